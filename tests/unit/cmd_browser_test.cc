// browser [--revoke]: the one-time sign-in link (its URL, expiry, the caller's limits kept),
// no link without a web listener, and --revoke counting the sessions it ended.
#include <gtest/gtest.h>

#include <string>

#include "lobby/commands/web_access.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

constexpr std::string_view kLoginPrefix = "http://warren.localhost:8081/__warren/login?token=";

class BrowserCommandTest : public VmCommandTest {
 protected:
  // The token of a fresh magic link for `caller`.
  std::string MagicToken(const Caller& caller) {
    Outcome o = Exec(caller, {"browser", "--json"});
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    std::string url = o.Json()["url"];
    EXPECT_TRUE(url.starts_with(kLoginPrefix)) << url;
    return url.substr(kLoginPrefix.size());
  }
};

TEST_F(BrowserCommandTest, PrintsAOneTimeLinkWithItsExpiry) {
  Outcome o = Exec(Alice(), {"browser", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  nlohmann::json j = o.Json();
  const std::string url = j["url"];
  ASSERT_TRUE(url.starts_with(kLoginPrefix)) << url;
  EXPECT_GE(url.size() - kLoginPrefix.size(), 43u);
  EXPECT_EQ(j["expires_at"], kStart + kMagicLinkSeconds);
  EXPECT_EQ(j["user"], "alice");

  o = Exec(Alice(), {"browser"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, std::string(kLoginPrefix))) << o.out;
  EXPECT_TRUE(Has(o.out, "within 5 minutes")) << o.out;
  EXPECT_TRUE(Has(o.out, "browser --revoke")) << o.out;
}

TEST_F(BrowserCommandTest, TheLinkSignsInOnceAsTheCaller) {
  WebAccess web(*interpreter_);
  const std::string token = MagicToken(Alice());
  Result<std::string> cookie = web.RedeemMagicLink(token);
  ASSERT_TRUE(cookie.ok()) << cookie.status().ToString();
  Result<WebVisitor> who = web.SessionVisitor(*cookie, "warren.localhost");
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->who, "user:alice");
  EXPECT_EQ(web.RedeemMagicLink(token).status().code(), Code::kUnauthenticated);
}

TEST_F(BrowserCommandTest, NoWebListenerNoLink) {
  interpreter_->services().info.web_port = 0;
  Outcome o = Exec(Alice(), {"browser"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_TRUE(Has(o.err, "no web listener")) << o.err;
  // Signing out still works.
  EXPECT_TRUE(Exec(Alice(), {"browser", "--revoke"}).status.ok());
}

TEST_F(BrowserCommandTest, RevokeEndsEverySessionOfTheUser) {
  WebAccess web(*interpreter_);
  std::vector<std::string> cookies;
  for (int i = 0; i < 3; ++i) {
    Result<std::string> c = web.RedeemMagicLink(MagicToken(i == 0 ? AliceCi() : Alice()));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cookies.push_back(*c);
  }
  Result<std::string> bobs = web.RedeemMagicLink(MagicToken(Bob()));
  ASSERT_TRUE(bobs.ok());
  const std::string pending = MagicToken(Alice());

  Outcome o = Exec(Alice(), {"browser", "--revoke", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["revoked"], 3);
  for (const std::string& c : cookies) {
    EXPECT_EQ(web.SessionVisitor(c, "warren.localhost").status().code(), Code::kUnauthenticated);
  }
  EXPECT_EQ(web.RedeemMagicLink(pending).status().code(), Code::kUnauthenticated);
  EXPECT_TRUE(web.SessionVisitor(*bobs, "warren.localhost").ok());

  o = Exec(Alice(), {"browser", "--revoke"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_TRUE(Has(o.out, "ended 0 browser sessions")) << o.out;
}

TEST_F(BrowserCommandTest, LinksPerUserAreBounded) {
  for (size_t i = 0; i < kMaxMagicLinksPerUser; ++i) {
    ASSERT_TRUE(Exec(Alice(), {"browser"}).status.ok());
  }
  Outcome o = Exec(Alice(), {"browser"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  clock_.now += kMagicLinkSeconds;  // they expire and are pruned
  EXPECT_TRUE(Exec(Alice(), {"browser"}).status.ok());
}

TEST_F(BrowserCommandTest, NeedsBrowserInCmds) {
  Scope scope;
  scope.cmds = {"ls"};
  ASSERT_TRUE(
      store_
          ->AddKey(KeyRecord(
              "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 l",
              "alice", "ls-only", scope))
          .ok());
  Caller ls_only =
      As("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 l");
  EXPECT_EQ(Exec(ls_only, {"browser"}).status.code(), Code::kPermissionDenied);
}

}  // namespace
}  // namespace warren::vmtest
