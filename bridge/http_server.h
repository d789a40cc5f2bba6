// HttpServer: the bridge's HTTP listener (Boost.Beast over Asio), plain HTTP or HTTPS
// (OpenSSL) when given a certificate and key. It serves GET /healthz itself and hands every
// other path to the first mounted HttpHandler (http_handler.h) that matches it: /exec, OAuth,
// the MCP endpoints (and /metrics on the separate metrics listener). It bounds what arrives
// before a handler runs: open connections (in all, and per source: an IPv4 address or an
// IPv6 /64), the time a request's header may take (slowloris) and a kept-alive connection
// may sit idle, header size and each route's body size. Out of file descriptors, it pauses
// accepting instead of spinning. It counts requests by route and status in Metrics.
//
// AddHandler() and Start() are called from one thread before serving; Stop() from that
// thread. Requests are served on the server's own I/O threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "bridge/http_handler.h"
#include "lobby/base/status.h"

namespace warren {

class Metrics;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  int port = 8080;  // 0 picks a free port
  int threads = 2;
  // HTTPS: PEM files of the certificate (chain) and its private key. Both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Optional: counts warren_http_requests_total{route,code} and the connection figures
  // (warren_http_connections, warren_http_connections_refused_total{reason},
  // warren_http_accept_pauses_total). Must outlive the server.
  Metrics* metrics = nullptr;
  // What the listening log line calls this listener: "http listening on ADDR:PORT".
  std::string name = "http";

  // A connection past either cap is answered 503 (plain HTTP) or closed (HTTPS) at once,
  // so the ones already open are not starved.
  int max_connections = 4096;
  int max_connections_per_source = 256;
  // A new connection must have sent a whole request header (TLS handshake included) this
  // long after it was accepted, and a kept-alive one this long after its next request
  // began; else it is closed.
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
  // How long a kept-alive connection may wait for its next request to begin, and how long
  // a request's body may take to arrive.
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(30)};
};

// The key connection caps and per-source rate limits count by: an IPv4 address as it is
// (also when it arrives IPv4-mapped), an IPv6 address as its /64 ("2001:db8:1:2::/64"),
// since one host usually holds a whole /64. Other text is returned unchanged.
std::string SourceKey(std::string_view address);

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Mounts `handler` (before Start). Handlers are tried in the order added.
  void AddHandler(std::shared_ptr<HttpHandler> handler);

  // Loads the TLS certificate (if any), binds and starts serving. InvalidArgument for an
  // unusable certificate or key; Unavailable when the address cannot be bound.
  Status Start();
  // Stops accepting, closes connections and joins the I/O threads. Idempotent.
  void Stop();
  // The bound port (after Start).
  int port() const;
  bool tls() const;
  // Reads a new certificate (chain) and key for HTTPS (SIGHUP): connections accepted from now
  // on use them, open ones keep theirs. On any error the old ones stay. Only for a server
  // started with TLS (a plain one stays plain).
  Status ReloadTls(const std::string& cert_file, const std::string& key_file);

 private:
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace warren
