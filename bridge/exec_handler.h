// ExecHandler: POST /exec — one command line from an agent, run by the one interpreter as
// an in-process command session, exactly as if it came over SSH. The request carries an
// API token (Authorization: Bearer wr1.…) and a body that is either the command line
// itself or JSON {"command", "stdin"?, "wait_seconds"?}, at most 64 KiB. The answer is the
// command's --json data with the HTTP status of its outcome (lobby/base/error_map.h): 200,
// 400, 401, 403, 404, 405, 409, 413, 422 (with the output), 429, 504…
//
// Each request gets a thread of its own for the command (commands block: `ssh VM CMD`
// waits up to 45 s), bounded by max_in_flight; each token (label) is rate limited. A client
// that goes away cancels its command. Handle() is called on the HTTP server's I/O threads;
// Stop() from the thread that owns the server, before the server stops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "bridge/http_handler.h"
#include "bridge/rate_limiter.h"

namespace warren {

class Interpreter;

struct ExecHandlerOptions {
  // Per API token label: requests a second on average, and the burst allowed.
  double rate_per_second = 20;
  double burst = 40;
  // Commands running at once over /exec, all tokens together.
  int max_in_flight = 64;
  size_t max_body_bytes = 64 * 1024;
  // A command still running after this many seconds is answered 504. It is not stopped:
  // like a gateway timeout, the work goes on (a `new` still finishes; `ls` shows it).
  // Above the 45 s that `ssh VM CMD` and `wait` stay attached, so they never reach it.
  int timeout_seconds = 120;
};

class ExecHandler final : public HttpHandler {
 public:
  // `interpreter` must outlive the handler.
  ExecHandler(Interpreter& interpreter, ExecHandlerOptions options);
  ~ExecHandler() override;

  bool Matches(std::string_view path) const override { return path == "/exec"; }
  std::string route() const override { return "/exec"; }
  size_t max_body_bytes() const override { return options_.max_body_bytes; }
  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) override;

  // Refuses new requests, cancels the running commands and waits up to `timeout_ms` for
  // them. False when some command ignored cancellation (its thread still runs: the caller
  // should then exit without destructors, as with SshServer::Stop). Idempotent.
  bool Stop(int timeout_ms = 10'000);

 private:
  void Run(HttpRequest request, std::shared_ptr<HttpResponder> responder);
  // Counts a thread in (false when stopping) and out, for Stop.
  bool Enter(const std::shared_ptr<CancelSignal>& cancel);
  void Leave(const std::shared_ptr<CancelSignal>& cancel);

  Interpreter& interpreter_;
  const ExecHandlerOptions options_;
  RateLimiter limiter_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int running_ = 0;
  std::multiset<std::shared_ptr<CancelSignal>> cancels_;  // one per running thread
};

}  // namespace warren
