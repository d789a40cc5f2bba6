// SshConnection: one client connection, from key exchange to disconnect. After
// authentication the login name decides, once, where the connection leads: the lobby
// (commands, the REPL), served here, or a VM (`ssh NAME@HOST`, `vm+NAME@HOST`), served by
// the connection's VmRoute (lobby/ssh/vm_route.h).
// Run() executes on the connection's own thread, which owns the libssh session and every
// channel on it (libssh sessions are not thread-safe): it does the key exchange, answers
// authentication, and runs the session's ssh_event loop. A lobby channel's command or REPL
// runs on a worker thread of its own (lobby_workers.h) and talks to this thread through a
// ChannelIo; what a VM channel runs is VmRoute's. An EventWaker in the event loop wakes it;
// nothing else touches the session.
// Once logged in, the connection is a live use of its key (lobby/commands/live_sessions.h):
// when the key (or its user) is removed, every channel is ended with the reason — commands
// cancelled, shells, sftp and forwards into a VM closed — and the client is disconnected.
// Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/event_waker.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/live_sessions.h"
#include "lobby/ssh/libssh_handles.h"

#include <libssh/callbacks.h>

namespace warren::ssh {

class SshConnection;
struct SessionChannel;
class VmRoute;

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
  friend struct ConnectionCallbacks;

  bool Alive();
  void Service();
  void ServiceChannel(SessionChannel& c);
  void FlushOutput(SessionChannel& c);
  void ReapChannels();
  void Teardown();
  // The key was revoked (live_; connection thread): ends every channel with `why` and has
  // the loop end once they are gone.
  void EndRevoked(const Status& why);
  // Lobby: the exec request's command or the shell's REPL on a worker thread.
  bool StartWorker(SessionChannel& c, bool shell, std::string command);
  // VM route: a direct-tcpip open, within the connection's channel limit.
  bool OpenVmTcp(ssh_message message);
  SessionChannel* NewChannel(ssh_channel ch);
  void SendAccessBannerOnce(const std::string& key_line);
  void CountAuthFailure(std::string_view method, std::string_view reason,
                        std::string_view fingerprint);

  // Sets up the event loop and runs the key exchange on it; false: the connection is done.
  bool KeyExchange(std::chrono::steady_clock::time_point deadline);

  // libssh callbacks (static trampolines live in ssh_connection.cc).
  int OnAuthPubkey(const char* user, ssh_key pubkey, char signature_state);
  int OnAuthPassword(const char* user);
  ssh_channel OnChannelOpen();
  int OnMessage(ssh_message message);

  const ConnectionConfig& config_;
  SessionPtr session_;
  std::string peer_;
  std::chrono::steady_clock::time_point started_;

  std::shared_ptr<EventWaker> waker_;
  EventPtr event_;
  ssh_server_callbacks_struct server_callbacks_{};
  std::atomic<bool> stop_requested_{false};

  // Authentication state (connection thread only).
  bool authenticated_ = false;
  int auth_failures_ = 0;
  bool banner_sent_ = false;
  std::string login_name_;
  Caller caller_;
  std::unique_ptr<VmRoute> vm_route_;  // set when the login name leads into a VM

  // Registered at login; its callback only records the reason and wakes the loop.
  LiveSessions::Registration live_;
  std::mutex revoked_mu_;
  std::optional<Status> revoked_;  // set by that callback
  bool ending_ = false;            // EndRevoked ran: no new channels; leave when drained
  std::chrono::steady_clock::time_point ending_deadline_;

  int next_channel_id_ = 0;
  int channels_opened_ = 0;
  std::map<int, std::unique_ptr<SessionChannel>> channels_;
};

}  // namespace warren::ssh
