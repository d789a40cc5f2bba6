#include "bridge/exec_handler.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "bridge/json_api.h"
#include "lobby/base/ascii.h"
#include "lobby/base/error_map.h"
#include "lobby/base/log.h"
#include "lobby/commands/command_runner.h"
#include "lobby/commands/guest_output.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/session.h"

namespace warren {
namespace {

// What a request asks to run, from either body form.
struct ExecRequest {
  std::string command;
  std::optional<std::string> stdin_text;
  std::optional<int> wait_seconds;
};

Result<ExecRequest> ParseBody(const HttpRequest& req) {
  std::string_view body = TrimAsciiSpace(req.body);
  const bool json =
      StartsWithIgnoreCase(TrimAsciiSpace(req.Header("content-type")), "application/json") ||
      (!body.empty() && body.front() == '{');
  ExecRequest out;
  if (!json) {
    if (body.empty()) {
      return InvalidArgument(
          "the body is empty: send one command line, e.g. \"ls\", or JSON "
          "{\"command\": \"ls\"}");
    }
    out.command = std::string(body);
    return out;
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("the JSON body must be an object {\"command\": …}");
  auto command = j.find("command");
  if (command == j.end() || !command->is_string() ||
      TrimAsciiSpace(command->get_ref<const std::string&>()).empty()) {
    return InvalidArgument("the JSON body needs \"command\": a non-empty string");
  }
  out.command = command->get<std::string>();
  if (auto in = j.find("stdin"); in != j.end() && !in->is_null()) {
    if (!in->is_string()) return InvalidArgument("\"stdin\" must be a string");
    out.stdin_text = in->get<std::string>();
  }
  if (auto wait = j.find("wait_seconds"); wait != j.end() && !wait->is_null()) {
    if (!wait->is_number_integer() || wait->get<int64_t>() < 0 ||
        wait->get<int64_t>() > kMaxWaitSeconds) {
      return InvalidArgument("\"wait_seconds\" must be an integer from 0 to " +
                             std::to_string(kMaxWaitSeconds));
    }
    out.wait_seconds = static_cast<int>(wait->get<int64_t>());
  }
  return out;
}

// One request's command session and what it produced, shared by the runner's thread that
// runs it and the timer that may answer 504 first; whichever answers first answers.
struct ExecCall {
  explicit ExecCall(std::string stdin_text) : in(std::move(stdin_text)) {}
  StringInput in;
  StringSink out;
  StringSink err;
  CommandSession session;
  std::string command;
  std::shared_ptr<HttpResponder> responder;
  std::mutex mu;
  bool answered = false;

  // True once, for whoever answers.
  bool Claim() {
    std::lock_guard lock(mu);
    return !std::exchange(answered, true);
  }
};

void RespondOutcome(HttpResponder& responder, ExecCall& call) {
  const CommandSession& session = call.session;
  std::string body = call.out.str();
  if (body.empty()) {
    nlohmann::json j = session.status.ok() ? nlohmann::json::object()
                                           : nlohmann::json{{"error", session.status.message()}};
    body = j.dump() + "\n";
  }
  responder.Respond(HttpStatusFor(session.status.code()),
                    {{"Content-Type", "application/json"},
                     {"Cache-Control", "no-store"},
                     {"X-Warren-Exit-Status", std::to_string(session.exit_status)}},
                    std::move(body));
}

}  // namespace

ExecHandler::ExecHandler(Interpreter& interpreter, CommandRunner& runner,
                         ExecHandlerOptions options)
    : interpreter_(interpreter),
      runner_(runner),
      options_(options),
      limiter_(options.rate_per_second, options.burst) {}

void ExecHandler::Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  if (request.method != "POST") {
    return RespondStatus(*responder,
                         Status(Code::kMethodNotAllowed, "use POST with the command as the body"));
  }
  // Checked here, on the I/O thread, as MCP checks its token: store reads, no waiting.
  Result<std::string> token = BearerToken(request);
  if (!token.ok()) return RespondStatus(*responder, token.status());
  Result<Caller> caller = interpreter_.CallerForToken(*token, "exec");
  if (!caller.ok()) return RespondStatus(*responder, caller.status());
  if (!limiter_.Allow(caller->token_label_id)) {
    return RespondStatus(*responder,
                         LimitExceeded("rate limit: at most " + std::to_string(limiter_.burst()) +
                                       " requests at once and " + std::to_string(limiter_.rate()) +
                                       " a second per token label"));
  }
  Result<ExecRequest> parsed = ParseBody(request);
  if (!parsed.ok()) return RespondStatus(*responder, parsed.status());

  auto call = std::make_shared<ExecCall>(parsed->stdin_text.value_or(""));
  CommandSession& session = call->session;
  session.caller = std::move(caller).value();
  session.in = &call->in;
  session.out = &call->out;
  session.err = &call->err;
  session.cancel = responder->closed();
  session.json = true;
  session.wait_seconds = parsed->wait_seconds;
  call->command = std::move(parsed->command);
  call->responder = responder;

  CommandTask task;
  // `ssh --timeout` is its own limit, above the deadline: it moves the deadline past it.
  session.extend_deadline = runner_.DeadlineExtender(task);
  task.user = session.caller.user;
  task.cancel = session.cancel;
  task.run = [&interpreter = interpreter_, call] {
    interpreter.ExecuteLine(call->session, call->command);
    if (!call->Claim()) return;  // answered 504 already
    RespondOutcome(*call->responder, *call);
    call->responder.reset();  // only who answered touches it
  };
  // The deadline counts from here, waiting for a thread included: a gateway timeout. The
  // command is not stopped; like a gateway's, the work goes on.
  task.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.timeout_seconds);
  task.on_deadline = [call, seconds = options_.timeout_seconds] {
    if (!call->Claim()) return;
    RespondStatus(*call->responder,
                  Timeout("the command is still running after " + std::to_string(seconds) +
                          " s; it was not stopped (ls, jobs and wait show how it ends)"));
    call->responder.reset();
  };
  if (Status st = runner_.Submit(std::move(task)); !st.ok()) RespondStatus(*responder, st);
}

}  // namespace warren
