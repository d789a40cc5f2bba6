// HttpServer: the bridge's HTTP listener (Boost.Beast over Asio), plain HTTP or HTTPS
// (OpenSSL) when given a certificate and key. It serves GET /healthz itself and hands every
// other path to the first mounted HttpHandler (http_handler.h) that matches it: /exec,
// /metrics, the MCP endpoints. It bounds what arrives before a handler runs (header size,
// each route's body size, idle time) and counts requests by route and status in Metrics.
//
// AddHandler() and Start() are called from one thread before serving; Stop() from that
// thread. Requests are served on the server's own I/O threads.
#pragma once

#include <memory>
#include <string>

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
  // Optional: counts warren_http_requests_total{route,code}. Must outlive the server.
  Metrics* metrics = nullptr;
};

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

 private:
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace warren
