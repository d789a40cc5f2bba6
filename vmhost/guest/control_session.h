// ControlSession: warren's one SSH client connection into one VM, over the VM's control
// socket (a virtio-serial port that QEMU exposes as a unix socket; the guest runs sshd on
// it). Many channels are multiplexed on it (the runner's exec channels, and raw channels
// for `ssh NAME@HOST`: shells, sftp, port forwards), because an SSH handshake to a TCG
// guest costs about a second.
//
// Threads: libssh sessions are not thread-safe, so one owner thread per session does every
// libssh call: it connects (lazily, when a channel is wanted; retrying with backoff, since
// the guest's launcher needs the previous connection gone before it serves the next), runs
// the event loop over the session socket plus an eventfd, opens channels and moves bytes
// between them and their GuestChannel objects. Callers on other threads ask for a channel
// with OpenExec and then talk only to that GuestChannel. libssh callbacks only record facts;
// Service() acts on them after each poll, and channels are freed only in ReapChannels(),
// because libssh runs callbacks re-entrantly from inside its own calls.
//
// The guest is untrusted: its host key is accepted (the port can only lead to this VM)
// but logged and pinned for the life of this object, and nothing it sends is buffered
// without bound.
//
// Thread-safe: every public method may be called from any thread.
#pragma once

#include <libssh/callbacks.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "lobby/base/event_waker.h"
#include "lobby/base/status.h"
#include "lobby/base/unique_fd.h"
#include "vmhost/guest/guest_channel.h"
#include "vmhost/guest/libssh_handles.h"

namespace warren::guest {

// Connects to a VM's control port and returns the connected socket (any stream socket the
// guest's sshd answers on: the VM's unix socket on this machine, DialUnixSocket in
// lobby/base/unix_socket.h; a libvirt channel's socket pair for a VM on a remote host,
// vmhost/libvirt_channel.h). Called on the session's owner thread, once per connection
// attempt; it should not block for long. NotFound or Conflict (no such VM, not running) fail
// the waiting calls at once; other errors, like a port that cannot be connected to yet, are
// retried with backoff until each call's deadline.
using ControlDialer = std::function<Result<UniqueFd>(std::string_view vm_id)>;

// The integrations endpoint as one control connection sets it up (see GuestEndpoint): a
// setup command run first, then SSH remote forwards (tcpip-forward) that make the guest's
// sshd listen on address:ports for us — the listen ports when the setup reports that the
// guest redirects the URL ports to them (ParseEndpointSetupReport), else the URL ports.
struct EndpointPlan {
  std::string setup_command;  // for the guest user's shell; empty: none (the URL ports)
  bool forwards = false;      // false: the setup only (it removes what an earlier one made)
  std::string address;
  uint16_t http_port = 0;  // the URL ports
  uint16_t https_port = 0;
  uint16_t http_listen_port = 0;  // 0: no redirect is ever made
  uint16_t https_listen_port = 0;
  // The setup's exit status that means "ask for the forwards on a new connection" (it
  // changed the guest sshd's config); 0: none. The reconnect waits until no channel is open.
  int reconnect_exit = 0;
};

struct ControlSessionOptions {
  std::string vm_id;
  ControlDialer dial;
  std::string key_path;  // the host's control private key (ed25519, OpenSSH format)
  std::string user = "dev";
  // One connection attempt: the dial, SSH handshake and authentication.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  // A channel the guest has not opened (or whose exec it has not answered) by then means
  // the connection is hung (the guest rebooted under it, say): it is dropped and remade.
  std::chrono::milliseconds channel_open_timeout{std::chrono::seconds(30)};
  // Channels at once on the connection; more requests wait for a free slot. The guest's
  // sshd allows 256 (MaxSessions).
  int max_channels = 128;
  // While channels are open and the guest has sent nothing for `keepalive_after`, a
  // keepalive (a global request the guest's sshd must answer) is sent; no byte back within
  // `keepalive_timeout` more means the guest's sshd is gone (a virtio-serial port shows no
  // hang-up when it dies): the connection is dropped, and its channels fail and reattach.
  // A connection that was idle and silent for `keepalive_after` already when a caller's
  // channel comes is probed at once (its sshd may have died meanwhile, unnoticed), so a
  // guest whose sshd went away costs its next command `keepalive_timeout`, not both.
  std::chrono::milliseconds keepalive_after{std::chrono::seconds(10)};
  std::chrono::milliseconds keepalive_timeout{std::chrono::seconds(10)};
  // How much slower than alone the guest may answer now (vmhost/host_load.h's
  // GuestSlowdown): keepalive_timeout and channel_open_timeout are stretched by it when they
  // run out, so a CPU-starved guest is not dropped as a dead one. Asked only then. Empty: 1.
  std::function<double()> slowdown;
  // Backoff between failed connection attempts: doubles from first to max.
  std::chrono::milliseconds retry_first{std::chrono::milliseconds(200)};
  std::chrono::milliseconds retry_max{std::chrono::seconds(2)};
  // Asked on every connection and on RefreshEndpoint (owner thread: must not block long);
  // nullopt, or no function: no endpoint.
  std::function<std::optional<EndpointPlan>()> endpoint_plan;
  // Takes a connection the guest opened to one of the forwards (open already; `https`: to
  // the plan's https_port) and returns the notify for its channel, or an empty function to
  // refuse it (it is closed). Owner thread, from inside libssh: must not block.
  std::function<std::function<void()>(bool https, std::shared_ptr<GuestChannel>)> accept_forward;
  // The setup command's exit is awaited this long; the forwards are asked for anyway.
  std::chrono::milliseconds endpoint_setup_timeout{std::chrono::seconds(30)};
  // A new connection's endpoint setup (and so its forwards) starts this long after it was
  // made (RefreshEndpoint starts it at once): the setup (sudo, a shell and its programs:
  // 0.3-0.9 s of a TCG guest's CPU) stays off the path of the command the connection was
  // made for, such as the first one in a VM just restored from a template.
  std::chrono::milliseconds endpoint_setup_delay{std::chrono::seconds(2)};
};

class ControlSession {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ControlSession(ControlSessionOptions options);
  // Shutdown() and join.
  ~ControlSession();
  ControlSession(const ControlSession&) = delete;
  ControlSession& operator=(const ControlSession&) = delete;

  // Opens an exec channel running `command_line` (through the guest user's shell),
  // connecting first if there is no connection, until `deadline`. Unavailable when the
  // guest cannot be reached in time (with the last connection error); Cancelled soon after
  // `cancel` fires (when given), however long the guest takes.
  Result<std::shared_ptr<GuestChannel>> OpenExec(std::string command_line,
                                                 Clock::time_point deadline,
                                                 const CancelSignal* cancel = nullptr);
  // The same for a runner channel opened by any request (the runner's server socket).
  Result<std::shared_ptr<GuestChannel>> OpenRunnerChannel(GuestChannelRequest request,
                                                          Clock::time_point deadline,
                                                          const CancelSignal* cancel = nullptr);
  // Asks for a raw channel (shell, exec, subsystem, or a TCP port in the guest; see
  // GuestChannelRequest) and returns at once: the channel reports, through `notify`, when
  // the guest opened it or refused, or when `deadline` passed without a connection.
  std::shared_ptr<GuestChannel> OpenRaw(GuestChannelRequest request, std::function<void()> notify,
                                        Clock::time_point deadline);
  // Returns once there is a connection (making one first when there is none), or fails as
  // OpenExec would. No channel is opened. `answered` as GuestControl::Connect's.
  Status AwaitConnection(Clock::time_point deadline, std::function<void()> answered = {});
  // Drops the current connection (channels on it fail with Unavailable); the next OpenExec
  // connects again.
  void DropConnection();
  // Channels open (or opening) on the connection right now; for tests and leak checks.
  int open_channels() const { return open_channels_.load(); }
  // Keeps the connection up — connecting now, and again whenever it is lost — so the VM's
  // endpoint is there without waiting for a command; until the dialer says the VM is not
  // running (NotFound/Conflict) or DropConnection.
  void KeepConnected();
  // Runs the endpoint setup again now (the VM's integrations changed); asks for the
  // forwards if this connection has not (reconnecting first when a keepalive went out on it:
  // libssh tracks one global request at a time and could take its answer for ours).
  void RefreshEndpoint();
  // True while the current connection's forwards were asked for (tests).
  bool endpoint_ready() const { return endpoint_ready_.load(); }
  // A setup still waiting for endpoint_setup_delay starts now (one done or under way is
  // left alone): for a VM about to be paused, whose setup would otherwise come due at its
  // resume, beside what the resumed VM is asked first.
  void SetUpEndpointNow();
  // True while this connection's endpoint setup or forwards are due, asked for or under
  // way (as of the owner thread's last turn, at most a second ago; at once after
  // RefreshEndpoint).
  bool endpoint_pending() const { return endpoint_pending_.load(); }
  // Why the endpoint's last setup or forwards did not fully work ("" when they did, or
  // before the first): sudo refused, a step failed, a forward refused. One line, bounded.
  std::string endpoint_problem();
  // Ends the owner thread: every channel and waiting request fails. Idempotent.
  void Shutdown();
  // True once Shutdown was called: this session will never connect again.
  bool closed();

  // Counts successful connections (0 before the first). Lets callers do something once per
  // connection, such as checking the runner.
  uint64_t generation() const { return generation_.load(); }
  // "SHA256:..." of the guest's host key, once seen.
  std::string host_key_fingerprint();
  // From now on only the host key `public_key_line` ("ssh-ed25519 AAAA… comment") is taken
  // from the guest: a VM restored from a template has just put its own in place of the
  // template's, which the open connection was made with (and keeps). InvalidArgument for a
  // line that is no public key.
  Status Repin(std::string_view public_key_line);
  const std::string& vm_id() const { return options_.vm_id; }

 private:
  struct Channel;
  friend struct ControlSessionCallbacks;

  struct Request {
    std::shared_ptr<GuestChannel> io;
    Clock::time_point deadline;
    bool connection_only = false;      // AwaitConnection's: opened once connected, no channel
    std::function<void()> answered{};  // AwaitConnection's, called once (then cleared)
  };

  void Run();
  // Makes the connection; `answered` is called once the guest's sshd sent its banner.
  Status Connect(Clock::time_point deadline, std::function<void()> answered);
  Status Authenticate(ssh_session s);
  // Ends the connection; every channel fails with `why`. `graceful`: the connection is
  // fine, so first close the open channels and wait (briefly) for the guest's closes.
  // Ends the connection; its channels fail with `why`. With `requeue`, the channels the
  // guest never ran anything on (not yet open, or waiting for their terminal) go back to it
  // instead, to be opened on the next connection within their deadline: a connection lost
  // under a channel still opening (a guest's sshd restarted) costs its caller nothing.
  void TearDown(const Status& why, bool graceful, std::deque<Request>* requeue = nullptr);
  void Quiesce();
  void StartChannels(std::deque<Request>& waiting);
  void Service();
  void ServiceChannel(Channel& c);
  void FlushStdin(Channel& c);
  void ReapChannels();
  bool Alive();
  // Keepalive bookkeeping after each poll; false when the guest stopped answering.
  bool CheckLiveness();
  // options_.slowdown(), or 1 without one.
  double Slowdown() const;
  bool InstallCallbacks(Channel& c);
  // The endpoint, owner thread: its setup on a new connection or a refresh, the forwards
  // after it, and the connections the guest opens to them (from the message callback).
  enum class EndpointPhase { kOff, kSetup, kForward, kReady };
  void StartEndpoint();
  void ServiceEndpoint();
  // The event loop's poll timeout: at most 1 s, less when the endpoint setup is due sooner.
  int PollMillis() const;
  // After the setup: the forwards its report calls for (both sets when it said nothing and
  // none were asked for yet: the endpoint must answer whichever way the guest is).
  void PlanForwards(const std::string& setup_stdout, bool setup_ran, bool setup_ok = false,
                    const std::string& setup_stderr = "");
  void SetEndpointProblem(std::string problem);
  bool AcceptForward(ssh_message message);

  const ControlSessionOptions options_;
  const std::shared_ptr<EventWaker> waker_ = std::make_shared<EventWaker>();

  std::mutex mu_;  // guards the fields below
  std::deque<Request> incoming_;
  bool stop_ = false;
  bool drop_ = false;
  bool keep_connected_ = false;
  bool refresh_endpoint_ = false;
  bool endpoint_now_ = false;  // SetUpEndpointNow
  std::string endpoint_problem_;
  int connecting_fd_ = -1;  // while a blocking connect runs: shut down to interrupt it
  std::string pinned_fingerprint_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> open_channels_{0};
  std::atomic<bool> endpoint_ready_{false};
  std::atomic<bool> endpoint_pending_{false};

  // Owner thread only.
  // The session's callbacks (libssh keeps the pointer: declared before session_, to outlive
  // it): connect_status_function tells Connect when the guest's banner came.
  ssh_callbacks_struct session_callbacks_{};
  std::function<void()> answered_;  // during Connect: called at the guest's banner, once
  SshSessionPtr session_;
  SshEventPtr event_;
  int socket_fd_ = -1;  // the connection's socket (libssh does not close an fd handed in)
  ssh_counter_struct counters_{};  // bytes in/out on the socket, kept by libssh
  uint64_t heard_bytes_ = 0;       // counters_.in_bytes when last looked at
  Clock::time_point last_heard_{};
  Clock::time_point last_traffic_{};  // when the guest last sent a byte, probing or not
  bool probing_ = false;              // CheckLiveness's last look found channels to watch
  bool keepalive_sent_ = false;
  double dropped_slowdown_ = 1;  // the slowdown CheckLiveness last gave up under
  std::map<uint64_t, std::unique_ptr<Channel>> channels_;
  uint64_t next_channel_id_ = 1;
  EndpointPhase endpoint_phase_ = EndpointPhase::kOff;
  Clock::time_point endpoint_due_{};  // when this connection's setup starts; {}: not pending
  bool endpoint_at_connect_ = false;  // the next connection is made for the endpoint: no delay
  EndpointPlan plan_;
  std::shared_ptr<GuestChannel> setup_io_;
  Clock::time_point setup_since_{};
  // The forwards to ask for (port, https), and those asked for on this connection.
  std::vector<std::pair<uint16_t, bool>> forwards_wanted_;
  size_t forward_next_ = 0;
  std::map<uint16_t, bool> forwarded_ports_;
  bool forwards_requested_ = false;
  bool forward_problems_ = true;  // false: a refused forward is no problem of its own
  // Rounds of forwards asked again on this connection after the guest refused one (the
  // sshd of a connection just dropped may still hold the port, in a slow guest).
  int forward_retries_ = 0;
  std::vector<std::pair<uint16_t, bool>> forwards_refused_;
  std::string problem_before_refusal_;     // the endpoint's problem before a forward was refused
  Clock::time_point forward_retry_due_{};  // {}: none pending
  void RetryForwards();
  bool keepalive_ever_sent_ = false;
  bool reconnect_when_idle_ = false;
  int setup_reconnects_ = 0;  // bounded: a guest cannot make us reconnect for ever

  std::thread owner_;
};

}  // namespace warren::guest
