// SshServer: the SSH lobby's listener. It binds the address, accepts connections on its
// own thread and gives each one a thread of its own (SshConnection), where the key
// exchange, authentication and the connection's event loop run, so one slow or hostile
// peer never holds up another. Public-key authentication only; modern algorithms only.
// Start() and Stop() are called from one thread (main); port() from any thread after
// Start().
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/status.h"
#include "lobby/commands/interpreter.h"

namespace warren::ssh {

struct SshServerOptions {
  std::string address = "127.0.0.1";
  int port = 2222;  // 0 picks a free port
  // Holds ssh_host_ed25519_key (created on first start).
  std::string data_dir;
  // Key exchange plus authentication must finish within this.
  std::chrono::milliseconds preauth_timeout{20000};
  int max_auth_failures = 6;
  int max_channels_per_connection = 10;
  // Connections beyond this are closed right after accept.
  int max_connections = 1024;
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
  // address cannot be bound.
  Status Start();
  // Stops accepting, cancels running commands, disconnects every client and joins the
  // threads. Returns false when some command ignored cancellation and its thread had to be
  // left running (the caller should then exit without running destructors). Idempotent.
  bool Stop();

  int port() const;
  // Connections open now (authenticated or not), for metrics. Any thread.
  int open_connections() const;
  // "SHA256:..." of the host key (after Start).
  const std::string& host_key_fingerprint() const;

 private:
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace warren::ssh
