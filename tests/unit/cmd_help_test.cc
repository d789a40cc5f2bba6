// help, CMD --help and help --json (lobby/commands/cmd_help.cc, help_text.cc) through
// Interpreter::Execute: listings, what a caller may see, the JSON description and the
// error model.
#include <gtest/gtest.h>

#include "lobby/base/error_map.h"
#include "tests/unit/lobby_test_fixture.h"

namespace warren::lobbytest {
namespace {

using nlohmann::json;

class HelpCommandTest : public LobbyTest {};

TEST_F(HelpCommandTest, HelpFlagPrintsTheCommandsHelp) {
  Outcome flag = Exec(As(kAliceKey), {"ssh-key", "add", "--help"});
  ASSERT_TRUE(flag.status.ok()) << flag.err;
  EXPECT_EQ(flag.exit_status, 0);
  EXPECT_NE(flag.out.find("usage: ssh-key add [KEY…] [flags]"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("--name NAME"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("--cmds LIST"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("--json"), std::string::npos) << flag.out;
  Outcome shorter = Exec(As(kAliceKey), {"ssh-key", "add", "-h"});
  EXPECT_EQ(shorter.out, flag.out);
  Outcome help = Exec(As(kAliceKey), {"help", "ssh-key", "add"});
  EXPECT_EQ(help.out, flag.out);
  // --help wins over missing required arguments.
  Outcome rm = Exec(As(kAliceKey), {"ssh-key", "remove", "--help"});
  EXPECT_TRUE(rm.status.ok()) << rm.err;
}

TEST_F(HelpCommandTest, HelpListsCommandsGrouped) {
  Outcome o = Exec(As(kRootKey), {"help"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  for (const char* s : {"whoami", "ssh-key list", "ssh-key add", "ssh-key remove", "ssh-key rename",
                        "user add", "user ls", "user rm", "ssh-key: ", "ssh -p 2222 warren.test"}) {
    EXPECT_NE(o.out.find(s), std::string::npos) << s << "\n" << o.out;
  }
}

TEST_F(HelpCommandTest, HelpHidesAdminCommandsFromOthers) {
  Outcome o = Exec(As(kAliceKey), {"help"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.out.find("user add"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ssh-key add"), std::string::npos);
  Outcome one = Exec(As(kAliceKey), {"help", "user", "add"});
  EXPECT_EQ(one.status.code(), Code::kPermissionDenied);
}

TEST_F(HelpCommandTest, HelpJsonDescribesCommandsAndFlags) {
  Outcome o = Exec(As(kRootKey), {"help", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  ASSERT_TRUE(j["commands"].is_array());
  bool saw_add = false, saw_user_add = false;
  for (const json& c : j["commands"]) {
    for (const char* field : {"path", "summary", "usage", "read_only", "admin_only", "flags"}) {
      EXPECT_TRUE(c.contains(field)) << field << " in " << c.dump();
    }
    if (c["path"] == "ssh-key add") {
      saw_add = true;
      EXPECT_EQ(c["read_only"], false);
      std::vector<std::string> names;
      for (const json& f : c["flags"]) {
        EXPECT_TRUE(f.contains("description"));
        names.push_back(f["name"]);
      }
      for (const char* want : {"--name", "--cmds", "--tag", "--exp", "--json", "--help"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
      }
    }
    if (c["path"] == "user add") {
      saw_user_add = true;
      EXPECT_EQ(c["admin_only"], true);
    }
    if (c["path"] == "ssh-key list") {
      EXPECT_EQ(c["read_only"], true);
    }
  }
  EXPECT_TRUE(saw_add);
  EXPECT_TRUE(saw_user_add);

  json alice = Exec(As(kAliceKey), {"help", "--json"}).Json();
  for (const json& c : alice["commands"]) EXPECT_EQ(c["admin_only"], false) << c["path"];
}

TEST_F(HelpCommandTest, HelpJsonCarriesTheErrorModel) {
  Outcome o = Exec(As(kAliceKey), {"help", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  json errors = o.Json()["errors"];
  ASSERT_TRUE(errors.is_array());
  EXPECT_EQ(errors.size(), ErrorMappings().size());
  bool found = false;
  for (const json& e : errors) {
    if (e["code"] != "not_found") continue;
    found = true;
    EXPECT_EQ(e["exit_status"], ExitStatusFor(Code::kNotFound));
    EXPECT_EQ(e["http_status"], 404);
  }
  EXPECT_TRUE(found) << errors.dump();
}

TEST_F(HelpCommandTest, GroupWordAloneShowsGroupHelp) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("ssh-key list"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ssh-key rename"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("whoami"), std::string::npos) << o.out;
  json j = Exec(As(kAliceKey), {"ssh-key", "--json"}).Json();
  EXPECT_EQ(j["commands"].size(), 5u);  // list, add, remove, rename, generate-api-key
  // A non-admin asking for the user group learns it is closed to them.
  EXPECT_EQ(Exec(As(kAliceKey), {"user"}).status.code(), Code::kPermissionDenied);
}

}  // namespace
}  // namespace warren::lobbytest
