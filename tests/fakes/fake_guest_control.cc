#include "tests/fakes/fake_guest_control.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>

#include "vmhost/guest/identity.h"

namespace warren {
namespace {

constexpr int kPollMs = 5;

std::string JobId(int n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", n);
  return buf;
}

// An echoing raw channel: input comes back as stdout; EOF on input ends it with status 0.
class EchoPipe final : public GuestPipe {
 public:
  explicit EchoPipe(std::function<void()> notify) : notify_(std::move(notify)) {}
  bool opening() override { return false; }
  Status status() override { return Status::Ok(); }
  size_t Write(std::string_view bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || eof_) return bytes.size();
      out_.append(bytes);
    }
    Notify();
    return bytes.size();
  }
  void CloseInput() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      eof_ = true;
    }
    Notify();
  }
  void Resize(const GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_stderr || out_.empty()) return false;
    bytes->assign(out_, 0, std::min(max, out_.size()));
    return true;
  }
  void ConsumeOutput(bool is_stderr, size_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!is_stderr) out_.erase(0, n);
  }
  End end() override {
    std::lock_guard<std::mutex> lock(mu_);
    End e;
    e.output_eof = eof_ && out_.empty();
    e.closed = e.output_eof;
    if (e.closed) e.exit_status = 0;
    return e;
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }

 private:
  void Notify() {
    if (notify_) notify_();
  }
  const std::function<void()> notify_;
  std::mutex mu_;
  std::string out_;
  bool eof_ = false;
  bool closed_ = false;
};

// A command that prints `out` and `err` and exits with `status` once its input closed (the
// runner's `identity-wait`, and `identity` without root when nothing waits).
class FixedPipe final : public GuestPipe {
 public:
  FixedPipe(std::function<void()> notify, std::string out, std::string err, int status)
      : notify_(std::move(notify)), out_(std::move(out)), err_(std::move(err)), status_(status) {}
  bool opening() override { return false; }
  Status status() override { return Status::Ok(); }
  size_t Write(std::string_view bytes) override { return bytes.size(); }
  void CloseInput() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      eof_ = true;
    }
    if (notify_) notify_();
  }
  void Resize(const GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string& from = is_stderr ? err_ : out_;
    if (from.empty()) return false;
    bytes->assign(from, 0, std::min(max, from.size()));
    return true;
  }
  void ConsumeOutput(bool is_stderr, size_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    (is_stderr ? err_ : out_).erase(0, n);
  }
  End end() override {
    std::lock_guard<std::mutex> lock(mu_);
    End e;
    // Ends by itself when its output is all read (`identity` refusing does not wait for
    // input), or once its input closed.
    e.output_eof = out_.empty() && err_.empty() && (eof_ || status_ != 0);
    e.closed = e.output_eof;
    if (e.closed) e.exit_status = status_;
    return e;
  }
  void Close() override {}

 private:
  const std::function<void()> notify_;
  std::mutex mu_;
  std::string out_, err_;
  const int status_;
  bool eof_ = false;
};

// The runner's `identity` verb as the guest plays it (runner/identity.c): the request's
// records up to `end`, then `clock?`, then, once the clock line came, one report line and
// exit 0. `direct`: reached at the waiter's socket (runner/identity_wait.c), so the byte 'D'
// comes first and the line `exit 0` last. Runs on the caller's writes; no thread.
class IdentityPipe final : public GuestPipe {
 public:
  // `direct`: the waiter's socket (a first byte 'D', an exit line, the channel closes);
  // `port`: the identity port (a hello answered first, an exit line, never closed).
  IdentityPipe(std::function<void()> notify, std::string hostname,
               std::function<void(bool handout, bool host_key)> done, bool direct,
               bool port = false)
      : notify_(std::move(notify)),
        hostname_(std::move(hostname)),
        done_(std::move(done)),
        direct_(direct || port),
        port_(port),
        want_first_byte_(direct && !port) {}
  bool opening() override { return false; }
  Status status() override { return Status::Ok(); }
  size_t Write(std::string_view bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_.append(bytes);
      if (want_first_byte_ && !in_.empty()) {
        if (in_[0] != 'D') ended_ = true;  // the waiter drops it
        in_.erase(0, 1);
        want_first_byte_ = false;
      }
      size_t nl;
      while ((nl = in_.find('\n')) != std::string::npos) {
        const std::string line = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        if (port_ && line == "warren identity") out_ += "identity here\n";
        if (line.rfind("mac ", 0) == 0) mac_ = line.substr(4);
        if (line.rfind("hostname ", 0) == 0) handout_ = true;
        if (line.rfind("host-key ", 0) == 0) host_key_ = true;
        if (line == "end") out_ += "clock?\n";
        if (line.rfind("clock ", 0) == 0 && !ended_) {
          out_ += "identity ok hostname=" + hostname_ +
                  " machine-id=0123456789abcdef0123456789abcdef mac=" + mac_ +
                  " setup=none clock-step-ms=1 clock-rtt-us=100 work-ms=1 runner=" +
                  std::string(FakeGuestControl::kRunnerVersion) + "\n" +
                  (direct_ ? "exit 0\n" : "");
          ended_ = true;
        }
      }
    }
    Notify();
    return bytes.size();
  }
  void CloseInput() override {}
  void Resize(const GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_stderr || out_.empty()) return false;
    bytes->assign(out_, 0, std::min(max, out_.size()));
    return true;
  }
  void ConsumeOutput(bool is_stderr, size_t n) override {
    bool finished = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!is_stderr) out_.erase(0, n);
      finished = ended_ && out_.empty() && !reported_;
      if (finished) reported_ = true;
    }
    if (finished && done_) done_(handout_, host_key_);
    if (finished) Notify();
  }
  End end() override {
    std::lock_guard<std::mutex> lock(mu_);
    End e;
    e.output_eof = ended_ && out_.empty() && !port_;
    e.closed = e.output_eof;
    if (e.closed && !direct_) e.exit_status = 0;
    return e;
  }
  void Close() override {}

 private:
  void Notify() {
    if (notify_) notify_();
  }
  const std::function<void()> notify_;
  const std::string hostname_;
  const std::function<void(bool, bool)> done_;
  const bool direct_;
  const bool port_;
  bool want_first_byte_;
  std::mutex mu_;
  std::string in_, out_;
  std::string mac_ = "-";
  bool handout_ = false;   // the request named the hostname (a hand-out), not a seed device
  bool host_key_ = false;  // and a host key
  bool ended_ = false;
  bool reported_ = false;
};

}  // namespace

Result<std::shared_ptr<GuestPipe>> FakeGuestControl::OpenChannel(std::string_view vm_id,
                                                                 const GuestChannelRequest& request,
                                                                 std::function<void()> notify) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    channel_requests_.push_back(request);
    if (!reachable_) return Unavailable("VM " + std::string(vm_id) + " is not reachable");
  }
  const bool exec = request.kind == GuestChannelRequest::Kind::kExec;
  if (exec && request.command == kGuestIdentityWaitCommand) {
    std::lock_guard<std::mutex> lock(mu_);
    identity_waits_.insert(std::string(vm_id));
    return std::shared_ptr<GuestPipe>(
        std::make_shared<FixedPipe>(std::move(notify), kGuestIdentityWaits, "", 0));
  }
  bool handed_over = false;
  const bool port = request.kind == GuestChannelRequest::Kind::kIdentityPort;
  if (port) {
    std::lock_guard<std::mutex> lock(mu_);
    if (identity_waits_.count(vm_id) == 0 && !clones_wait_) {
      return Unavailable("VM " + std::string(vm_id) + " has no identity port read");
    }
    handed_over = true;
  }
  const bool direct = request.kind == GuestChannelRequest::Kind::kUnix;
  if (direct) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool waits =
        request.path == kGuestIdentitySocket && (identity_waits_.count(vm_id) > 0 || clones_wait_);
    if (!waits) return Unavailable("nothing in the VM accepted a connection on " + request.path);
    handed_over = true;
  }
  if (exec && request.command == kGuestIdentityHandOverCommand) {
    std::lock_guard<std::mutex> lock(mu_);
    handed_over = identity_waits_.count(vm_id) > 0 || clones_wait_;
    if (!handed_over) {
      return std::shared_ptr<GuestPipe>(std::make_shared<FixedPipe>(
          std::move(notify), "", "warren-run identity: must run as root\n", 5));
    }
  }
  if (handed_over || (exec && request.command == kGuestIdentityCommand)) {
    std::string hostname;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hostname = hostname_of_ ? hostname_of_(vm_id) : std::string(vm_id);
    }
    return std::shared_ptr<GuestPipe>(std::make_shared<IdentityPipe>(
        std::move(notify), hostname,
        [this, applied = identities_, handouts = handouts_, keyed = keyed_handouts_,
         id = std::string(vm_id)](bool handout, bool host_key) {
          std::lock_guard<std::mutex> lock(mu_);
          applied->push_back(id);
          if (handout) handouts->push_back(id);
          if (handout && host_key) keyed->push_back(id);
        },
        direct, port));
  }
  return std::shared_ptr<GuestPipe>(std::make_shared<EchoPipe>(std::move(notify)));
}

Status FakeGuestControl::Connect(std::string_view vm_id, std::chrono::steady_clock::time_point,
                                 std::function<void()> answered) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    connects_.push_back(std::string(vm_id));
    if (!reachable_) return Unavailable("VM " + std::string(vm_id) + " is not reachable");
  }
  if (answered) answered();
  return Status::Ok();
}

std::vector<std::string> FakeGuestControl::connects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connects_;
}

void FakeGuestControl::SetHostnames(std::function<std::string(std::string_view)> hostname_of) {
  std::lock_guard<std::mutex> lock(mu_);
  hostname_of_ = std::move(hostname_of);
}

std::vector<std::string> FakeGuestControl::identities_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return *identities_;
}

std::vector<std::string> FakeGuestControl::handouts_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return *handouts_;
}

std::vector<std::string> FakeGuestControl::handouts_with_host_key() const {
  std::lock_guard<std::mutex> lock(mu_);
  return *keyed_handouts_;
}

void FakeGuestControl::ClonesStartWaiting() {
  std::lock_guard<std::mutex> lock(mu_);
  clones_wait_ = true;
}

std::vector<GuestChannelRequest> FakeGuestControl::channel_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return channel_requests_;
}

void FakeGuestControl::Deliver(const Job& job, uint64_t& out_off, uint64_t& err_off,
                               const GuestStreams& s) {
  if (out_off < job.out.size()) {
    s.out->Write(std::string_view(job.out).substr(out_off));
    out_off = job.out.size();
  }
  if (err_off < job.err.size()) {
    s.err->Write(std::string_view(job.err).substr(err_off));
    err_off = job.err.size();
  }
}

bool FakeGuestControl::Block(std::unique_lock<std::mutex>& lock, const Job& job,
                             const GuestStreams& s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.wait_ms);
  while (!job.finished && !Detached(job)) {
    if (s.cancel != nullptr && s.cancel->cancelled()) return true;
    if (s.wait_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return false;
    // Short waits: cancellation arrives on another condition variable.
    changed_.wait_for(lock, std::chrono::milliseconds(kPollMs));
  }
  return false;
}

GuestProgress FakeGuestControl::ProgressOf(const std::string& id, const Job& job, uint64_t out_off,
                                           uint64_t err_off) const {
  GuestProgress p;
  p.job = id;
  p.finished = job.finished;
  p.exit_code = job.exit_code;
  p.signal = job.signal;
  p.stdout_offset = out_off;
  p.stderr_offset = err_off;
  return p;
}

Result<GuestProgress> FakeGuestControl::Exec(std::string_view vm_id, const GuestCommand& command,
                                             const GuestStreams& streams) {
  std::string stdin_data;
  if (streams.in != nullptr) {
    Result<std::string> all = ReadAll(*streams.in, 1 << 20);
    if (!all.ok()) return all.status();
    stdin_data = std::move(all).value();
  }
  std::unique_lock lock(mu_);
  commands_.push_back(command.command);
  last_command_ = command;
  if (!reachable_) return Unavailable("fake guest " + std::string(vm_id) + " is not reachable");
  if (unreachable_for_ > 0) {
    --unreachable_for_;
    return Unavailable("fake guest " + std::string(vm_id) + " is still booting");
  }
  last_stdin_ = stdin_data;

  Job job;
  job.vm_id = std::string(vm_id);
  job.command = command.command;
  Script script;
  if (auto it = scripts_.find(command.command); it != scripts_.end()) {
    script = it->second;
  } else if (command.command == "false") {
    script.exit_code = 1;
  } else if (command.command == "cat") {
    script.out = stdin_data;
  }
  job.out = script.out;
  job.err = script.err;
  job.generation =
      static_cast<int>(std::count(disconnected_.begin(), disconnected_.end(), std::string(vm_id)));
  job.finished = !script.hold;
  job.exit_code = script.hold ? std::nullopt : script.exit_code;
  const std::string id = JobId(next_++);
  Job& stored = jobs_.emplace(id, std::move(job)).first->second;

  uint64_t out_off = 0, err_off = 0;
  Deliver(stored, out_off, err_off, streams);
  if (Block(lock, stored, streams)) {
    // Cancelled before the hand-back: the command dies with its caller.
    stored.finished = true;
    stored.exit_code.reset();
    stored.signal = 9;
    ++killed_;
    return Cancelled("cancelled");
  }
  Deliver(stored, out_off, err_off, streams);
  if (!stored.finished && Detached(stored)) {
    return Unavailable("the control connection to VM " + stored.vm_id + " is closed; job " + id +
                       " may still be running");
  }
  return ProgressOf(id, stored, out_off, err_off);
}

bool FakeGuestControl::Detached(const Job& job) const {
  return std::count(disconnected_.begin(), disconnected_.end(), job.vm_id) > job.generation;
}

Result<GuestProgress> FakeGuestControl::Wait(std::string_view vm_id, std::string_view job,
                                             uint64_t stdout_from, uint64_t stderr_from,
                                             const GuestStreams& streams) {
  std::unique_lock lock(mu_);
  if (!reachable_) return Unavailable("fake guest " + std::string(vm_id) + " is not reachable");
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end() || it->second.vm_id != vm_id) {
    return NotFound("no job " + std::string(job));
  }
  const Job& j = it->second;
  uint64_t out_off = stdout_from, err_off = stderr_from;
  Deliver(j, out_off, err_off, streams);
  // Cancelling a Wait only detaches: the job runs on.
  if (Block(lock, j, streams)) return Cancelled("cancelled");
  Deliver(j, out_off, err_off, streams);
  return ProgressOf(it->first, j, out_off, err_off);
}

Status FakeGuestControl::Kill(std::string_view vm_id, std::string_view job) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end() || it->second.vm_id != vm_id) {
    return NotFound("no job " + std::string(job));
  }
  if (!it->second.finished) {
    it->second.finished = true;
    it->second.exit_code.reset();
    it->second.signal = 9;
    ++killed_;
    changed_.notify_all();
  }
  return Status::Ok();
}

Result<std::vector<GuestJob>> FakeGuestControl::Jobs(std::string_view vm_id) {
  std::lock_guard lock(mu_);
  if (!reachable_) return Unavailable("fake guest " + std::string(vm_id) + " is not reachable");
  std::vector<GuestJob> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {  // newest first
    if (it->second.vm_id != vm_id) continue;
    GuestJob g;
    g.job = it->first;
    g.command = it->second.command;
    g.finished = it->second.finished;
    g.exit_code = it->second.exit_code;
    out.push_back(std::move(g));
  }
  return out;
}

void FakeGuestControl::Disconnect(std::string_view vm_id) {
  {
    std::lock_guard lock(mu_);
    disconnected_.emplace_back(vm_id);
  }
  changed_.notify_all();
}

Status FakeGuestControl::RepinHostKey(std::string_view vm_id, std::string_view public_key_line) {
  if (!public_key_line.starts_with("ssh-")) return InvalidArgument("not an ssh public key line");
  std::lock_guard lock(mu_);
  pinned_[std::string(vm_id)] = std::string(public_key_line);
  return Status::Ok();
}

void FakeGuestControl::NoteRunnerVersion(std::string_view vm_id, std::string_view version,
                                         std::string_view) {
  std::lock_guard lock(mu_);
  runner_noted_[std::string(vm_id)] = std::string(version);
}

std::string FakeGuestControl::NotedRunnerVersion(std::string_view vm_id) {
  std::lock_guard lock(mu_);
  auto it = runner_noted_.find(vm_id);
  return it == runner_noted_.end() ? "" : it->second;
}

std::string FakeGuestControl::PinnedHostKey(std::string_view vm_id) {
  std::lock_guard lock(mu_);
  auto it = pinned_.find(vm_id);
  return it == pinned_.end() ? "" : it->second;
}

void FakeGuestControl::SetScript(const std::string& command, Script script) {
  std::lock_guard lock(mu_);
  scripts_[command] = std::move(script);
}

void FakeGuestControl::SetReachable(bool reachable) {
  std::lock_guard lock(mu_);
  reachable_ = reachable;
}

void FakeGuestControl::UnreachableFor(int n) {
  std::lock_guard lock(mu_);
  unreachable_for_ = n;
}

void FakeGuestControl::Append(const std::string& job, const std::string& out,
                              const std::string& err) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.out += out;
  it->second.err += err;
  changed_.notify_all();
}

void FakeGuestControl::Release(const std::string& job, std::optional<int> exit_code,
                               const std::string& out) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.out += out;
  it->second.finished = true;
  it->second.exit_code = exit_code;
  changed_.notify_all();
}

void FakeGuestControl::Forget(const std::string& job) {
  std::lock_guard lock(mu_);
  jobs_.erase(job);
  changed_.notify_all();
}

std::vector<std::string> FakeGuestControl::commands() const {
  std::lock_guard lock(mu_);
  return commands_;
}

std::string FakeGuestControl::last_stdin() const {
  std::lock_guard lock(mu_);
  return last_stdin_;
}

std::optional<GuestCommand> FakeGuestControl::last_command() const {
  std::lock_guard lock(mu_);
  return last_command_;
}

std::vector<std::string> FakeGuestControl::disconnected() const {
  std::lock_guard lock(mu_);
  return disconnected_;
}

bool FakeGuestControl::finished(const std::string& job) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  return it != jobs_.end() && it->second.finished;
}

int FakeGuestControl::killed() const {
  std::lock_guard lock(mu_);
  return killed_;
}

std::string FakeGuestControl::next_job() const {
  std::lock_guard lock(mu_);
  return JobId(next_);
}

}  // namespace warren
