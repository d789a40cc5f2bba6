// SshGuestControl: the GuestControl that reaches each VM over its control connection (one
// ControlSession per VM, made on first use) and runs every command under the guest runner
// (runner/warren-run.c), which it installs in the guest itself. Exec is `warren-run start`
// on one channel: the start header and the caller's stdin go in, output frames come back
// until the job ends or is handed back; Wait is `attach` from offsets; Kill, Jobs are `kill`
// and `list`. A channel lost while following a started job is re-attached from the offsets
// already delivered, so a dropped connection costs no output.
//
// Thread-safe: any number of calls, for any VMs, may run at once; calls for one VM share its
// connection. Each call blocks its thread (and, when streams.in is set, one more for stdin).
// Exec and Wait stop waiting for a guest that does not answer (a stalled control link, a
// runner check in progress) as soon as streams.cancel fires: cancelling a caller never
// costs reach_timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "vmhost/guest/control_session.h"
#include "vmhost/guest/runner_install.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_load.h"

namespace warren::guest {

struct SshGuestControlOptions {
  ControlDialer dial;  // VM id -> a socket connected to its control port
  // VM id -> a socket connected to its identity port (GuestChannelRequest::kIdentityPort);
  // empty: none (such channels are Unavailable).
  ControlDialer dial_identity;
  std::string key_path;  // DATA/control_ed25519 (EnsureControlKey)
  std::string user = "dev";
  std::string runner_path;  // the warren-run binary; empty: next to the running executable
  // How long a call waits for the guest to be reachable (connection attempts with backoff,
  // the runner check) and for a command to start before it fails with Unavailable.
  std::chrono::milliseconds reach_timeout{std::chrono::seconds(60)};
  // One connection attempt (socket, handshake, authentication).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  // A connection whose guest stops answering is dropped this long after it went silent
  // (see ControlSessionOptions::keepalive_after and keepalive_timeout).
  std::chrono::milliseconds keepalive_after{std::chrono::seconds(10)};
  std::chrono::milliseconds keepalive_timeout{std::chrono::seconds(10)};
  // Stretches those waits and reach_timeout while the host's CPUs are busy (see
  // ControlSessionOptions::slowdown; asked once per call, and when a keepalive runs out).
  std::function<double()> slowdown = [] { return GuestSlowdown(); };
  // Replies of `kill` (which waits up to ~6 s for a stubborn job) and `list`.
  std::chrono::milliseconds reply_timeout{std::chrono::seconds(30)};
  // The integrations endpoint: with a sink, every VM the sink wants it for gets, on each
  // control connection, the guest setup (endpoint_setup.h) and then SSH remote forwards on
  // endpoint.address:{http_port,https_port}, whose connections go to the sink. Must outlive
  // this object. Null: no endpoint.
  GuestInboundSink* inbound = nullptr;
  GuestEndpoint endpoint;
  // false: the forwards only, no guest setup (a guest set up otherwise, such as a local
  // sshd in tests, whose "guest" is this machine).
  bool endpoint_guest_setup = true;
  // How long after a connection is made its endpoint setup starts
  // (ControlSessionOptions::endpoint_setup_delay).
  std::chrono::milliseconds endpoint_setup_delay = ControlSessionOptions{}.endpoint_setup_delay;
};

class SshGuestControl final : public GuestControl {
 public:
  using Clock = std::chrono::steady_clock;

  // Loads the runner binary (and checks its version); fails when it is missing.
  static Result<std::unique_ptr<SshGuestControl>> Create(SshGuestControlOptions options);
  // Closes every VM's connection; jobs keep running in the guests.
  ~SshGuestControl() override;

  // stdin (streams.in) is forwarded only while Exec streams: at the hand-back the job's
  // stdin gets EOF. Exec returns once its last streams.in->ReadFor (100 ms) returned.
  Result<GuestProgress> Exec(std::string_view vm_id, const GuestCommand& command,
                             const GuestStreams& streams) override;
  // streams.in is not used: a job's stdin ended when its Exec did.
  Result<GuestProgress> Wait(std::string_view vm_id, std::string_view job, uint64_t stdout_from,
                             uint64_t stderr_from, const GuestStreams& streams) override;
  Status Kill(std::string_view vm_id, std::string_view job) override;
  Result<std::vector<GuestJob>> Jobs(std::string_view vm_id) override;
  void Disconnect(std::string_view vm_id) override;
  Status RepinHostKey(std::string_view vm_id, std::string_view public_key_line) override;
  void NoteRunnerVersion(std::string_view vm_id, std::string_view version,
                         std::string_view serve_socket) override;
  // A raw channel on the VM's connection (no runner). Env for a session is set by the
  // command line the guest's shell runs (`export NAME='VALUE'; …`), because the guest's sshd
  // accepts no env requests: a shell with env becomes `exec "$SHELL" -l` after the exports.
  // kIdentityPort: the socket options.dial_identity connects, as a PortPipe.
  Result<std::shared_ptr<GuestPipe>> OpenChannel(std::string_view vm_id,
                                                 const GuestChannelRequest& request,
                                                 std::function<void()> notify) override;
  Status Connect(std::string_view vm_id, Clock::time_point deadline,
                 std::function<void()> answered) override;

  // The VM's integrations endpoint (needs options.inbound): connects now; a connection that
  // set the endpoint up is kept up while the VM runs, so the forwards are there without a
  // command (call when a VM started, and for each running VM at warren's start;
  // Disconnect ends it).
  void EnsureEndpoint(std::string_view vm_id);
  // Rewrites the VM's /etc/hosts block (and asks for the forwards, if the VM now wants the
  // endpoint) right away: after an attach, a detach, a changed egress. Asynchronous: the
  // outcome is logged (`guest endpoint …`).
  void RefreshEndpoint(std::string_view vm_id);
  // A setup the VM's connection holds back (endpoint_setup_delay) starts now; true while
  // one is due or under way (false without a connection). For a VM about to be paused (the
  // warm pool), so that the setup does not come due at its resume.
  bool SettleEndpoint(std::string_view vm_id);
  // Whether the VM's current control connection asked for the endpoint's forwards (tests).
  bool EndpointReady(std::string_view vm_id);
  // Why the VM's endpoint does not fully work, in one line ("" when it does, or is not
  // known yet): for `stat` and the like to say so (sudo refused in the guest, say).
  std::string EndpointProblem(std::string_view vm_id);

  // Channels open on the VM's connection right now (0 without one): for leak checks.
  int OpenChannels(std::string_view vm_id);
  // How many commands started at the runner's server, and how many through exec channels
  // (tests, benchmarks).
  struct StartRoutes {
    int64_t server = 0;
    int64_t exec = 0;
  };
  StartRoutes start_routes() const { return {served_starts_.load(), exec_starts_.load()}; }

  // The guest's host key fingerprint as pinned by the VM's connection ("" before one).
  std::string HostKeyFingerprint(std::string_view vm_id);

 private:
  struct Vm {
    std::shared_ptr<ControlSession> session;
    // One runner check or upload per VM at a time; timed, so a waiter can be cancelled.
    std::timed_mutex install_mu;
    uint64_t checked_generation = 0;
    // The runner's server the check on connection `serve_generation` started ("" for none):
    // commands start there, without an sshd session.
    std::string serve_socket;
    uint64_t serve_generation = 0;
  };

  SshGuestControl(SshGuestControlOptions options, RunnerBinary runner);

  std::shared_ptr<Vm> VmFor(std::string_view vm_id);
  // When a call that starts now stops waiting for the guest to be reached and to answer:
  // reach_timeout, stretched by the host's load (options_.slowdown).
  Clock::time_point ReachDeadline() const;
  // Checks the guest's runner once per connection (under install_mu); the socket of the
  // runner's server this connection's check started, "" when there is none.
  Result<std::string> CheckRunner(Vm& vm, Clock::time_point deadline, const CancelSignal* cancel);
  // A runner channel once the guest's runner is checked; Cancelled soon after `cancel`
  // fires (when given), Unavailable at the deadline.
  Result<std::shared_ptr<GuestChannel>> OpenRunner(Vm& vm, const std::string& args,
                                                   Clock::time_point deadline,
                                                   const CancelSignal* cancel = nullptr);
  // A channel to `start ID` (the start header comes next): at the runner's server when the
  // connection's check started one, else through an exec channel (also when the server is
  // not reached, for the rest of the connection).
  Result<std::shared_ptr<GuestChannel>> OpenStart(Vm& vm, const std::string& id,
                                                  Clock::time_point deadline,
                                                  const CancelSignal* cancel = nullptr);
  // Runs a runner verb whose reply is plain text: stdout (up to `limit`), exit status and
  // the first bytes of stderr.
  struct Reply {
    std::string out;
    int exit_status = 0;
    std::string err;
  };
  Result<Reply> RunRunner(std::string_view vm_id, const std::string& args, size_t limit);

  const SshGuestControlOptions options_;
  const RunnerBinary runner_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Vm>, std::less<>> vms_;
  std::atomic<int64_t> served_starts_{0};
  std::atomic<int64_t> exec_starts_{0};
};

}  // namespace warren::guest
