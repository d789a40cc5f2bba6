#include "bridge/sandbox_handler.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bridge/json_api.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command.h"
#include "lobby/commands/command_runner.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox_view.h"
#include "lobby/commands/session.h"

namespace warren {
namespace {

using nlohmann::json;

constexpr std::string_view kPrefix = "/v1/";

// What a path under /v1 names.
enum class Resource { kCollection, kSandbox, kExec, kExtend, kUsage };

struct Route {
  Resource resource;
  std::string id;  // the sandbox's, for kSandbox, kExec, kExtend
  std::string_view allow;
};

Result<Route> ParseRoute(std::string_view path) {
  const Status unknown = NotFound(
      "no such endpoint: the API has /v1/sandboxes, /v1/sandboxes/ID, /v1/sandboxes/ID/exec, "
      "/v1/sandboxes/ID/extend and /v1/usage");
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == "/v1/usage") return Route{Resource::kUsage, "", "GET"};
  constexpr std::string_view kSandboxes = "/v1/sandboxes";
  if (path == kSandboxes) return Route{Resource::kCollection, "", "GET, POST"};
  if (!path.starts_with(kSandboxes) || path[kSandboxes.size()] != '/') return unknown;
  std::string_view rest = path.substr(kSandboxes.size() + 1);
  size_t slash = rest.find('/');
  std::string id(rest.substr(0, slash));
  // Ids are VM names ([a-z0-9-]): nothing in them needs decoding, and a request for one
  // that is not a name gets the command's own "not found".
  if (id.empty()) return unknown;
  if (slash == std::string_view::npos) return Route{Resource::kSandbox, id, "GET, DELETE"};
  std::string_view action = rest.substr(slash + 1);
  if (action == "exec") return Route{Resource::kExec, id, "POST"};
  if (action == "extend") return Route{Resource::kExtend, id, "POST"};
  return unknown;
}

bool MethodAllowed(const Route& route, std::string_view method) {
  switch (route.resource) {
    case Resource::kCollection:
      return method == "GET" || method == "POST";
    case Resource::kSandbox:
      return method == "GET" || method == "DELETE";
    case Resource::kExec:
    case Resource::kExtend:
      return method == "POST";
    case Resource::kUsage:
      return method == "GET";
  }
  return false;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      int hi = i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
      int lo = hi >= 0 ? HexValue(s[i + 2]) : -1;
      if (lo < 0) return InvalidArgument("the query has a bad %-escape");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The query's parameters, each of `known` at most once; anything else is refused.
Result<std::vector<std::pair<std::string, std::string>>> ParseQuery(
    std::string_view target, std::initializer_list<std::string_view> known) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    Result<std::string> name = Unescape(pair.substr(0, eq));
    Result<std::string> value =
        Unescape(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name.ok()) return name.status();
    if (!value.ok()) return value.status();
    if (std::find(known.begin(), known.end(), *name) == known.end()) {
      std::string names;
      for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument(
          "unknown query parameter \"" + name->substr(0, 64) + "\"" +
          (names.empty() ? "; this endpoint takes none" : "; this endpoint takes " + names));
    }
    for (const auto& [n, v] : out) {
      if (n == *name) return InvalidArgument("query parameter \"" + n + "\" given twice");
    }
    if (value->empty()) return InvalidArgument("query parameter \"" + *name + "\" is empty");
    out.emplace_back(std::move(name).value(), std::move(value).value());
  }
  return out;
}

// The request's JSON object; an empty body is {} where `empty_ok`.
Result<json> ParseJsonBody(const HttpRequest& req, bool empty_ok) {
  std::string_view body = req.body;
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.front()))) {
    body.remove_prefix(1);
  }
  if (body.empty()) {
    if (empty_ok) return json::object();
    return InvalidArgument("the body must be a JSON object");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("the body must be a JSON object");
  return j;
}

// How a REST client does what a hint names (CommandSession::spell_command): the request,
// for the four operations this API has; nothing else can be asked here.
std::optional<std::string> SpellForRest(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  // The id is the last word of the commands this API runs ("--" before it).
  const std::string& last = argv.back();
  if (argv[0] == "new") return "POST /v1/sandboxes";
  if (argv[0] == "ls") return "GET /v1/sandboxes";
  if (argv[0] == "usage") return "GET /v1/usage";
  if (argv.size() < 2) return std::nullopt;
  if (argv[0] == "stat") return "GET /v1/sandboxes/" + last;
  if (argv[0] == "rm") return "DELETE /v1/sandboxes/" + last;
  if (argv[0] == "extend") return "POST /v1/sandboxes/" + last + "/extend";
  if (argv[0] == "ssh" && argv.size() >= 3) {
    // ssh [flags] [--] VM CMD…: the first word after the flags is the VM.
    size_t i = 1;
    while (i < argv.size() && argv[i].starts_with("-")) {
      if (argv[i++] == "--") break;
    }
    if (i + 1 >= argv.size()) return std::nullopt;
    json body = {{"command", JoinWords(argv, i + 1)}};
    return "POST /v1/sandboxes/" + argv[i] + "/exec " + body.dump();
  }
  return std::nullopt;
}

// One request's command session and what it produced, shared by the runner's thread that
// runs it and the timer that may answer 504 first; whichever answers first answers.
struct SandboxCall {
  StringInput in{""};
  StringSink err;
  CommandSession session;
  Route route;
  std::shared_ptr<HttpResponder> responder;
  std::mutex mu;
  bool answered = false;

  bool Claim() {
    std::lock_guard lock(mu);
    return !std::exchange(answered, true);
  }
};

void RespondJson(HttpResponder& responder, int status, const json& body, HttpHeaders extra = {}) {
  HttpHeaders headers = {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}};
  for (auto& h : extra) headers.push_back(std::move(h));
  responder.Respond(status, std::move(headers), body.dump() + "\n");
}

// The command's outcome as the API's answer (sandbox_view.h has the shapes).
void RespondOutcome(HttpResponder& responder, const SandboxCall& call) {
  const CommandSession& session = call.session;
  const Route& route = call.route;
  const json* data = session.result.has_value() ? &session.result->data : nullptr;
  // A command in the sandbox that exited non-zero failed as a command but is exec's result.
  if (route.resource == Resource::kExec && data != nullptr && data->is_object() &&
      data->contains("finished") &&
      (session.status.ok() || session.status.code() == Code::kCommandFailed)) {
    return RespondJson(responder, HttpStatusFor(Code::kOk), SandboxExecJson(*data));
  }
  if (!session.status.ok()) return RespondStatus(responder, session.status, route.allow);
  if (data == nullptr) return RespondStatus(responder, Internal("the command gave no data"));
  Result<json> body = Internal("unreachable");
  switch (route.resource) {
    case Resource::kCollection:
      if (session.argv.empty() || session.argv[0] != "new") {
        body = SandboxListJson(*data);
        break;
      }
      body = SandboxJson(*data);
      if (body.ok()) {
        return RespondJson(responder, HttpStatusFor(Code::kOk, HttpSuccess::kCreated), *body,
                           {{"Location", "/v1/sandboxes/" + (*body)["id"].get<std::string>()}});
      }
      break;
    case Resource::kSandbox:
      body = session.argv[0] == "rm" ? SandboxDestroyJson(*data, route.id) : SandboxJson(*data);
      break;
    case Resource::kExec:
      body = SandboxExecJson(*data);
      break;
    case Resource::kExtend:
      body = SandboxExtendJson(*data);
      break;
    case Resource::kUsage:
      body = *data;  // the usage command's own shape, unchanged
      break;
  }
  if (!body.ok()) return RespondStatus(responder, body.status());
  RespondJson(responder, HttpStatusFor(Code::kOk), *body);
}

// The command line a request runs, and its deadline in seconds.
struct Planned {
  std::vector<std::string> argv;
  int deadline_seconds = 0;
};

Result<Planned> Plan(const Route& route, const HttpRequest& req,
                     const SandboxHandlerOptions& options) {
  Planned p{{}, options.timeout_seconds};
  const bool takes_query = route.resource == Resource::kUsage;
  if (!takes_query) {
    Result<std::vector<std::pair<std::string, std::string>>> q = ParseQuery(req.target, {});
    if (!q.ok()) return q.status();
  }
  const bool post = req.method == "POST";
  if (!post && !req.body.empty() && req.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    return InvalidArgument(req.method + " takes no body");
  }
  switch (route.resource) {
    case Resource::kCollection: {
      if (!post) {
        p.argv = SandboxListArgv();
        return p;
      }
      Result<json> body = ParseJsonBody(req, /*empty_ok=*/true);
      if (!body.ok()) return body.status();
      Result<std::vector<std::string>> argv = SandboxCreateArgv(*body);
      if (!argv.ok()) return argv.status();
      p.argv = std::move(argv).value();
      return p;
    }
    case Resource::kSandbox:
      p.argv = req.method == "DELETE" ? SandboxDestroyArgv(route.id) : SandboxStatArgv(route.id);
      return p;
    case Resource::kExec: {
      Result<json> body = ParseJsonBody(req, /*empty_ok=*/false);
      if (!body.ok()) return body.status();
      Result<std::vector<std::string>> argv = SandboxExecArgv(route.id, *body);
      if (!argv.ok()) return argv.status();
      int64_t timeout_ms = body->value("timeout_ms", kDefaultSandboxExecTimeoutMs);
      p.deadline_seconds =
          static_cast<int>((timeout_ms + 999) / 1000) + options.exec_margin_seconds;
      p.argv = std::move(argv).value();
      return p;
    }
    case Resource::kExtend: {
      Result<json> body = ParseJsonBody(req, /*empty_ok=*/false);
      if (!body.ok()) return body.status();
      Result<std::vector<std::string>> argv = SandboxExtendArgv(route.id, *body);
      if (!argv.ok()) return argv.status();
      p.argv = std::move(argv).value();
      return p;
    }
    case Resource::kUsage: {
      Result<std::vector<std::pair<std::string, std::string>>> q =
          ParseQuery(req.target, {"since", "vm"});
      if (!q.ok()) return q.status();
      p.argv = {"usage"};
      for (const auto& [name, value] : *q) p.argv.push_back("--" + name + "=" + value);
      return p;
    }
  }
  return Internal("unknown route");
}

}  // namespace

SandboxHandler::SandboxHandler(Interpreter& interpreter, CommandRunner& runner,
                               SandboxHandlerOptions options)
    : interpreter_(interpreter),
      runner_(runner),
      options_(options),
      limiter_(options.rate_per_second, options.burst) {}

bool SandboxHandler::Matches(std::string_view path) const {
  return path == "/v1" || path.starts_with(kPrefix);
}

void SandboxHandler::Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  Result<Route> route = ParseRoute(request.path);
  if (!route.ok()) return RespondStatus(*responder, route.status());
  if (!MethodAllowed(*route, request.method)) {
    return RespondStatus(
        *responder,
        Status(Code::kMethodNotAllowed, request.path + " takes " + std::string(route->allow)),
        route->allow);
  }
  // Checked here, on the I/O thread, as /exec and MCP check theirs: store reads, no waiting.
  Result<std::string> token = BearerToken(request);
  if (!token.ok()) return RespondStatus(*responder, token.status());
  Result<Caller> caller = interpreter_.CallerForToken(*token, "rest");
  if (!caller.ok()) return RespondStatus(*responder, caller.status());
  if (!limiter_.Allow(caller->token_label_id)) {
    return RespondStatus(*responder,
                         LimitExceeded("rate limit: at most " + std::to_string(limiter_.burst()) +
                                       " requests at once and " + std::to_string(limiter_.rate()) +
                                       " a second per token label"));
  }
  Result<Planned> planned = Plan(*route, request, options_);
  if (!planned.ok()) return RespondStatus(*responder, planned.status());

  auto call = std::make_shared<SandboxCall>();
  CommandSession& session = call->session;
  session.caller = std::move(caller).value();
  session.argv = std::move(planned->argv);
  session.in = &call->in;
  session.out = nullptr;  // the result is read as data from the session
  session.err = &call->err;
  session.cancel = responder->closed();
  session.json = true;
  session.spell_command = SpellForRest;
  call->route = std::move(route).value();
  call->responder = responder;

  CommandTask task;
  // `ssh --timeout` is its own limit, above the deadline: it moves the deadline past it.
  session.extend_deadline = runner_.DeadlineExtender(task);
  task.user = session.caller.user;
  task.cancel = session.cancel;
  task.run = [&interpreter = interpreter_, call] {
    interpreter.Execute(call->session);
    if (!call->Claim()) return;  // answered 504 already
    RespondOutcome(*call->responder, *call);
    call->responder.reset();  // only who answered touches it
  };
  const int seconds = planned->deadline_seconds;
  task.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  task.on_deadline = [call, seconds, created = SandboxCreateId(call->session.argv)] {
    if (!call->Claim()) return;
    if (!created.empty()) {
      // A create outlived the deadline (boots queue behind each other on a busy host): the
      // sandbox's id, so the client can follow it rather than make another.
      const std::string where = "/v1/sandboxes/" + created;
      RespondJsonError(*call->responder, HttpStatusFor(Code::kTimeout),
                       "sandbox " + created + " is still being created after " +
                           std::to_string(seconds) + " s; it was not stopped (GET " + where +
                           " shows when it runs)",
                       {{"Location", where}});
    } else {
      RespondStatus(*call->responder,
                    Timeout("the request is still running after " + std::to_string(seconds) +
                            " s; it was not stopped (GET /v1/sandboxes shows how it ends)"));
    }
    call->responder.reset();
  };
  if (Status st = runner_.Submit(std::move(task)); !st.ok()) RespondStatus(*responder, st);
}

}  // namespace warren
