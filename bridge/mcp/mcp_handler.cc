#include "bridge/mcp/mcp_handler.h"

#include <algorithm>
#include <cctype>

#include "bridge/mcp/jsonrpc.h"
#include "lobby/base/error_map.h"
#include "lobby/base/log.h"
#include "lobby/commands/command_runner.h"
#include "lobby/commands/interpreter.h"

namespace warren::mcp {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

HttpHeaders JsonHeaders() {
  return {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}};
}

void RespondJson(HttpResponder& r, int status, const json& body, HttpHeaders headers = {}) {
  for (auto& h : JsonHeaders()) headers.push_back(h);
  r.Respond(status, std::move(headers), Dump(body) + "\n");
}

// A transport-level refusal: the HTTP status from the one error map, a JSON-RPC error body.
void RespondStatus(HttpResponder& r, const Status& st, const json& id = nullptr,
                   HttpHeaders headers = {}) {
  RespondJson(r, HttpStatusFor(st.code()), StatusReply(id, st), std::move(headers));
}

std::string SseEvent(const json& message) {
  return "event: message\ndata: " + Dump(message) + "\n\n";
}

bool SupportedVersion(std::string_view v) {
  for (std::string_view s : kSupportedProtocolVersions) {
    if (s == v) return true;
  }
  return false;
}

}  // namespace

bool IsUnderDomain(std::string_view origin, std::string_view domain) {
  if (domain.empty()) return false;
  std::string o = Lower(origin);
  size_t scheme = o.find("://");
  if (scheme == std::string::npos) return false;
  std::string host = o.substr(scheme + 3);
  if (!host.empty() && host.front() == '[') return false;  // an address, never a name of ours
  host = host.substr(0, host.find_first_of(":/"));
  if (!host.empty() && host.back() == '.') host.pop_back();
  std::string d = Lower(domain);
  return host.size() > d.size() && host.ends_with("." + d);
}

bool IsLoopbackOrigin(std::string_view origin) {
  std::string o = Lower(origin);
  std::string_view rest;
  if (o.rfind("http://", 0) == 0) {
    rest = std::string_view(o).substr(7);
  } else if (o.rfind("https://", 0) == 0) {
    rest = std::string_view(o).substr(8);
  } else {
    return false;
  }
  std::string_view host;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return false;
    host = rest.substr(0, close + 1);
    rest.remove_prefix(close + 1);
  } else {
    size_t end = rest.find(':');
    host = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  }
  // Only an optional port may follow the host.
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() == 1) return false;
    for (char c : rest.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    }
  }
  if (host == "localhost" || host == "[::1]") return true;
  if (host.size() > 10 && host.substr(host.size() - 10) == ".localhost") return true;
  if (host.rfind("127.", 0) == 0) {
    int dots = 0;
    for (char c : host) {
      if (c == '.') {
        ++dots;
      } else if (!std::isdigit(static_cast<unsigned char>(c))) {
        return false;
      }
    }
    return dots == 3;
  }
  return false;
}

McpHandler::McpHandler(Interpreter& interpreter, CommandRunner& runner, Authenticator authenticate,
                       McpOptions options)
    : interpreter_(interpreter),
      runner_(runner),
      authenticate_(std::move(authenticate)),
      options_(std::move(options)),
      sessions_(options_.max_sessions, options_.max_sessions_per_user,
                options_.session_idle_limit) {
  auto full_text = [](const Caller& c) { return Instructions(c, /*curated=*/false); };
  auto curated_text = [](const Caller& c) { return Instructions(c, /*curated=*/true); };
  Endpoint full{"/mcp", FullTools(interpreter_), full_text};
  if (options_.conformance_fixtures) AddConformanceFixtures(full.tools);
  endpoints_.push_back(std::move(full));
  endpoints_.push_back(Endpoint{"/mcp/claude", CuratedTools(interpreter_), curated_text});
  endpoints_.push_back(Endpoint{"/mcp/openai", CuratedTools(interpreter_), curated_text});
  Endpoint sandbox{"/mcp/sandbox", SandboxTools(interpreter_), [this](const Caller& c) {
                     return SandboxInstructions(c, interpreter_.services().sandboxes);
                   }};
  // The conformance suite runs against this endpoint too; its fixtures come with it.
  if (options_.conformance_fixtures) AddConformanceFixtures(sandbox.tools);
  endpoints_.push_back(std::move(sandbox));
}

McpHandler::~McpHandler() {
  Shutdown(std::chrono::milliseconds(0));
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return running_ == 0; });
}

bool McpHandler::Shutdown(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  stopping_ = true;
  sessions_.CancelAll();
  return idle_.wait_for(lock, timeout, [this] { return running_ == 0; });
}

const McpHandler::Endpoint* McpHandler::FindEndpoint(std::string_view path) const {
  // "/mcp/" is "/mcp".
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  for (const Endpoint& e : endpoints_) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

bool McpHandler::Matches(std::string_view path) const { return FindEndpoint(path) != nullptr; }

size_t McpHandler::max_body_bytes() const { return kMaxMessageBytes; }

bool McpHandler::OriginAllowed(std::string_view origin) const {
  if (std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(),
                std::string(origin)) != options_.allowed_origins.end()) {
    return true;
  }
  if (IsUnderDomain(origin, options_.web_domain)) return false;
  return IsLoopbackOrigin(origin);
}

void McpHandler::Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  const Endpoint* endpoint = FindEndpoint(request.path);
  if (endpoint == nullptr) return RespondStatus(*responder, NotFound("no such endpoint"));

  // DNS rebinding: a web page must not reach a local server through the user's browser.
  if (!request.Header("origin").empty() && !OriginAllowed(request.Header("origin"))) {
    return RespondStatus(*responder, PermissionDenied("origin not allowed"));
  }
  if (request.method != "POST" && request.method != "DELETE") {
    // No server-initiated stream: everything this server says answers a POST.
    return RespondStatus(*responder,
                         Status(Code::kMethodNotAllowed, "use POST (or DELETE to end a session)"),
                         nullptr, {{"Allow", "POST, DELETE"}});
  }

  const HttpHeaders unauthorized = {
      {"WWW-Authenticate", options_.challenge ? options_.challenge(endpoint->path)
                                              : std::string("Bearer realm=\"warren\"")}};
  std::string_view token = request.BearerCredential().value_or("");
  if (token.empty()) {
    return RespondStatus(*responder,
                         Unauthenticated("missing or invalid Authorization header: send "
                                         "\"Authorization: Bearer TOKEN\" (make one with ssh "
                                         "HOST ssh-key generate-api-key)"),
                         nullptr, unauthorized);
  }
  Result<Caller> caller = authenticate_(token, endpoint->path);
  if (!caller.ok()) {
    Status st = caller.status();
    HttpHeaders headers;
    if (st.code() == Code::kUnauthenticated) headers = unauthorized;
    return RespondStatus(*responder, st, nullptr, std::move(headers));
  }

  std::string_view version = request.Header("mcp-protocol-version");
  if (!version.empty() && !SupportedVersion(version)) {
    return RespondStatus(
        *responder,
        InvalidArgument("unsupported MCP-Protocol-Version \"" + std::string(version.substr(0, 32)) +
                        "\"; this server speaks 2025-11-25 and 2025-06-18"));
  }

  if (request.method == "DELETE") {
    std::string_view id = request.Header("mcp-session-id");
    if (id.empty()) return RespondStatus(*responder, InvalidArgument("missing Mcp-Session-Id"));
    Status st = sessions_.End(id, endpoint->path, caller->credential);
    if (!st.ok()) return RespondStatus(*responder, st);
    return responder->Respond(200, {{"Cache-Control", "no-store"}}, "");
  }
  Post(*endpoint, std::move(request), std::move(responder), *caller);
}

void McpHandler::Post(const Endpoint& endpoint, HttpRequest request,
                      std::shared_ptr<HttpResponder> responder, const Caller& caller) {
  std::string content_type = Lower(request.Header("content-type"));
  if (content_type.rfind("application/json", 0) != 0) {
    return RespondStatus(*responder, InvalidArgument("Content-Type must be application/json"));
  }
  std::string accept = Lower(request.Header("accept"));
  const bool any = accept.empty() || accept.find("*/*") != std::string::npos;
  const bool stream = accept.find("text/event-stream") != std::string::npos;
  if (!any && !stream && accept.find("application/json") == std::string::npos) {
    return RespondStatus(*responder, InvalidArgument("Accept must allow application/json and "
                                                     "text/event-stream"));
  }

  std::variant<Message, Fault> decoded = Decode(request.body);
  if (auto* fault = std::get_if<Fault>(&decoded)) {
    return RespondJson(*responder, 400, ErrorReply(fault->id, fault->code, fault->message));
  }
  Message& m = std::get<Message>(decoded);
  if (m.kind == Message::Kind::kResponse) return responder->Respond(202, {}, "");

  if (m.kind == Message::Kind::kRequest && m.method == "initialize") {
    auto requested = m.params.find("protocolVersion");
    if (requested == m.params.end() || !requested->is_string()) {
      return RespondJson(*responder, 200,
                         ErrorReply(m.id, kInvalidParams, "initialize needs protocolVersion"));
    }
    std::string negotiated = SupportedVersion(requested->get<std::string>())
                                 ? requested->get<std::string>()
                                 : std::string(kLatestProtocolVersion);
    Result<SessionInfo> session =
        sessions_.Create(endpoint.path, caller.credential, caller.user, negotiated);
    if (!session.ok()) return RespondStatus(*responder, session.status(), m.id);
    json capabilities = {{"tools", {{"listChanged", false}}}};
    if (options_.conformance_fixtures) capabilities["logging"] = json::object();
    json result = {
        {"protocolVersion", negotiated},
        {"capabilities", capabilities},
        {"serverInfo",
         {{"name", "warren"}, {"title", "warren"}, {"version", options_.server_version}}},
        {"instructions", endpoint.instructions(caller)}};
    return RespondJson(*responder, 200, ResultReply(m.id, std::move(result)),
                       {{"Mcp-Session-Id", session->id}});
  }

  std::string_view session_id = request.Header("mcp-session-id");
  if (session_id.empty()) {
    return RespondStatus(*responder,
                         InvalidArgument("missing Mcp-Session-Id: send initialize first"), m.id);
  }
  Result<SessionInfo> session = sessions_.Use(session_id, endpoint.path, caller.credential);
  if (!session.ok()) return RespondStatus(*responder, session.status(), m.id);

  if (m.kind == Message::Kind::kNotification) {
    if (m.method == "notifications/cancelled") {
      auto rid = m.params.find("requestId");
      if (rid != m.params.end()) sessions_.CancelCall(session->id, Dump(*rid));
    }
    return responder->Respond(202, {}, "");
  }

  if (m.method == "ping") return RespondJson(*responder, 200, ResultReply(m.id, json::object()));
  if (m.method == "tools/list") {
    return RespondJson(*responder, 200, ResultReply(m.id, {{"tools", endpoint.tools.List()}}));
  }
  if (m.method == "logging/setLevel" && options_.conformance_fixtures) {
    auto level = m.params.find("level");
    if (level == m.params.end() || !level->is_string()) {
      return RespondJson(*responder, 200, ErrorReply(m.id, kInvalidParams, "level is required"));
    }
    (void)sessions_.SetLogLevel(session->id, level->get<std::string>());
    return RespondJson(*responder, 200, ResultReply(m.id, json::object()));
  }
  if (m.method == "tools/call") {
    return CallTool(endpoint, *session, m.id, std::move(m.params), stream, caller,
                    std::move(responder));
  }
  RespondJson(*responder, 200,
              ErrorReply(m.id, kMethodNotFound, "method not found: " + m.method.substr(0, 64)));
}

void McpHandler::CallTool(const Endpoint& endpoint, const SessionInfo& session, json id,
                          json params, bool stream, const Caller& caller,
                          std::shared_ptr<HttpResponder> responder) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return RespondJson(*responder, 200, ErrorReply(id, kInvalidParams, "tools/call needs a name"));
  }
  const Tool* tool = endpoint.tools.Find(name->get<std::string>());
  if (tool == nullptr) {
    return RespondJson(*responder, 200,
                       ErrorReply(id, kInvalidParams,
                                  "unknown tool \"" + name->get<std::string>().substr(0, 64) +
                                      "\"; see tools/list"));
  }
  json arguments = params.value("arguments", json::object());
  json progress_token = nullptr;
  if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    auto t = meta->find("progressToken");
    if (t != meta->end() && (t->is_string() || t->is_number_integer())) progress_token = *t;
  }

  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return RespondStatus(*responder, Unavailable("the server is shutting down"), id);
    }
    ++running_;
  }
  // The responder's own signal: cancelled when the client goes away, and the one
  // notifications/cancelled sets. A command nobody can read the end of stops, as over SSH.
  std::shared_ptr<CancelSignal> cancel = responder->closed();
  if (cancel == nullptr) cancel = std::make_shared<CancelSignal>();
  const std::string call_id = Dump(id);
  sessions_.BeginCall(session.id, call_id, cancel);

  CommandTask task;
  task.user = caller.user;
  task.cancel = cancel;
  task.run = [this, tool, id, arguments = std::move(arguments),
              progress_token = std::move(progress_token), stream, caller, session, call_id, cancel,
              responder]() mutable {
    ToolCall call;
    call.caller = caller;
    call.cancel = cancel;
    call.progress_token = progress_token;
    call.progress_interval_ms = options_.progress_interval_ms;
    call.log_level = session.log_level;
    if (stream) {
      responder->BeginStream(
          200, {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}});
      call.notify = [responder](const json& n) { responder->Write(SseEvent(n)); };
    }
    json result;
    try {
      result = tool->run(arguments, call);
    } catch (const std::exception& e) {
      LogError("mcp tool " + LogQuote(tool->definition.value("name", "")) +
               " threw: " + LogQuote(e.what()));
      result = {{"content", {{{"type", "text"}, {"text", "error: internal error"}}}},
                {"isError", true}};
    }
    sessions_.EndCall(session.id, call_id);
    json reply = ResultReply(id, std::move(result));
    if (stream) {
      // A call the client cancelled gets no response (the spec's rule); the stream ends.
      if (!cancel->cancelled()) responder->Write(SseEvent(reply));
      responder->End();
    } else {
      RespondJson(*responder, 200, reply);
    }
    responder.reset();
    std::lock_guard lock(mu_);
    if (--running_ == 0) idle_.notify_all();
  };
  if (Status st = runner_.Submit(std::move(task)); !st.ok()) {
    // Over the user's share (429, from the one error map) or stopping: nothing ran.
    sessions_.EndCall(session.id, call_id);
    {
      std::lock_guard lock(mu_);
      if (--running_ == 0) idle_.notify_all();
    }
    HttpHeaders headers;
    if (st.code() == Code::kLimitExceeded) headers.emplace_back("Retry-After", "1");
    RespondStatus(*responder, st, id, std::move(headers));
  }
}

}  // namespace warren::mcp
