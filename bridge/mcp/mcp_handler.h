// McpHandler: the MCP endpoints over Streamable HTTP (protocol 2025-11-25, also 2025-06-18),
// mounted on HttpServer through the HttpHandler seam. /mcp serves exec, exec_read_only and
// wait; /mcp/claude and /mcp/openai the curated tools; /mcp/sandbox the sandbox API's four
// (tools.h). It enforces the
// transport's rules: Origin checked (loopback or configured origins; otherwise 403), a
// bearer token on every request (401 without), sessions (Mcp-Session-Id from initialize;
// unknown -> 404, missing -> 400, DELETE ends one), MCP-Protocol-Version (unsupported ->
// 400), one JSON-RPC message per POST (batches and malformed JSON get JSON-RPC errors),
// GET -> 405 (this server sends nothing unasked). A tools/call answers over an SSE stream
// when the client accepts one, with progress notifications while its command runs;
// notifications/cancelled — or the client going away — stops the command unless it has
// already become a job.
//
// Threading: Handle never blocks; each tools/call runs on the one CommandRunner
// (lobby/commands/command_runner.h), shared with /exec: fair between users, bounded in
// threads, and a call over its user's share is answered 429 at once. Shutdown() cancels
// calls in flight and waits for them; the destructor waits for them without a limit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/http_handler.h"
#include "bridge/mcp/sessions.h"
#include "bridge/mcp/tools.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"

namespace warren {
class Interpreter;
class CommandRunner;
}  // namespace warren

namespace warren::mcp {

inline constexpr std::string_view kLatestProtocolVersion = "2025-11-25";
// Newest first.
inline constexpr std::string_view kSupportedProtocolVersions[] = {"2025-11-25", "2025-06-18"};

struct McpOptions {
  // Origins allowed besides loopback ones (http://localhost:*, http://127.0.0.1:*,
  // http://[::1]:*, *.localhost): exact "scheme://host[:port]" strings.
  std::vector<std::string> allowed_origins;
  // The domain VMs' web pages are served under (serve --domain): an Origin of a host under
  // it is a VM's page — untrusted, whatever the guest serves — and refused, even
  // though *.localhost is otherwise loopback (unless allowed_origins names it exactly).
  std::string web_domain = "warren.localhost";
  // Open sessions in all, and of one user: a user at their cap loses their oldest idle
  // session to a new one (never one with a call in flight).
  size_t max_sessions = 10000;
  size_t max_sessions_per_user = 64;
  std::chrono::seconds session_idle_limit{3600};
  int progress_interval_ms = 1000;
  // TEST-ONLY: the conformance suite's fixture tools and logging (serve
  // --mcp-conformance-fixtures). Never on by default.
  bool conformance_fixtures = false;
  std::string server_version = "0.1.0";
  // The WWW-Authenticate value of a 401 for an endpoint path (OAuth adds its
  // resource_metadata here). Default: Bearer realm="warren".
  std::function<std::string(std::string_view path)> challenge;
};

// Authenticates the bearer token of a request to endpoint `path` ("/mcp", "/mcp/claude"…):
// the caller (surface "mcp"), or Unauthenticated. Called for every request, so expiry and
// revocation act at once.
using Authenticator = std::function<Result<Caller>(std::string_view token, std::string_view path)>;

class McpHandler final : public HttpHandler {
 public:
  // `interpreter` and `runner` must outlive the handler.
  McpHandler(Interpreter& interpreter, CommandRunner& runner, Authenticator authenticate,
             McpOptions options);
  ~McpHandler() override;

  bool Matches(std::string_view path) const override;
  std::string route() const override { return "/mcp"; }
  size_t max_body_bytes() const override;
  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) override;

  // Refuses new calls, cancels those in flight and waits up to `timeout` for their
  // threads. False when some still run then (a command ignored cancellation): the caller
  // must not destroy the interpreter under them. Idempotent.
  bool Shutdown(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  size_t sessions() const { return sessions_.size(); }

 private:
  struct Endpoint {
    std::string path;
    ToolSet tools;
    // The initialize result's instructions for a caller of this endpoint.
    std::function<std::string(const Caller&)> instructions;
  };
  const Endpoint* FindEndpoint(std::string_view path) const;
  bool OriginAllowed(std::string_view origin) const;
  void Post(const Endpoint& endpoint, HttpRequest request, std::shared_ptr<HttpResponder> responder,
            const Caller& caller);
  void CallTool(const Endpoint& endpoint, const SessionInfo& session, nlohmann::json id,
                nlohmann::json params, bool stream, const Caller& caller,
                std::shared_ptr<HttpResponder> responder);

  Interpreter& interpreter_;
  CommandRunner& runner_;
  Authenticator authenticate_;
  McpOptions options_;
  std::vector<Endpoint> endpoints_;
  SessionTable sessions_;

  // Tool calls accepted by the runner and not finished.
  std::mutex mu_;
  std::condition_variable idle_;
  int running_ = 0;
  bool stopping_ = false;
};

// True for loopback origins: http(s)://localhost, 127.0.0.0/8, [::1], *.localhost, any port.
bool IsLoopbackOrigin(std::string_view origin);
// True when the origin's host is a name under `domain` (not `domain` itself; any case, any
// port).
bool IsUnderDomain(std::string_view origin, std::string_view domain);

}  // namespace warren::mcp
