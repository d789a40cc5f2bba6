// share show|port|set-public|set-private|add|remove|add-link|remove-link: validation, the
// JSON shapes, the permissions (owner, tag scope, --cmds on full paths, read-only flags),
// URLs with and without a web listener, and what rm, rename, cp and user rm do to shares.
#include <gtest/gtest.h>

#include <string>

#include "keys/oauth.h"
#include "lobby/commands/command_table.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

inline constexpr const char* kLimitedKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 limited";

class ShareCommandTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    New(Alice(), {"--name", "web-one"});
  }

  nlohmann::json Show(const std::string& vm = "web-one") {
    Outcome o = Exec(Alice(), {"share", "show", vm, "--json"});
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    return o.Json();
  }

  // A key of alice's limited to `cmds`.
  Caller AliceLimitedTo(std::vector<std::string> cmds) {
    Scope scope;
    scope.cmds = std::move(cmds);
    EXPECT_TRUE(store_->AddKey(KeyRecord(kLimitedKey, "alice", "limited", scope)).ok());
    return As(kLimitedKey);
  }
};

TEST_F(ShareCommandTest, ShowIsPrivateOnPort8000AtFirst) {
  nlohmann::json j = Show();
  EXPECT_EQ(j["name"], "web-one");
  EXPECT_EQ(j["status"], "private");
  EXPECT_EQ(j["public"], false);
  EXPECT_EQ(j["port"], 8000);
  EXPECT_EQ(j["url"], "http://web-one.warren.localhost:8081/");
  EXPECT_EQ(j["users"], nlohmann::json::array());
  EXPECT_EQ(j["links"], nlohmann::json::array());

  Outcome o = Exec(Alice(), {"share", "show", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "web-one is private")) << o.out;
  EXPECT_TRUE(Has(o.out, "url:   http://web-one.warren.localhost:8081/")) << o.out;
  EXPECT_TRUE(Has(o.out, "port:  8000")) << o.out;
  EXPECT_TRUE(Has(o.out, "users: (none)")) << o.out;
}

TEST_F(ShareCommandTest, PortIsChecked) {
  for (const char* bad : {"80", "2999", "10000", "abc", "3000x", "", "-1"}) {
    Outcome o = Exec(Alice(), {"share", "port", "web-one", bad});
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << bad << ": " << o.err;
  }
  Outcome o = Exec(Alice(), {"share", "port", "web-one", "3000", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["port"], 3000);
  EXPECT_EQ(o.Json()["url"], "http://web-one.warren.localhost:8081/");
  EXPECT_TRUE(Exec(Alice(), {"share", "port", "web-one", "9999"}).status.ok());
  EXPECT_EQ(Show()["port"], 9999);
  EXPECT_EQ(Exec(Alice(), {"share", "port", "web-one"}).status.code(), Code::kInvalidArgument);
}

TEST_F(ShareCommandTest, PublicAndPrivate) {
  Outcome o = Exec(Alice(), {"share", "set-public", "web-one", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["status"], "public");
  EXPECT_EQ(Show()["status"], "public");
  EXPECT_EQ(Show()["public"], true);
  o = Exec(Alice(), {"share", "set-private", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "web-one is private")) << o.out;
  EXPECT_EQ(Show()["status"], "private");
}

TEST_F(ShareCommandTest, AddAndRemoveUsers) {
  Outcome o = Exec(Alice(), {"share", "add", "web-one", "nobody"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "no user named \"nobody\"")) << o.err;
  EXPECT_TRUE(Has(o.err, "share add-link web-one")) << o.err;
  EXPECT_EQ(Exec(Alice(), {"share", "add", "web-one", "Not A Name"}).status.code(),
            Code::kNotFound);
  EXPECT_EQ(Exec(Alice(), {"share", "add", "web-one", "alice"}).status.code(),
            Code::kInvalidArgument);

  o = Exec(Alice(), {"share", "add", "web-one", "root", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  o = Exec(Alice(), {"share", "add", "web-one", "bob", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["users"], (nlohmann::json{"bob", "root"}));
  EXPECT_EQ(o.Json()["added"], true);
  o = Exec(Alice(), {"share", "add", "web-one", "bob", "--json"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.Json()["added"], false);
  EXPECT_EQ(Show()["users"], (nlohmann::json{"bob", "root"}));

  o = Exec(Alice(), {"share", "remove", "web-one", "bob"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(Show()["users"], (nlohmann::json{"root"}));
  o = Exec(Alice(), {"share", "remove", "web-one", "bob"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "not shared with \"bob\"")) << o.err;
}

TEST_F(ShareCommandTest, LinksShowTheirTokenOnce) {
  Outcome o = Exec(Alice(), {"share", "add-link", "web-one", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  nlohmann::json link = o.Json();
  const std::string token = link["token"];
  const std::string id = link["id"];
  EXPECT_GE(token.size(), 43u);  // 256 random bits, base64url
  EXPECT_EQ(id.size(), 8u);
  EXPECT_EQ(link["url"], "http://web-one.warren.localhost:8081/?share=" + token);
  EXPECT_EQ(link["created_by"], "alice");
  EXPECT_EQ(link["use_count"], 0);
  // Only its hash is kept.
  Result<ShareLinkMatch> m = store_->FindShareLink(HashSecret(token));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->link.id, id);

  o = Exec(Alice(), {"share", "add-link", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "?share=")) << o.out;

  nlohmann::json shown = Show();
  ASSERT_EQ(shown["links"].size(), 2u);
  EXPECT_EQ(shown["links"][0]["id"], id);
  EXPECT_FALSE(Has(shown.dump(), token));
  EXPECT_FALSE(shown["links"][0].contains("token"));
  Outcome text = Exec(Alice(), {"share", "show", "web-one"});
  EXPECT_TRUE(Has(text.out, id)) << text.out;
  EXPECT_FALSE(Has(text.out, token));

  o = Exec(Alice(), {"share", "remove-link", "web-one", "zzzzzzzz"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "no share link \"zzzzzzzz\"")) << o.err;
  o = Exec(Alice(), {"share", "remove-link", "web-one", id, "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["removed"], id);
  EXPECT_EQ(Show()["links"].size(), 1u);
  EXPECT_EQ(store_->FindShareLink(HashSecret(token)).status().code(), Code::kNotFound);
}

TEST_F(ShareCommandTest, OnlyTheOwnerWithinItsTag) {
  // Bob cannot see alice's VM, so he cannot share it: "no VM named", as for none at all.
  for (std::vector<std::string> argv : {std::vector<std::string>{"share", "show", "web-one"},
                                        {"share", "set-public", "web-one"},
                                        {"share", "add", "web-one", "bob"},
                                        {"share", "add-link", "web-one"}}) {
    Outcome o = Exec(Bob(), argv);
    EXPECT_EQ(o.status.code(), Code::kNotFound) << argv[1];
    EXPECT_TRUE(Has(o.err, "no VM named \"web-one\"")) << o.err;
  }
  EXPECT_EQ(Show()["status"], "private");

  // A key limited to the tag "ci" shares only VMs carrying it.
  EXPECT_EQ(Exec(AliceCi(), {"share", "set-public", "web-one"}).status.code(), Code::kNotFound);
  ASSERT_TRUE(Exec(Alice(), {"tag", "web-one", "ci"}).status.ok());
  EXPECT_TRUE(Exec(AliceCi(), {"share", "set-public", "web-one"}).status.ok());
  EXPECT_EQ(Show()["status"], "public");
}

TEST_F(ShareCommandTest, CmdsLimitsNameFullPaths) {
  Caller limited = AliceLimitedTo({"share show"});
  EXPECT_TRUE(Exec(limited, {"share", "show", "web-one"}).status.ok());
  Outcome o = Exec(limited, {"share", "set-public", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;
  EXPECT_EQ(Show()["status"], "private");
}

TEST_F(ShareCommandTest, TheGroupAllowsEveryShareCommand) {
  Caller limited = AliceLimitedTo({"share"});
  EXPECT_TRUE(Exec(limited, {"share", "set-public", "web-one"}).status.ok());
  EXPECT_EQ(Exec(limited, {"ls"}).status.code(), Code::kPermissionDenied);
}

TEST_F(ShareCommandTest, ReadOnlyFlags) {
  const CommandTable& table = interpreter_->table();
  ASSERT_NE(table.Find("share show"), nullptr);
  EXPECT_TRUE(table.Find("share show")->read_only);
  for (const char* path : {"share port", "share set-public", "share set-private", "share add",
                           "share remove", "share add-link", "share remove-link", "browser"}) {
    ASSERT_NE(table.Find(path), nullptr) << path;
    EXPECT_FALSE(table.Find(path)->read_only) << path;
    EXPECT_EQ(table.Find(path)->target.need,
              std::string(path) == "browser" ? VmNeed::kNone : VmNeed::kExists)
        << path;
  }
}

TEST_F(ShareCommandTest, HelpListsTheGroup) {
  Outcome o = Exec(Alice(), {"help", "share"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  for (const char* word : {"share show", "share port", "share set-public", "share set-private",
                           "share add", "share remove", "share add-link", "share remove-link"}) {
    EXPECT_TRUE(Has(o.out, word)) << word << "\n" << o.out;
  }
  o = Exec(Alice(), {"share", "port", "--help"});
  EXPECT_TRUE(Has(o.out, "3000-9999")) << o.out;
}

TEST_F(ShareCommandTest, NoWebListenerNoUrl) {
  interpreter_->services().info.web_port = 0;
  nlohmann::json j = Show();
  EXPECT_TRUE(j["url"].is_null());
  Outcome o = Exec(Alice(), {"share", "show", "web-one"});
  EXPECT_FALSE(Has(o.out, "url:")) << o.out;
  o = Exec(Alice(), {"share", "add-link", "web-one", "--json"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_TRUE(o.Json()["url"].is_null());
  o = Exec(Alice(), {"stat", "web-one", "--json"});
  EXPECT_TRUE(o.Json()["url"].is_null()) << o.out;
}

TEST_F(ShareCommandTest, UrlsCarryThePortUnlessTheSchemeImpliesIt) {
  ServerInfo& info = interpreter_->services().info;
  info.web_port = 80;
  EXPECT_EQ(Show()["url"], "http://web-one.warren.localhost/");
  info.web_scheme = "https";
  EXPECT_EQ(Show()["url"], "https://web-one.warren.localhost:80/");
  info.web_port = 443;
  EXPECT_EQ(Show()["url"], "https://web-one.warren.localhost/");
  info.web_scheme = "http";
  EXPECT_EQ(Show()["url"], "http://web-one.warren.localhost:443/");
}

TEST_F(ShareCommandTest, RenameKeepsCpDropsRmRemoves) {
  ASSERT_TRUE(Exec(Alice(), {"share", "set-public", "web-one"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"share", "add", "web-one", "bob"}).status.ok());
  Outcome link = Exec(Alice(), {"share", "add-link", "web-one", "--json"});
  const std::string token = link.Json()["token"];

  ASSERT_TRUE(Exec(Alice(), {"rename", "web-one", "web-two"}).status.ok());
  nlohmann::json j = Show("web-two");
  EXPECT_EQ(j["status"], "public");
  EXPECT_EQ(j["users"], (nlohmann::json{"bob"}));
  EXPECT_EQ(j["url"], "http://web-two.warren.localhost:8081/");

  Outcome cp = Exec(Alice(), {"cp", "web-two", "web-three"});
  ASSERT_TRUE(cp.status.ok()) << cp.err;
  j = Show("web-three");
  EXPECT_EQ(j["status"], "private");
  EXPECT_EQ(j["users"], nlohmann::json::array());
  EXPECT_EQ(j["links"], nlohmann::json::array());

  const std::string id = IdOf("web-two");
  ASSERT_TRUE(Exec(Alice(), {"rm", "web-two"}).status.ok());
  EXPECT_EQ(store_->GetVmShare(id).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->FindShareLink(HashSecret(token)).status().code(), Code::kNotFound);
}

TEST_F(ShareCommandTest, UserRmTakesThemOffShares) {
  ASSERT_TRUE(Exec(Alice(), {"share", "add", "web-one", "bob"}).status.ok());
  Outcome o = Exec(Root(), {"user", "rm", "bob"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_EQ(Show()["users"], nlohmann::json::array());
}

TEST_F(ShareCommandTest, SurvivesARestart) {
  ASSERT_TRUE(Exec(Alice(), {"share", "port", "web-one", "3000"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"share", "add", "web-one", "bob"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"share", "add-link", "web-one"}).status.ok());
  interpreter_.reset();
  OpenStore();
  MakeInterpreter();
  nlohmann::json j = Show();
  EXPECT_EQ(j["port"], 3000);
  EXPECT_EQ(j["users"], (nlohmann::json{"bob"}));
  EXPECT_EQ(j["links"].size(), 1u);
}

TEST_F(ShareCommandTest, ArgumentsAreRequiredAndLinksBounded) {
  for (std::vector<std::string> argv : {std::vector<std::string>{"share", "show"},
                                        {"share", "add", "web-one"},
                                        {"share", "remove", "web-one"},
                                        {"share", "remove-link", "web-one"},
                                        {"share", "set-public"},
                                        {"share", "show", "web-one", "extra"}}) {
    EXPECT_EQ(Exec(Alice(), argv).status.code(), Code::kInvalidArgument) << argv[1];
  }
  EXPECT_EQ(Exec(Alice(), {"share", "show", "nosuch"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Alice(), {"share", "frob", "web-one"}).status.code(), Code::kNotFound);
  for (size_t i = 0; i < kMaxShareLinks; ++i) {
    ASSERT_TRUE(Exec(Alice(), {"share", "add-link", "web-one"}).status.ok()) << i;
  }
  Outcome o = Exec(Alice(), {"share", "add-link", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded);
  EXPECT_TRUE(Has(o.err, "share remove-link")) << o.err;
}

}  // namespace
}  // namespace warren::vmtest
