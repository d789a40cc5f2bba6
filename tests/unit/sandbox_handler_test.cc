// REST /v1 (bridge/sandbox_handler.cc) without sockets: the handler over the real
// interpreter with FakeVmHost and FakeGuestControl, answering through a recording
// responder. Routing (404 for an unknown path, 405 with Allow), the bearer token (401),
// every body field and query parameter checked (400), a token's --cmds applying as on every
// surface (403), and the sandbox lifecycle end to end: create (201), list, get, exec (a
// non-zero exit is a 200 result; cwd, env and timeout_ms reach `ssh`), extend, destroy,
// usage; a create slower than the deadline answered 504 with its sandbox's id.
#include "bridge/sandbox_handler.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "keys/token.h"
#include "lobby/commands/command_runner.h"
#include "tests/unit/recording_responder.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class SandboxHandlerTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    interpreter_->services().token_signer = &signer_;
    handler_ = std::make_unique<SandboxHandler>(*interpreter_, runner_, SandboxHandlerOptions{});
    token_ = Mint(Alice(), {"--label", "agent"});
  }
  void TearDown() override {
    handler_.reset();
    EXPECT_TRUE(runner_.Stop());
    VmCommandTest::TearDown();
  }

  std::string Mint(const Caller& caller, std::vector<std::string> flags) {
    std::vector<std::string> argv = {"ssh-key", "generate-api-key", "--json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Outcome o = Exec(caller, argv);
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    return o.Json().value("token", "");
  }

  struct Answer {
    int status = 0;
    json body;
    std::shared_ptr<RecordingResponder> r;
    std::string header(const std::string& name) const { return r->header(name); }
  };

  Answer Send(const std::string& method, const std::string& target, const std::string& body = "",
              const std::string& token = "") {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.path = target.substr(0, target.find('?'));
    req.headers = {{"content-type", "application/json"}};
    const std::string t = token.empty() ? token_ : token;
    if (t != "none") req.headers.push_back({"authorization", "Bearer " + t});
    req.body = body;
    auto r = std::make_shared<RecordingResponder>();
    handler_->Handle(std::move(req), r);
    r->Await();
    json j = json::parse(r->body(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r->body();
    return {r->status(), j, r};
  }
  Answer Post(const std::string& target, const json& body, const std::string& token = "") {
    return Send("POST", target, body.dump(), token);
  }

  TokenSigner signer_ = TokenSigner::FromSecret(std::string(32, 'v')).value();
  CommandRunner runner_;
  std::unique_ptr<SandboxHandler> handler_;
  std::string token_;
};

TEST_F(SandboxHandlerTest, UnknownPathsAre404AndWrongMethods405WithAllow) {
  EXPECT_TRUE(handler_->Matches("/v1/anything"));
  EXPECT_FALSE(handler_->Matches("/v10/sandboxes"));
  EXPECT_FALSE(handler_->Matches("/exec"));
  for (const std::string path : {"/v1", "/v1/", "/v1/nothing", "/v1/sandboxes/sbx-1/frob",
                                 "/v1/sandboxes/sbx-1/exec/x", "/v1/sandboxesx", "/v1/usage/x"}) {
    Answer a = Send("GET", path);
    EXPECT_EQ(a.status, 404) << path << " " << a.body.dump();
    EXPECT_TRUE(a.body.contains("error")) << path;
  }
  const std::pair<std::string, std::string> wrong[] = {
      {"PUT /v1/sandboxes", "GET, POST"},
      {"DELETE /v1/sandboxes", "GET, POST"},
      {"POST /v1/sandboxes/sbx-1", "GET, DELETE"},
      {"GET /v1/sandboxes/sbx-1/exec", "POST"},
      {"DELETE /v1/sandboxes/sbx-1/extend", "POST"},
      {"POST /v1/usage", "GET"}};
  for (const auto& [line, allow] : wrong) {
    const std::string method = line.substr(0, line.find(' '));
    Answer a = Send(method, line.substr(line.find(' ') + 1));
    EXPECT_EQ(a.status, 405) << line;
    EXPECT_EQ(a.header("Allow"), allow) << line;
    EXPECT_TRUE(a.body.contains("error")) << line;
  }
}

TEST_F(SandboxHandlerTest, ABearerTokenIsRequired) {
  Answer none = Send("GET", "/v1/sandboxes", "", "none");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer realm=\"warren\"");
  Answer bad = Send("GET", "/v1/sandboxes", "", "wr1.bogus.token");
  EXPECT_EQ(bad.status, 401) << bad.body.dump();
}

TEST_F(SandboxHandlerTest, EveryFieldAndParameterIsChecked) {
  struct Case {
    std::string method, target, body, mentions;
  };
  const Case cases[] = {
      {"POST", "/v1/sandboxes", R"({"size": 3})", "\"size\""},
      {"POST", "/v1/sandboxes", R"({"timeout_minutes": 0})", "1 to 1440"},
      {"POST", "/v1/sandboxes", R"({"timeout_minutes": 1441})", "1 to 1440"},
      {"POST", "/v1/sandboxes", R"({"name": "mine"})", "unknown field \"name\""},
      {"POST", "/v1/sandboxes", "not json", "not valid JSON"},
      {"POST", "/v1/sandboxes", "[1]", "JSON object"},
      {"POST", "/v1/sandboxes/sbx-1/exec", "", "JSON object"},
      {"POST", "/v1/sandboxes/sbx-1/exec", R"({"timeout_ms": 5})", "\"command\" is required"},
      {"POST", "/v1/sandboxes/sbx-1/exec", R"({"command": "x", "timeout_ms": 600001})",
       "1 to 600000"},
      {"POST", "/v1/sandboxes/sbx-1/exec", R"({"command": "x", "env": {"A": 1}})", "\"A\""},
      {"POST", "/v1/sandboxes/sbx-1/exec", R"({"command": "x", "cwd": ""})", "\"cwd\""},
      {"POST", "/v1/sandboxes/sbx-1/exec", R"({"command": "x", "sandbox_id": "y"})",
       "unknown field"},
      {"POST", "/v1/sandboxes/sbx-1/extend", R"({})", "\"additional_minutes\" is required"},
      {"POST", "/v1/sandboxes/sbx-1/extend", R"({"additional_minutes": "5"})", "1 to 1440"},
      {"GET", "/v1/sandboxes?all=1", "", "unknown query parameter \"all\""},
      {"GET", "/v1/usage?since=2026-12-01&since=2026-11-01", "", "given twice"},
      {"GET", "/v1/usage?price=1", "", "takes since, vm"},
      {"GET", "/v1/usage?vm=", "", "empty"},
      {"GET", "/v1/usage?vm=%zz", "", "%-escape"},
      {"GET", "/v1/sandboxes", "{}", "takes no body"},
  };
  for (const Case& c : cases) {
    Answer a = Send(c.method, c.target, c.body);
    EXPECT_EQ(a.status, 400) << c.method << " " << c.target << " " << c.body << " "
                             << a.body.dump();
    EXPECT_NE(a.body.value("error", "").find(c.mentions), std::string::npos)
        << c.target << " " << c.body << ": " << a.body.dump();
  }
}

// A token held to `ls` may list but not create: the interpreter's check, as on every
// surface.
TEST_F(SandboxHandlerTest, ATokensCommandsLimitItHereToo) {
  std::string ls_only = Mint(Alice(), {"--label", "lister", "--cmds", "ls"});
  Answer create = Post("/v1/sandboxes", json::object(), ls_only);
  EXPECT_EQ(create.status, 403) << create.body.dump();
  Answer rm = Send("DELETE", "/v1/sandboxes/web-one", "", ls_only);
  EXPECT_EQ(rm.status, 403) << rm.body.dump();
}

// An ordinary VM is not one of the API's sandboxes, though exec reaches it by name.
TEST_F(SandboxHandlerTest, AnOrdinaryVmIsNotASandboxButRunsCommands) {
  New(Alice(), {"--name", "web-one"});
  Answer get = Send("GET", "/v1/sandboxes/web-one");
  EXPECT_EQ(get.status, 404) << get.body.dump();
  EXPECT_NE(get.body.value("error", "").find("not a sandbox"), std::string::npos);
  Answer missing = Send("GET", "/v1/sandboxes/sbx-nothere");
  EXPECT_EQ(missing.status, 404) << missing.body.dump();

  guests_.SetScript("fail", {"caf\xc3\xa9\n", "oops\n", 3});
  Answer ran = Post("/v1/sandboxes/web-one/exec", {{"command", "fail"}});
  // A command that exited non-zero is a result: 200 with its exit code.
  EXPECT_EQ(ran.status, 200) << ran.body.dump();
  EXPECT_EQ(ran.body["stdout"], "caf\xc3\xa9\n");
  EXPECT_EQ(ran.body["stderr"], "oops\n");
  EXPECT_EQ(ran.body["exit_code"], 3);
  EXPECT_EQ(ran.body["truncated"], false);
  EXPECT_TRUE(ran.body["duration_ms"].is_number_integer());
  EXPECT_FALSE(ran.body.contains("finished"));
}

TEST_F(SandboxHandlerTest, TheLifecycleEndToEnd) {
  Answer made = Post("/v1/sandboxes", {{"size", "small"}, {"timeout_minutes", 30}});
  ASSERT_EQ(made.status, 201) << made.body.dump();
  const std::string id = made.body.value("id", "");
  EXPECT_TRUE(id.starts_with("sbx-")) << id;
  EXPECT_EQ(made.body["status"], "running");
  EXPECT_EQ(made.body["size"], "small");
  // 30 minutes from the fixture clock, in RFC 3339.
  EXPECT_EQ(made.body["expires_at"], "2023-11-14T22:43:20Z") << made.body.dump();
  EXPECT_EQ(made.header("Location"), "/v1/sandboxes/" + id);

  Answer list = Send("GET", "/v1/sandboxes");
  ASSERT_EQ(list.status, 200) << list.body.dump();
  ASSERT_EQ(list.body["sandboxes"].size(), 1u) << list.body.dump();
  EXPECT_EQ(list.body["sandboxes"][0], made.body);
  EXPECT_EQ(Send("GET", "/v1/sandboxes/" + id).body, made.body);

  guests_.SetScript("node --version", {"v22.11.0\n", "", 0});
  Answer ran = Post("/v1/sandboxes/" + id + "/exec", {{"command", "node --version"},
                                                      {"timeout_ms", 300000},
                                                      {"cwd", "/tmp"},
                                                      {"env", {{"CI", "1"}}}});
  EXPECT_EQ(ran.status, 200) << ran.body.dump();
  EXPECT_EQ(ran.body["stdout"], "v22.11.0\n");
  EXPECT_EQ(ran.body["exit_code"], 0);

  Answer extended = Post("/v1/sandboxes/" + id + "/extend", {{"additional_minutes", 20}});
  EXPECT_EQ(extended.status, 200) << extended.body.dump();
  EXPECT_EQ(extended.body, (json{{"id", id}, {"expires_at", "2023-11-14T23:03:20Z"}}))
      << extended.body.dump();

  Answer usage = Send("GET", "/v1/usage?vm=" + id);
  EXPECT_EQ(usage.status, 200) << usage.body.dump();
  EXPECT_TRUE(usage.body.is_object()) << usage.body.dump();

  Answer gone = Send("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(gone.status, 200) << gone.body.dump();
  EXPECT_EQ(gone.body, (json{{"id", id}, {"status", "destroyed"}}));
  EXPECT_EQ(Send("GET", "/v1/sandboxes/" + id).status, 404);
  EXPECT_EQ(Send("DELETE", "/v1/sandboxes/" + id).status, 404);
}

TEST_F(SandboxHandlerTest, ACreateThatOutlivesTheDeadlineNamesItsSandbox) {
  handler_.reset();
  SandboxHandlerOptions options;
  options.timeout_seconds = 1;
  handler_ = std::make_unique<SandboxHandler>(*interpreter_, runner_, options);
  host_.SetCreateDelay(2500ms);
  Answer late = Post("/v1/sandboxes", json::object());
  ASSERT_EQ(late.status, 504) << late.body.dump();
  const std::string where = late.header("Location");
  ASSERT_TRUE(where.starts_with("/v1/sandboxes/sbx-")) << where;
  const std::string id = where.substr(std::string("/v1/sandboxes/").size());
  EXPECT_NE(late.body.value("error", "").find("sandbox " + id + " is still being created"),
            std::string::npos)
      << late.body.dump();
  // It was not stopped: it comes up under the id the client was given.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  Answer got;
  do {
    std::this_thread::sleep_for(100ms);
    got = Send("GET", where);
  } while (got.status != 200 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(got.status, 200) << got.body.dump();
  EXPECT_EQ(got.body.value("id", ""), id);
}

}  // namespace
}  // namespace warren::vmtest
