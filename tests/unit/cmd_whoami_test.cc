// whoami (lobby/commands/cmd_whoami.cc) through Interpreter::Execute.
#include <gtest/gtest.h>

#include "tests/unit/lobby_test_fixture.h"

namespace warren::lobbytest {
namespace {

using nlohmann::json;

class WhoamiCommandTest : public LobbyTest {};

TEST_F(WhoamiCommandTest, WhoamiShowsUserAndKeyInUse) {
  Outcome o = Exec(As(kAliceKey), {"whoami"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.exit_status, 0);
  EXPECT_EQ(o.err, "");
  EXPECT_NE(o.out.find("alice"), std::string::npos);
  EXPECT_NE(o.out.find("laptop"), std::string::npos);
  EXPECT_NE(o.out.find(Fingerprint(kAliceKey)), std::string::npos);
  EXPECT_EQ(o.out.back(), '\n');
}

TEST_F(WhoamiCommandTest, WhoamiJsonMarksTheKeyInUse) {
  Caller desktop = AliceKeyWith(kSpareKey1, {});
  Outcome o = Exec(desktop, {"whoami", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["admin"], false);
  EXPECT_EQ(j["credential"], "key:" + Fingerprint(kSpareKey1));
  ASSERT_EQ(j["keys"].size(), 2u);
  for (const json& k : j["keys"]) {
    EXPECT_EQ(k["in_use"], k["fingerprint"] == Fingerprint(kSpareKey1)) << k.dump();
    EXPECT_FALSE(k.contains("blob_base64"));
  }
}

// A credential held to some commands or a tag speaks for part of the account only: it is not
// shown the admin flag or the account's other keys.
TEST_F(WhoamiCommandTest, ALimitedCredentialSeesItsLimitsNotTheAdminOrOtherKeys) {
  Caller root = As(kRootKey);
  ASSERT_TRUE(Exec(root, {"ssh-key", "add", kSpareKey2, "--name", "agent", "--cmds", "whoami,ls"})
                  .status.ok());
  Caller agent = As(kSpareKey2);
  Outcome o = Exec(agent, {"whoami", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out << o.err;
  json j = o.Json();
  EXPECT_EQ(j["user"], "root");
  EXPECT_FALSE(j.contains("admin")) << j.dump();
  EXPECT_EQ(j["limited"], true);
  EXPECT_EQ(j["limits"]["cmds"], json({"whoami", "ls"}));
  ASSERT_EQ(j["keys"].size(), 1u) << j.dump();
  EXPECT_EQ(j["keys"][0]["fingerprint"], Fingerprint(kSpareKey2));
  o = Exec(agent, {"whoami"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out.find("admin"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("root-key"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("key agent"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("whoami, ls"), std::string::npos) << o.out;

  // A token limited to a tag: its label and limits, no keys at all.
  Caller bot = ForToken(MintToken(root, {"--label", "bot", "--tag", "ci"}));
  o = Exec(bot, {"whoami", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  j = o.Json();
  EXPECT_FALSE(j.contains("admin")) << j.dump();
  EXPECT_EQ(j["keys"], json::array()) << j.dump();
  EXPECT_EQ(j["limits"]["tag"], "ci");
  EXPECT_EQ(j["token_label"], "bot");
  o = Exec(bot, {"whoami"});
  EXPECT_EQ(o.out.find("admin"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("root-key"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("API token bot"), std::string::npos) << o.out;

  // The account's own unrestricted key still sees all of it.
  o = Exec(root, {"whoami", "--json"});
  j = o.Json();
  EXPECT_EQ(j["admin"], true);
  EXPECT_EQ(j["limited"], false);
  EXPECT_EQ(j["keys"].size(), 2u);
  EXPECT_NE(Exec(root, {"whoami"}).out.find("(admin)"), std::string::npos);
}

}  // namespace
}  // namespace warren::lobbytest
