#include "vmhost/guest/ssh_guest_control.h"

#include <atomic>
#include <thread>
#include <utility>

#include "lobby/base/env_name.h"
#include "lobby/base/log.h"
#include "vmhost/guest/endpoint_setup.h"
#include "vmhost/guest/job_stream.h"
#include "vmhost/guest/port_pipe.h"
#include "vmhost/guest/runner_protocol.h"

namespace warren::guest {
namespace {

using Stop = JobStream::Stop;

// A job's start answer, after the caller cancelled, is awaited this long before giving up.
constexpr auto kStartAfterCancel = std::chrono::seconds(10);
// Re-attaching after a lost channel, at most this often per call.
constexpr int kMaxReattach = 3;
constexpr int kMaxIdCollisions = 3;

// Closes a channel when the call is done with it, whatever path it takes.
class ChannelCloser {
 public:
  explicit ChannelCloser(std::shared_ptr<GuestChannel>& ch) : ch_(ch) {}
  ~ChannelCloser() {
    if (ch_ != nullptr) ch_->Close();
  }

 private:
  std::shared_ptr<GuestChannel>& ch_;
};

// Forwards the caller's stdin into the start channel on its own thread, because
// InputStream::Read blocks. Stops at EOF, a read error, when the channel refuses bytes (it
// was closed: the job ended or was handed back), or when stopped.
class StdinPump {
 public:
  StdinPump(InputStream* in, std::shared_ptr<GuestChannel> ch) {
    if (in == nullptr) {
      ch->CloseStdin();
      return;
    }
    thread_ = std::thread([this, in, ch = std::move(ch)] {
      char buf[32 * 1024];
      while (!stop_.load()) {
        // A timed read, so the pump can stop once the command ended or was handed back
        // even while an interactive client keeps its stdin open.
        Result<size_t> n = in->ReadFor(buf, sizeof buf, 100);
        if (!n.ok() && n.status().code() == Code::kTimeout) continue;
        if (!n.ok() || *n == 0) break;
        if (!ch->Write(std::string_view(buf, *n)).ok()) break;
      }
      ch->CloseStdin();
    });
  }
  // Joins the thread. With a stream that has no timed read, this waits for its Read to
  // return (EOF, data, or the caller's cancellation).
  ~StdinPump() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The error for a job whose channel was lost for good: the job itself may still run.
Status Detached(const JobStream& job, std::string_view vm_id) {
  return Unavailable(job.error().message() + "; job " + job.Progress().job + " in VM " +
                     std::string(vm_id) + " may still be running");
}

std::string RunnerFailure(GuestChannel& ch, const Status& why) {
  std::string err = SanitizeGuestText(ch.StderrText(), 300);
  return why.message() + (err.empty() ? "" : " (" + err + ")");
}

// GuestPipe over a raw GuestChannel; dropping it closes the channel.
class RawPipe final : public GuestPipe {
 public:
  explicit RawPipe(std::shared_ptr<GuestChannel> ch) : ch_(std::move(ch)) {}
  ~RawPipe() override { ch_->Close(); }

  bool opening() override { return ch_->opening(); }
  Status status() override { return ch_->status(); }
  size_t Write(std::string_view bytes) override { return ch_->TryWrite(bytes); }
  void CloseInput() override { ch_->CloseStdin(); }
  void Resize(const GuestTerminal& size) override { ch_->Resize(size); }
  void Signal(std::string_view name) override { ch_->Signal(name); }
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override {
    return ch_->PeekOutput(is_stderr, max, bytes);
  }
  void ConsumeOutput(bool is_stderr, size_t n) override { ch_->ConsumeOutput(is_stderr, n); }
  End end() override { return ch_->End(); }
  void Close() override { ch_->Close(); }

 private:
  std::shared_ptr<GuestChannel> ch_;
};

}  // namespace

Result<std::unique_ptr<SshGuestControl>> SshGuestControl::Create(SshGuestControlOptions options) {
  if (!options.dial) return InvalidArgument("no control port dialer");
  std::string path = options.runner_path.empty() ? DefaultRunnerPath() : options.runner_path;
  WARREN_ASSIGN_OR_RETURN(RunnerBinary runner, LoadRunnerBinary(path));
  return std::unique_ptr<SshGuestControl>(
      new SshGuestControl(std::move(options), std::move(runner)));
}

SshGuestControl::SshGuestControl(SshGuestControlOptions options, RunnerBinary runner)
    : options_(std::move(options)), runner_(std::move(runner)) {}

SshGuestControl::~SshGuestControl() {
  std::map<std::string, std::shared_ptr<Vm>, std::less<>> vms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    vms.swap(vms_);
  }
  for (auto& [id, vm] : vms) vm->session->Shutdown();
}

std::shared_ptr<SshGuestControl::Vm> SshGuestControl::VmFor(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = vms_.find(vm_id);
  if (it != vms_.end()) return it->second;
  ControlSessionOptions so;
  so.vm_id = std::string(vm_id);
  so.dial = options_.dial;
  so.key_path = options_.key_path;
  so.user = options_.user;
  so.connect_timeout = options_.connect_timeout;
  so.keepalive_after = options_.keepalive_after;
  so.keepalive_timeout = options_.keepalive_timeout;
  so.slowdown = options_.slowdown;
  so.endpoint_setup_delay = options_.endpoint_setup_delay;
  if (options_.inbound != nullptr) {
    GuestInboundSink* sink = options_.inbound;
    const GuestEndpoint& ep = options_.endpoint;
    std::string id(vm_id);
    bool setup = options_.endpoint_guest_setup;
    so.endpoint_plan = [sink, &ep, id, setup]() -> std::optional<EndpointPlan> {
      EndpointPlan plan;
      plan.forwards = sink->WantsEndpoint(id);
      std::vector<std::string> names;
      if (plan.forwards) names = sink->EndpointNames(id);
      if (setup) plan.setup_command = EndpointSetupCommand(ep, names, plan.forwards);
      plan.address = ep.address;
      plan.http_port = ep.http_port;
      plan.https_port = ep.https_port;
      plan.http_listen_port = ep.http_listen_port;
      plan.https_listen_port = ep.https_listen_port;
      plan.reconnect_exit = kEndpointSetupReconnect;
      return plan;
    };
    so.accept_forward = [sink, id](bool https,
                                   std::shared_ptr<GuestChannel> ch) -> std::function<void()> {
      auto pipe = std::make_shared<RawPipe>(std::move(ch));
      // Asked per connection too: a VM whose egress became `none` keeps its forwards until
      // the next connection, but gets nothing through them.
      if (!sink->WantsEndpoint(id)) return {};
      return sink->Accept(id, https, std::move(pipe));
    };
  }
  auto vm = std::make_shared<Vm>();
  vm->session = std::make_shared<ControlSession>(std::move(so));
  vms_.emplace(std::string(vm_id), vm);
  return vm;
}

Result<std::string> SshGuestControl::CheckRunner(Vm& vm, Clock::time_point deadline,
                                                 const CancelSignal* cancel) {
  // Another caller may be checking the runner of a guest that does not answer: wait for
  // it in slices, so that this caller can go when cancelled.
  std::unique_lock<std::timed_mutex> lock(vm.install_mu, std::defer_lock);
  while (!lock.try_lock_for(GuestChannel::kCancelPoll)) {
    if (cancel != nullptr && cancel->cancelled()) {
      return Cancelled("cancelled while waiting for VM " + vm.session->vm_id() +
                       "'s control connection");
    }
    if (Clock::now() >= deadline) {
      return Unavailable("VM " + vm.session->vm_id() + " did not answer on its control connection");
    }
  }
  const uint64_t before = vm.checked_generation;
  std::string serve_socket;
  WARREN_RETURN_IF_ERROR(
      EnsureRunner(*vm.session, runner_, &vm.checked_generation, &serve_socket, deadline, cancel));
  if (vm.checked_generation != before) {
    // This connection's check ran: its server (or none) is the one to use from now on.
    vm.serve_socket = std::move(serve_socket);
    vm.serve_generation = vm.checked_generation;
  }
  if (vm.serve_generation != vm.session->generation()) return std::string();
  return vm.serve_socket;
}

Result<std::shared_ptr<GuestChannel>> SshGuestControl::OpenRunner(Vm& vm, const std::string& args,
                                                                  Clock::time_point deadline,
                                                                  const CancelSignal* cancel) {
  WARREN_RETURN_IF_ERROR(CheckRunner(vm, deadline, cancel).status());
  return vm.session->OpenExec(RunnerCommandLine(args), deadline, cancel);
}

Result<std::shared_ptr<GuestChannel>> SshGuestControl::OpenStart(Vm& vm, const std::string& id,
                                                                 Clock::time_point deadline,
                                                                 const CancelSignal* cancel) {
  WARREN_ASSIGN_OR_RETURN(std::string serve_socket, CheckRunner(vm, deadline, cancel));
  if (!serve_socket.empty()) {
    GuestChannelRequest request;
    request.kind = GuestChannelRequest::Kind::kUnix;
    request.path = serve_socket;
    Result<std::shared_ptr<GuestChannel>> ch =
        vm.session->OpenRunnerChannel(std::move(request), deadline, cancel);
    if (!ch.ok() && ch.status().code() == Code::kCancelled) return ch.status();
    Status asked = ch.ok() ? (*ch)->Write("start " + id + "\n") : ch.status();
    if (asked.ok()) {
      served_starts_.fetch_add(1);
      return ch;
    }
    if (ch.ok()) (*ch)->Close();
    // Stopped in the guest: commands start through sshd for the rest of this connection;
    // the next connection's check starts the server anew.
    LogInfo("guest runner server not reached vm=" + LogQuote(vm.session->vm_id()) +
            " error=" + LogQuote(asked.message()));
    std::lock_guard<std::timed_mutex> lock(vm.install_mu);
    if (vm.serve_socket == serve_socket) vm.serve_socket.clear();
  }
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestChannel> ch,
                          vm.session->OpenExec(RunnerCommandLine("start " + id), deadline, cancel));
  exec_starts_.fetch_add(1);
  return ch;
}

SshGuestControl::Clock::time_point SshGuestControl::ReachDeadline() const {
  const double slowdown = options_.slowdown ? options_.slowdown() : 1.0;
  return Clock::now() + StretchedBy(options_.reach_timeout, slowdown);
}

Result<GuestProgress> SshGuestControl::Exec(std::string_view vm_id, const GuestCommand& command,
                                            const GuestStreams& streams) {
  if (streams.out == nullptr || streams.err == nullptr) {
    return InvalidArgument("Exec needs stdout and stderr sinks");
  }
  WARREN_ASSIGN_OR_RETURN(std::string header, EncodeStartHeader(command, streams.in != nullptr));
  auto t0 = Clock::now();
  auto hand_back = streams.wait_ms < 0 ? Clock::time_point::max()
                                       : t0 + std::chrono::milliseconds(streams.wait_ms);
  const CancelSignal* cancel = streams.cancel.get();
  std::shared_ptr<Vm> vm = VmFor(vm_id);

  for (int attempt = 0;; ++attempt) {
    std::string id = NewJobId();
    auto reach = ReachDeadline();
    Result<std::shared_ptr<GuestChannel>> opened = OpenStart(*vm, id, reach, cancel);
    if (!opened.ok() && opened.status().code() == Code::kCancelled) {
      // Nothing was asked of the guest yet: there is nothing to kill.
      return Cancelled("the command was cancelled before it started");
    }
    WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestChannel> ch, std::move(opened));
    ChannelCloser closer(ch);
    std::shared_ptr<GuestChannel> start_channel = ch;
    if (Status wrote = ch->Write(header); !wrote.ok()) {
      // A runner that ends without reading its header (a guest's root replaced it, or it
      // crashed) closes the channel under us: say whose fault it is.
      if (wrote.code() == Code::kCancelled) return wrote;
      return Unavailable("the guest runner did not take the command (" + wrote.message() + ")");
    }
    DiscardSink discard;
    JobStream job(id, 0, 0, /*expect_start=*/true);
    Stop stop = job.Follow(*ch, discard, discard, cancel, reach, /*stop_at_start=*/true);
    if (stop == Stop::kRunnerError && job.error().code() == Code::kConflict &&
        attempt + 1 < kMaxIdCollisions) {
      continue;  // the id was taken in this guest: draw another
    }
    StdinPump pump(stop == Stop::kStarted ? streams.in : nullptr, ch);
    // Destroyed before the pump: closing the start channel releases a pump blocked in Write
    // (and gives the job EOF on stdin) before the pump is joined.
    struct PumpStopper {
      std::shared_ptr<GuestChannel> ch;
      ~PumpStopper() { ch->Close(); }
    } stopper{start_channel};

    switch (stop) {
      case Stop::kStarted:
        break;
      case Stop::kCancelled: {
        // The runner may be starting the job right now: wait for its answer, then kill it.
        ch->CloseStdin();
        Stop late = job.Follow(*ch, discard, discard, nullptr, Clock::now() + kStartAfterCancel,
                               /*stop_at_start=*/true);
        if (late == Stop::kStarted) {
          Status killed = Kill(vm_id, id);
          if (!killed.ok())
            LogWarn("guest cancel: kill failed job=" + id + " " + killed.ToString());
        }
        return Cancelled("the command was cancelled before it started");
      }
      case Stop::kRunnerError:
        return job.error();
      case Stop::kChannelEnded:
        if (job.error().code() == Code::kUnavailable && ch->StderrText().empty())
          return job.error();
        return Internal("the guest runner failed to start the command: " +
                        RunnerFailure(*ch, job.error()));
      default:
        (void)Kill(vm_id, id);  // it may still start; it must not run unseen
        return Unavailable("VM " + std::string(vm_id) + " did not start the command in time");
    }

    int reattached = 0;
    for (;;) {
      stop = job.Follow(*ch, *streams.out, *streams.err, cancel, hand_back, false);
      switch (stop) {
        case Stop::kEnded:
        case Stop::kHandBack:
          return job.Progress();
        case Stop::kCancelled: {
          Status killed = Kill(vm_id, id);
          if (!killed.ok())
            LogWarn("guest cancel: kill failed job=" + id + " " + killed.ToString());
          return Cancelled("the command was cancelled and killed");
        }
        case Stop::kRunnerError:
          return job.error();
        default:
          break;
      }
      // The channel ended without an end of job: the connection went, or the runner did.
      // The job keeps running in the guest, so follow it again from what was delivered,
      // unless the VM's connection was closed on purpose (it stopped or restarted).
      if (vm->session->closed() || ++reattached > kMaxReattach) return Detached(job, vm_id);
      LogInfo("guest job reattach vm=" + LogQuote(vm_id) + " job=" + id +
              " reason=" + LogQuote(job.error().message()));
      ch->Close();
      Result<std::shared_ptr<GuestChannel>> again =
          OpenRunner(*vm,
                     "attach " + id + " " + std::to_string(job.stdout_offset()) + " " +
                         std::to_string(job.stderr_offset()),
                     ReachDeadline(), cancel);
      if (!again.ok() && again.status().code() == Code::kCancelled) {
        // The guest does not answer, so it cannot be told to kill the job now.
        return Cancelled("the command was cancelled while VM " + std::string(vm_id) +
                         " did not answer; job " + id + " may still be running there");
      }
      WARREN_ASSIGN_OR_RETURN(ch, std::move(again));
      ch->CloseStdin();
      job.Reattach();
    }
  }
}

Result<GuestProgress> SshGuestControl::Wait(std::string_view vm_id, std::string_view job_id,
                                            uint64_t stdout_from, uint64_t stderr_from,
                                            const GuestStreams& streams) {
  if (streams.out == nullptr || streams.err == nullptr) {
    return InvalidArgument("Wait needs stdout and stderr sinks");
  }
  if (!ValidJobId(job_id)) return NotFound("no job " + SanitizeGuestText(job_id, 32));
  auto hand_back = streams.wait_ms < 0 ? Clock::time_point::max()
                                       : Clock::now() + std::chrono::milliseconds(streams.wait_ms);
  std::shared_ptr<Vm> vm = VmFor(vm_id);
  std::string id(job_id);
  JobStream job(id, stdout_from, stderr_from, /*expect_start=*/false,
                /*hand_back_caught_up=*/true);
  int reattached = 0;
  for (;;) {
    Result<std::shared_ptr<GuestChannel>> opened =
        OpenRunner(*vm,
                   "attach " + id + " " + std::to_string(job.stdout_offset()) + " " +
                       std::to_string(job.stderr_offset()),
                   ReachDeadline(), streams.cancel.get());
    if (!opened.ok() && opened.status().code() == Code::kCancelled) {
      return Cancelled("stopped waiting; the job keeps running");
    }
    WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestChannel> ch, std::move(opened));
    ChannelCloser closer(ch);
    ch->CloseStdin();
    Stop stop = job.Follow(*ch, *streams.out, *streams.err, streams.cancel.get(), hand_back, false);
    switch (stop) {
      case Stop::kEnded:
      case Stop::kHandBack:
        return job.Progress();
      case Stop::kCancelled:
        return Cancelled("stopped waiting; the job keeps running");
      case Stop::kRunnerError:
        return job.error();
      default:
        break;
    }
    if (vm->session->closed() || ++reattached > kMaxReattach) return Detached(job, vm_id);
    job.Reattach();
  }
}

Result<SshGuestControl::Reply> SshGuestControl::RunRunner(std::string_view vm_id,
                                                          const std::string& args, size_t limit) {
  std::shared_ptr<Vm> vm = VmFor(vm_id);
  auto deadline = ReachDeadline();
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestChannel> ch, OpenRunner(*vm, args, deadline));
  ChannelCloser closer(ch);
  ch->CloseStdin();
  deadline = Clock::now() + options_.reply_timeout;
  Reply reply;
  char buf[32 * 1024];
  for (;;) {
    WARREN_ASSIGN_OR_RETURN(size_t n, ch->Read(buf, sizeof buf, deadline));
    if (n == 0) break;
    if (reply.out.size() + n > limit)
      return Internal("the guest's reply to " + args + " is too large");
    reply.out.append(buf, n);
  }
  WARREN_ASSIGN_OR_RETURN(reply.exit_status, ch->WaitExit(deadline));
  reply.err = ch->StderrText();
  return reply;
}

Status SshGuestControl::Kill(std::string_view vm_id, std::string_view job) {
  if (!ValidJobId(job)) return NotFound("no job " + SanitizeGuestText(job, 32));
  WARREN_ASSIGN_OR_RETURN(Reply r, RunRunner(vm_id, "kill " + std::string(job), 4096));
  switch (r.exit_status) {
    case 0:
      return Status::Ok();
    case 3:
      return NotFound("no job " + std::string(job) + " in VM " + std::string(vm_id));
    default:
      return Internal("killing job " + std::string(job) +
                      " failed: " + SanitizeGuestText(r.err, 300));
  }
}

Result<std::vector<GuestJob>> SshGuestControl::Jobs(std::string_view vm_id) {
  WARREN_ASSIGN_OR_RETURN(Reply r, RunRunner(vm_id, "list", kMaxListBytes));
  if (r.exit_status != 0) {
    return Internal("listing jobs failed: " + SanitizeGuestText(r.err, 300));
  }
  return ParseJobList(r.out);
}

void SshGuestControl::Disconnect(std::string_view vm_id) {
  std::shared_ptr<Vm> vm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(vm_id);
    if (it == vms_.end()) return;
    vm = it->second;
    vms_.erase(it);
  }
  vm->session->Shutdown();
}

void SshGuestControl::NoteRunnerVersion(std::string_view vm_id, std::string_view version,
                                        std::string_view serve_socket) {
  if (version != RunnerVersion()) return;  // the next command's check upgrades it
  std::shared_ptr<Vm> vm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(vm_id);
    if (it != vms_.end()) vm = it->second;
  }
  if (vm == nullptr) return;
  // A check under way (it holds the lock) comes to the same answer itself.
  std::unique_lock<std::timed_mutex> lock(vm->install_mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  // The runner on the guest's disk is what was checked, whatever connection it ran on.
  const uint64_t gen = vm->session->generation();
  if (gen == 0) return;
  vm->checked_generation = gen;
  if (!serve_socket.empty()) {
    vm->serve_socket = std::string(serve_socket);
    vm->serve_generation = gen;
  }
}

Status SshGuestControl::RepinHostKey(std::string_view vm_id, std::string_view public_key_line) {
  std::shared_ptr<Vm> vm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(vm_id);
    if (it != vms_.end()) vm = it->second;
  }
  // Without a connection there is nothing pinned yet: the next one pins what the guest shows,
  // which is this key by then.
  if (vm == nullptr) return Status::Ok();
  return vm->session->Repin(public_key_line);
}

Result<std::shared_ptr<GuestPipe>> SshGuestControl::OpenChannel(std::string_view vm_id,
                                                                const GuestChannelRequest& request,
                                                                std::function<void()> notify) {
  using Kind = GuestChannelRequest::Kind;
  GuestChannelRequest req = request;
  if (req.kind == Kind::kIdentityPort) {
    if (!options_.dial_identity) return Unavailable("no identity port here");
    Result<UniqueFd> port = options_.dial_identity(vm_id);
    if (!port.ok()) {
      return Unavailable("VM " + std::string(vm_id) +
                         "'s identity port cannot be reached: " + port.status().message());
    }
    return std::shared_ptr<GuestPipe>(
        std::make_shared<PortPipe>(std::move(port).value(), std::move(notify)));
  }
  if (req.kind == Kind::kTcp) {
    if (req.port == 0) return InvalidArgument("no port given");
    req.env.clear();
  } else if (req.kind == Kind::kUnix) {
    if (!ValidGuestSocketPath(req.path)) return InvalidArgument("bad unix socket path");
    req.env.clear();
  } else if (req.kind == Kind::kSubsystem) {
    if (req.command.empty() || req.command.size() > 64)
      return InvalidArgument("bad subsystem name");
    req.env.clear();
  } else if (!req.env.empty()) {
    std::string exports;
    for (const auto& [name, value] : req.env) {
      if (!ValidEnvName(name)) return InvalidArgument("bad environment variable name");
      if (value.find('\0') != std::string::npos) {
        return InvalidArgument("environment value with a NUL byte");
      }
      exports += "export " + name + "=" + ShellQuote(value) + "; ";
    }
    if (req.kind == Kind::kShell) {
      req.kind = Kind::kExec;
      req.command = exports + "exec \"$SHELL\" -l";
    } else {
      req.command = exports + req.command;
    }
    req.env.clear();
  }
  if (req.command.find('\0') != std::string::npos) {
    return InvalidArgument("a command line with a NUL byte");
  }
  std::shared_ptr<Vm> vm = VmFor(vm_id);
  std::shared_ptr<GuestChannel> ch =
      vm->session->OpenRaw(std::move(req), std::move(notify), ReachDeadline());
  return std::shared_ptr<GuestPipe>(std::make_shared<RawPipe>(std::move(ch)));
}

void SshGuestControl::EnsureEndpoint(std::string_view vm_id) {
  if (options_.inbound == nullptr) return;
  VmFor(vm_id)->session->KeepConnected();
}

void SshGuestControl::RefreshEndpoint(std::string_view vm_id) {
  if (options_.inbound == nullptr) return;
  std::shared_ptr<Vm> vm = VmFor(vm_id);
  vm->session->RefreshEndpoint();
  vm->session->KeepConnected();
}

bool SshGuestControl::SettleEndpoint(std::string_view vm_id) {
  std::shared_ptr<Vm> vm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(vm_id);
    if (it == vms_.end()) return false;
    vm = it->second;
  }
  vm->session->SetUpEndpointNow();
  return vm->session->endpoint_pending();
}

bool SshGuestControl::EndpointReady(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = vms_.find(vm_id);
  return it != vms_.end() && it->second->session->endpoint_ready();
}

std::string SshGuestControl::EndpointProblem(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = vms_.find(vm_id);
  return it == vms_.end() ? "" : it->second->session->endpoint_problem();
}

Status SshGuestControl::Connect(std::string_view vm_id, Clock::time_point deadline,
                                std::function<void()> answered) {
  return VmFor(vm_id)->session->AwaitConnection(deadline, std::move(answered));
}

int SshGuestControl::OpenChannels(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = vms_.find(vm_id);
  return it == vms_.end() ? 0 : it->second->session->open_channels();
}

std::string SshGuestControl::HostKeyFingerprint(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = vms_.find(vm_id);
  return it == vms_.end() ? "" : it->second->session->host_key_fingerprint();
}

}  // namespace warren::guest
