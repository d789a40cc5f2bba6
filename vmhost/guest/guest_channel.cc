#include "vmhost/guest/guest_channel.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace warren::guest {

namespace {

GuestChannelRequest ExecRequest(std::string command) {
  GuestChannelRequest r;
  r.kind = GuestChannelRequest::Kind::kExec;
  r.command = std::move(command);
  return r;
}

}  // namespace

GuestChannel::GuestChannel(std::string command, std::shared_ptr<EventWaker> waker)
    : GuestChannel(ExecRequest(std::move(command)), std::move(waker)) {}

GuestChannel::GuestChannel(GuestChannelRequest request, std::shared_ptr<EventWaker> waker)
    : request_(std::move(request)), raw_(false), waker_(std::move(waker)) {}

GuestChannel::GuestChannel(GuestChannelRequest request, std::shared_ptr<EventWaker> waker,
                           std::function<void()> notify)
    : request_(std::move(request)),
      raw_(true),
      waker_(std::move(waker)),
      notify_(std::move(notify)) {}

void GuestChannel::SetNotify(std::function<void()> notify) {
  std::lock_guard<std::mutex> lock(notify_mu_);
  if (notify_off_) return;  // the consumer already closed it: its callback may be gone
  notify_ = std::move(notify);
  notify_();  // whatever happened before it was there
}

void GuestChannel::Notify() {
  // Held while the callback runs, so that once Close() returned it never runs again: the
  // caller may then destroy whatever the callback refers to.
  std::lock_guard<std::mutex> lock(notify_mu_);
  if (notify_ && !notify_off_) notify_();
}

Status GuestChannel::WaitOpen(Clock::time_point deadline, const CancelSignal* cancel) {
  std::unique_lock<std::mutex> lock(mu_);
  auto answered = [&] { return open_ || failed_or_closed(); };
  for (;;) {
    // With a cancel signal, woken at least every kCancelPoll to look at it: the guest may
    // never answer (its control link stalled), and the caller must not wait on it then.
    auto until = cancel == nullptr ? deadline : std::min(deadline, Clock::now() + kCancelPoll);
    if (cv_.wait_until(lock, until, answered)) break;
    if (cancel != nullptr && cancel->cancelled()) {
      return Cancelled("cancelled while waiting for the guest");
    }
    if (Clock::now() >= deadline) return Timeout("the guest did not open a channel in time");
  }
  if (!failure_.ok()) return failure_;
  if (caller_closed_) return Cancelled("channel closed");
  return Status::Ok();
}

Status GuestChannel::Write(std::string_view bytes) {
  while (!bytes.empty()) {
    bool was_empty;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return failed_or_closed() || remote_closed_ || stdin_.size() - stdin_pos_ < kStdinCapacity;
      });
      if (!failure_.ok()) return failure_;
      if (caller_closed_ || remote_closed_ || stdin_closed_) {
        return Unavailable("the channel is closed");
      }
      if (stdin_pos_ > 0 && stdin_pos_ == stdin_.size()) {
        stdin_.clear();
        stdin_pos_ = 0;
      } else if (stdin_pos_ > kStdinCapacity) {
        stdin_.erase(0, stdin_pos_);
        stdin_pos_ = 0;
      }
      was_empty = stdin_pos_ == stdin_.size();
      n = std::min(bytes.size(), kStdinCapacity - (stdin_.size() - stdin_pos_));
      stdin_.append(bytes.data(), n);
    }
    bytes.remove_prefix(n);
    if (was_empty) waker_->Wake();
  }
  return Status::Ok();
}

void GuestChannel::CloseStdin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stdin_closed_) return;
    stdin_closed_ = true;
  }
  waker_->Wake();
}

Result<size_t> GuestChannel::Read(char* buf, size_t len, Clock::time_point deadline) {
  if (len == 0) return size_t{0};
  bool wake_owner = false;
  size_t n = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    bool ready = cv_.wait_until(lock, deadline, [&] {
      return stdout_pos_ < stdout_.size() || stdout_eof_ || failed_or_closed();
    });
    if (stdout_pos_ < stdout_.size()) {
      n = std::min(len, stdout_.size() - stdout_pos_);
      std::memcpy(buf, stdout_.data() + stdout_pos_, n);
      stdout_pos_ += n;
      if (stdout_pos_ == stdout_.size()) {
        stdout_.clear();
        stdout_pos_ = 0;
      }
      if (owner_wants_room_) {
        owner_wants_room_ = false;
        wake_owner = true;
      }
    } else if (stdout_eof_) {
      return size_t{0};
    } else if (!failure_.ok()) {
      return failure_;
    } else if (caller_closed_) {
      return Cancelled("channel closed");
    } else if (!ready) {
      return Timeout("no output yet");
    }
  }
  if (wake_owner) waker_->Wake();
  return n;
}

Result<int> GuestChannel::WaitExit(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return remote_closed_ || failed_or_closed(); })) {
    return Timeout("the guest did not finish the command in time");
  }
  if (exit_status_) return *exit_status_;
  if (!exit_signal_.empty()) return Internal("the command was killed by SIG" + exit_signal_);
  if (!failure_.ok()) return failure_;
  if (caller_closed_ && !remote_closed_) return Cancelled("channel closed");
  return Internal("the command ended without an exit status");
}

std::string GuestChannel::StderrText() {
  std::lock_guard<std::mutex> lock(mu_);
  return stderr_;
}

void GuestChannel::Close() {
  {
    std::lock_guard<std::mutex> lock(notify_mu_);
    notify_off_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (caller_closed_) return;
    caller_closed_ = true;
  }
  cv_.notify_all();
  waker_->Wake();
}

bool GuestChannel::caller_closed() {
  std::lock_guard<std::mutex> lock(mu_);
  return caller_closed_;
}

uint64_t GuestChannel::generation() {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void GuestChannel::SetOpen(uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    generation_ = generation;
  }
  cv_.notify_all();
  Notify();
}

void GuestChannel::Fail(Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return;
    failure_ = std::move(status);
  }
  cv_.notify_all();
  Notify();
}

size_t GuestChannel::PushStdout(const char* data, size_t len, size_t held_back) {
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (caller_closed_) return len;  // nobody reads any more: let the window move on
    size_t buffered = stdout_.size() - stdout_pos_;
    if (stdout_pos_ > 0 && stdout_pos_ >= stdout_.size() / 2) {
      stdout_.erase(0, stdout_pos_);
      stdout_pos_ = 0;
    }
    size_t room = buffered >= kStdoutCapacity ? 0 : kStdoutCapacity - buffered;
    n = std::min(room, len);
    stdout_.append(data, n);
    owner_wants_room_ = owner_wants_room_ || n < len || held_back > 0;
  }
  if (n > 0) {
    cv_.notify_all();
    Notify();
  }
  return n;
}

size_t GuestChannel::StdoutSpace() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t buffered = stdout_.size() - stdout_pos_;
  return buffered >= kStdoutCapacity ? 0 : kStdoutCapacity - buffered;
}

size_t GuestChannel::PushStderr(const char* data, size_t len, size_t held_back) {
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!raw_) {
      if (stderr_.size() < kStderrKeep)
        stderr_.append(data, std::min(len, kStderrKeep - stderr_.size()));
      return len;
    }
    if (caller_closed_) return len;
    if (stderr_pos_ > 0 && stderr_pos_ >= stderr_.size() / 2) {
      stderr_.erase(0, stderr_pos_);
      stderr_pos_ = 0;
    }
    size_t buffered = stderr_.size() - stderr_pos_;
    size_t room = buffered >= kStdoutCapacity ? 0 : kStdoutCapacity - buffered;
    n = std::min(room, len);
    stderr_.append(data, n);
    owner_wants_room_ = owner_wants_room_ || n < len || held_back > 0;
  }
  if (n > 0) Notify();
  return n;
}

size_t GuestChannel::StderrSpace() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!raw_) return kStderrKeep;
  size_t buffered = stderr_.size() - stderr_pos_;
  return buffered >= kStdoutCapacity ? 0 : kStdoutCapacity - buffered;
}

GuestChannel::ControlRequests GuestChannel::TakeControlRequests() {
  std::lock_guard<std::mutex> lock(mu_);
  ControlRequests out = std::move(control_);
  control_ = ControlRequests{};
  return out;
}

bool GuestChannel::opening() {
  std::lock_guard<std::mutex> lock(mu_);
  return !open_ && failure_.ok();
}

Status GuestChannel::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

size_t GuestChannel::TryWrite(std::string_view bytes) {
  bool was_empty;
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_or_closed() || remote_closed_ || stdin_closed_) return bytes.size();  // dropped
    if (stdin_pos_ > 0 && stdin_pos_ == stdin_.size()) {
      stdin_.clear();
      stdin_pos_ = 0;
    } else if (stdin_pos_ > kStdinCapacity) {
      stdin_.erase(0, stdin_pos_);
      stdin_pos_ = 0;
    }
    size_t buffered = stdin_.size() - stdin_pos_;
    n = std::min(bytes.size(), buffered >= kStdinCapacity ? 0 : kStdinCapacity - buffered);
    was_empty = buffered == 0;
    stdin_.append(bytes.data(), n);
  }
  if (n > 0 && was_empty) waker_->Wake();
  return n;
}

bool GuestChannel::PeekOutput(bool is_stderr, size_t max, std::string* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& buf = is_stderr ? stderr_ : stdout_;
  size_t pos = is_stderr ? stderr_pos_ : stdout_pos_;
  if (pos >= buf.size()) return false;
  bytes->assign(buf, pos, std::min(max, buf.size() - pos));
  return true;
}

void GuestChannel::ConsumeOutput(bool is_stderr, size_t n) {
  bool wake_owner = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string& buf = is_stderr ? stderr_ : stdout_;
    size_t& pos = is_stderr ? stderr_pos_ : stdout_pos_;
    pos += std::min(n, buf.size() - pos);
    if (pos == buf.size()) {
      buf.clear();
      pos = 0;
    }
    if (owner_wants_room_) {
      owner_wants_room_ = false;
      wake_owner = true;
    }
  }
  if (wake_owner) waker_->Wake();
}

void GuestChannel::Resize(const GuestTerminal& size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    control_.resize = size;
  }
  waker_->Wake();
}

void GuestChannel::Signal(std::string_view name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (control_.signals.size() >= 16) return;  // a flood of signals: the rest are dropped
    control_.signals.emplace_back(name);
  }
  waker_->Wake();
}

GuestPipe::End GuestChannel::End() {
  std::lock_guard<std::mutex> lock(mu_);
  GuestPipe::End e;
  bool drained = stdout_pos_ >= stdout_.size() && stderr_pos_ >= stderr_.size();
  e.output_eof = stdout_eof_ && drained;
  e.closed = remote_closed_ && drained;
  e.exit_status = exit_status_;
  e.exit_signal = exit_signal_;
  return e;
}

void GuestChannel::SetStdoutEof() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stdout_eof_ = true;
  }
  cv_.notify_all();
  Notify();
}

void GuestChannel::SetExitStatus(int status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_status_ = status;
  }
  Notify();
}

void GuestChannel::SetExitSignal(std::string signal) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_signal_ = std::move(signal);
    if (exit_signal_.size() > 32) exit_signal_.resize(32);
  }
  Notify();
}

void GuestChannel::SetRemoteClosed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    remote_closed_ = true;
    stdout_eof_ = true;
  }
  cv_.notify_all();
  Notify();
}

bool GuestChannel::PeekStdin(size_t max, std::string* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stdin_pos_ == stdin_.size()) return false;
  bytes->assign(stdin_, stdin_pos_, std::min(max, stdin_.size() - stdin_pos_));
  return true;
}

void GuestChannel::ConsumeStdin(size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stdin_pos_ += std::min(n, stdin_.size() - stdin_pos_);
  }
  cv_.notify_all();
  Notify();
}

bool GuestChannel::StdinEofDue() {
  std::lock_guard<std::mutex> lock(mu_);
  return stdin_closed_ && stdin_pos_ == stdin_.size();
}

bool GuestChannel::StdinClosed() {
  std::lock_guard<std::mutex> lock(mu_);
  return stdin_closed_;
}

bool GuestChannel::RemoteClosed() {
  std::lock_guard<std::mutex> lock(mu_);
  return remote_closed_;
}

}  // namespace warren::guest
