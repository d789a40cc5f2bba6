// Fuzzes the HTTP request path up to and through the route seam (bridge/http_handler.h): the
// bytes a client sends on a connection, parsed by Boost.Beast's request parser with the limits
// HttpServer sets, routed to the first mounted handler that matches — OAuth, MCP, /exec, the
// REST /v1 — as `warren serve` mounts them, over command_world.h's interpreter and store, and
// answered to a responder that records the answer. HttpServer's connection itself is not
// reachable without a socket (its Connection is private to http_server.cc), so the few lines
// that turn Beast's message into an HttpRequest are repeated here; everything after them is
// the product's.
// Input: one request. "@TOKEN@" becomes the agent's API token, "@SESSION@" a fresh MCP
// session of the agent on /mcp, so the fuzzer reaches what lies behind them.
// Invariants: no handler throws; exactly one answer, with a status from 100 to 599, never
// 500; a JSON answer is JSON.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bridge/exec_handler.h"
#include "bridge/http_server.h"
#include "bridge/mcp/mcp_handler.h"
#include "bridge/oauth/oauth_handler.h"
#include "bridge/sandbox_handler.h"
#include "lobby/commands/command_runner.h"
#include "tests/fuzz/command_world.h"
#include "tests/fuzz/recording_responder.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using warren::HttpRequest;
using warren::fuzz::Fail;
using warren::fuzz::Record;
using warren::fuzz::RecordingResponder;

// HttpServer's limits (bridge/http_server.cc): header bytes, and the body of a path no handler
// serves.
constexpr size_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kUnroutedBodyBytes = 64 * 1024;
constexpr char kClientId[] = "wc-0123456789abcdef0123456789abcdef";

struct Server {
  warren::CommandRunner runner;  // declared first: destroyed last, after the handlers
  std::vector<std::shared_ptr<warren::HttpHandler>> handlers;
  std::shared_ptr<warren::mcp::McpHandler> mcp;
};

// The handlers as `warren serve` mounts them (lobby/main.cc), without its rate limits: the
// fuzzer sends far more than a client may, and a 429 for everything would hide the rest.
std::unique_ptr<Server> MakeServer(warren::fuzz::CommandWorld& world) {
  auto s = std::make_unique<Server>();
  warren::OAuthOptions oauth;
  oauth.public_url = "https://warren.example";
  oauth.ssh_host = "warren.example";
  oauth.ssh_port = [] { return 2222; };
  oauth.registrations_per_minute = 1e12;
  oauth.sign_ins_per_minute = 1e12;
  warren::OAuthClient client;
  client.id = kClientId;
  client.name = "Fuzz Client";
  client.redirect_uris = {"http://localhost:9999/cb"};
  client.created_at = warren::fuzz::kNow;
  if (!world.store().CreateOAuthClient(client).ok()) Fail("registering the OAuth client");
  auto oauth_handler = std::make_shared<warren::OAuthHandler>(world.store(), world.store(),
                                                              world.signer(), world.clock(), oauth);
  warren::mcp::McpOptions mcp;
  mcp.challenge = [oauth_handler](std::string_view) {
    return warren::oauth::WwwAuthenticate(oauth_handler->urls());
  };
  warren::Interpreter& interpreter = world.interpreter();
  s->mcp = std::make_shared<warren::mcp::McpHandler>(
      interpreter, s->runner,
      [&interpreter, oauth_handler](std::string_view token, std::string_view) {
        return interpreter.CallerForToken(token, "mcp", oauth_handler->urls().mcp_resource());
      },
      mcp);
  warren::ExecHandlerOptions exec;
  exec.rate_per_second = exec.burst = 1e12;
  warren::SandboxHandlerOptions sandbox;
  sandbox.rate_per_second = sandbox.burst = 1e12;
  s->handlers = {oauth_handler, s->mcp,
                 std::make_shared<warren::ExecHandler>(interpreter, s->runner, exec),
                 std::make_shared<warren::SandboxHandler>(interpreter, s->runner, sandbox)};
  return s;
}

// The server over the current world; made again with each world.
Server& TheServer() {
  static std::unique_ptr<Server> server;
  warren::fuzz::CommandWorld& world = warren::fuzz::CommandWorld::Get();
  if (world.Due()) {
    server.reset();  // its handlers and runner hold the interpreter
    world.Reset();
  }
  if (!server) server = MakeServer(world);
  return *server;
}

std::string Replace(std::string text, std::string_view from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// An MCP session of the agent on /mcp, opened as a client opens one.
std::string NewSession(Server& server) {
  HttpRequest req;
  req.method = "POST";
  req.target = req.path = "/mcp";
  req.headers = {{"authorization", "Bearer " + warren::fuzz::CommandWorld::Get().agent_token()},
                 {"content-type", "application/json"},
                 {"accept", "application/json, text/event-stream"}};
  req.body =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",)"
      R"("capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}})";
  req.remote_address = req.source = "127.0.0.1";
  auto record = std::make_shared<Record>();
  server.mcp->Handle(std::move(req), std::make_shared<RecordingResponder>(record));
  record->AwaitReleased();
  std::string id = record->Header("Mcp-Session-Id");
  if (id.empty()) Fail("initialize made no session: " + record->body);
  return id;
}

// Beast's message as HttpServer hands it to a handler (Connection::Dispatch).
HttpRequest ToRequest(http::request<http::string_body>& req, std::string path) {
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.path = std::move(path);
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  request.body = std::move(req.body());
  request.remote_address = "127.0.0.1";
  request.source = warren::SourceKey(request.remote_address);
  return request;
}

void CheckAnswer(Record& r) {
  warren::fuzz::Note(std::to_string(r.status) + " " + r.body);
  if (r.responses != 1) Fail(std::to_string(r.responses) + " answers to one request");
  if (r.status < 100 || r.status > 599) Fail("status " + std::to_string(r.status));
  if (r.status == 500) Fail("500: " + r.body);
  if (!r.streaming && r.Header("Content-Type").starts_with("application/json")) {
    (void)nlohmann::json::parse(r.body);  // throws (a crash) when it is not JSON
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server& server = TheServer();
  std::string bytes(reinterpret_cast<const char*>(data), size);
  bytes = Replace(std::move(bytes), "@TOKEN@", warren::fuzz::CommandWorld::Get().agent_token());
  if (bytes.find("@SESSION@") != std::string::npos) {
    bytes = Replace(std::move(bytes), "@SESSION@", NewSession(server));
  }

  // The head first, within HttpServer's header limit; then the body within the route's.
  http::request_parser<http::string_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(boost::none);
  beast::error_code ec;
  size_t used = 0;
  while (!ec && !parser.is_header_done() && used < bytes.size()) {
    used += parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec == http::error::need_more) return 0;  // the client never finished its head
  }
  if (ec || !parser.is_header_done()) return 0;  // answered 400/413 by the server itself
  std::string_view target = parser.get().target();
  std::string path(target.substr(0, target.find('?')));
  warren::HttpHandler* handler = nullptr;
  if (path != "/healthz") {
    for (const auto& h : server.handlers) {
      if (h->Matches(path)) {
        handler = h.get();
        break;
      }
    }
  }
  size_t limit = handler != nullptr ? handler->max_body_bytes() : kUnroutedBodyBytes;
  if (auto length = parser.content_length(); length && *length > limit) return 0;  // 413
  parser.body_limit(limit);
  while (!ec && !parser.is_done() && used < bytes.size()) {
    used += parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
  }
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done() || handler == nullptr) return 0;  // 400, 413, or 404

  auto record = std::make_shared<Record>();
  handler->Handle(ToRequest(parser.get(), std::move(path)),
                  std::make_shared<RecordingResponder>(record));
  record->AwaitReleased();  // the handler's copies decide when it has answered
  CheckAnswer(*record);
  return 0;
}
