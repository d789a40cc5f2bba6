// ExecHandler: POST /exec — one command line from an agent, run by the one interpreter as
// an in-process command session, exactly as if it came over SSH. The request carries an
// API token (Authorization: Bearer wr1.…) and a body that is either the command line
// itself or JSON {"command", "stdin"?, "wait_seconds"?}, at most 64 KiB. The answer is the
// command's --json data with the HTTP status of its outcome (lobby/base/error_map.h): 200,
// 400, 401, 403, 404, 405, 409, 413, 422 (with the output), 429, 504…
//
// Authentication, the per-label rate limit and the body are handled on the I/O thread;
// the command then runs on the one CommandRunner (lobby/commands/command_runner.h), shared
// with MCP: fair between users, bounded in threads, 429 for a user over their share. A
// command still running at the deadline is answered 504 from the runner's timer and left
// to finish. A client that goes away cancels its command. Handle() is called on the HTTP
// server's I/O threads; the handler keeps no state of a request after Handle returns, so
// it may go before the commands it started (the runner's Stop ends those).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "bridge/http_handler.h"
#include "bridge/rate_limiter.h"

namespace warren {

class Interpreter;
class CommandRunner;

struct ExecHandlerOptions {
  // Per API token label: requests a second on average, and the burst allowed.
  double rate_per_second = 20;
  double burst = 40;
  size_t max_body_bytes = 64 * 1024;
  // A command still running after this many seconds is answered 504. It is not stopped:
  // like a gateway timeout, the work goes on (a `new` still finishes; `ls` shows it).
  // Above the 45 s that `ssh VM CMD` and `wait` stay attached, so they never reach it.
  int timeout_seconds = 120;
};

class ExecHandler final : public HttpHandler {
 public:
  // `interpreter` and `runner` must outlive the handler.
  ExecHandler(Interpreter& interpreter, CommandRunner& runner, ExecHandlerOptions options);

  bool Matches(std::string_view path) const override { return path == "/exec"; }
  std::string route() const override { return "/exec"; }
  size_t max_body_bytes() const override { return options_.max_body_bytes; }
  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) override;

 private:
  Interpreter& interpreter_;
  CommandRunner& runner_;
  const ExecHandlerOptions options_;
  RateLimiter limiter_;
};

}  // namespace warren
