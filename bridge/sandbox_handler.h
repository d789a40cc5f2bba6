// SandboxHandler: the sandbox API over REST (seed 004), /v1 on the HTTP listener, bearer
// token as for POST /exec:
//   POST   /v1/sandboxes {size?, timeout_minutes?}       → 201 {id, status, size, expires_at}
//   GET    /v1/sandboxes                                  → {sandboxes: [{id, status, …}]}
//   GET    /v1/sandboxes/ID                               → {id, status, size, expires_at}
//   POST   /v1/sandboxes/ID/exec {command, timeout_ms?, cwd?, env?}
//                                         → {stdout, stderr, exit_code, duration_ms, truncated}
//   POST   /v1/sandboxes/ID/extend {additional_minutes}   → {id, expires_at}
//   DELETE /v1/sandboxes/ID                               → {id, status: "destroyed"}
//   GET    /v1/usage[?since=YYYY-MM-DD&vm=NAME]           → the `usage --json` data
// The handler holds no policy: each request is one lobby command session through
// Interpreter::Execute (argv and shapes from lobby/commands/sandbox_view.h), so a token's
// --cmds, --tag and --exp limit it as on every surface. Errors are {"error": …} with the one
// error map's status; a command in a sandbox that exits non-zero is a result (200).
//
// Threading as ExecHandler's: token, rate limit (a bucket per token label with /exec's
// figures) and the request are checked on the I/O thread; the command runs on the one
// CommandRunner; a request still running at its deadline is answered 504 and left to finish
// (exec's deadline is its timeout_ms plus a margin, so the sandbox's own kill answers first).
// A client that goes away cancels its command. The handler keeps no state of a request after
// Handle returns.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "bridge/http_handler.h"
#include "bridge/rate_limiter.h"

namespace warren {

class Interpreter;
class CommandRunner;

struct SandboxHandlerOptions {
  // Per API token label, as /exec (serve --exec-rate, --exec-burst).
  double rate_per_second = 20;
  double burst = 40;
  size_t max_body_bytes = 64 * 1024;
  // Requests other than exec are answered 504 after this (serve --exec-timeout); `new
  // --sandbox` waits for its guest to boot.
  int timeout_seconds = 120;
  // exec: how long past its timeout_ms before a 504, for reaching the guest and collecting
  // what the killed command printed.
  int exec_margin_seconds = 30;
};

class SandboxHandler final : public HttpHandler {
 public:
  // `interpreter` and `runner` must outlive the handler.
  SandboxHandler(Interpreter& interpreter, CommandRunner& runner, SandboxHandlerOptions options);

  // Everything under /v1: a path it does not know is its 404, in its JSON.
  bool Matches(std::string_view path) const override;
  std::string route() const override { return "/v1"; }
  size_t max_body_bytes() const override { return options_.max_body_bytes; }
  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) override;

 private:
  Interpreter& interpreter_;
  CommandRunner& runner_;
  const SandboxHandlerOptions options_;
  RateLimiter limiter_;
};

}  // namespace warren
