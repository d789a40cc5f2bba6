// The MCP layer without sockets: JSON-RPC decoding (bounds, batches, malformed input),
// sessions (CSPRNG ids, expiry, binding to a credential), the transport's rules through
// McpHandler with a recording responder (Origin, auth, session, protocol version, GET,
// DELETE), tools/list schemas and annotations, and tools/call mapped onto the real
// interpreter with FakeVmHost/FakeGuestControl: exec, exec_read_only, wait, jobs, progress
// notifications, cancellation, scoped credentials and the curated tools; the per-user
// session cap, tool calls over a user's share of the one command runner, and a call ended by
// removing its credential.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "bridge/mcp/jsonrpc.h"
#include "bridge/mcp/mcp_handler.h"
#include "bridge/mcp/sessions.h"
#include "bridge/mcp/tools.h"
#include "keys/base64.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command_runner.h"
#include "tests/unit/recording_responder.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::mcp {
namespace {

using nlohmann::json;
using vmtest::VmCommandTest;

// A real ed25519 key (ssh-keygen) that a test limits to `ls` (token "alice-ls").
constexpr const char* kLsOnlyKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHCncav2yw8jhlQoNq3B6NSgYcyC++Bbwn5gzLcjTBLz ls@host";

// A real ed25519 key (ssh-keygen) that the expiry test gives a limited lifetime.
constexpr const char* kExpiringKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 exp@host";

// ---- JSON-RPC -------------------------------------------------------------------------------

TEST(JsonRpcTest, DecodesRequestsNotificationsAndResponses) {
  auto r = Decode(R"({"jsonrpc":"2.0","id":7,"method":"tools/list"})");
  ASSERT_TRUE(std::holds_alternative<Message>(r));
  EXPECT_EQ(std::get<Message>(r).kind, Message::Kind::kRequest);
  EXPECT_EQ(std::get<Message>(r).id, 7);
  EXPECT_TRUE(std::get<Message>(r).params.is_object());

  r = Decode(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  ASSERT_TRUE(std::holds_alternative<Message>(r));
  EXPECT_EQ(std::get<Message>(r).kind, Message::Kind::kNotification);

  r = Decode(R"({"jsonrpc":"2.0","id":"a","result":{}})");
  ASSERT_TRUE(std::holds_alternative<Message>(r));
  EXPECT_EQ(std::get<Message>(r).kind, Message::Kind::kResponse);
}

TEST(JsonRpcTest, RefusesMalformedInputWithTheRightCodes) {
  auto code = [](std::string_view body) {
    auto r = Decode(body);
    return std::holds_alternative<Fault>(r) ? std::get<Fault>(r).code : 0;
  };
  EXPECT_EQ(code("{not json"), kParseError);
  EXPECT_EQ(code(""), kParseError);
  EXPECT_EQ(code(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])"), kInvalidRequest);  // batch
  EXPECT_EQ(code(R"("ping")"), kInvalidRequest);
  EXPECT_EQ(code(R"({"id":1,"method":"ping"})"), kInvalidRequest);  // no jsonrpc
  EXPECT_EQ(code(R"({"jsonrpc":"1.0","id":1,"method":"ping"})"), kInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":{},"method":"ping"})"), kInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1,"method":5})"), kInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})"), kInvalidRequest);
  EXPECT_EQ(code(R"({"jsonrpc":"2.0","id":1,"result":1,"error":{}})"), kInvalidRequest);
  // The id is echoed when it could be read.
  auto r = Decode(R"({"jsonrpc":"2.0","id":"x","method":7})");
  EXPECT_EQ(std::get<Fault>(r).id, "x");
}

TEST(JsonRpcTest, BoundsSizeAndNesting) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  auto r = Decode(deep);
  ASSERT_TRUE(std::holds_alternative<Fault>(r));
  EXPECT_EQ(std::get<Fault>(r).code, kParseError);
  std::string big = R"({"jsonrpc":"2.0","id":1,"method":"x","params":{"a":")" +
                    std::string(kMaxMessageBytes, 'a') + "\"}}";
  r = Decode(big);
  ASSERT_TRUE(std::holds_alternative<Fault>(r));
  EXPECT_EQ(std::get<Fault>(r).code, JsonRpcCodeFor(Code::kTooLarge));
}

TEST(JsonRpcTest, DumpSurvivesInvalidUtf8) {
  json j = {{"text", std::string("ok \xff\xfe end")}};
  EXPECT_NE(Dump(j).find("ok "), std::string::npos);
}

// ---- Sessions -------------------------------------------------------------------------------

TEST(SessionTableTest, IdsAreRandomHexAndBoundToEndpointAndCredential) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string id = NewSessionId();
    ASSERT_EQ(id.size(), 32u);
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);

  SessionTable t(10, 10, std::chrono::seconds(60));
  auto s = t.Create("/mcp", "token:a", "alice", "2025-11-25");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(t.Use(s->id, "/mcp", "token:a").ok());
  EXPECT_EQ(t.Use(s->id, "/mcp", "token:b").status().code(), Code::kNotFound);
  EXPECT_EQ(t.Use(s->id, "/mcp/claude", "token:a").status().code(), Code::kNotFound);
  EXPECT_EQ(t.Use("nope", "/mcp", "token:a").status().code(), Code::kNotFound);
  EXPECT_EQ(t.End(s->id, "/mcp", "token:b").code(), Code::kNotFound);
  EXPECT_TRUE(t.End(s->id, "/mcp", "token:a").ok());
  EXPECT_EQ(t.Use(s->id, "/mcp", "token:a").status().code(), Code::kNotFound);
}

TEST(SessionTableTest, IdleSessionsExpireButNotWhileACallRuns) {
  auto now = std::chrono::steady_clock::now();
  SessionTable t(2, 10, std::chrono::seconds(60), [&] { return now; });
  auto a = t.Create("/mcp", "c", "u", "2025-11-25");
  auto b = t.Create("/mcp", "c", "u", "2025-11-25");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(t.Create("/mcp", "c", "u", "2025-11-25").status().code(), Code::kLimitExceeded);
  auto cancel = std::make_shared<CancelSignal>();
  t.BeginCall(a->id, "1", cancel);
  now += std::chrono::seconds(61);
  EXPECT_TRUE(t.Use(a->id, "/mcp", "c").ok());                            // busy: kept
  EXPECT_EQ(t.Use(b->id, "/mcp", "c").status().code(), Code::kNotFound);  // idle: gone
  EXPECT_TRUE(t.CancelCall(a->id, "1"));
  EXPECT_TRUE(cancel->cancelled());
  EXPECT_FALSE(t.CancelCall(a->id, "2"));
  t.EndCall(a->id, "1");
  EXPECT_TRUE(t.Create("/mcp", "c", "u", "2025-11-25").ok());
}

// One user opening sessions without end (a client that never sends DELETE) stays within
// their own cap, losing their least recently used idle session each time; nobody else's.
TEST(SessionTableTest, AUserAtTheCapLosesTheirOldestIdleSession) {
  auto now = std::chrono::steady_clock::now();
  SessionTable t(100, 3, std::chrono::seconds(3600), [&] { return now; });
  std::vector<SessionInfo> a;
  for (int i = 0; i < 3; ++i) {
    now += std::chrono::seconds(1);
    a.push_back(t.Create("/mcp", "token:a", "alice", "2025-11-25").value());
  }
  auto b = t.Create("/mcp", "token:b", "bob", "2025-11-25");
  ASSERT_TRUE(b.ok());
  now += std::chrono::seconds(1);
  ASSERT_TRUE(t.Use(a[0].id, "/mcp", "token:a").ok());  // a[1] is now the least recently used
  now += std::chrono::seconds(1);
  ASSERT_TRUE(t.Create("/mcp", "token:a", "alice", "2025-11-25").ok());
  EXPECT_EQ(t.size_of("alice"), 3u);
  EXPECT_EQ(t.Use(a[1].id, "/mcp", "token:a").status().code(), Code::kNotFound);
  EXPECT_TRUE(t.Use(a[0].id, "/mcp", "token:a").ok());
  EXPECT_TRUE(t.Use(a[2].id, "/mcp", "token:a").ok());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(t.Create("/mcp", "token:a", "alice", "v").ok());
  EXPECT_EQ(t.size_of("alice"), 3u);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_TRUE(t.Use(b->id, "/mcp", "token:b").ok());

  // A session with a call in flight is never the one to go.
  SessionTable busy(100, 2, std::chrono::seconds(3600), [&] { return now; });
  auto x = busy.Create("/mcp", "token:a", "alice", "v").value();
  auto y = busy.Create("/mcp", "token:a", "alice", "v").value();
  busy.BeginCall(x.id, "1", std::make_shared<CancelSignal>());
  busy.BeginCall(y.id, "1", std::make_shared<CancelSignal>());
  EXPECT_EQ(busy.Create("/mcp", "token:a", "alice", "v").status().code(), Code::kLimitExceeded);
  busy.EndCall(y.id, "1");
  EXPECT_TRUE(busy.Create("/mcp", "token:a", "alice", "v").ok());
  EXPECT_TRUE(busy.Use(x.id, "/mcp", "token:a").ok());
  EXPECT_EQ(busy.Use(y.id, "/mcp", "token:a").status().code(), Code::kNotFound);
}

TEST(OriginTest, LoopbackOriginsOnly) {
  EXPECT_TRUE(IsLoopbackOrigin("http://localhost"));
  EXPECT_TRUE(IsLoopbackOrigin("http://localhost:6274"));
  EXPECT_TRUE(IsLoopbackOrigin("https://127.0.0.1:8080"));
  EXPECT_TRUE(IsLoopbackOrigin("http://[::1]:80"));
  EXPECT_TRUE(IsLoopbackOrigin("http://warren.localhost:8080"));
  EXPECT_FALSE(IsLoopbackOrigin("http://evil.example.com"));
  EXPECT_FALSE(IsLoopbackOrigin("http://localhost.evil.com"));
  EXPECT_FALSE(IsLoopbackOrigin("http://127.0.0.1.evil.com"));
  EXPECT_FALSE(IsLoopbackOrigin("http://localhost:80@evil.com"));
  EXPECT_FALSE(IsLoopbackOrigin("null"));
  EXPECT_FALSE(IsLoopbackOrigin("file://localhost"));
  EXPECT_TRUE(IsUnderDomain("http://a.warren.localhost:8081", "warren.localhost"));
  EXPECT_TRUE(IsUnderDomain("HTTPS://A-P3000.WARREN.LOCALHOST", "warren.localhost"));
  EXPECT_FALSE(IsUnderDomain("http://warren.localhost", "warren.localhost"));
  EXPECT_FALSE(IsUnderDomain("http://xwarren.localhost", "warren.localhost"));
  EXPECT_FALSE(IsUnderDomain("http://localhost:6274", "warren.localhost"));
  EXPECT_FALSE(IsUnderDomain("http://[::1]:80", "warren.localhost"));
}

// ---- The handler ----------------------------------------------------------------------------

class McpHandlerTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    MakeHandler({});
  }
  void TearDown() override {
    handler_.reset();
    runner_.reset();
    VmCommandTest::TearDown();
  }

  void MakeHandler(McpOptions options, CommandRunnerOptions runner = {}) {
    handler_.reset();
    runner_ = std::make_unique<CommandRunner>(runner);
    options.progress_interval_ms = 20;
    handler_ = std::make_shared<McpHandler>(
        *interpreter_, *runner_,
        [this](std::string_view token, std::string_view) -> Result<Caller> {
          if (token == "alice") return Alice("mcp");
          if (token == "alice-ci") return AliceCi("mcp");
          if (token == "bob") return Bob("mcp");
          if (token == "alice-ls") return As(kLsOnlyKey, "mcp");
          if (token == "alice-exp") {
            return CallerForKey(*store_, clock_, ParseAuthorizedKey(kExpiringKey)->fingerprint,
                                "mcp");
          }
          return Unauthenticated("invalid API token");
        },
        std::move(options));
  }

  std::shared_ptr<RecordingResponder> Send(const std::string& method, const std::string& body,
                                           HttpHeaders extra = {},
                                           const std::string& token = "alice",
                                           const std::string& path = "/mcp") {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.target = path;
    req.body = body;
    if (!token.empty()) req.headers.push_back({"authorization", "Bearer " + token});
    req.headers.push_back({"content-type", "application/json"});
    req.headers.push_back({"accept", "application/json, text/event-stream"});
    for (auto& h : extra) req.headers.push_back(h);
    auto r = std::make_shared<RecordingResponder>();
    handler_->Handle(std::move(req), r);
    r->Await();
    return r;
  }

  // initialize; returns the session id.
  std::string Init(const std::string& token = "alice", const std::string& path = "/mcp",
                   const std::string& version = "2025-11-25") {
    auto r = Send("POST",
                  json{{"jsonrpc", "2.0"},
                       {"id", 1},
                       {"method", "initialize"},
                       {"params",
                        {{"protocolVersion", version},
                         {"capabilities", json::object()},
                         {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}}
                      .dump(),
                  {}, token, path);
    EXPECT_EQ(r->status(), 200) << r->body();
    last_init_ = r->Messages().empty() ? json() : r->Messages()[0];
    return r->header("Mcp-Session-Id");
  }

  std::shared_ptr<RecordingResponder> Rpc(const std::string& session, const std::string& method,
                                          json params, const std::string& token = "alice",
                                          const std::string& path = "/mcp", json id = 2) {
    return Send("POST",
                json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump(),
                {{"mcp-session-id", session}, {"mcp-protocol-version", "2025-11-25"}}, token, path);
  }

  // tools/call; returns the result (the last message).
  json Call(const std::string& session, const std::string& tool, json args,
            const std::string& token = "alice", const std::string& path = "/mcp") {
    auto r = Rpc(session, "tools/call", {{"name", tool}, {"arguments", args}}, token, path);
    auto msgs = r->Messages();
    EXPECT_FALSE(msgs.empty()) << r->body();
    return msgs.empty() ? json() : msgs.back().value("result", json());
  }

  // Waits until the guest has run more than `before` commands (`new` runs some too).
  void AwaitGuestCommand(size_t before) {
    for (int i = 0; i < 500 && guests_.commands().size() <= before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(guests_.commands().size(), before);
  }

  static std::string Text(const json& result) { return result["content"][0].value("text", ""); }

  // A tools/call of `command` with `token`, answered over SSE, without waiting for it.
  std::shared_ptr<RecordingResponder> StartCall(const std::string& session,
                                                const std::string& command,
                                                const std::string& token = "alice", json id = 7) {
    HttpRequest req;
    req.method = "POST";
    req.path = "/mcp";
    req.body = json{{"jsonrpc", "2.0"},
                    {"id", id},
                    {"method", "tools/call"},
                    {"params", {{"name", "exec"}, {"arguments", {{"command", command}}}}}}
                   .dump();
    req.headers = {{"authorization", "Bearer " + token},
                   {"content-type", "application/json"},
                   {"accept", "application/json, text/event-stream"},
                   {"mcp-session-id", session}};
    auto call = std::make_shared<RecordingResponder>();
    handler_->Handle(req, call);
    return call;
  }

  std::unique_ptr<CommandRunner> runner_;
  std::shared_ptr<McpHandler> handler_;
  json last_init_;
};

TEST_F(McpHandlerTest, InitializeNegotiatesTheVersionAndOpensASession) {
  std::string id = Init();
  ASSERT_EQ(id.size(), 32u);
  json result = last_init_["result"];
  EXPECT_EQ(result["protocolVersion"], "2025-11-25");
  EXPECT_EQ(result["serverInfo"]["name"], "warren");
  EXPECT_TRUE(result["capabilities"].contains("tools"));
  EXPECT_FALSE(result["capabilities"].contains("logging"));
  EXPECT_NE(result["instructions"].get<std::string>().find("exec"), std::string::npos);
  // Pages are private until shared, and how to check one from inside the VM.
  EXPECT_NE(result["instructions"].get<std::string>().find("private until shared"),
            std::string::npos);
  EXPECT_NE(result["instructions"].get<std::string>().find("curl -s localhost:8000"),
            std::string::npos);
  // Unrestricted: no limits named.
  EXPECT_EQ(result["instructions"].get<std::string>().find("limited"), std::string::npos);

  Init("alice", "/mcp", "2025-06-18");
  EXPECT_EQ(last_init_["result"]["protocolVersion"], "2025-06-18");
  Init("alice", "/mcp", "1999-01-01");
  EXPECT_EQ(last_init_["result"]["protocolVersion"], "2025-11-25");
}

TEST_F(McpHandlerTest, InstructionsNameALimitedCredentialsTag) {
  Init("alice-ci");
  std::string text = last_init_["result"]["instructions"];
  EXPECT_NE(text.find("limited"), std::string::npos) << text;
  EXPECT_NE(text.find("tagged \"ci\""), std::string::npos) << text;
}

TEST_F(McpHandlerTest, TransportRules) {
  std::string id = Init();
  // Origin.
  auto r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})",
                {{"origin", "http://evil.example.com"}, {"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 403);
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})",
           {{"origin", "http://localhost:6274"}, {"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 200);
  // A VM's web page (NAME.warren.localhost) is untrusted content, loopback or not.
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})",
           {{"origin", "http://web-one.Warren.localhost:8081"}, {"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 403);
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})",
           {{"origin", "http://warren.localhost:8081"}, {"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 200);
  // Auth.
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})", {{"mcp-session-id", id}}, "");
  EXPECT_EQ(r->status(), 401);
  EXPECT_NE(r->header("WWW-Authenticate").find("Bearer"), std::string::npos);
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})", {{"mcp-session-id", id}},
           "forged");
  EXPECT_EQ(r->status(), 401);
  // Sessions: unknown -> 404, missing -> 400, someone else's -> 404.
  r = Rpc("0123456789abcdef0123456789abcdef", "ping", json::object());
  EXPECT_EQ(r->status(), 404);
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  EXPECT_EQ(r->status(), 400);
  r = Rpc(id, "ping", json::object(), "bob");
  EXPECT_EQ(r->status(), 404);
  // Protocol version.
  r = Send("POST", R"({"jsonrpc":"2.0","id":1,"method":"ping"})",
           {{"mcp-session-id", id}, {"mcp-protocol-version", "2099-01-01"}});
  EXPECT_EQ(r->status(), 400);
  // Batch, malformed JSON: JSON-RPC errors, not HTML.
  r = Send("POST", R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", {{"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 400);
  EXPECT_EQ(r->Messages()[0]["error"]["code"], kInvalidRequest);
  r = Send("POST", "{oops", {{"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 400);
  EXPECT_EQ(r->Messages()[0]["error"]["code"], kParseError);
  // GET: no server-initiated stream.
  r = Send("GET", "", {{"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 405);
  // Notifications are accepted with 202.
  r = Send("POST", R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
           {{"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 202);
  // Unknown methods are JSON-RPC errors.
  r = Rpc(id, "resources/list", json::object());
  EXPECT_EQ(r->Messages()[0]["error"]["code"], kMethodNotFound);
  // DELETE ends the session.
  r = Send("DELETE", "", {{"mcp-session-id", id}});
  EXPECT_EQ(r->status(), 200);
  EXPECT_EQ(Rpc(id, "ping", json::object())->status(), 404);
  EXPECT_EQ(handler_->sessions(), 0u);
}

TEST_F(McpHandlerTest, ToolsListHasSchemasAndAnnotations) {
  std::string id = Init();
  json tools = Rpc(id, "tools/list", json::object())->Messages()[0]["result"]["tools"];
  ASSERT_EQ(tools.size(), 3u);
  std::map<std::string, json> by_name;
  for (auto& t : tools) by_name[t["name"]] = t;
  EXPECT_TRUE(by_name["exec"]["annotations"]["destructiveHint"].get<bool>());
  EXPECT_FALSE(by_name["exec"]["annotations"]["readOnlyHint"].get<bool>());
  EXPECT_TRUE(by_name["exec_read_only"]["annotations"]["readOnlyHint"].get<bool>());
  EXPECT_TRUE(by_name["wait"]["annotations"]["readOnlyHint"].get<bool>());
  EXPECT_EQ(by_name["exec"]["inputSchema"]["required"], json({"command"}));
  EXPECT_EQ(by_name["exec"]["inputSchema"]["properties"]["wait_seconds"]["maximum"], 45);
  EXPECT_TRUE(by_name["wait"].contains("outputSchema"));

  std::string cid = Init("alice", "/mcp/claude");
  json curated = Rpc(cid, "tools/list", json::object(), "alice", "/mcp/claude")
                     ->Messages()[0]["result"]["tools"];
  std::set<std::string> names;
  for (auto& t : curated) names.insert(t["name"]);
  EXPECT_EQ(names,
            (std::set<std::string>{"list_vms", "create_vm", "run_vm_command", "get_cli_help"}));
  // A session belongs to its endpoint.
  EXPECT_EQ(Rpc(cid, "tools/list", json::object())->status(), 404);
}

TEST_F(McpHandlerTest, ExecRunsLobbyCommandsAsJson) {
  New(Alice(), {"--name", "web-one"});
  std::string id = Init();
  json r = Call(id, "exec", {{"command", "ls"}});
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_NE(Text(r).find("web-one"), std::string::npos) << r.dump();
  ASSERT_TRUE(r.contains("structuredContent"));
  EXPECT_TRUE(r["structuredContent"].is_object());
  // help is text.
  r = Call(id, "exec", {{"command", "help"}});
  EXPECT_FALSE(r["isError"].get<bool>());
  EXPECT_NE(Text(r).find("ssh"), std::string::npos);
  EXPECT_TRUE(r["structuredContent"].contains("text"));
  // A failing command is a tool error, not a JSON-RPC error.
  r = Call(id, "exec", {{"command", "frobnicate"}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_NE(Text(r).find("unknown command"), std::string::npos) << r.dump();
  // Bad arguments too.
  r = Call(id, "exec", {{"command", 5}});
  EXPECT_TRUE(r["isError"].get<bool>());
  r = Call(id, "exec", {{"command", "ls"}, {"wait_seconds", 46}});
  EXPECT_TRUE(r["isError"].get<bool>());
  r = Call(id, "exec", {{"command", "ls"}, {"extra", 1}});
  EXPECT_TRUE(r["isError"].get<bool>());
  r = Call(id, "exec", {{"command", "ls 'unterminated"}});
  EXPECT_TRUE(r["isError"].get<bool>());
  // An unknown tool is a protocol error.
  auto raw = Rpc(id, "tools/call", {{"name", "nope"}, {"arguments", json::object()}});
  EXPECT_EQ(raw->Messages().back()["error"]["code"], kInvalidParams);
}

TEST_F(McpHandlerTest, ExecSshReturnsOutputExitCodeAndStdin) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("make test", {"ok 1\n", "FAIL 2\n", 3});
  std::string id = Init();
  json r = Call(id, "exec", {{"command", "ssh web-one make test"}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_EQ(r["structuredContent"]["stdout"], "ok 1\n");
  EXPECT_EQ(r["structuredContent"]["stderr"], "FAIL 2\n");
  EXPECT_EQ(r["structuredContent"]["exit_code"], 3);
  EXPECT_NE(Text(r).find("[remote command exited with status 3]"), std::string::npos) << Text(r);

  r = Call(id, "exec", {{"command", "ssh web-one cat"}, {"stdin", "hello\n"}});
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_EQ(r["structuredContent"]["stdout"], "hello\n");
  EXPECT_EQ(r["structuredContent"]["exit_code"], 0);
  // "ssh VM prog --json" gives --json to prog.
  guests_.SetScript("tool --json", {"{}\n", "", 0});
  r = Call(id, "exec", {{"command", "ssh web-one tool --json"}});
  EXPECT_EQ(r["structuredContent"]["stdout"], "{}\n") << r.dump();
}

TEST_F(McpHandlerTest, LongCommandsBecomeJobsFollowedWithWait) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("build", {"step 1\n", "", std::nullopt, /*hold=*/true});
  std::string job = guests_.next_job();
  std::string id = Init();
  json r = Call(id, "exec", {{"command", "ssh web-one build"}, {"wait_seconds", 0}});
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_FALSE(r["structuredContent"]["finished"].get<bool>());
  std::string name = r["structuredContent"]["job"];
  EXPECT_EQ(name, "web-one/" + job);
  EXPECT_NE(Text(r).find("call wait with job"), std::string::npos) << Text(r);

  guests_.Release(job, 0, "step 2\n");
  r = Call(id, "wait", {{"job", name}});
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_TRUE(r["structuredContent"]["finished"].get<bool>());
  EXPECT_EQ(r["structuredContent"]["stdout"], "step 2\n");
  EXPECT_EQ(r["structuredContent"]["exit_code"], 0);
}

// A 1x1 PNG (what `base64 -d` of a tiny image gives in the guest).
constexpr const char* kTinyPngBase64 =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg"
    "==";

// What `ssh` prints comes back as an image block when it is an image (PNG, JPEG, GIF, WebP
// by magic), as base64 for other binary output, as text otherwise; structuredContent
// carries stdout_base64 whenever the bytes are not UTF-8, on both endpoints.
TEST_F(McpHandlerTest, SshOutputComesBackAsAnImageAsBase64OrAsText) {
  New(Alice(), {"--name", "web-one"});
  const std::string png = Base64Decode(kTinyPngBase64).value();
  guests_.SetScript("cat dot.png", {png, "", 0});
  const std::string bytes("\xde\xad\xbe\xef\x00\xff", 6);
  guests_.SetScript("head -c 6 /dev/urandom", {bytes, "", 0});
  const std::string gif = std::string("GIF89a\x01\x00\x01\x00\x80\xff", 12);
  guests_.SetScript("cat dot.gif", {gif, "", 0});

  std::string id = Init();
  json r = Call(id, "exec", {{"command", "ssh web-one cat dot.png"}});
  ASSERT_FALSE(r["isError"].get<bool>()) << r.dump();
  ASSERT_GE(r["content"].size(), 1u) << r.dump();
  EXPECT_EQ(r["content"][0]["type"], "image") << r.dump();
  EXPECT_EQ(r["content"][0]["mimeType"], "image/png");
  EXPECT_EQ(r["content"][0]["data"], kTinyPngBase64);
  EXPECT_EQ(r["structuredContent"]["stdout"], "");
  EXPECT_EQ(r["structuredContent"]["stdout_base64"], kTinyPngBase64);

  r = Call(id, "exec", {{"command", "ssh web-one cat dot.gif"}});
  EXPECT_EQ(r["content"][0]["mimeType"], "image/gif") << r.dump();

  r = Call(id, "exec", {{"command", "ssh web-one head -c 6 /dev/urandom"}});
  ASSERT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_EQ(r["content"][0]["type"], "text");
  EXPECT_NE(Text(r).find("6 bytes that are not text, in base64"), std::string::npos) << Text(r);
  EXPECT_NE(Text(r).find(Base64Encode(bytes)), std::string::npos) << Text(r);
  EXPECT_EQ(Base64Decode(r["structuredContent"]["stdout_base64"].get<std::string>()).value(),
            bytes);

  // The curated run_vm_command maps the same decision.
  std::string cid = Init("alice", "/mcp/claude");
  r = Call(cid, "run_vm_command", {{"vm", "web-one"}, {"command", "cat dot.png"}}, "alice",
           "/mcp/claude");
  EXPECT_EQ(r["content"][0]["type"], "image") << r.dump();
  EXPECT_EQ(r["content"][0]["data"], kTinyPngBase64);
}

// Every string a curated endpoint returns names only what it offers (list_vms, create_vm,
// run_vm_command, get_cli_help): never the tools it lacks, or lobby commands it cannot run.
TEST_F(McpHandlerTest, CuratedEndpointsNameOnlyTheirOwnTools) {
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-two"}).status.ok());
  const std::regex lacking("\\b(exec|exec_read_only|wait|kill)\\b");
  std::function<void(const json&, std::vector<std::string>&)> strings =
      [&](const json& j, std::vector<std::string>& out) {
        if (j.is_string()) out.push_back(j.get<std::string>());
        if (j.is_structured()) {
          for (const auto& item : j) strings(item, out);
        }
      };
  for (const std::string path : {"/mcp/claude", "/mcp/openai"}) {
    for (const std::string token : {"alice", "alice-ci"}) {
      guests_.SetScript("build", {"step 1\n", "", std::nullopt, /*hold=*/true});
      std::vector<json> answers;
      std::string id = Init(token, path);
      answers.push_back(last_init_);
      answers.push_back(Rpc(id, "tools/list", json::object(), token, path)->Messages()[0]);
      answers.push_back(Call(id, "list_vms", json::object(), token, path));
      if (token == "alice") {
        json job =
            Call(id, "run_vm_command",
                 {{"vm", "web-one"}, {"command", "build"}, {"wait_seconds", 0}}, token, path);
        EXPECT_FALSE(job["structuredContent"]["finished"].get<bool>()) << job.dump();
        EXPECT_NE(Text(job).find("run_vm_command"), std::string::npos) << Text(job);
        answers.push_back(job);
        json stopped =
            Call(id, "run_vm_command", {{"vm", "web-two"}, {"command", "true"}}, token, path);
        EXPECT_TRUE(stopped["isError"].get<bool>());
        EXPECT_NE(Text(stopped).find("web-two is stopped"), std::string::npos) << Text(stopped);
        EXPECT_EQ(Text(stopped).find("start it"), std::string::npos) << Text(stopped);
        answers.push_back(stopped);
      }
      for (const json& args : {json{{"vm", "no-such-vm"}, {"command", "true"}},
                               json{{"vm", "web-one"}, {"command", "x"}, {"wait_seconds", 99}},
                               json{{"command", "true"}}}) {
        json failed = Call(id, "run_vm_command", args, token, path);
        EXPECT_TRUE(failed["isError"].get<bool>()) << failed.dump();
        answers.push_back(failed);
      }
      answers.push_back(Call(id, "get_cli_help", {{"command", "frobnicate"}}, token, path));
      answers.push_back(Call(id, "create_vm", {{"name", "Bad Name"}}, token, path));
      answers.push_back(Call(id, "create_vm", {{"name", "dev"}}, token, path));
      answers.push_back(Call(id, "create_vm", {{"image", "alpine"}}, token, path));
      for (const json& answer : answers) {
        std::vector<std::string> found;
        strings(answer, found);
        for (const std::string& text : found) {
          EXPECT_FALSE(std::regex_search(text, lacking)) << path << " " << token << ": " << text;
        }
      }
    }
  }
}

// A credential held to some commands is told, on a curated endpoint, which of its tools it
// may use — in the instructions and when it calls one it may not.
TEST_F(McpHandlerTest, CuratedEndpointsNameTheToolsALimitedCredentialMayUse) {
  Scope ls_only;
  ls_only.cmds = {"ls"};
  ASSERT_TRUE(store_->AddKey(vmtest::KeyRecord(kLsOnlyKey, "alice", "ls-only", ls_only)).ok());
  std::string id = Init("alice-ls", "/mcp/claude");
  std::string text = last_init_["result"]["instructions"];
  EXPECT_NE(text.find("Of these tools it may use only: list_vms, get_cli_help."), std::string::npos)
      << text;
  json r = Call(id, "run_vm_command", {{"vm", "web-one"}, {"command", "true"}}, "alice-ls",
                "/mcp/claude");
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_EQ(Text(r),
            "error: this key may not use run_vm_command here; it may use only: list_vms (and "
            "get_cli_help)")
      << r.dump();
  // On /mcp, where exec takes any command line, it names command lines.
  id = Init("alice-ls");
  r = Call(id, "exec", {{"command", "whoami"}}, "alice-ls");
  EXPECT_NE(Text(r).find("it may use only: exec \"ls\""), std::string::npos) << r.dump();
}

// Agents are told who commands in a VM run as, where its home is, and that it has sudo.
TEST_F(McpHandlerTest, InstructionsNameTheVmUserItsHomeAndSudo) {
  for (const std::string path : {"/mcp", "/mcp/claude", "/mcp/openai"}) {
    Init("alice", path);
    std::string text = last_init_["result"]["instructions"];
    EXPECT_NE(text.find("as its user dev (home /home/dev), who has passwordless sudo"),
              std::string::npos)
        << path << ": " << text;
  }
}

TEST_F(McpHandlerTest, ProgressNotificationsWhileACommandRuns) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  std::string job = guests_.next_job();
  std::string id = Init();
  auto r = Rpc(id, "tools/call",
               {{"name", "exec"},
                {"arguments", {{"command", "ssh web-one slow"}, {"wait_seconds", 1}}},
                {"_meta", {{"progressToken", "p1"}}}});
  EXPECT_TRUE(r->streaming());
  auto msgs = r->Messages();
  ASSERT_GE(msgs.size(), 3u) << r->body();
  EXPECT_EQ(msgs[0]["method"], "notifications/progress");
  EXPECT_EQ(msgs[0]["params"]["progressToken"], "p1");
  EXPECT_LT(msgs[0]["params"]["progress"].get<int>(), msgs[1]["params"]["progress"].get<int>());
  EXPECT_EQ(msgs.back()["id"], 2);
  EXPECT_FALSE(msgs.back()["result"]["structuredContent"]["finished"].get<bool>());
  guests_.Release(job, 0);
}

TEST_F(McpHandlerTest, CancelledCallStopsItsCommand) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  std::string id = Init();
  HttpRequest req;
  req.method = "POST";
  req.path = "/mcp";
  req.body = json{{"jsonrpc", "2.0"},
                  {"id", "call-9"},
                  {"method", "tools/call"},
                  {"params", {{"name", "exec"}, {"arguments", {{"command", "ssh web-one slow"}}}}}}
                 .dump();
  req.headers = {{"authorization", "Bearer alice"},
                 {"content-type", "application/json"},
                 {"accept", "application/json, text/event-stream"},
                 {"mcp-session-id", id}};
  auto call = std::make_shared<RecordingResponder>();
  const size_t before = guests_.commands().size();
  handler_->Handle(req, call);
  // Wait until the command runs in the guest, then cancel it.
  AwaitGuestCommand(before);
  auto c = Send("POST",
                json{{"jsonrpc", "2.0"},
                     {"method", "notifications/cancelled"},
                     {"params", {{"requestId", "call-9"}, {"reason", "user"}}}}
                    .dump(),
                {{"mcp-session-id", id}});
  EXPECT_EQ(c->status(), 202);
  call->Await();
  EXPECT_EQ(guests_.killed(), 1);
  // No response for a cancelled request.
  for (const json& m : call->Messages()) EXPECT_FALSE(m.contains("id")) << m.dump();
}

TEST_F(McpHandlerTest, ClientGoingAwayStopsItsCommand) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  std::string id = Init();
  HttpRequest req;
  req.method = "POST";
  req.path = "/mcp";
  req.body = json{{"jsonrpc", "2.0"},
                  {"id", 5},
                  {"method", "tools/call"},
                  {"params", {{"name", "exec"}, {"arguments", {{"command", "ssh web-one slow"}}}}}}
                 .dump();
  req.headers = {{"authorization", "Bearer alice"},
                 {"content-type", "application/json"},
                 {"accept", "application/json, text/event-stream"},
                 {"mcp-session-id", id}};
  auto call = std::make_shared<RecordingResponder>();
  const size_t before = guests_.commands().size();
  handler_->Handle(req, call);
  AwaitGuestCommand(before);
  call->closed_->Cancel();
  call->Await();
  EXPECT_EQ(guests_.killed(), 1);
}

TEST_F(McpHandlerTest, ExecReadOnlyRefusesSshAndChanges) {
  New(Alice(), {"--name", "web-one"});
  const size_t before = guests_.commands().size();
  std::string id = Init();
  json r = Call(id, "exec_read_only", {{"command", "ssh web-one true"}});
  EXPECT_TRUE(r["isError"].get<bool>());
  // The interpreter refuses it (ssh is not read-only) and says what may run instead.
  EXPECT_NE(Text(r).find("runs only commands that change nothing"), std::string::npos) << Text(r);
  EXPECT_NE(Text(r).find("\"ssh\""), std::string::npos) << Text(r);
  r = Call(id, "exec_read_only", {{"command", "rm web-one"}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_TRUE(store_->GetVmByName("web-one").ok());
  r = Call(id, "exec_read_only", {{"command", "ls"}});
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  r = Call(id, "exec_read_only", {{"command", "rm --help"}});
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_EQ(guests_.commands().size(), before);
}

TEST_F(McpHandlerTest, ATagScopedCallerSeesOnlyItsTag) {
  New(Alice(), {"--name", "private-one"});
  std::string id = Init("alice-ci");
  json r = Call(id, "exec", {{"command", "ssh private-one true"}}, "alice-ci");
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_NE(Text(r).find("no VM named"), std::string::npos) << Text(r);
  r = Call(id, "exec", {{"command", "rm private-one"}}, "alice-ci");
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_TRUE(store_->GetVmByName("private-one").ok());
  r = Call(id, "exec", {{"command", "ls"}}, "alice-ci");
  EXPECT_EQ(Text(r).find("private-one"), std::string::npos) << Text(r);
}

TEST_F(McpHandlerTest, ExpiryAndRevocationActAtOnceInAnOpenSession) {
  Scope scope;
  scope.expires_at = vmtest::kStart + 3600;
  ASSERT_TRUE(store_->AddKey(vmtest::KeyRecord(kExpiringKey, "alice", "short", scope)).ok());
  std::string id = Init("alice-exp");
  json r = Call(id, "exec", {{"command", "whoami"}}, "alice-exp");
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_NE(last_init_["result"]["instructions"].get<std::string>().find("expires"),
            std::string::npos);
  clock_.now += 3601;
  auto raw = Rpc(id, "tools/call", {{"name", "exec"}, {"arguments", {{"command", "whoami"}}}},
                 "alice-exp");
  EXPECT_EQ(raw->status(), 401) << raw->body();
  clock_.now -= 3601;
  EXPECT_EQ(Rpc(id, "ping", json::object(), "alice-exp")->status(), 200);
  const std::string fp = ParseAuthorizedKey(kExpiringKey)->fingerprint;
  ASSERT_TRUE(store_->RemoveKey("alice", fp).ok());
  EXPECT_EQ(Rpc(id, "ping", json::object(), "alice-exp")->status(), 401);
}

TEST_F(McpHandlerTest, CuratedToolsMapOntoCommands) {
  std::string id = Init("alice", "/mcp/claude");
  json r = Call(id, "create_vm", {{"name", "cur-one"}}, "alice", "/mcp/claude");
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_TRUE(store_->GetVmByName("cur-one").ok());
  r = Call(id, "list_vms", json::object(), "alice", "/mcp/claude");
  EXPECT_NE(Text(r).find("cur-one"), std::string::npos) << r.dump();
  guests_.SetScript("echo hi && id", {"hi\n", "", 0});
  r = Call(id, "run_vm_command", {{"vm", "cur-one"}, {"command", "echo hi && id"}}, "alice",
           "/mcp/claude");
  EXPECT_EQ(r["structuredContent"]["stdout"], "hi\n") << r.dump();
  r = Call(id, "get_cli_help", {{"command", "new"}}, "alice", "/mcp/claude");
  EXPECT_NE(Text(r).find("--name"), std::string::npos) << r.dump();
  // A command given as "help new" is the same question.
  r = Call(id, "get_cli_help", {{"command", "help new"}}, "alice", "/mcp/claude");
  EXPECT_NE(Text(r).find("--name"), std::string::npos) << r.dump();
  r = Call(id, "get_cli_help", json::object(), "alice", "/mcp/claude");
  EXPECT_FALSE(r["isError"].get<bool>()) << r.dump();
  EXPECT_NE(Text(r).find("list commands"), std::string::npos) << r.dump();
  // The full tools are not here.
  auto raw = Rpc(id, "tools/call", {{"name", "exec"}, {"arguments", {{"command", "ls"}}}}, "alice",
                 "/mcp/claude");
  EXPECT_EQ(raw->Messages().back()["error"]["code"], kInvalidParams);
}

TEST_F(McpHandlerTest, FixturesOnlyBehindTheTestFlag) {
  std::string id = Init();
  json tools = Rpc(id, "tools/list", json::object())->Messages()[0]["result"]["tools"];
  for (auto& t : tools)
    EXPECT_EQ(t["name"].get<std::string>().rfind("test_", 0), std::string::npos);
  McpOptions o;
  o.conformance_fixtures = true;
  MakeHandler(o);
  id = Init();
  EXPECT_TRUE(last_init_["result"]["capabilities"].contains("logging"));
  auto r = Rpc(id, "tools/call",
               {{"name", "test_tool_with_progress"},
                {"arguments", json::object()},
                {"_meta", {{"progressToken", 7}}}});
  auto msgs = r->Messages();
  ASSERT_EQ(msgs.size(), 4u) << r->body();
  EXPECT_EQ(msgs[2]["params"]["progress"], 100);
  // The conformance suite runs at /mcp/sandbox too; the curated endpoints never get them.
  for (const std::string path : {"/mcp/sandbox", "/mcp/claude"}) {
    id = Init("alice", path);
    json listed = Rpc(id, "tools/list", json::object(), "alice", path)->Messages()[0];
    bool fixtures = false;
    for (auto& t : listed["result"]["tools"]) {
      fixtures = fixtures || t["name"].get<std::string>().rfind("test_", 0) == 0;
    }
    EXPECT_EQ(fixtures, path == "/mcp/sandbox") << path;
  }
}

TEST_F(McpHandlerTest, ShutdownCancelsCallsInFlight) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  std::string id = Init();
  HttpRequest req;
  req.method = "POST";
  req.path = "/mcp";
  req.body = json{{"jsonrpc", "2.0"},
                  {"id", 5},
                  {"method", "tools/call"},
                  {"params", {{"name", "exec"}, {"arguments", {{"command", "ssh web-one slow"}}}}}}
                 .dump();
  req.headers = {{"authorization", "Bearer alice"},
                 {"content-type", "application/json"},
                 {"mcp-session-id", id}};
  auto call = std::make_shared<RecordingResponder>();
  const size_t before = guests_.commands().size();
  handler_->Handle(req, call);
  AwaitGuestCommand(before);
  EXPECT_TRUE(handler_->Shutdown());
  call->Await();
  EXPECT_EQ(guests_.killed(), 1);
}

// 10,000 initialize calls by one user used to fill the server's session table for an hour.
TEST_F(McpHandlerTest, OneUsersSessionsStayWithinTheirCap) {
  McpOptions o;
  o.max_sessions = 50;
  o.max_sessions_per_user = 5;
  MakeHandler(o);
  std::string first = Init();
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(Init().empty()) << i;
  EXPECT_EQ(handler_->sessions(), 5u);
  // The oldest went; the newest works; someone else still gets in.
  EXPECT_EQ(Rpc(first, "ping", json::object())->status(), 404);
  std::string bob = Init("bob");
  ASSERT_FALSE(bob.empty());
  EXPECT_EQ(Rpc(bob, "ping", json::object(), "bob")->status(), 200);
}

// 150 concurrent tool calls by one user used to be all accepted, a thread each. Now they go
// to the one command runner: past the user's share they are refused with 429 at once, and
// another user's call runs meanwhile.
TEST_F(McpHandlerTest, ToolCallsOverAUsersShareAreRefused) {
  CommandRunnerOptions r;
  r.threads = 8;
  r.threads_per_user = 2;
  r.queue_per_user = 1;
  MakeHandler({}, r);
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  std::string id = Init();
  const size_t before = guests_.commands().size();
  std::vector<std::shared_ptr<RecordingResponder>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(StartCall(id, "ssh web-one slow", "alice", 10 + i));
  AwaitGuestCommand(before + 1);  // two run, one waits for a thread
  EXPECT_EQ(runner_->load().running, 2);
  EXPECT_EQ(runner_->load().queued, 1);
  auto over = StartCall(id, "ssh web-one slow", "alice", 20);
  over->Await();
  EXPECT_EQ(over->status(), 429) << over->body();
  EXPECT_EQ(over->header("Retry-After"), "1");
  EXPECT_NE(over->body().find("too many commands at once"), std::string::npos) << over->body();
  // Bob is not behind alice's commands.
  std::string bob = Init("bob");
  auto started = std::chrono::steady_clock::now();
  json r2 = Call(bob, "exec", {{"command", "whoami"}}, "bob");
  EXPECT_FALSE(r2["isError"].get<bool>()) << r2.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_TRUE(handler_->Shutdown());
  for (auto& c : calls) c->Await();
}

// Removing the key a call runs with ends the call at once (its command is killed in the
// VM), not at its next request.
TEST_F(McpHandlerTest, RemovingTheCredentialEndsItsCallsInFlight) {
  Scope scope;
  ASSERT_TRUE(store_->AddKey(vmtest::KeyRecord(kExpiringKey, "alice", "short", scope)).ok());
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  std::string id = Init("alice-exp");
  const size_t before = guests_.commands().size();
  auto call = StartCall(id, "ssh web-one slow", "alice-exp");
  AwaitGuestCommand(before);
  auto started = std::chrono::steady_clock::now();
  vmtest::Outcome removed = Exec(Alice(), {"ssh-key", "remove", "short"});
  ASSERT_TRUE(removed.status.ok()) << removed.err;
  call->Await();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_EQ(guests_.killed(), 1);
  EXPECT_EQ(Rpc(id, "ping", json::object(), "alice-exp")->status(), 401);
}

// ---- /mcp/sandbox -----------------------------------------------------------------------

// Exactly the four tools of seed 004, each with its result schema and annotations.
TEST_F(McpHandlerTest, SandboxEndpointHasExactlyTheFourTools) {
  std::string id = Init("alice", "/mcp/sandbox");
  json tools = Rpc(id, "tools/list", json::object(), "alice", "/mcp/sandbox")
                   ->Messages()[0]["result"]["tools"];
  std::map<std::string, json> by_name;
  for (auto& t : tools) by_name[t["name"]] = t;
  ASSERT_EQ(tools.size(), 4u) << tools.dump();
  for (const char* name : {"create_sandbox", "exec", "extend_sandbox", "destroy_sandbox"}) {
    ASSERT_TRUE(by_name.count(name)) << name;
    const json& t = by_name[name];
    EXPECT_TRUE(t.contains("outputSchema")) << name;
    EXPECT_TRUE(t["annotations"].contains("title")) << name;
    EXPECT_FALSE(t["annotations"]["readOnlyHint"].get<bool>()) << name;
    EXPECT_EQ(t["inputSchema"]["additionalProperties"], false) << name;
  }
  EXPECT_EQ(by_name["create_sandbox"]["inputSchema"]["properties"].size(), 2u);
  EXPECT_FALSE(by_name["create_sandbox"]["inputSchema"].contains("required"));
  EXPECT_EQ(by_name["create_sandbox"]["inputSchema"]["properties"]["timeout_minutes"]["maximum"],
            1440);
  EXPECT_EQ(by_name["exec"]["inputSchema"]["required"], json({"sandbox_id", "command"}));
  EXPECT_EQ(by_name["exec"]["inputSchema"]["properties"]["timeout_ms"]["maximum"], 600000);
  EXPECT_EQ(by_name["exec"]["inputSchema"]["properties"]["env"]["additionalProperties"]["type"],
            "string");
  EXPECT_EQ(by_name["extend_sandbox"]["inputSchema"]["required"],
            json({"sandbox_id", "additional_minutes"}));
  EXPECT_EQ(by_name["destroy_sandbox"]["inputSchema"]["required"], json({"sandbox_id"}));
  EXPECT_TRUE(by_name["destroy_sandbox"]["annotations"]["destructiveHint"].get<bool>());
  EXPECT_TRUE(by_name["exec"]["annotations"]["openWorldHint"].get<bool>());
  EXPECT_FALSE(by_name["extend_sandbox"]["annotations"]["destructiveHint"].get<bool>());
  EXPECT_EQ(by_name["exec"]["outputSchema"]["required"],
            json({"stdout", "stderr", "exit_code", "duration_ms", "truncated"}));
  // A session belongs to its endpoint.
  EXPECT_EQ(Rpc(id, "tools/list", json::object())->status(), 404);
}

// The instructions state the limits and, for a limited credential, its scope in tool names.
TEST_F(McpHandlerTest, SandboxInstructionsStateTheLimitsAndTheScope) {
  Init("alice", "/mcp/sandbox");
  std::string text = last_init_["result"]["instructions"];
  for (const char* part :
       {"default 15", "1440 = 24 hours", "extend_sandbox", "at most 20 sandboxes", "small",
        "medium", "large", "600000", "as its user dev (home /home/dev), who has passwordless sudo",
        "not an error"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << ": " << text;
  }
  EXPECT_EQ(text.find("limited"), std::string::npos) << text;
  Init("alice-ci", "/mcp/sandbox");
  text = last_init_["result"]["instructions"];
  EXPECT_NE(text.find("only VMs tagged \"ci\""), std::string::npos) << text;

  Scope ls_only;
  ls_only.cmds = {"ls"};
  ASSERT_TRUE(store_->AddKey(vmtest::KeyRecord(kLsOnlyKey, "alice", "ls-only", ls_only)).ok());
  std::string id = Init("alice-ls", "/mcp/sandbox");
  text = last_init_["result"]["instructions"];
  EXPECT_NE(text.find("Of these tools it may use only: none."), std::string::npos) << text;
  json r = Call(id, "create_sandbox", json::object(), "alice-ls", "/mcp/sandbox");
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_EQ(Text(r), "error: this key may not use create_sandbox here") << r.dump();
}

TEST_F(McpHandlerTest, SandboxToolsCheckTheirArguments) {
  std::string id = Init("alice", "/mcp/sandbox");
  const std::pair<std::string, json> cases[] = {
      {"create_sandbox", {{"name", "mine"}}},
      {"create_sandbox", {{"timeout_minutes", 0}}},
      {"create_sandbox", {{"size", 2}}},
      {"exec", {{"command", "true"}}},
      {"exec", {{"sandbox_id", "sbx-1"}}},
      {"exec", {{"sandbox_id", 7}, {"command", "true"}}},
      {"exec", {{"sandbox_id", "sbx-1"}, {"command", "true"}, {"env", {{"A", 1}}}}},
      {"exec", {{"sandbox_id", "sbx-1"}, {"command", "true"}, {"timeout_ms", 600001}}},
      {"exec", {{"sandbox_id", "sbx-1"}, {"command", "true"}, {"stdin", "x"}}},
      {"extend_sandbox", {{"sandbox_id", "sbx-1"}}},
      {"extend_sandbox", {{"sandbox_id", "sbx-1"}, {"additional_minutes", 1441}}},
      {"destroy_sandbox", json::object()},
      {"destroy_sandbox", {{"sandbox_id", "sbx-1"}, {"force", true}}},
  };
  for (const auto& [tool, args] : cases) {
    json r = Call(id, tool, args, "alice", "/mcp/sandbox");
    EXPECT_TRUE(r.value("isError", false)) << tool << " " << args.dump() << ": " << r.dump();
    EXPECT_TRUE(Text(r).starts_with("error: ")) << r.dump();
    EXPECT_FALSE(r.contains("structuredContent")) << r.dump();
  }
}

// Seed 004's transcript: create, exec (a failing test run is a result, not an error), extend,
// destroy — with hints that name only this endpoint's tools.
TEST_F(McpHandlerTest, SandboxToolsEndToEnd) {
  const std::string path = "/mcp/sandbox";
  std::string id = Init("alice", path);
  json made =
      Call(id, "create_sandbox", {{"size", "small"}, {"timeout_minutes", 30}}, "alice", path);
  ASSERT_FALSE(made["isError"].get<bool>()) << made.dump();
  json sbx = made["structuredContent"];
  const std::string sid = sbx.value("id", "");
  EXPECT_TRUE(sid.starts_with("sbx-")) << sbx.dump();
  EXPECT_EQ(sbx["status"], "running");
  EXPECT_EQ(sbx["size"], "small");
  EXPECT_EQ(sbx["expires_at"], "2023-11-14T22:43:20Z");
  EXPECT_EQ(json::parse(Text(made)), sbx);

  guests_.SetScript("npm test 2>&1 | tail -n 40", {"2 failing\n", "", 1});
  json ran = Call(id, "exec",
                  {{"sandbox_id", sid},
                   {"command", "npm test 2>&1 | tail -n 40"},
                   {"timeout_ms", 180000},
                   {"cwd", "/home/dev/widget"},
                   {"env", {{"NODE_ENV", "test"}}}},
                  "alice", path);
  EXPECT_FALSE(ran["isError"].get<bool>()) << ran.dump();
  EXPECT_EQ(ran["structuredContent"]["exit_code"], 1);
  EXPECT_EQ(ran["structuredContent"]["stdout"], "2 failing\n");
  EXPECT_EQ(ran["structuredContent"]["truncated"], false);

  json extended =
      Call(id, "extend_sandbox", {{"sandbox_id", sid}, {"additional_minutes", 20}}, "alice", path);
  EXPECT_FALSE(extended["isError"].get<bool>()) << extended.dump();
  EXPECT_EQ(extended["structuredContent"],
            (json{{"id", sid}, {"expires_at", "2023-11-14T23:03:20Z"}}));

  json gone = Call(id, "destroy_sandbox", {{"sandbox_id", sid}}, "alice", path);
  EXPECT_FALSE(gone["isError"].get<bool>()) << gone.dump();
  EXPECT_EQ(gone["structuredContent"], (json{{"id", sid}, {"status", "destroyed"}}));

  json again = Call(id, "exec", {{"sandbox_id", sid}, {"command", "true"}}, "alice", path);
  EXPECT_TRUE(again["isError"].get<bool>());
  const std::regex other("\\b(exec_read_only|wait|kill|run_vm_command|list_vms|ssh|rm)\\b");
  EXPECT_FALSE(std::regex_search(Text(again), other)) << Text(again);
}

}  // namespace
}  // namespace warren::mcp
