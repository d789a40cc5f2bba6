// What the VM commands share, through Interpreter::Execute on a real LmdbStore with
// FakeVmHost and FakeGuestControl: removing a user removes their VMs, VMs survive a store
// restart, help lists the VM commands. Each command's own tests are in cmd_<name>_test.cc.
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "keys/vm_rules.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/image_catalog.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

// --- new ---------------------------------------------------------------------------------

TEST_F(VmCommandTest, RemovingAUserRemovesTheirVms) {
  New(Bob(), {"--name", "bobs-box"});
  New(Alice(), {"--name", "web-one"});
  const std::string bobs = IdOf("bobs-box");
  Outcome o = Exec(Root(), {"user", "rm", "bob"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "removed user bob and 1 key and 1 VM\n");
  EXPECT_FALSE(host_.Inspect(bobs).ok());
  EXPECT_FALSE(store_->GetVmByName("bobs-box").ok());
  EXPECT_TRUE(store_->GetVmByName("web-one").ok());
  // A VM that will not go keeps the user, so the removal can be run again.
  host_.FailNext(Unavailable("injected: libvirt down"));
  o = Exec(Root(), {"user", "rm", "alice"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_TRUE(store_->GetUser("alice").ok());
  EXPECT_TRUE(Exec(Root(), {"user", "rm", "alice"}).status.ok());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCommandTest, VmsSurviveAStoreRestart) {
  New(Alice(), {"--name", "web-one", "--tag", "prod"});
  interpreter_.reset();
  OpenStore();
  MakeInterpreter();
  json ls = Exec(Alice(), {"ls", "--json"}).Json();
  ASSERT_EQ(ls["vms"].size(), 1u);
  EXPECT_EQ(ls["vms"][0]["name"], "web-one");
  EXPECT_EQ(ls["vms"][0]["state"], "running");
  EXPECT_EQ(ls["vms"][0]["tags"], json::array({"prod"}));
}

TEST_F(VmCommandTest, HelpListsTheVmCommands) {
  Outcome o = Exec(Alice(), {"help"});
  for (const char* c : {"new", "ls", "rm VM…", "ssh VM CMD…", "wait JOB", "jobs [VM]"}) {
    EXPECT_TRUE(Has(o.out, c)) << c << "\n" << o.out;
  }
  o = Exec(Alice(), {"ssh", "--help"});
  EXPECT_TRUE(Has(o.out, "--wait-seconds")) << o.out;
}

}  // namespace
}  // namespace warren::vmtest
