// Per-user limits (lobby/commands/vm_quota.h) as `new`, `cp`, `resize` and `start` meet them,
// and the host's own room (vmhost CheckHostRoom, through FakeVmHost) as the commands report
// it: on a real LmdbStore with FakeVmHost and FakeGuestControl.
#include <atomic>
#include <thread>
#include <vector>

#include "lobby/base/error_map.h"
#include "lobby/commands/vm_quota.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

class VmQuotaTest : public VmCommandTest {
 protected:
  void SetLimits(const std::string& user, std::vector<std::string> flags) {
    std::vector<std::string> argv = {"user", "set", user};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Outcome o = Exec(Root(), argv);
    ASSERT_TRUE(o.status.ok()) << o.err;
  }
  size_t VmsOf(const std::string& owner) {
    Result<std::vector<VmRecord>> vms = store_->ListVms();
    EXPECT_TRUE(vms.ok()) << vms.status().ToString();
    size_t n = 0;
    for (const VmRecord& vm : vms.ok() ? *vms : std::vector<VmRecord>{}) n += vm.owner == owner;
    return n;
  }
};

// 2 VMs, 3 running vCPUs, 3 GiB running memory, 25 GiB of disk: each limit refuses the
// VM that would pass it, before anything is recorded or made.
TEST_F(VmQuotaTest, NewIsRefusedPastEachLimit) {
  SetLimits("alice",
            {"--max-vms", "2", "--max-cpu", "3", "--max-memory", "3G", "--max-disk", "25G"});
  New(Alice(), {"--name", "web-one"});  // 2 vCPUs, 2 GiB, 10 GiB
  Outcome o = Exec(Alice(), {"new", "--name", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kLimitExceeded));
  EXPECT_TRUE(Has(o.err, "alice may run at most 3 vCPUs (2 held now, this needs 2 more)")) << o.err;
  EXPECT_TRUE(Has(o.err, "user set alice --max-cpu N")) << o.err;
  o = Exec(Alice(), {"new", "--name", "web-two", "--cpu", "1", "--memory", "2G"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded);
  EXPECT_TRUE(Has(o.err, "at most 3 GiB of memory")) << o.err;
  o = Exec(Alice(), {"new", "--name", "web-two", "--cpu", "1", "--memory", "1G", "--disk", "20G"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded);
  EXPECT_TRUE(Has(o.err, "at most 25 GiB of disk")) << o.err;
  EXPECT_EQ(VmsOf("alice"), 1u);
  EXPECT_EQ(host_.List()->size(), 1u);

  New(Alice(), {"--name", "web-two", "--cpu", "1", "--memory", "1G", "--disk", "15G"});
  o = Exec(Alice(),
           {"new", "--name", "web-three", "--cpu", "1", "--memory", "256M", "--disk", "1"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded);
  EXPECT_TRUE(Has(o.err, "alice may have at most 2 VMs")) << o.err;
  // Limits are per user: bob has the server's.
  New(Bob(), {"--name", "bob-one"});
}

// A stopped VM keeps its disk and its place in the count but frees its vCPUs and memory;
// starting it again is checked like a new one.
TEST_F(VmQuotaTest, StopFreesCpuAndMemoryStartTakesThemAgain) {
  SetLimits("alice", {"--max-cpu", "2", "--max-memory", "2G"});
  New(Alice(), {"--name", "web-one"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  New(Alice(), {"--name", "web-two"});
  Outcome o = Exec(Alice(), {"start", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_TRUE(Has(o.err, "at most 2 vCPUs")) << o.err;
  EXPECT_EQ(store_->GetVmByName("web-one")->desired_state, DesiredState::kStopped);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kStopped);
  // Paused VMs still hold theirs; stopping one frees them.
  ASSERT_TRUE(Exec(Alice(), {"pause", "web-two"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"start", "web-one"}).status.code(), Code::kLimitExceeded);
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-two"}).status.ok());
  o = Exec(Alice(), {"start", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetVmByName("web-one")->desired_state, DesiredState::kRunning);
  // What already runs is not checked again: restart and resume are free.
  ASSERT_TRUE(Exec(Alice(), {"restart", "web-one"}).status.ok());
}

// cp makes a VM: the copy counts like a `new` of the source's sizes.
TEST_F(VmQuotaTest, TheCopyCounts) {
  SetLimits("alice", {"--max-disk", "15G"});
  New(Alice(), {"--name", "web-one"});  // 10 GiB
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_TRUE(
      Has(o.err, "alice may have at most 15 GiB of disk (10 GiB held now, this needs 10 GiB more)"))
      << o.err;
  EXPECT_EQ(VmsOf("alice"), 1u);
  EXPECT_EQ(host_.List()->size(), 1u);
  SetLimits("alice", {"--max-disk", "none"});
  o = Exec(Alice(), {"cp", "web-one", "web-two"});
  ASSERT_TRUE(o.status.ok()) << o.err;
}

// resize: growth counts; a VM over a limit an admin lowered keeps what it has and may still
// grow what is within its limits.
TEST_F(VmQuotaTest, ResizeGrowthCounts) {
  SetLimits("alice", {"--max-cpu", "4", "--max-disk", "30G"});
  New(Alice(), {"--name", "web-one"});  // 2 vCPUs, 10 GiB
  New(Alice(), {"--name", "web-two"});  // 2 vCPUs, 10 GiB
  Outcome o = Exec(Alice(), {"resize", "web-one", "--disk", "21G"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_TRUE(Has(o.err, "at most 30 GiB of disk (20 GiB held now, this needs 11 GiB more)"))
      << o.err;
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->disk_gib, 10);  // nothing changed
  ASSERT_TRUE(Exec(Alice(), {"resize", "web-one", "--disk", "20G"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"resize", "web-one", "--cpu", "3"}).status.code(), Code::kLimitExceeded);
  // Less is always fine; so is the same.
  ASSERT_TRUE(Exec(Alice(), {"resize", "web-one", "--cpu", "1", "--memory", "1G"}).status.ok());
  // Stopped: the vCPUs are not held, so they may grow; the start is checked then.
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-two"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"resize", "web-two", "--cpu", "4"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"start", "web-two"}).status.code(), Code::kLimitExceeded);

  SetLimits("alice", {"--max-cpu", "0", "--max-disk", "10G"});  // below what she holds
  o = Exec(Alice(), {"resize", "web-one", "--memory", "2G"});
  EXPECT_TRUE(o.status.ok()) << o.err;  // memory is within its limit
  EXPECT_EQ(Exec(Alice(), {"resize", "web-one", "--disk", "21G"}).status.code(),
            Code::kLimitExceeded);
  EXPECT_EQ(store_->GetVmByName("web-one")->cpus, 1);
}

// serve --user-max-*: every user's limits unless their record has its own.
TEST_F(VmQuotaTest, ServerDefaultsApplyUntilAUserHasTheirOwn) {
  vm_defaults_.user_limits.max_vms = 1;
  MakeInterpreter();
  New(Alice(), {"--name", "web-one"});
  Outcome o = Exec(Alice(), {"new", "--name", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded);
  EXPECT_TRUE(Has(o.err, "alice may have at most 1 VMs")) << o.err;
  EXPECT_EQ(Exec(Bob(), {"new", "--name", "bob-one"}).status.code(), Code::kOk);
  EXPECT_EQ(Exec(Bob(), {"new", "--name", "bob-two"}).status.code(), Code::kLimitExceeded);
  SetLimits("alice", {"--max-vms", "none"});
  New(Alice(), {"--name", "web-two"});
  SetLimits("alice", {"--max-vms", "default"});
  EXPECT_EQ(Exec(Alice(), {"new", "--name", "web-three"}).status.code(), Code::kLimitExceeded);
}

// Two commands of one user at once cannot both take the last of a limit.
TEST_F(VmQuotaTest, ConcurrentNewsNeverPassTheLimit) {
  SetLimits("alice", {"--max-vms", "3"});
  Caller alice = Alice();
  std::atomic<int> made{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      Outcome o = Exec(alice, {"new", "--name", "race-vm-" + std::to_string(i)});
      (o.status.ok() ? made : o.status.code() == Code::kLimitExceeded ? refused : other)++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 3);
  EXPECT_EQ(refused.load(), 5);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(VmsOf("alice"), 3u);
}

TEST(VmQuotaRuleTest, HoldingAndEffectiveLimits) {
  VmRecord vm;
  vm.cpus = 2;
  vm.memory_mib = 512;
  vm.disk_gib = 7;
  vm.desired_state = DesiredState::kPaused;
  VmHolding h = HoldingOf(vm);
  EXPECT_EQ((std::vector<int64_t>{h.vms, h.cpus, h.memory_mib, h.disk_gib}),
            (std::vector<int64_t>{1, 2, 512, 7}));
  vm.desired_state = DesiredState::kStopped;
  h = HoldingOf(vm);
  EXPECT_EQ((std::vector<int64_t>{h.vms, h.cpus, h.memory_mib, h.disk_gib}),
            (std::vector<int64_t>{1, 0, 0, 7}));
  UserLimits own;
  own.max_cpus = kNoLimit;
  own.max_vms = 0;
  UserLimits server = {10, 16, 1024, std::nullopt};
  UserLimits in_force = EffectiveLimits(own, server);
  EXPECT_EQ(in_force.max_vms, 0);
  EXPECT_EQ(in_force.max_cpus, kNoLimit);
  EXPECT_EQ(in_force.max_memory_mib, 1024);
  EXPECT_EQ(in_force.max_disk_gib, kNoLimit);  // neither sets one: none
}

// --- the host's room, as the commands meet it ---------------------------------------------

// No VM gets more vCPUs than the host has cores; `new` without --cpu asks for no more.
TEST_F(VmQuotaTest, NoMoreVcpusThanTheHostHasCores) {
  host_.SetHostCores(2);
  Outcome o = Exec(Alice(), {"new", "--name", "web-one", "--cpu", "4"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << o.err;
  EXPECT_TRUE(Has(o.err, "this host has 2 CPU cores")) << o.err;
  EXPECT_EQ(VmsOf("alice"), 0u);
  New(Alice(), {"--name", "web-one", "--cpu", "2"});
  EXPECT_EQ(Exec(Alice(), {"resize", "web-one", "--cpu", "3"}).status.code(),
            Code::kInvalidArgument);
  host_.SetHostCores(1);
  New(Alice(), {"--name", "web-two"});  // the default (2) fits the host: 1
  EXPECT_EQ(store_->GetVmByName("web-two")->cpus, 1);
}

// The host admits by what its VMs hold, not by what a fresh guest has touched: two VMs that
// each fit but not together are not both made, and a stopped VM must fit again to start.
TEST_F(VmQuotaTest, TheHostCountsWhatItsVmsHold) {
  host_.SetHostLimits(5000, 25);
  New(Alice(), {"--name", "web-one"});  // 2 GiB, 10 GiB
  New(Alice(), {"--name", "web-two"});
  Outcome o = Exec(Alice(), {"new", "--name", "web-three", "--disk", "1"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_TRUE(Has(o.err, "not enough memory on the host")) << o.err;
  o = Exec(Alice(), {"new", "--name", "web-three", "--memory", "512M"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_TRUE(Has(o.err, "not enough disk on the host")) << o.err;
  EXPECT_EQ(VmsOf("alice"), 2u);
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-two"}).status.ok());
  New(Bob(), {"--name", "bob-one", "--disk", "1"});
  o = Exec(Alice(), {"start", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_TRUE(Has(o.err, "not enough memory on the host")) << o.err;
  EXPECT_EQ(store_->GetVmByName("web-two")->desired_state, DesiredState::kStopped);
}

}  // namespace
}  // namespace warren::vmtest
