// Usage metering end to end above vmhost: the fake host's state events drive UsageMeter
// into the real store, and `usage` reports what accrued — across start, pause, resume,
// stop, restart, removal and a restart of warren — with a clock the test moves.
#include <gtest/gtest.h>

#include "lobby/commands/usage_meter.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

class UsageTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    vm_defaults_.user_limits = {kNoLimit, kNoLimit, kNoLimit, kNoLimit, 20};
    MakeInterpreter();
    Watch();
  }
  void TearDown() override {
    ASSERT_TRUE(host_.WatchStates(nullptr).ok());
    VmCommandTest::TearDown();
  }

  void Watch() {
    meter_ = std::make_unique<UsageMeter>(*store_, clock_);
    ASSERT_TRUE(
        host_
            .WatchStates([meter = meter_.get()](const VmStateEvent& e) { meter->OnStateChange(e); })
            .ok());
  }

  // A command, and its state changes metered before the test moves the clock on (the host
  // delivers them on a thread of its own).
  void Run(const Caller& caller, std::vector<std::string> argv) {
    Outcome o = Exec(caller, argv);
    ASSERT_TRUE(o.status.ok()) << argv[0] << ": " << o.status.ToString();
    host_.FlushStateEvents();
  }

  nlohmann::json Usage(const Caller& caller, std::vector<std::string> flags = {}) {
    host_.FlushStateEvents();
    std::vector<std::string> argv = {"usage", "--json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Outcome o = Exec(caller, argv);
    EXPECT_TRUE(o.status.ok()) << o.status.ToString();
    return o.status.ok() ? o.Json() : nlohmann::json();
  }

  static nlohmann::json Vm(const nlohmann::json& usage, const std::string& name) {
    for (const auto& v : usage["vms"]) {
      if (v["name"] == name) return v;
    }
    ADD_FAILURE() << "no usage line for " << name << " in " << usage.dump();
    return nlohmann::json::object();
  }

  std::unique_ptr<UsageMeter> meter_;
};

TEST_F(UsageTest, AccruesOnlyWhileRunningAcrossEveryTransition) {
  Run(Alice(), {"new", "--name", "web-one"});  // 2 vCPU, 2 GiB, 10 GiB: running from now
  clock_.now += 100;
  Run(Alice(), {"pause", "web-one"});
  clock_.now += 50;  // paused: no CPU or memory
  Run(Alice(), {"resume", "web-one"});
  clock_.now += 30;
  Run(Alice(), {"stop", "web-one"});
  clock_.now += 1000;  // stopped: disk only
  Run(Alice(), {"start", "web-one"});
  clock_.now += 20;
  Run(Alice(), {"restart", "web-one"});  // a fresh boot loses no time
  clock_.now += 10;

  nlohmann::json vm = Vm(Usage(Alice()), "web-one");
  EXPECT_DOUBLE_EQ(vm["running_seconds"].get<double>(), 160);
  EXPECT_DOUBLE_EQ(vm["vcpu_seconds"].get<double>(), 320);
  EXPECT_DOUBLE_EQ(vm["memory_gib_seconds"].get<double>(), 320);
  EXPECT_NEAR(vm["disk_gib_hours"].get<double>(), 10.0 * 1210 / 3600, 1e-6);
  // 2 vCPUs and 2 GiB: the mean of 160 s × 2/2 and 160 s × 2/4, in hours.
  EXPECT_NEAR(vm["units"].get<double>(), (160.0 + 80.0) / 2 / 3600, 1e-6);
  EXPECT_EQ(vm["live"], true);
  EXPECT_TRUE(vm["cost"].is_null());
}

TEST_F(UsageTest, ARemovedVmKeepsItsUsage) {
  Run(Alice(), {"new", "--name", "web-one"});
  clock_.now += 60;
  Run(Alice(), {"rm", "web-one"});
  clock_.now += 600;  // gone: nothing more accrues
  nlohmann::json usage = Usage(Alice());
  nlohmann::json vm = Vm(usage, "web-one");
  EXPECT_EQ(vm["live"], false);
  EXPECT_DOUBLE_EQ(vm["running_seconds"].get<double>(), 60);
  EXPECT_DOUBLE_EQ(usage["total"]["vcpu_seconds"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(Vm(Usage(Alice(), {"--vm", "web-one"}), "web-one")["running_seconds"], 60);
}

TEST_F(UsageTest, TimeWhileWarrenWasDownIsCountedOnce) {
  Run(Alice(), {"new", "--name", "web-one"});
  clock_.now += 100;
  // warren stops; the VM runs on; warren starts again 500 s later and resyncs.
  ASSERT_TRUE(host_.WatchStates(nullptr).ok());
  interpreter_.reset();
  OpenStore();
  MakeInterpreter();
  clock_.now += 500;
  Watch();
  ASSERT_TRUE(meter_->Resync(host_).ok());
  ASSERT_TRUE(meter_->Resync(host_).ok());  // twice changes nothing
  clock_.now += 10;
  EXPECT_DOUBLE_EQ(Vm(Usage(Alice()), "web-one")["running_seconds"].get<double>(), 610);
}

TEST_F(UsageTest, EachCallerSeesOnlyWhatItMaySee) {
  Run(Alice(), {"new", "--name", "web-one"});
  Run(AliceCi(), {"new", "--name", "ci-one"});  // tagged ci
  Run(Bob(), {"new", "--name", "bob-one"});
  clock_.now += 30;
  Run(AliceCi(), {"rm", "ci-one"});
  nlohmann::json ci = Usage(AliceCi());
  ASSERT_EQ(ci["vms"].size(), 1u) << ci.dump();
  EXPECT_EQ(ci["vms"][0]["name"], "ci-one");  // removed, still its
  EXPECT_EQ(Usage(Alice())["vms"].size(), 2u);
  EXPECT_EQ(Usage(Bob())["vms"].size(), 1u);
  EXPECT_EQ(Exec(Alice(), {"usage", "--all"}).status.code(), Code::kPermissionDenied);
  nlohmann::json all = Usage(Root(), {"--all"});
  EXPECT_EQ(all["vms"].size(), 3u);
  EXPECT_EQ(Exec(Bob(), {"usage", "--vm", "web-one"}).status.code(), Code::kNotFound);
}

// An admin's key limited to a tag sees only its tag's VMs, --all included: it listed every
// user's VMs, names and owners (found by the scope matrix, issue 16).
TEST_F(UsageTest, AllIsRefusedToACredentialLimitedToATag) {
  constexpr const char* kRootCiKey =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIELtkoa6DV+K3HQz8TzhLItzGgU9jftscZYh32uiZM/Y "
      "root@ci";
  Scope ci;
  ci.tag = "ci";
  ASSERT_TRUE(store_->AddKey(KeyRecord(kRootCiKey, "root", "root-ci", ci)).ok());
  Run(Bob(), {"new", "--name", "bob-one"});
  Outcome o = Exec(As(kRootCiKey), {"usage", "--all"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.out;
  EXPECT_TRUE(Has(o.err, "limited to the tag \"ci\"")) << o.err;
  EXPECT_FALSE(Has(o.out + o.err, "bob-one"));
  EXPECT_EQ(Usage(Root(), {"--all"})["vms"].size(), 1u);
}

TEST_F(UsageTest, SinceCountsFromThatDayAndPriceMakesMoney) {
  sandboxes_.price_unit = 0.105;
  MakeInterpreter();
  // kStart is 2023-11-14 22:13:20 UTC: run over midnight.
  Run(Alice(), {"new", "--sandbox", "--name", "sbx1", "--timeout", "24h"});  // 2 vCPU / 4 GiB
  clock_.now += 6400;  // to 2023-11-15 00:00:00
  clock_.now += 3600;
  nlohmann::json whole = Usage(Alice());
  EXPECT_DOUBLE_EQ(Vm(whole, "sbx1")["running_seconds"].get<double>(), 10000);
  nlohmann::json since = Usage(Alice(), {"--since", "2023-11-15"});
  EXPECT_EQ(since["since"], "2023-11-15");
  nlohmann::json line = Vm(since, "sbx1");
  EXPECT_DOUBLE_EQ(line["running_seconds"].get<double>(), 3600);
  EXPECT_NEAR(line["units"].get<double>(), 1.0, 1e-9);  // the seed's unit: 2 vCPU, 4 GiB, 1 h
  EXPECT_NEAR(line["cost"].get<double>(), 0.105, 1e-9);
  EXPECT_EQ(since["price_unit"], 0.105);
  for (const char* bad : {"2023-13-01", "2023-02-30", "yesterday", "2023-1-1"}) {
    EXPECT_EQ(Exec(Alice(), {"usage", "--since", bad}).status.code(), Code::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace warren::vmtest
