// migrate VM HOST (lobby/commands/cmd_migrate.cc) through HostSet::Migrate and
// FakeVmHost::MigrateTo: a running VM moves live and a stopped one cold, the record follows,
// the target's checks (vm_placement.h CheckHostTakes: drained, isolation, room, answering) and
// a host's own refusal leave the VM where it was; the old host's "stopped" for a moved VM is
// not passed on; reconcile puts right what a migration cut short left (reconcile.h).
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lobby/commands/reconcile.h"
#include "tests/fakes/outage_vm_host.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

class MigrateTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    host_.SetHostLimits(8 * 1024, 500);
    two_.SetHostLimits(16 * 1024, 500);
    std::vector<HostMember> members;
    members.push_back({"one", &host_, "tcg", [] { return true; }});
    members.push_back({"two", &outage_, "kvm", [this] { return isolated_two_.load(); }});
    auto set = HostSet::Make(std::move(members));
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    set_ = std::move(set).value();
    hosts_ = set_.get();
    MakeInterpreter();
    New(Root(), {"--name", "mover", "--host", "one", "--memory", "1G"});
    id_ = IdOf("mover");
  }

  std::string RecordHost() {
    Result<VmRecord> vm = store_->GetVmByName("mover");
    EXPECT_TRUE(vm.ok());
    return vm.ok() ? vm->host : "";
  }

  // Refused with `code`, and the VM is on one as before, running, its record unchanged.
  void ExpectRefusedAndUnmoved(Code code, const std::string& why) {
    Outcome o = Exec(Root(), {"migrate", "mover", "two"});
    EXPECT_EQ(o.status.code(), code) << why << ": " << o.status.ToString();
    EXPECT_EQ(RecordHost(), "one") << why;
    Result<VmInfo> here = host_.Inspect(id_);
    ASSERT_TRUE(here.ok()) << why;
    EXPECT_EQ(here->state, VmState::kRunning) << why;
    EXPECT_EQ(two_.Inspect(id_).status().code(), Code::kNotFound) << why;
  }

  FakeVmHost two_{clock_};
  OutageVmHost outage_{two_};
  std::atomic<bool> isolated_two_{true};
  std::unique_ptr<HostSet> set_;
  std::string id_;
};

TEST_F(MigrateTest, ARunningVmMovesLiveAndItsRecordFollows) {
  Outcome o = Exec(Root(), {"migrate", "mover", "two", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  json j = o.Json();
  EXPECT_EQ(j["from"], "one");
  EXPECT_EQ(j["to"], "two");
  EXPECT_EQ(j["live"], true);
  EXPECT_TRUE(j.contains("total_ms"));
  EXPECT_TRUE(j.contains("downtime_ms"));
  EXPECT_EQ(RecordHost(), "two");
  EXPECT_EQ(two_.Inspect(id_)->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(id_).status().code(), Code::kNotFound);
  json stat = Exec(Root(), {"stat", "mover", "--json"}).Json();
  EXPECT_EQ(stat["host"], "two");
  EXPECT_EQ(stat["state"], "running");
  // Commands reach it where it is now, and it can come back.
  EXPECT_TRUE(Exec(Root(), {"stop", "mover"}).status.ok());
  EXPECT_EQ(two_.Inspect(id_)->state, VmState::kStopped);
  Outcome back = Exec(Root(), {"migrate", "mover", "one"});
  ASSERT_TRUE(back.status.ok()) << back.err;
  EXPECT_NE(back.out.find("(stopped)"), std::string::npos) << back.out;
  EXPECT_EQ(RecordHost(), "one");
  EXPECT_EQ(host_.Inspect(id_)->state, VmState::kStopped);
}

// A control connection redialled while the VM moves (its source stopped at the switchover)
// waits for the move and then reaches the target (lobby/vm_hosts.cc DialControl): the live
// move leaves the connection made there alone; a cold one drops what was left.
TEST_F(MigrateTest, ADialDuringAMoveWaitsForItToEnd) {
  using Clock = std::chrono::steady_clock;
  EXPECT_EQ(set_->MovingTo(id_), "");
  const Clock::time_point t0 = Clock::now();
  set_->AwaitMove(id_, t0 + std::chrono::seconds(5));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1)) << "no move: at once";
  std::thread waiter;
  std::string moving_to;
  Clock::time_point hook_left{}, waiter_woke{};
  host_.SetStepHook([&](std::string_view step, std::string_view) {
    if (step != "migrate:before") return;
    moving_to = set_->MovingTo(id_);
    waiter = std::thread([&] {
      set_->AwaitMove(id_, Clock::now() + std::chrono::seconds(10));
      waiter_woke = Clock::now();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hook_left = Clock::now();
  });
  Outcome o = Exec(Root(), {"migrate", "mover", "two"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  ASSERT_TRUE(waiter.joinable());
  waiter.join();
  host_.SetStepHook(nullptr);
  EXPECT_EQ(moving_to, "two");
  EXPECT_EQ(set_->MovingTo(id_), "");
  EXPECT_GE(waiter_woke, hook_left) << "woke before the move ended";
  for (const std::string& id : guests_.disconnected()) EXPECT_NE(id, id_) << "live: kept";
  EXPECT_TRUE(Exec(Root(), {"stop", "mover"}).status.ok());
  ASSERT_TRUE(Exec(Root(), {"migrate", "mover", "one"}).status.ok());
  EXPECT_EQ(guests_.disconnected().back(), id_) << "cold: dropped";
}

TEST_F(MigrateTest, AStoppedVmMovesColdAndStaysStopped) {
  ASSERT_TRUE(Exec(Root(), {"stop", "mover"}).status.ok());
  json j = Exec(Root(), {"migrate", "mover", "two", "--json"}).Json();
  EXPECT_EQ(j["live"], false);
  EXPECT_FALSE(j.contains("downtime_ms"));
  EXPECT_EQ(two_.Inspect(id_)->state, VmState::kStopped);
  EXPECT_EQ(RecordHost(), "two");
  // Its memory is not needed there until it starts: a host without room for it takes it.
  two_.SetHostLimits(512, 500);
  ASSERT_TRUE(Exec(Root(), {"migrate", "mover", "one"}).status.ok());
  EXPECT_TRUE(Exec(Root(), {"migrate", "mover", "two"}).status.ok());
}

TEST_F(MigrateTest, OnlyAdminsMoveVmsAndOnlyToAnotherHostThatExists) {
  Outcome alice = Exec(Alice(), {"migrate", "mover", "two"});
  EXPECT_NE(alice.status.code(), Code::kOk);
  EXPECT_EQ(RecordHost(), "one");
  EXPECT_EQ(Exec(Root(), {"migrate", "mover", "one"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Root(), {"migrate", "mover", "three"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Root(), {"migrate", "mover", "Bad_Name"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Root(), {"migrate", "nosuch", "two"}).status.code(), Code::kNotFound);
}

TEST_F(MigrateTest, ATargetThatMayNotTakeItLeavesTheVmWhereItWas) {
  ASSERT_TRUE(Exec(Root(), {"hosts", "drain", "two"}).status.ok());
  ExpectRefusedAndUnmoved(Code::kConflict, "drained");
  ASSERT_TRUE(Exec(Root(), {"hosts", "undrain", "two"}).status.ok());

  isolated_two_ = false;
  ExpectRefusedAndUnmoved(Code::kConflict, "not isolated");
  isolated_two_ = true;

  two_.SetHostLimits(512, 500);  // its memory does not fit there
  ExpectRefusedAndUnmoved(Code::kLimitExceeded, "no room");
  two_.SetHostLimits(16 * 1024, 500);

  outage_.SetDown(true);
  ExpectRefusedAndUnmoved(Code::kUnavailable, "unreachable");
  outage_.SetDown(false);

  // Checks passed, and the host fails it half-way: nothing moved.
  host_.FailNext(Internal("the migration stream broke"));
  ExpectRefusedAndUnmoved(Code::kInternal, "failed half-way");

  ASSERT_TRUE(Exec(Root(), {"migrate", "mover", "two"}).status.ok());
  EXPECT_EQ(RecordHost(), "two");
}

TEST_F(MigrateTest, TheOldHostsStoppedIsNotPassedOn) {
  std::mutex mu;
  std::vector<VmStateEvent> seen;
  ASSERT_TRUE(set_->WatchStates([&](const VmStateEvent& e) {
                    std::lock_guard lock(mu);
                    seen.push_back(e);
                  })
                  .ok());
  host_.FlushStateEvents();
  two_.FlushStateEvents();
  {
    std::lock_guard lock(mu);
    seen.clear();
  }
  ASSERT_TRUE(set_->Migrate(id_, "two").ok());
  host_.FlushStateEvents();
  two_.FlushStateEvents();
  ASSERT_TRUE(set_->Stop(id_).ok());
  two_.FlushStateEvents();
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].state, VmState::kRunning);  // there
  EXPECT_EQ(seen[1].state, VmState::kStopped);  // stopped there, later: passed on
  ASSERT_TRUE(set_->WatchStates(nullptr).ok());
}

TEST_F(MigrateTest, ReconcileLetsTheRecordFollowAMoveWarrenDidNotRecord) {
  // Moved behind the interpreter's back: the record still names one.
  ASSERT_TRUE(host_.MigrateTo(id_, two_).ok());
  ReconcileScope one{"one", "one"};
  ReconcileScope two{"two", "one"};
  auto holds = [this](const std::string& name, const std::string& id) -> Result<bool> {
    Result<VmInfo> info = set_->member(name)->Inspect(id);
    if (info.ok()) return true;
    if (info.status().code() == Code::kNotFound) return false;
    return info.status();
  };
  one.holds = holds;
  two.holds = holds;
  ReconcileReport r1;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r1, one).ok());
  EXPECT_EQ(r1.missing, std::vector<std::string>{"mover"});  // one alone cannot tell
  EXPECT_EQ(RecordHost(), "one");
  ReconcileReport r2;
  ASSERT_TRUE(Reconcile(*store_, two_, &guests_, clock_, &r2, two).ok());
  EXPECT_EQ(r2.adopted, std::vector<std::string>{"mover"});
  EXPECT_TRUE(r2.orphans_destroyed.empty());
  EXPECT_EQ(RecordHost(), "two");
  EXPECT_EQ(two_.Inspect(id_)->state, VmState::kRunning);
  // Without a way to ask the other host, it is left as before.
  ASSERT_TRUE(two_.MigrateTo(id_, host_).ok());
  ReconcileReport r3;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r3, {"one", "one"}).ok());
  EXPECT_EQ(r3.elsewhere, std::vector<std::string>{id_});
  EXPECT_EQ(RecordHost(), "two");
}

TEST_F(MigrateTest, ReconcileDestroysAStoppedCopyAColdMoveLeft) {
  ASSERT_TRUE(Exec(Root(), {"stop", "mover"}).status.ok());
  // A cold move defined it on two and warren died before it was undefined on one: the same
  // VM on both, the record naming one.
  VmSpec spec;
  spec.id = id_;
  spec.image = "debian@20261129";
  spec.cpus = 1;
  spec.memory_mib = 1024;
  spec.disk_gib = 10;
  ASSERT_TRUE(two_.Create(spec).ok());
  ASSERT_TRUE(two_.Stop(id_).ok());
  two_.SettleShutdowns();
  ReconcileScope two{"two", "one"};
  two.holds = [this](const std::string& name, const std::string& id) -> Result<bool> {
    return set_->member(name)->Inspect(id).ok();
  };
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, two_, &guests_, clock_, &r, two).ok());
  EXPECT_EQ(r.migration_copies_destroyed, std::vector<std::string>{id_});
  EXPECT_EQ(two_.Inspect(id_).status().code(), Code::kNotFound);
  EXPECT_EQ(RecordHost(), "one");
  EXPECT_TRUE(host_.Inspect(id_).ok());
}

}  // namespace
}  // namespace warren::vmtest
