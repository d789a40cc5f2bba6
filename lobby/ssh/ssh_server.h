// SshServer: the SSH lobby's listener. One listener thread accepts connections and holds
// every one that has not started its key exchange yet, in an epoll set, with no thread per
// socket: it sends our identification line at once (clients such as ssh-keyscan wait for
// it), waits for the client's first bytes, closes connections that stay silent past
// `version_timeout`, and applies the admission limits (ssh_admission.h: per source
// address, per user, in all, and a MaxStartups-like early drop). A connection that has
// spoken gets a thread of its own (SshConnection) for its key exchange, authentication and
// event loop once a handshake slot is free, so one slow or hostile peer never holds up
// another, and the number of threads is set by the limits, never by clients: the listener,
// at most limits.handshakes key exchanges and limits.logins logins (plus the logins'
// command workers). Why not a thread at accept, as before: 1,024 idle sockets then cost
// 1,024 threads and filled the one global cap, and every login failed while they were held.
// Public-key authentication only; modern algorithms only.
// Start() and Stop() are called from one thread (main); port() from any thread after
// Start(); open_connections() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/status.h"
#include "lobby/commands/interpreter.h"
#include "lobby/ssh/ssh_admission.h"

namespace warren::ssh {

struct SshServerOptions {
  std::string address = "127.0.0.1";
  int port = 2222;  // 0 picks a free port
  // Holds ssh_host_ed25519_key (created on first start).
  std::string data_dir;
  // A connection that has not sent its identification line ("SSH-2.0-...") by then is
  // closed (it cost no thread while it waited).
  std::chrono::milliseconds version_timeout{5000};
  // Key exchange plus authentication must finish within this once started; a connection
  // waiting for a handshake slot is closed when this much has passed since accept.
  std::chrono::milliseconds preauth_timeout{20000};
  int max_auth_failures = 6;
  int max_channels_per_connection = 10;
  AdmissionLimits limits;
  // Called by Start() with the bound port, before the first connection is accepted (so
  // e.g. the interpreter's ServerInfo can name a port picked from 0).
  std::function<void(int port)> on_listening;
};

class SshServer {
 public:
  // `interpreter`, `store` and `clock` must outlive the server.
  SshServer(SshServerOptions options, Interpreter& interpreter, Store& store, const Clock& clock);
  ~SshServer();  // Stop()s
  SshServer(const SshServer&) = delete;
  SshServer& operator=(const SshServer&) = delete;

  // Loads or creates the host key, binds and starts accepting. Unavailable when the
  // address cannot be bound; InvalidArgument for limits that make no sense.
  Status Start();
  // Stops accepting, cancels running commands, disconnects every client and joins the
  // threads. Returns false when some command ignored cancellation and its thread had to be
  // left running (the caller should then exit without running destructors). Idempotent.
  bool Stop();

  int port() const;
  // Connections open now (in any stage, held by the listener or not), for metrics.
  int open_connections() const;
  // "SHA256:..." of the host key (after Start).
  const std::string& host_key_fingerprint() const;

 private:
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace warren::ssh
