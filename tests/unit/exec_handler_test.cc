// POST /exec (bridge/exec_handler.cc) without sockets: the handler over the real interpreter
// with FakeVmHost and FakeGuestControl, answering through a recording responder. What a
// command in a VM printed comes back byte for byte — JSON text when it is UTF-8,
// stdout_base64 / stderr_base64 when it is not — with the status of its outcome. Admission
// on the one CommandRunner: one user's long commands fill only that user's share (each
// request counted once), the next are refused with 429 and another user runs at once; the
// deadline answers 504 once and lets the command finish; removing a token's label ends its
// call in flight with 401.
#include "bridge/exec_handler.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bridge/json_api.h"
#include "keys/base64.h"
#include "keys/token.h"
#include "lobby/commands/command_runner.h"
#include "tests/unit/recording_responder.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ExecHandlerTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    interpreter_->services().token_signer = &signer_;
    handler_ = std::make_unique<ExecHandler>(*interpreter_, runner_, ExecHandlerOptions{});
    New(Alice(), {"--name", "web-one"});
    Outcome o = Exec(Alice(), {"ssh-key", "generate-api-key", "--label", "agent", "--json"});
    ASSERT_TRUE(o.status.ok()) << o.out << o.err;
    token_ = o.Json()["token"];
  }
  void TearDown() override {
    handler_.reset();
    EXPECT_TRUE(runner_.Stop());
    VmCommandTest::TearDown();
  }

  // POSTs `body` as JSON; returns the status and the parsed body.
  std::pair<int, json> Post(const json& body) {
    HttpRequest req;
    req.method = "POST";
    req.path = req.target = "/exec";
    req.headers = {{"authorization", "Bearer " + token_}, {"content-type", "application/json"}};
    req.body = body.dump();
    auto responder = std::make_shared<RecordingResponder>();
    handler_->Handle(std::move(req), responder);
    responder->Await();
    json j = json::parse(responder->body(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << responder->body();
    return {responder->status(), j};
  }

  TokenSigner signer_ = TokenSigner::FromSecret(std::string(32, 's')).value();
  CommandRunner runner_;
  std::unique_ptr<ExecHandler> handler_;
  std::string token_;
};

TEST_F(ExecHandlerTest, OutputThatIsNotTextComesBackAsBase64ByteForByte) {
  const std::string bytes("\x00\x9f\x92\x96\xff random", 12);
  const std::string err("\xe2\x28\xa1\n", 4);
  guests_.SetScript("head -c 64 /dev/urandom", {bytes, err, 0});
  auto [status, body] = Post({{"command", "ssh web-one 'head -c 64 /dev/urandom'"}});
  EXPECT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["stdout"], "");
  EXPECT_EQ(Base64Decode(body.value("stdout_base64", "")).value(), bytes) << body.dump();
  EXPECT_EQ(body["stderr"], "");
  EXPECT_EQ(Base64Decode(body.value("stderr_base64", "")).value(), err) << body.dump();

  // Text stays text, with its exit status and the 422 of a failed command.
  guests_.SetScript("fail", {"caf\xc3\xa9\n", "oops\n", 3});
  std::tie(status, body) = Post({{"command", "ssh web-one fail"}});
  EXPECT_EQ(status, 422);
  EXPECT_EQ(body["stdout"], "caf\xc3\xa9\n");
  EXPECT_FALSE(body.contains("stdout_base64"));
  EXPECT_EQ(body["exit_code"], 3);
}

class ExecAdmissionTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    interpreter_->services().token_signer = &signer_;
    New(Alice(), {"--name", "web-one"});
    guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
    alice_ = Mint(Alice(), "agent");
    bob_ = Mint(Bob(), "bob-agent");
  }
  void TearDown() override {
    handler_.reset();
    if (runner_ != nullptr) {
      EXPECT_TRUE(runner_->Stop());
    }
    runner_.reset();
    VmCommandTest::TearDown();
  }

  std::string Mint(const Caller& caller, const std::string& label) {
    Outcome o = Exec(caller, {"ssh-key", "generate-api-key", "--label", label, "--json"});
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    return o.Json().value("token", "");
  }

  void MakeHandler(CommandRunnerOptions runner, ExecHandlerOptions options = {}) {
    runner_ = std::make_unique<CommandRunner>(runner);
    options.burst = 1000;  // these tests are about admission, not the rate limit
    handler_ = std::make_unique<ExecHandler>(*interpreter_, *runner_, options);
  }

  // Posts `command` with `token`; does not wait for the answer.
  std::shared_ptr<RecordingResponder> Post(const std::string& token, const std::string& command) {
    HttpRequest req;
    req.method = "POST";
    req.path = "/exec";
    req.target = "/exec";
    req.body = command;
    req.headers = {{"authorization", "Bearer " + token}};
    auto r = std::make_shared<RecordingResponder>();
    handler_->Handle(std::move(req), r);
    return r;
  }

  // Waits until the guest has run more than `count` commands.
  void AwaitGuestCommands(size_t count) {
    for (int i = 0; i < 500 && guests_.commands().size() <= count; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_GT(guests_.commands().size(), count);
  }

  TokenSigner signer_ = TokenSigner::FromSecret(std::string(32, 'k')).value();
  std::unique_ptr<CommandRunner> runner_;
  std::unique_ptr<ExecHandler> handler_;
  std::string alice_, bob_;
};

// Before: 32 long commands of one user filled all 64 slots (each counted twice) and every
// other user got 429.
TEST_F(ExecAdmissionTest, OneUsersLongCommandsLeaveOthersTheirShare) {
  CommandRunnerOptions r;
  r.threads = 8;
  r.threads_per_user = 2;
  r.queue_per_user = 3;
  MakeHandler(r);
  const size_t before = guests_.commands().size();
  std::vector<std::shared_ptr<RecordingResponder>> alice;
  for (int i = 0; i < 5; ++i) alice.push_back(Post(alice_, "ssh web-one slow"));
  AwaitGuestCommands(before + 1);
  EXPECT_EQ(runner_->load().running, 2);  // once each
  EXPECT_EQ(runner_->load().queued, 3);
  auto over = Post(alice_, "ssh web-one slow");
  over->Await();
  EXPECT_EQ(over->status(), 429) << over->body();
  EXPECT_EQ(over->header("Retry-After"), "1");
  EXPECT_NE(over->body().find("2 running and 3 waiting"), std::string::npos) << over->body();

  auto started = std::chrono::steady_clock::now();
  auto bob = Post(bob_, "whoami");
  bob->Await();
  EXPECT_EQ(bob->status(), 200) << bob->body();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  EXPECT_NE(bob->body().find("bob"), std::string::npos) << bob->body();
  for (auto& a : alice) EXPECT_EQ(a->responses(), 0);
}

TEST_F(ExecAdmissionTest, TheDeadlineAnswers504OnceAndTheCommandGoesOn) {
  ExecHandlerOptions o;
  o.timeout_seconds = 1;
  MakeHandler({}, o);
  const std::string job = guests_.next_job();
  auto call = Post(alice_, "ssh web-one slow");
  call->Await();
  EXPECT_EQ(call->status(), 504) << call->body();
  EXPECT_NE(call->body().find("was not stopped"), std::string::npos) << call->body();
  EXPECT_FALSE(guests_.finished(job));
  guests_.Release(job, 0);
  for (int i = 0; i < 200 && runner_->load().running > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(runner_->load().running, 0);
  EXPECT_EQ(call->responses(), 1);
  EXPECT_EQ(guests_.killed(), 0);
}

// Removing the label ends the token's call in flight at once (killed in the VM), with 401.
TEST_F(ExecAdmissionTest, RemovingTheTokensLabelEndsItsCall) {
  MakeHandler({});
  const size_t before = guests_.commands().size();
  auto call = Post(alice_, "ssh web-one slow");
  AwaitGuestCommands(before);
  auto t0 = std::chrono::steady_clock::now();
  Outcome removed = Exec(Alice(), {"ssh-key", "remove", "agent"});
  ASSERT_TRUE(removed.status.ok()) << removed.err;
  call->Await();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(call->status(), 401) << call->body();
  EXPECT_NE(call->body().find("revoked"), std::string::npos) << call->body();
  EXPECT_EQ(guests_.killed(), 1);
}

// The one reader of bearer credentials (HttpRequest::BearerCredential), which /exec, /v1 and
// /mcp share, and the answers /exec gives for each way the header can be wrong.
TEST(BearerCredential, SchemeCaseSpacesAndOtherSchemes) {
  auto with = [](std::string auth) {
    HttpRequest r;
    if (!auth.empty()) r.headers.emplace_back("authorization", std::move(auth));
    return r;
  };
  EXPECT_EQ(with("Bearer abc").BearerCredential(), "abc");
  EXPECT_EQ(with("bEaReR   abc \t").BearerCredential(), "abc");
  EXPECT_EQ(with("Bearer  ").BearerCredential(), std::nullopt);  // trimmed to "Bearer"
  EXPECT_EQ(with("Bearer \t x").BearerCredential(), "x");
  EXPECT_EQ(with("Basic abc").BearerCredential(), std::nullopt);
  EXPECT_EQ(with("Bearerabc").BearerCredential(), std::nullopt);
  EXPECT_EQ(with("").BearerCredential(), std::nullopt);

  EXPECT_EQ(BearerToken(with("Bearer abc")).value(), "abc");
  EXPECT_NE(BearerToken(with("")).status().message().find("missing API token"), std::string::npos);
  EXPECT_NE(BearerToken(with("Basic abc")).status().message().find("must be"), std::string::npos);
  EXPECT_EQ(BearerToken(with("Basic abc")).status().code(), Code::kUnauthenticated);
}

}  // namespace
}  // namespace warren::vmtest
