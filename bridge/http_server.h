// HttpServer: the bridge's HTTP listener (Boost.Beast over Asio). It serves the operator
// endpoint GET /healthz now; MCP, POST /exec and /v1 arrive with the bridge issue, each
// turning a request into a command session for the one interpreter. Start() and Stop() are
// called from one thread; requests are served on the server's own I/O threads.
#pragma once

#include <memory>
#include <string>

#include "lobby/base/status.h"

namespace warren {

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  int port = 8080;  // 0 picks a free port
  int threads = 2;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving. Unavailable when the address cannot be bound.
  Status Start();
  // Stops accepting, closes connections and joins the I/O threads. Idempotent.
  void Stop();
  // The bound port (after Start).
  int port() const;

 private:
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace warren
