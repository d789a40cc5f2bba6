// WebServer: the web proxy — every VM on the web at http(s)://NAME.<domain>[:port]/ (its
// route port) and NAME-pPORT.<domain> (one port, the owner only), private until shared. It
// listens on one address (HTTP, or HTTPS with a wildcard certificate for *.<domain>),
// admits connections within its limits (in total and per source address: past them a 503
// from a bounded number of rejecting threads, else the socket is closed), and serves each on
// a worker of its own: the domain's sign-in pages, the per-host session hand-off, and for a
// VM's host the visitor's credentials asked of the WebGate, then the request forwarded over
// a channel into the guest (WebGate::Open) and the answer streamed back — bodies, server-sent
// events and WebSocket upgrades both ways with backpressure. A visitor's connection is kept
// alive between forwarded answers whose end is known (each request gets its own channel into
// the VM); the proxy's own pages close it. Every decision is the gate's; warren's cookies and
// tokens never reach a VM. One log line per request, with no query, cookie or token in it.
//
// Threads: one accept thread; one worker per admitted connection (two while an upgraded
// connection is spliced), bounded by max_connections, plus at most max_rejecting. Start and
// Stop from one thread; the rest is internal. The gate is called from the workers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "lobby/base/event_waker.h"
#include "lobby/base/status.h"
#include "lobby/relay/byte_stream.h"
#include "lobby/relay/tls_stream.h"
#include "lobby/web/web_gate.h"

namespace warren::web {

// The seam is declared in namespace warren (beside the interpreter's vocabulary); it is the
// proxy's own too, so web::WebGate names it as well.
using ::warren::WebGate;

struct WebServerOptions {
  std::string listen = "127.0.0.1:8081";  // HOST:PORT, [V6]:PORT; port 0 picks one (tests)
  // Both or neither: HTTPS with this certificate (for *.<domain> and <domain>), else HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string domain = "warren.localhost";
  // The port visitors use in URLs (redirects to the domain and between hosts); 0: the
  // bound port. The scheme follows TLS.
  int public_port = 0;
  // The command that prints a sign-in link, shown on the sign-in page and in 401 JSON.
  std::string sign_in_command = "ssh HOST browser";
  int max_connections = 512;  // in total; past it: 503
  // Per peer address; past it: 503. On one machine every visitor is 127.0.0.1.
  int max_connections_per_source = 256;
  int max_connections_per_site = 128;   // per VM; past it: 503
  int max_rejecting = 8;                // connections answered 503 at once; past it: closed
  size_t max_header_bytes = 32 * 1024;  // the request head (431 past it); 2x for the VM's answer
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};  // TLS + request head
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};    // no byte either way
  // A kept-alive connection may wait this long for its next request.
  std::chrono::milliseconds keepalive_timeout{std::chrono::seconds(15)};
  // An upgraded connection (WebSocket) may be quiet this long in one direction.
  std::chrono::milliseconds upgrade_idle_timeout{std::chrono::minutes(30)};
  long long cookie_max_age_s = 30LL * 24 * 3600;  // the gate decides how long a session lives
};

class WebServer {
 public:
  WebServer(WebServerOptions options, WebGate* gate);
  ~WebServer();  // Stop()
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  // Loads the certificate (InvalidArgument naming the file), binds and listens
  // (Unavailable naming the address), starts accepting.
  Status Start();
  // Stops accepting, cuts every open connection and waits for the workers. Idempotent.
  void Stop();

  // For a change whose effect only the gate knows (a VM made private, a share removed, a
  // session ended, a token revoked): asks the gate again for every request being forwarded
  // now (a download, server-sent events, a WebSocket) and cuts those it refuses. Calls the
  // gate without the lock held. Returns how many were cut.
  int Revalidate();
  // Cuts every request being forwarded to VM `vm_id` (stopped, removed, renamed). Returns
  // how many.
  int RevokeVm(std::string_view vm_id);

  uint16_t port() const { return port_; }  // the bound port, after Start
  bool https() const { return Tls() != nullptr; }
  // Reads a new certificate (chain) and key (SIGHUP): connections accepted from now on use
  // them, open ones keep theirs; on any error the old ones stay. Only when serving HTTPS.
  Status ReloadTls(const std::string& cert_file, const std::string& key_file);
  int active();  // connections being served now (tests, metrics)

  // One connection's state (web_exchange.cc); public for the helpers there.
  struct Conn;

 private:
  void AcceptLoop();
  void Admit(int fd, std::string peer);
  void Reject(std::unique_ptr<relay::FdStream> stream, std::string peer);
  // Marks `c` cancelled and cuts both its streams; mu_ held.
  static void Cut(Conn& c);
  void Run(std::shared_ptr<Conn> conn);
  // The request and answer (web_exchange.cc).
  void Handle(Conn& c);
  void HandleRequest(Conn& c, relay::ByteStream::Clock::time_point header_deadline, bool first);
  void HandleDomain(Conn& c);
  // This host's session cookie (of several, the live one).
  std::optional<std::string> PickSession(Conn& c);
  void HandleSite(Conn& c);
  void Forward(Conn& c);
  // The per-VM count for `c`'s request (its site known now); false past the limit.
  bool CountSite(Conn& c);
  void ReleaseSite(Conn& c);
  void LogRequest(const Conn& c, relay::ByteStream::Clock::time_point t0);

  const WebServerOptions options_;
  WebGate* const gate_;
  relay::SslCtxPtr Tls() const;
  mutable std::mutex tls_mu_;
  relay::SslCtxPtr tls_;  // swapped whole by ReloadTls, under tls_mu_
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  EventWaker waker_;
  std::thread acceptor_;

  std::mutex mu_;
  std::condition_variable cv_;  // a worker ended
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Conn>> conns_;
  std::map<std::string, int, std::less<>> per_source_;
  std::map<std::string, int, std::less<>> per_site_;
  int rejecting_ = 0;
  int workers_ = 0;
};

}  // namespace warren::web
