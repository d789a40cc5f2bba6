// ls, stat and console through Interpreter::Execute: patterns and tags, the hypervisor's
// states and missing domains, stat's fields and the console's lines.
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

TEST_F(VmCommandTest, LsPatternsAndTags) {
  EXPECT_EQ(Exec(Alice(), {"ls"}).out, "no VMs yet; make one with: new\n");
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two", "--tag", "prod"});
  New(Alice(), {"--name", "db-one", "--comment", "the data"});

  auto names = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), "ls");
    argv.push_back("--json");
    std::vector<std::string> out;
    json result = Exec(Alice(), argv).Json();
    for (const json& vm : result["vms"]) out.push_back(vm["name"]);
    return out;
  };
  EXPECT_EQ(names({}), (std::vector<std::string>{"db-one", "web-one", "web-two"}));
  EXPECT_EQ(names({"web-*"}), (std::vector<std::string>{"web-one", "web-two"}));
  EXPECT_EQ(names({"prod"}), (std::vector<std::string>{"web-two"}));
  EXPECT_EQ(names({"db-one", "prod"}), (std::vector<std::string>{"db-one", "web-two"}));
  EXPECT_EQ(names({"*-one"}), (std::vector<std::string>{"db-one", "web-one"}));
  EXPECT_TRUE(names({"nothing"}).empty());
  EXPECT_EQ(Exec(Alice(), {"ls", "nothing"}).out, "no VMs match\n");

  Outcome text = Exec(Alice(), {"ls"});
  EXPECT_TRUE(Has(text.out, "NAME")) << text.out;
  EXPECT_TRUE(Has(text.out, "ssh -p 2222 web-two@warren.test")) << text.out;
  EXPECT_FALSE(Has(text.out, "debian@20261129")) << text.out;
  Outcome long_text = Exec(Alice(), {"ls", "-l"});
  EXPECT_TRUE(Has(long_text.out, "debian@20261129")) << long_text.out;
  EXPECT_TRUE(Has(long_text.out, "2 GiB")) << long_text.out;
  EXPECT_TRUE(Has(long_text.out, "the data")) << long_text.out;

  json all = Exec(Alice(), {"ls", "--json"}).Json();
  json web_two = all["vms"][2];
  EXPECT_EQ(web_two["state"], "running");
  EXPECT_EQ(web_two["tags"], json::array({"prod"}));
  EXPECT_EQ(web_two["cpus"], 2);
  EXPECT_EQ(web_two["memory_mib"], 2048);
  EXPECT_EQ(web_two["created_at"], kStart);
}

TEST_F(VmCommandTest, LsShowsHypervisorStatesAndMissingDomains) {
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  ASSERT_TRUE(host_.Destroy(IdOf("web-two")).ok());  // gone behind warren's back
  json ls = Exec(Alice(), {"ls", "--json"}).Json();
  EXPECT_EQ(ls["vms"][0]["state"], "stopped");
  EXPECT_EQ(ls["vms"][1]["state"], "missing");
  EXPECT_EQ(Exec(Alice(), {"stat", "web-two", "--json"}).Json()["state"], "missing");
  // A missing VM can still be removed.
  EXPECT_TRUE(Exec(Alice(), {"rm", "web-two"}).status.ok());
}

// ls, jobs and rename ask the hypervisor about the caller's VMs only, once each: never a walk
// over every domain of the host. Found by tests/bench/soak.py: with 20 users' VMs on one
// host, each user's `ls` and `jobs` listed all of them (XML, info, disk chain of each) and
// took ten times a `stat`, and waited on any domain another user's `cp` held busy.
TEST_F(VmCommandTest, LsJobsAndRenameAskTheHostOnlyAboutTheCallersVms) {
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two"});
  for (const char* name : {"b-1", "b-2", "b-3", "b-4", "b-5"}) New(Bob(), {"--name", name});
  const int lists = host_.ListCalls();

  int inspects = host_.InspectCalls();
  json ls = Exec(Alice(), {"ls", "--json"}).Json();
  ASSERT_EQ(ls["vms"].size(), 2u) << ls;
  EXPECT_EQ(ls["vms"][1]["state"], "running");
  EXPECT_EQ(host_.InspectCalls() - inspects, 2);

  inspects = host_.InspectCalls();
  EXPECT_TRUE(Exec(Alice(), {"ls", "web-one", "--json"}).status.ok());
  EXPECT_EQ(host_.InspectCalls() - inspects, 1);

  EXPECT_TRUE(Exec(Alice(), {"jobs", "--json"}).status.ok());
  EXPECT_TRUE(Exec(Alice(), {"rename", "web-two", "web-2"}).status.ok());
  EXPECT_EQ(host_.ListCalls(), lists);
}

TEST_F(VmCommandTest, StatAndConsole) {
  New(Alice(), {"--name", "web-one", "--tag", "prod"});
  clock_.now += 3600 + 120;
  Outcome o = Exec(Alice(), {"stat", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "state:    running")) << o.out;
  EXPECT_TRUE(Has(o.out, "uptime:   1h 2m")) << o.out;
  EXPECT_TRUE(Has(o.out, "memory:   2 GiB")) << o.out;
  EXPECT_TRUE(Has(o.out, "tags:     prod")) << o.out;
  json j = Exec(Alice(), {"stat", "web-one", "--json"}).Json();
  EXPECT_EQ(j["uptime_seconds"], 3720);
  EXPECT_EQ(j["disk_gib"], 10);

  o = Exec(Alice(), {"console", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "fake boot of debian@20261129")) << o.out;
  o = Exec(Alice(), {"console", "web-one", "--lines", "1", "--json"});
  EXPECT_EQ(o.Json()["console"], "login:\n");
  EXPECT_EQ(Exec(Alice(), {"console", "web-one", "--lines", "0"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"stat"}).status.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace warren::vmtest
