// The seam through which the bridge's endpoints (/exec, /metrics, the MCP endpoints…) are
// mounted on HttpServer, without seeing Boost: a handler gets a parsed request and a
// responder, and answers once — in one piece (Respond) or as a stream written over time
// (BeginStream, Write…, End: chunked transfer encoding, e.g. text/event-stream).
//
// Threading: Handle runs on one of the server's I/O threads and must not block; work that
// may wait (a command) goes to a thread of the handler's own, taking the responder with it.
// A responder may be used from any thread; its calls are queued onto the connection in
// order. The connection stays open until the response ends (or the client goes away).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/ascii.h"
#include "lobby/base/streams.h"

namespace warren {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;          // as sent: "GET", "POST"
  std::string target;          // "/mcp?session=1"
  std::string path;            // "/mcp": the target without its query
  HttpHeaders headers;         // names lowercased, in the order sent
  std::string body;            // at most the handler's max_body_bytes()
  std::string remote_address;  // the peer's IP address
  // The peer as per-source limits count it (SourceKey in http_server.h: the IPv4 address,
  // or the IPv6 /64). Behind a reverse proxy every request has the proxy's.
  std::string source;
  bool tls = false;

  // The first header called `name` (give it lowercase), or "" when absent.
  std::string_view Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }

  // The credential of "Authorization: Bearer TOKEN" (the scheme case-insensitive, spaces
  // and tabs around the token dropped): nullopt when the header is absent or names another
  // scheme, "" when the token is empty. The one reader of bearer credentials.
  std::optional<std::string_view> BearerCredential() const {
    std::string_view auth = TrimAsciiSpace(Header("authorization"));
    constexpr std::string_view kScheme = "bearer ";
    if (!StartsWithIgnoreCase(auth, kScheme)) return std::nullopt;
    return TrimAsciiSpace(auth.substr(kScheme.size()));
  }
};

class HttpResponder {
 public:
  virtual ~HttpResponder() = default;

  // The whole response. Content-Length is set from `body`. Call Respond or BeginStream
  // once per request; later calls are ignored.
  virtual void Respond(int status, HttpHeaders headers, std::string body) = 0;

  // Starts a streamed response: the status and headers now (with chunked transfer
  // encoding), the body through Write, and End when done.
  virtual void BeginStream(int status, HttpHeaders headers) = 0;
  // Queues bytes of a streamed response; never blocks. False once the client has gone
  // (then stop producing).
  virtual bool Write(std::string_view bytes) = 0;
  // Ends a streamed response; the connection then serves its next request.
  virtual void End() = 0;

  // Cancelled when the client goes away before the response has ended: a command run for
  // the request should stop (use it as CommandSession::cancel).
  virtual std::shared_ptr<CancelSignal> closed() const = 0;
};

// Answers with `status` and {"error": message} as application/json.
void RespondJsonError(HttpResponder& responder, int status, std::string_view message,
                      HttpHeaders extra_headers = {});

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;

  // Whether this handler serves `path`. Asked once the headers are in, before the body is
  // read; the first handler that matches takes the request.
  virtual bool Matches(std::string_view path) const = 0;
  // The route's name in metrics ("/exec"): one per handler, so paths with ids in them do
  // not make a time series each.
  virtual std::string route() const = 0;
  // The largest body accepted. A longer one is answered 413 without being read whole.
  virtual size_t max_body_bytes() const { return 1024 * 1024; }
  // Serves one request (see the threading note above). If the last reference to the
  // responder goes without an answer, the client gets a 500.
  virtual void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) = 0;
};

}  // namespace warren
