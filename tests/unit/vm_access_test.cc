// Who sees which VM (lobby/commands/vm_access.*), through the VM commands: owners see only
// their own VMs, a tag-scoped credential only its tag's (and tags what it makes), and a
// server without a VM host answers unavailable.
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

TEST_F(VmCommandTest, WithoutAVmHostVmCommandsAreUnavailable) {
  Services s;
  s.store = store_.get();
  s.clock = &clock_;
  interpreter_ = std::make_unique<Interpreter>(s);
  EXPECT_EQ(Exec(Alice(), {"new"}).status.code(), Code::kUnavailable);
  EXPECT_EQ(Exec(Alice(), {"ssh", "web-one", "true"}).status.code(), Code::kUnavailable);
  EXPECT_TRUE(Exec(Alice(), {"ls"}).status.ok());
  EXPECT_TRUE(Exec(Alice(), {"whoami"}).status.ok());
}

TEST_F(VmCommandTest, TagScopedCallerSeesOnlyItsTagAndTagsWhatItMakes) {
  New(Alice(), {"--name", "web-one"});
  New(AliceCi(), {"--name", "ci-box"});
  EXPECT_EQ(store_->GetVmByName("ci-box")->tags, (std::vector<std::string>{"ci"}));
  // Only its tag: another would reach past its scope (cmd_new_test has the rest).
  EXPECT_EQ(Exec(AliceCi(), {"new", "--tag", "build"}).status.code(), Code::kPermissionDenied);

  json ls = Exec(AliceCi(), {"ls", "--json"}).Json();
  ASSERT_EQ(ls["vms"].size(), 1u);
  EXPECT_EQ(ls["vms"][0]["name"], "ci-box");
  for (std::vector<std::string> argv : {std::vector<std::string>{"stat", "web-one"},
                                        {"rm", "web-one"},
                                        {"stop", "web-one"},
                                        {"ssh", "web-one", "true"},
                                        {"console", "web-one"},
                                        {"comment", "web-one", "x"}}) {
    Outcome o = Exec(AliceCi(), argv);
    EXPECT_EQ(o.status.code(), Code::kNotFound) << argv[0];
    EXPECT_TRUE(Has(o.err, "no VM named \"web-one\"")) << o.err;
  }
  // Exactly as a VM that does not exist.
  EXPECT_EQ(Exec(AliceCi(), {"stat", "web-one"}).err,
            "error: no VM named \"web-one\"; see \"ls\"\n");
  EXPECT_EQ(Exec(AliceCi(), {"stat", "nope-vm"}).err,
            "error: no VM named \"nope-vm\"; see \"ls\"\n");
  EXPECT_EQ(Exec(Alice(), {"ls", "--json"}).Json()["vms"].size(), 2u);

  // It may not change tags, not even on its own VMs.
  Outcome o = Exec(AliceCi(), {"tag", "ci-box", "more"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  o = Exec(AliceCi(), {"tag", "-d", "ci-box", "ci"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_TRUE(Exec(AliceCi(), {"comment", "ci-box", "mine"}).status.ok());
}

TEST_F(VmCommandTest, OwnersSeeOnlyTheirOwnVms) {
  New(Alice(), {"--name", "web-one"});
  EXPECT_TRUE(Exec(Bob(), {"ls", "--json"}).Json()["vms"].empty());
  EXPECT_EQ(Exec(Bob(), {"stat", "web-one"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"rm", "web-one"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"ssh", "web-one", "id"}).status.code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetVmByName("web-one").ok());
}

}  // namespace
}  // namespace warren::vmtest
