// authorize CODE (lobby/commands/cmd_authorize.cc) through Interpreter::Execute, against the
// real LmdbStore as the OAuth store: approving and denying a pending sign-in, codes that
// expired, are unknown or were used, limits that may only narrow the caller's own, flags
// checked before a code is spent, and the limit on wrong guesses.
#include <gtest/gtest.h>

#include "keys/oauth.h"
#include "tests/unit/lobby_test_fixture.h"

namespace warren::lobbytest {
namespace {

using nlohmann::json;

constexpr const char* kCode = "KQ7MX2PD";  // what the sign-in page shows, as "KQ7M-X2PD"

class AuthorizeCommandTest : public LobbyTest {
 protected:
  void SetUp() override {
    LobbyTest::SetUp();
    Services services = interpreter_->services();
    services.oauth = real_store_.get();
    interpreter_ = std::make_unique<Interpreter>(services);
    OAuthClient client{"wc-1", "Claude Code", {"http://127.0.0.1:9/cb"}, kStart, ""};
    ASSERT_TRUE(real_store_->CreateOAuthClient(client).ok());
  }

  // A pending sign-in waiting for `code`, as the sign-in page makes it; returns its id.
  std::string Pending(const std::string& code, const std::string& page = "page-secret") {
    OAuthRequest r;
    r.id = HashSecret(page);
    r.user_code_hash = HashSecret(code);
    r.client_id = "wc-1";
    r.redirect_uri = "http://127.0.0.1:9/cb";
    r.code_challenge = std::string(43, 'c');
    r.resource = "https://warren.test/mcp";
    r.created_at = clock_.now;
    r.expires_at = clock_.now + kOAuthRequestSeconds;
    EXPECT_TRUE(real_store_->CreateOAuthRequest(r, clock_.now).ok());
    return r.id;
  }

  OAuthRequest Request(const std::string& id) { return real_store_->GetOAuthRequest(id).value(); }
};

TEST_F(AuthorizeCommandTest, ApprovesAsTheCallerWithItsOwnLimits) {
  const std::string id = Pending(kCode);
  // Typed as the page shows it, or in lowercase: the same code.
  Outcome o = Exec(As(kAliceKey), {"authorize", "kq7m-x2pd"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("approved the sign-in of \"Claude Code\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("redirect to: http://127.0.0.1:9/cb"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("https://warren.test/mcp as alice"), std::string::npos) << o.out;
  OAuthRequest r = Request(id);
  EXPECT_EQ(r.phase, OAuthPhase::kApproved);
  EXPECT_EQ(r.user, "alice");
  EXPECT_TRUE(r.scope.Unrestricted());
  EXPECT_EQ(r.approved_at, kStart);
}

TEST_F(AuthorizeCommandTest, JsonSaysWhatWasApproved) {
  Pending(kCode);
  Outcome o = Exec(As(kAliceKey), {"authorize", kCode, "--cmds", "ls,whoami", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  EXPECT_EQ(j["approved"], true);
  EXPECT_EQ(j["client"]["name"], "Claude Code");
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["resource"], "https://warren.test/mcp");
  EXPECT_EQ(j["restrictions"]["cmds"], json::array({"ls", "whoami"}));
}

TEST_F(AuthorizeCommandTest, DenyRefusesTheSignIn) {
  const std::string id = Pending(kCode);
  Outcome o = Exec(As(kAliceKey), {"authorize", kCode, "--deny"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "denied the sign-in of \"Claude Code\" (redirect to 127.0.0.1:9)\n");
  EXPECT_EQ(Request(id).phase, OAuthPhase::kDenied);
  // Denied is final: the code is used.
  EXPECT_EQ(Exec(As(kAliceKey), {"authorize", kCode}).status.code(), Code::kConflict);
  EXPECT_EQ(Request(id).phase, OAuthPhase::kDenied);
}

TEST_F(AuthorizeCommandTest, ACodeWorksOnce) {
  const std::string id = Pending(kCode);
  ASSERT_TRUE(Exec(As(kAliceKey), {"authorize", kCode}).status.ok());
  Outcome again = Exec(As(kRootKey), {"authorize", kCode});
  EXPECT_EQ(again.status.code(), Code::kConflict);
  EXPECT_NE(again.err.find("already used"), std::string::npos) << again.err;
  EXPECT_EQ(Request(id).user, "alice");
}

TEST_F(AuthorizeCommandTest, AnExpiredCodeIsRefused) {
  const std::string id = Pending(kCode);
  clock_.now += kOAuthRequestSeconds;
  Outcome o = Exec(As(kAliceKey), {"authorize", kCode});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_NE(o.err.find("expire"), std::string::npos) << o.err;
  EXPECT_EQ(Request(id).phase, OAuthPhase::kPending);
  EXPECT_TRUE(Request(id).user.empty());
}

TEST_F(AuthorizeCommandTest, UnknownAndMalformedCodes) {
  Pending(kCode);
  Outcome o = Exec(As(kAliceKey), {"authorize", "ABCD-EFGH"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_NE(o.err.find("no sign-in is waiting for code ABCD-EFGH"), std::string::npos) << o.err;
  o = Exec(As(kAliceKey), {"authorize", "not a code!"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << o.err;
}

TEST_F(AuthorizeCommandTest, LimitsOnlyNarrowTheCallersOwn) {
  Caller agents = AliceKeyWith(kSpareKey1, {"--tag", "agents"});
  const std::string id = Pending(kCode);
  // Another tag, or no tag at all, would be wider than "agents".
  Outcome o = Exec(agents, {"authorize", kCode, "--tag", "other"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("narrower limits than its own"), std::string::npos) << o.err;
  EXPECT_EQ(Request(id).phase, OAuthPhase::kPending);
  // Leaving --tag out inherits it; narrowing further by --cmds is fine.
  o = Exec(agents, {"authorize", kCode, "--cmds", "ls"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  OAuthRequest r = Request(id);
  EXPECT_EQ(r.scope.tag, "agents");
  EXPECT_EQ(r.scope.cmds, std::vector<std::string>{"ls"});
}

TEST_F(AuthorizeCommandTest, ABadFlagDoesNotSpendTheCode) {
  const std::string id = Pending(kCode);
  EXPECT_EQ(Exec(As(kAliceKey), {"authorize", kCode, "--cmds", "frobnicate"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(As(kAliceKey), {"authorize", kCode, "--exp", "soon"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Request(id).phase, OAuthPhase::kPending);
  Outcome o = Exec(As(kAliceKey), {"authorize", kCode, "--exp", "1d"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(Request(id).scope.expires_at, kStart + 24 * kHour);
}

TEST_F(AuthorizeCommandTest, WrongGuessesAreLimitedPerUser) {
  // A user of its own: the limit is per user and lives as long as the process.
  ASSERT_TRUE(
      real_store_->CreateUser({"guesser", false, kStart}, {KeyRecord(kSpareKey2, "guesser", "ci")})
          .ok());
  Caller guesser = As(kSpareKey2);
  Pending(kCode);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Exec(guesser, {"authorize", "ABCD-EFGH"}).status.code(), Code::kNotFound) << i;
  }
  // Past the limit even the right code waits: guessing gains nothing.
  Outcome o = Exec(guesser, {"authorize", kCode});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded);
  EXPECT_NE(o.err.find("wait a minute"), std::string::npos) << o.err;
  // Others are not held up, and a minute later the guesser may try again.
  EXPECT_EQ(Exec(As(kAliceKey), {"authorize", "ABCD-EFGH"}).status.code(), Code::kNotFound);
  clock_.now += 60;
  EXPECT_TRUE(Exec(guesser, {"authorize", kCode}).status.ok());
}

TEST_F(AuthorizeCommandTest, WithoutAnOAuthStoreItIsUnavailable) {
  Services services = interpreter_->services();
  services.oauth = nullptr;
  interpreter_ = std::make_unique<Interpreter>(services);
  EXPECT_EQ(Exec(As(kAliceKey), {"authorize", kCode}).status.code(), Code::kUnavailable);
}

}  // namespace
}  // namespace warren::lobbytest
