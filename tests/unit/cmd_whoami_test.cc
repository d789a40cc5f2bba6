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

}  // namespace
}  // namespace warren::lobbytest
