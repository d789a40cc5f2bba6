// SshConnection: one client connection, from key exchange to disconnect. After
// authentication the login name decides, once, where the connection leads: the lobby
// (commands, the REPL) or a VM (`ssh NAME@HOST`, `vm+NAME@HOST`: shells, commands, sftp and
// port forwards inside that VM).
// Run() executes on the connection's own thread, which owns the libssh session and every
// channel on it (libssh sessions are not thread-safe): it does the key exchange, answers
// authentication, and runs the session's ssh_event loop. A lobby channel's command or REPL,
// and a VM channel's non-terminal command (run under the guest runner), run on a worker
// thread of their own and talk to this thread through a ChannelIo; a VM channel's shell,
// terminal command, sftp or TCP forward is bridged by this thread itself to a GuestPipe (a
// raw channel on the VM's control connection). An eventfd in the event loop wakes it;
// nothing else touches the session.
// Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "lobby/ssh/channel_io.h"
#include "lobby/ssh/libssh_handles.h"

#include <libssh/callbacks.h>

namespace warren::ssh {

class SshConnection;

// What every connection of one server shares. All pointers outlive the connections.
struct ConnectionConfig {
  Interpreter* interpreter = nullptr;
  Store* store = nullptr;
  const Clock* clock = nullptr;
  const ServerInfo* info = nullptr;  // how users reach us, for the "get access" banner
  // Key exchange plus authentication must finish within this, or the client is dropped.
  std::chrono::milliseconds preauth_timeout{20000};
  int max_auth_failures = 6;
  int max_channels = 10;  // open session channels per connection (OpenSSH's MaxSessions)
  // Open channels (sessions and TCP forwards) per connection into a VM; more are refused.
  int max_vm_channels = 64;
  // Asked on the connection's thread once a key is accepted, before the login is granted;
  // an error refuses the login like a failed attempt (the server's login limits).
  std::function<Status(const SshConnection& conn, const std::string& user)> admit_login;
};

// Where a connection leads, decided once after authentication (lobby/commands/vm_login.h).
enum class LoginRoute { kLobby, kVm };

// How many command threads, process-wide, ignored cancellation and were left running when
// their connection ended. Non-zero means the process should exit without destructors.
int AbandonedWorkers();

class SshConnection {
 public:
  // `session` has been accepted (ssh_bind_accept_fd) but not yet keyed.
  SshConnection(const ConnectionConfig& config, SessionPtr session, std::string peer);
  ~SshConnection();
  SshConnection(const SshConnection&) = delete;
  SshConnection& operator=(const SshConnection&) = delete;

  // Serves the connection until the client leaves, it fails, or Stop(). Call once.
  void Run();
  // Asks Run() to end: running commands are cancelled and the client is disconnected.
  void Stop();

 private:
  struct Channel;
  friend struct ConnectionCallbacks;

  bool Alive();
  void Service();
  void ServiceChannel(Channel& c);
  void FlushOutput(Channel& c);
  void ReapChannels();
  void Teardown();
  bool StartWorker(Channel& c, bool shell, std::string command);
  // VM route: starts what a session channel asked for (kShell, kExec, kSubsystem). Always
  // accepts the request; a refusal (not allowed, not running...) is written to the
  // client's stderr with its exit status, which says more than a failed request would.
  bool StartVmSession(Channel& c, int kind, std::string command);
  bool OpenVmTcp(ssh_message message);
  void FailChannel(Channel& c, const Status& why);
  void ServiceVmChannel(Channel& c);
  void FlushVmOutput(Channel& c);
  Channel* NewChannel(ssh_channel ch);
  void AuditVm(std::string_view what, const Status& st);
  void SendAccessBannerOnce(const std::string& key_line);
  void CountAuthFailure(std::string_view method, std::string_view reason,
                        std::string_view fingerprint);

  // libssh callbacks (static trampolines live in ssh_connection.cc).
  int OnAuthPubkey(const char* user, ssh_key pubkey, char signature_state);
  int OnAuthPassword(const char* user);
  ssh_channel OnChannelOpen();
  int OnMessage(ssh_message message);

  const ConnectionConfig& config_;
  SessionPtr session_;
  std::string peer_;
  std::chrono::steady_clock::time_point started_;

  std::shared_ptr<Waker> waker_;
  EventPtr event_;
  ssh_server_callbacks_struct server_callbacks_{};
  std::atomic<bool> stop_requested_{false};

  // The socket, for Stop() to cut a key exchange short. Guarded so that Stop never shuts
  // down a descriptor number that libssh has closed and the kernel has handed out again.
  std::mutex socket_mu_;
  int socket_fd_ = -1;
  bool in_event_loop_ = false;

  // Authentication state (connection thread only).
  bool authenticated_ = false;
  int auth_failures_ = 0;
  bool banner_sent_ = false;
  std::string login_name_;
  Caller caller_;
  LoginRoute route_ = LoginRoute::kLobby;
  std::string vm_name_;  // kVm: the VM the login name asked for

  int next_channel_id_ = 0;
  int channels_opened_ = 0;
  std::map<int, std::unique_ptr<Channel>> channels_;
};

}  // namespace warren::ssh
