// POST /exec (bridge/exec_handler.cc) without sockets: the handler over the real interpreter
// with FakeVmHost and FakeGuestControl, answering through a recording responder. What a
// command in a VM printed comes back byte for byte — JSON text when it is UTF-8,
// stdout_base64 / stderr_base64 when it is not — with the status of its outcome.
#include "bridge/exec_handler.h"
#include "keys/base64.h"
#include "keys/token.h"
#include "lobby/commands/command_runner.h"
#include "tests/unit/recording_responder.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

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

}  // namespace
}  // namespace warren::vmtest
