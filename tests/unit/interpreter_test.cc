// The interpreter itself: dispatch, parsing, rendering, exit statuses, the session's
// properties and outcome (read-only, help, the result as data), credentials re-checked on
// every command, API token authentication, concurrency and the audit line — with the
// built-in commands and fixture commands against a real LmdbStore in a temp dir.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lobby/base/error_map.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "tests/unit/lobby_test_fixture.h"

namespace warren::lobbytest {
namespace {

using nlohmann::json;

class InterpreterTest : public LobbyTest {};

TEST_F(InterpreterTest, EmptyArgvIsInvalid) {
  Outcome o = Exec(As(kAliceKey), {});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kInvalidArgument));
  EXPECT_NE(o.err.find("error: no command given"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, UnknownCommandIsNotFoundWithHint) {
  Outcome o = Exec(As(kAliceKey), {"frobnicate"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kNotFound));
  EXPECT_EQ(o.err, "error: unknown command \"frobnicate\"; try \"help\"\n");
  EXPECT_EQ(o.out, "");
}

TEST_F(InterpreterTest, UnknownCommandSuggestsACloseName) {
  Outcome o = Exec(As(kAliceKey), {"whomai"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_NE(o.err.find("did you mean \"whoami\""), std::string::npos) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "lst"});
  EXPECT_NE(o.err.find("unknown command \"ssh-key lst\""), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("did you mean \"ssh-key list\""), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("try \"help ssh-key\""), std::string::npos) << o.err;
  // Hidden commands are not suggested to those who cannot run them.
  o = Exec(As(kAliceKey), {"user", "lss"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(o.err.find("did you mean"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, UnknownFlagIsInvalidArgument) {
  Outcome o = Exec(As(kAliceKey), {"whoami", "--frob"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(o.exit_status, 2);
  EXPECT_NE(o.err.find("--frob"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(see \"help whoami\")"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, ExtraPositionalsAreInvalid) {
  for (std::vector<std::string> argv : {std::vector<std::string>{"whoami", "extra"},
                                        {"ssh-key", "list", "x"},
                                        {"ssh-key", "remove", "a", "b"},
                                        {"ssh-key", "rename", "a", "b", "c"}}) {
    Outcome o = Exec(As(kAliceKey), argv);
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << argv[0] << " " << o.err;
  }
}

TEST_F(InterpreterTest, MissingRequiredArgumentIsInvalid) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "remove"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("KEY"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, JsonErrorShape) {
  Outcome o = Exec(As(kAliceKey), {"frob", "--json"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(o.err, "");
  json j = o.Json();
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 1u);
  EXPECT_NE(j["error"].get<std::string>().find("unknown command"), std::string::npos);

  // Even a parse failure answers in JSON when --json was asked for.
  o = Exec(As(kAliceKey), {"whoami", "--json", "--bogus"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(o.Json().contains("error"));

  o = Exec(As(kAliceKey), {"user", "ls", "--json"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kPermissionDenied));
  EXPECT_TRUE(o.Json().contains("error"));
}

TEST_F(InterpreterTest, ExitStatusesComeFromTheErrorMap) {
  Caller alice = As(kAliceKey);
  struct Case {
    std::vector<std::string> argv;
    Code code;
  };
  std::vector<Case> cases = {
      {{"whoami"}, Code::kOk},
      {{"whoami", "--nope"}, Code::kInvalidArgument},
      {{"user", "ls"}, Code::kPermissionDenied},
      {{"nope"}, Code::kNotFound},
      {{"ssh-key", "remove", "laptop"}, Code::kConflict},
  };
  for (const Case& c : cases) {
    Outcome o = Exec(alice, c.argv);
    EXPECT_EQ(o.status.code(), c.code) << c.argv[0] << ": " << o.err;
    EXPECT_EQ(o.exit_status, ExitStatusFor(c.code)) << c.argv[0];
  }
  Outcome big = Line(alice, std::string(1 << 20, 'a'));
  EXPECT_EQ(big.status.code(), Code::kTooLarge);
  EXPECT_EQ(big.exit_status, ExitStatusFor(Code::kTooLarge));
}

TEST_F(InterpreterTest, ExecuteLineTokenizes) {
  Caller alice = As(kAliceKey);
  Outcome o = Line(alice, "ssh-key rename laptop 'work laptop'");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("key name \"work laptop\" is not valid"), std::string::npos) << o.err;
  o = Line(alice, "ssh-key rename \"laptop\" work-laptop");
  EXPECT_TRUE(o.status.ok()) << o.err;
  o = Line(alice, "whoami 'unterminated");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("unterminated single quote"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, MegabyteLineIsTooLarge) {
  Outcome o = Line(As(kAliceKey), "ssh-key add " + std::string(1 << 20, 'A'));
  EXPECT_EQ(o.status.code(), Code::kTooLarge);
  EXPECT_EQ(o.exit_status, 8);
  EXPECT_LT(o.err.size(), 200u);
}

TEST_F(InterpreterTest, HandlerExceptionBecomesInternal) {
  store_->throw_on_list_keys = true;
  Outcome o = Exec(As(kAliceKey), {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kInternal);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kInternal));
  EXPECT_NE(o.err.find("internal error"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("injected"), std::string::npos) << "internals leak: " << o.err;
}

TEST_F(InterpreterTest, StoreErrorsKeepTheirCode) {
  store_->unavailable_on_list_keys = true;
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "list"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kUnavailable));
}

TEST_F(InterpreterTest, CancelledSessionDoesNotRun) {
  StringInput in("");
  StringSink out, err;
  CommandSession s;
  s.caller = As(kAliceKey);
  s.in = &in;
  s.out = &out;
  s.err = &err;
  s.argv = {"whoami"};
  s.cancel->Cancel();
  interpreter_->Execute(s);
  EXPECT_EQ(s.status.code(), Code::kCancelled);
  EXPECT_EQ(out.str(), "");
}

TEST_F(InterpreterTest, NullStreamsAreTolerated) {
  CommandSession s;
  s.caller = As(kAliceKey);
  s.argv = {"ssh-key", "add"};  // reads stdin: there is none, so no key
  interpreter_->Execute(s);
  EXPECT_EQ(s.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.in, nullptr);
}

TEST_F(InterpreterTest, CallerForKeyChecksAndTouches) {
  Result<Caller> unknown = CallerForKey(*store_, clock_, Fingerprint(kSpareKey3), "ssh");
  EXPECT_EQ(unknown.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(unknown.status().message(), "unknown key");

  clock_.now = kStart + 50;
  Caller root = As(kRootKey, "repl");
  EXPECT_EQ(root.user, "root");
  EXPECT_TRUE(root.admin);
  EXPECT_EQ(root.credential, "key:" + Fingerprint(kRootKey));
  EXPECT_EQ(root.key_fingerprint, Fingerprint(kRootKey));
  EXPECT_EQ(root.surface, "repl");
  EXPECT_TRUE(root.scope.Unrestricted());
  EXPECT_EQ(store_->GetKey(Fingerprint(kRootKey))->last_used_at, kStart + 50);
}

TEST_F(InterpreterTest, AdminOnlyCommandsAreRefused) {
  for (std::vector<std::string> argv : {std::vector<std::string>{"user", "ls"},
                                        {"user", "add", "bob", "--key", kSpareKey3},
                                        {"user", "rm", "root"}}) {
    Outcome o = Exec(As(kAliceKey), argv);
    EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;
    EXPECT_NE(o.err.find("admins only"), std::string::npos) << o.err;
  }
  EXPECT_FALSE(store_->GetUser("bob").ok());
}

TEST_F(InterpreterTest, ExpiredKeyIsRefused) {
  Caller shortlived = AliceKeyWith(kSpareKey1, {"--exp", "1h"});
  EXPECT_TRUE(Exec(shortlived, {"whoami"}).status.ok());
  clock_.now = kStart + 2 * kHour;
  // An open session notices on its next command...
  Outcome o = Exec(shortlived, {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kUnauthenticated));
  EXPECT_NE(o.err.find("expired"), std::string::npos) << o.err;
  // ...and a new one is refused at authentication.
  Result<Caller> again = CallerForKey(*store_, clock_, Fingerprint(kSpareKey1), "ssh");
  EXPECT_EQ(again.status().code(), Code::kUnauthenticated);
  // help is no way around expiry.
  EXPECT_EQ(Exec(shortlived, {"help"}).status.code(), Code::kUnauthenticated);
}

TEST_F(InterpreterTest, RemovedKeyIsRefusedOnTheNextCommand) {
  Caller laptop = As(kAliceKey);
  Caller desktop = AliceKeyWith(kSpareKey1, {"--name", "desktop"});
  ASSERT_TRUE(Exec(desktop, {"whoami"}).status.ok());
  Outcome rm = Exec(laptop, {"ssh-key", "remove", "desktop"});
  ASSERT_TRUE(rm.status.ok()) << rm.err;
  Outcome o = Exec(desktop, {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated);
  EXPECT_NE(o.err.find("removed"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, RemovedUserIsRefusedOnTheNextCommand) {
  ASSERT_TRUE(Exec(As(kRootKey), {"user", "add", "bob", "--key", kSpareKey3}).status.ok());
  Caller bob = As(kSpareKey3);
  ASSERT_TRUE(Exec(bob, {"whoami"}).status.ok());
  ASSERT_TRUE(Exec(As(kRootKey), {"user", "rm", "bob"}).status.ok());
  EXPECT_EQ(Exec(bob, {"whoami"}).status.code(), Code::kUnauthenticated);
}

TEST_F(InterpreterTest, CmdsRestrictedCallerRunsOnlyItsCommands) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--cmds", "whoami,ssh-key add"});
  EXPECT_TRUE(Exec(agent, {"whoami"}).status.ok());
  Outcome o = Exec(agent, {"ssh-key", "list"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("whoami, ssh-key add"), std::string::npos) << o.err;
  EXPECT_EQ(Exec(agent, {"ssh-key", "remove", "laptop"}).status.code(), Code::kPermissionDenied);
  // help always runs, and lists only what the key may do.
  Outcome help = Exec(agent, {"help"});
  ASSERT_TRUE(help.status.ok()) << help.err;
  EXPECT_NE(help.out.find("may run only: whoami, ssh-key add"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("ssh-key list"), std::string::npos) << help.out;
  json j = Exec(agent, {"help", "--json"}).Json();
  std::vector<std::string> paths;
  for (const json& c : j["commands"]) paths.push_back(c["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"help", "whoami", "ssh-key add"}));
}

TEST_F(InterpreterTest, ConcurrentSessionsShareOneInterpreter) {
  Caller alice = As(kAliceKey);
  Caller root = As(kRootKey);
  std::atomic<int> failures{0};
  testing::internal::CaptureStderr();  // 400 audit lines
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        Outcome o = t % 2 ? Exec(alice, {"whoami", "--json"}) : Exec(root, {"help", "--json"});
        if (!o.status.ok() || !json::accept(o.out)) ++failures;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(failures.load(), 0);
}

// Stands in for `ssh VM CMD`: output, then the remote command's exit status.
class ExitCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    ctx.audit_vm = "web-1";
    if (!ctx.json) ctx.session.out->Write("progress: starting\n");
    CommandResult r;
    r.text = "remote output";
    r.data = {{"stdout", "remote output"}, {"exit_code", 3}};
    r.exit_status = 3;
    return r;
  }
};

class ThrowCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext&) override { throw std::logic_error("boom"); }
};

class FixtureTest : public InterpreterTest {
 protected:
  void SetUp() override {
    InterpreterTest::SetUp();
    auto table = std::make_unique<CommandTable>();
    RegisterBuiltinCommands(*table);
    table->Add({.path = "fixture exit", .summary = "exits 3", .make = [] {
                  return std::make_unique<ExitCommand>();
                }});
    table->Add({.path = "fixture throw", .summary = "throws", .make = [] {
                  return std::make_unique<ThrowCommand>();
                }});
    Services services;
    services.store = store_.get();
    services.clock = &clock_;
    interpreter_ = std::make_unique<Interpreter>(services, std::move(table));
  }
};

TEST_F(FixtureTest, CommandFailedCarriesItsOwnExitStatusAndOutput) {
  testing::internal::CaptureStderr();
  Outcome o = Exec(As(kAliceKey), {"fixture", "exit"});
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_EQ(o.exit_status, 3);
  EXPECT_EQ(o.out, "progress: starting\nremote output\n");
  EXPECT_EQ(o.err, "");
  EXPECT_NE(log.find("audit cmd=\"fixture exit\" vm=web-1 "), std::string::npos) << log;
  EXPECT_NE(log.find("code=command_failed"), std::string::npos) << log;

  o = Exec(As(kAliceKey), {"fixture", "exit", "--json"});
  EXPECT_EQ(o.exit_status, 3);
  EXPECT_EQ(o.Json()["exit_code"], 3);
}

TEST_F(FixtureTest, ThrowingHandlerBecomesInternal) {
  Outcome o = Exec(As(kAliceKey), {"fixture", "throw", "--json"});
  EXPECT_EQ(o.status.code(), Code::kInternal);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kInternal));
  EXPECT_TRUE(o.Json().contains("error"));
  EXPECT_EQ(o.out.find("boom"), std::string::npos) << o.out;
}

TEST_F(InterpreterTest, AuditLineNamesTheCommandButNeverTheKey) {
  Caller alice = As(kAliceKey, "mcp");
  testing::internal::CaptureStderr();
  Outcome o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "desk"});
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(log.find("audit cmd=\"ssh-key add\" caller=key:" + Fingerprint(kAliceKey) +
                     " user=alice surface=mcp code=ok dur_ms="),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(Blob(kSpareKey1)), std::string::npos) << log;
  EXPECT_EQ(log.find("desk"), std::string::npos) << "argv leaked: " << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;

  testing::internal::CaptureStderr();
  Exec(alice, {"user", "add", "bob", "--key", kSpareKey3});
  Line(alice, std::string("wr1.secret-token-pasted-as-a-command"));
  log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("audit cmd=\"user add\""), std::string::npos) << log;
  EXPECT_NE(log.find("code=permission_denied"), std::string::npos) << log;
  EXPECT_NE(log.find("audit cmd=- "), std::string::npos) << log;
  EXPECT_NE(log.find("code=not_found"), std::string::npos) << log;
  EXPECT_EQ(log.find(Blob(kSpareKey3)), std::string::npos) << log;
  EXPECT_EQ(log.find("secret-token"), std::string::npos) << log;
}

TEST_F(InterpreterTest, TokenExpiryTakesEffectAtOnce) {
  std::string token = MintToken(As(kAliceKey), {"--label", "short", "--exp", "1h"});
  Caller caller = ForToken(token);
  ASSERT_TRUE(Exec(caller, {"whoami"}).status.ok());
  clock_.now += kHour;
  Outcome o = Exec(caller, {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated);
  EXPECT_NE(o.err.find("this token expired"), std::string::npos) << o.err;
  auto fresh = interpreter_->CallerForToken(token, "exec");
  ASSERT_FALSE(fresh.ok());
  EXPECT_NE(fresh.status().message().find("expired"), std::string::npos);
}

TEST_F(InterpreterTest, TokenOfARemovedUserIsRefused) {
  std::string token = MintToken(As(kAliceKey), {"--label", "ci"});
  Caller caller = ForToken(token);
  ASSERT_TRUE(Exec(As(kRootKey), {"user", "rm", "alice"}).status.ok());
  EXPECT_EQ(Exec(caller, {"whoami"}).status.code(), Code::kUnauthenticated);
  EXPECT_FALSE(interpreter_->CallerForToken(token, "exec").ok());
}

TEST_F(InterpreterTest, ForgedAndMalformedTokensAreUnauthenticated) {
  std::string token = MintToken(As(kAliceKey), {"--label", "ci"});
  TokenSigner other = TokenSigner::FromSecret(std::string(32, 'o')).value();
  TokenClaims claims = signer_.Verify(token).value();
  claims.user = "root";  // alice's label, root's name: signed by the server, still refused
  for (const std::string& bad :
       {std::string(""), std::string("wr1."), token.substr(0, token.size() - 1),
        other.Sign(signer_.Verify(token).value()).value(), signer_.Sign(claims).value()}) {
    auto r = interpreter_->CallerForToken(bad, "exec");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  }
}

TEST_F(InterpreterTest, SessionJsonAndTheCommandObserver) {
  StringSink out, err;
  CommandSession s = Session(As(kAliceKey, "exec"), out, err);
  s.json = true;  // as /exec does: JSON without --json in argv
  interpreter_->ExecuteLine(s, "whoami");
  ASSERT_TRUE(s.status.ok()) << err.str();
  EXPECT_EQ(json::parse(out.str())["user"], "alice");
  StringSink out2;
  s.out = &out2;
  interpreter_->ExecuteLine(s, "nope");
  EXPECT_EQ(json::parse(out2.str())["error"].get<std::string>().rfind("unknown command", 0), 0u);
  std::lock_guard lock(events_mu_);
  ASSERT_GE(events_.size(), 2u);
  EXPECT_EQ(events_[events_.size() - 2], "whoami/exec/ok");
  EXPECT_EQ(events_.back(), "-/exec/not_found");
}

TEST_F(InterpreterTest, SessionKeepsTheResultAsDataAndWhetherItWasHelp) {
  StringSink out, err;
  CommandSession s = Session(As(kAliceKey, "mcp"), out, err);
  s.json = true;  // as MCP does; it then reads the result from the session
  interpreter_->ExecuteLine(s, "whoami");
  ASSERT_TRUE(s.status.ok()) << err.str();
  ASSERT_TRUE(s.result.has_value());
  EXPECT_EQ(s.result->data["user"], "alice");
  EXPECT_FALSE(s.help);
  // Help, asked in words or with --help, is text for people even when JSON is wanted...
  for (const char* line : {"help", "help whoami", "whoami --help", "ssh-key", "ssh-key -h"}) {
    interpreter_->ExecuteLine(s, line);
    ASSERT_TRUE(s.status.ok()) << line;
    EXPECT_TRUE(s.help) << line;
    ASSERT_TRUE(s.result.has_value()) << line;
    EXPECT_FALSE(s.result->text.empty()) << line;
  }
  // ...unless the line itself says --json.
  interpreter_->ExecuteLine(s, "help --json");
  EXPECT_FALSE(s.help);
  EXPECT_TRUE(s.result->data.contains("commands"));
  // A failure leaves no result, only the status.
  interpreter_->ExecuteLine(s, "nope");
  EXPECT_EQ(s.status.code(), Code::kNotFound);
  EXPECT_FALSE(s.result.has_value());
  EXPECT_FALSE(s.help);
}

TEST_F(InterpreterTest, ReadOnlySessionRunsOnlyReadOnlyCommandsAndHelp) {
  StringSink out, err;
  CommandSession s = Session(As(kAliceKey, "mcp"), out, err);
  s.read_only = true;
  interpreter_->ExecuteLine(s, "whoami");
  EXPECT_TRUE(s.status.ok()) << err.str();
  interpreter_->ExecuteLine(s, "ssh-key add '" + std::string(kSpareKey1) + "'");
  EXPECT_EQ(s.status.code(), Code::kPermissionDenied);
  // The refusal names the command and what may run instead, from the table.
  EXPECT_NE(s.status.message().find("\"ssh-key add\""), std::string::npos) << s.status.message();
  EXPECT_NE(s.status.message().find("runs only commands that change nothing"), std::string::npos);
  EXPECT_NE(s.status.message().find("whoami"), std::string::npos);
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey1)).ok());
  // Help for a command that changes things is still help.
  interpreter_->ExecuteLine(s, "ssh-key add --help");
  EXPECT_TRUE(s.status.ok());
  EXPECT_TRUE(s.help);
}

TEST_F(InterpreterTest, NoSignerMeansNoTokens) {
  Services services;
  services.store = store_.get();
  services.clock = &clock_;
  Interpreter bare(services);
  EXPECT_EQ(bare.CallerForToken("wr1.a.b", "exec").status().code(), Code::kUnauthenticated);
  StringSink out, err;
  CommandSession s;
  s.caller = As(kAliceKey);
  s.out = &out;
  s.err = &err;
  bare.ExecuteLine(s, "ssh-key generate-api-key --label x");
  EXPECT_EQ(s.status.code(), Code::kUnavailable);
}

}  // namespace
}  // namespace warren::lobbytest
