#include "lobby/ssh/channel_io.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace warren::ssh {

ChannelIo::ChannelIo(std::shared_ptr<EventWaker> waker) : waker_(std::move(waker)) {}

size_t ChannelIo::PushStdin(const char* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return len;  // nobody will read it; let the client's window move on
  size_t interrupted = 0;      // bytes taken up to and including a Ctrl-C
  if (command_ != nullptr && ctrl_c_) {
    if (const void* c = std::memchr(data, 0x03, len); c != nullptr) {
      interrupted = static_cast<size_t>(static_cast<const char*>(c) - data) + 1;
      command_->Cancel();
      command_.reset();
      stdin_.clear();  // typed ahead for the next prompt: a tty's interrupt drops it too
      stdin_pos_ = 0;
      data += interrupted;
      len -= interrupted;
    }
  }
  // Compact lazily so the buffer never holds more than the capacity.
  if (stdin_pos_ > 0 && stdin_pos_ == stdin_.size()) {
    stdin_.clear();
    stdin_pos_ = 0;
  } else if (stdin_pos_ > kStdinCapacity / 2) {
    stdin_.erase(0, stdin_pos_);
    stdin_pos_ = 0;
  }
  size_t buffered = stdin_.size() - stdin_pos_;
  size_t room = buffered >= kStdinCapacity ? 0 : kStdinCapacity - buffered;
  size_t n = std::min(room, len);
  stdin_.append(data, n);
  owner_wants_room_ = n < len;
  if (n > 0) stdin_cv_.notify_all();
  return interrupted + n;
}

size_t ChannelIo::StdinSpace() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t buffered = stdin_.size() - stdin_pos_;
  return buffered >= kStdinCapacity ? 0 : kStdinCapacity - buffered;
}

void ChannelIo::SetStdinEof() {
  std::lock_guard<std::mutex> lock(mu_);
  stdin_eof_ = true;
  stdin_cv_.notify_all();
}

void ChannelIo::Cancel() {
  std::shared_ptr<CancelSignal> command;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    output_.clear();
    output_bytes_ = 0;
    command = std::move(command_);
  }
  if (command != nullptr) command->Cancel();
  cancel_->Cancel();
  stdin_cv_.notify_all();
  output_cv_.notify_all();
}

bool ChannelIo::PeekOutput(size_t max, std::string* bytes, bool* is_stderr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (output_.empty()) return false;
  const Chunk& front = output_.front();
  *is_stderr = front.is_stderr;
  bytes->assign(front.data, 0, std::min(max, front.data.size()));
  return true;
}

void ChannelIo::ConsumeOutput(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  while (n > 0 && !output_.empty()) {
    Chunk& front = output_.front();
    size_t k = std::min(n, front.data.size());
    front.data.erase(0, k);
    output_bytes_ -= k;
    n -= k;
    if (front.data.empty()) output_.pop_front();
  }
  output_cv_.notify_all();
}

bool ChannelIo::Drained(int* exit_status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_ || !output_.empty()) return false;
  *exit_status = exit_status_;
  return true;
}

bool ChannelIo::worker_done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Result<size_t> ChannelIo::ReadStdin(char* buf, size_t len) { return ReadStdinFor(buf, len, -1); }

Result<size_t> ChannelIo::ReadStdinFor(char* buf, size_t len, int timeout_ms) {
  if (len == 0) return size_t{0};
  bool wake_owner = false;
  size_t n = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return cancelled_ || stdin_pos_ < stdin_.size() || stdin_eof_; };
    if (timeout_ms < 0) {
      stdin_cv_.wait(lock, ready);
    } else if (!stdin_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      return Timeout("no input yet");
    }
    if (cancelled_) return Cancelled("the client closed the channel");
    if (stdin_pos_ == stdin_.size()) return size_t{0};  // EOF
    n = std::min(len, stdin_.size() - stdin_pos_);
    std::memcpy(buf, stdin_.data() + stdin_pos_, n);
    stdin_pos_ += n;
    if (owner_wants_room_) {
      owner_wants_room_ = false;
      wake_owner = true;
    }
  }
  if (wake_owner) waker_->Wake();
  return n;
}

void ChannelIo::WriteOutput(bool is_stderr, std::string_view bytes) {
  while (!bytes.empty()) {
    bool was_empty;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      output_cv_.wait(lock, [&] { return cancelled_ || output_bytes_ < kOutputCapacity; });
      if (cancelled_) return;
      n = std::min(bytes.size(), kOutputCapacity - output_bytes_);
      was_empty = output_.empty();
      if (!output_.empty() && output_.back().is_stderr == is_stderr) {
        output_.back().data.append(bytes.data(), n);
      } else {
        output_.push_back(Chunk{is_stderr, std::string(bytes.substr(0, n))});
      }
      output_bytes_ += n;
    }
    bytes.remove_prefix(n);
    if (was_empty) waker_->Wake();
  }
}

void ChannelIo::SetCommand(std::shared_ptr<CancelSignal> command, bool ctrl_c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_) {
      command_ = std::move(command);
      ctrl_c_ = ctrl_c;
      return;
    }
  }
  if (command != nullptr) command->Cancel();  // the channel went before the command began
}

void ChannelIo::Finish(int exit_status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    exit_status_ = exit_status;
  }
  waker_->Wake();
}

void ChannelOutput::Write(std::string_view bytes) {
  if (!crlf_) {
    io_.WriteOutput(is_stderr_, bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string converted;
  converted.reserve(bytes.size() + bytes.size() / 16 + 2);
  for (char c : bytes) {
    if (c == '\n' && !last_was_cr_) converted.push_back('\r');
    converted.push_back(c);
    last_was_cr_ = (c == '\r');
  }
  io_.WriteOutput(is_stderr_, converted);
}

}  // namespace warren::ssh
