// Reconcile at daemon start against FakeVmHost, a real LmdbStore and FakeGuestControl:
// unfinished creations, orphan domains, missing domains, desired states, expired jobs, and
// a failure that leaves the record for the next start.
#include "lobby/commands/reconcile.h"

#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

class ReconcileTest : public VmCommandTest {
 protected:
  // A ready VM made directly (record + domain), in `state`.
  std::string Vm(const std::string& id, const std::string& name, DesiredState desired,
                 VmState state, VmPhase phase = VmPhase::kReady, bool domain = true) {
    VmRecord vm;
    vm.id = id;
    vm.name = name;
    vm.owner = "alice";
    vm.image = "tiny@3";
    vm.cpus = 1;
    vm.memory_mib = 256;
    vm.disk_gib = 1;
    vm.desired_state = desired;
    vm.phase = phase;
    EXPECT_TRUE(store_->CreateVm(vm).ok());
    if (domain) Domain(id, name, state);
    return id;
  }

  void Domain(const std::string& id, const std::string& name, VmState state) {
    VmSpec spec;
    spec.id = id;
    spec.name = name;
    spec.image = "tiny@3";
    spec.cpus = 1;
    spec.memory_mib = 256;
    spec.disk_gib = 1;
    ASSERT_TRUE(host_.Create(spec).ok());
    if (state == VmState::kStopped) {
      ASSERT_TRUE(host_.Stop(id).ok());
    }
    if (state == VmState::kPaused) {
      ASSERT_TRUE(host_.Pause(id).ok());
    }
  }

  VmState StateOf(const std::string& id) { return host_.Inspect(id)->state; }
};

TEST_F(ReconcileTest, NothingToDoOnAnAgreeingWorld) {
  Vm("aaaaaaaaaaaa", "web-one", DesiredState::kRunning, VmState::kRunning);
  Vm("bbbbbbbbbbbb", "web-two", DesiredState::kStopped, VmState::kStopped);
  Vm("cccccccccccc", "web-three", DesiredState::kPaused, VmState::kPaused);
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_TRUE(r.unfinished_removed.empty() && r.orphans_destroyed.empty() && r.missing.empty() &&
              r.started.empty() && r.stopped.empty() && r.paused.empty() && r.errors.empty());
  EXPECT_EQ(StateOf("aaaaaaaaaaaa"), VmState::kRunning);
  EXPECT_EQ(StateOf("bbbbbbbbbbbb"), VmState::kStopped);
  EXPECT_EQ(StateOf("cccccccccccc"), VmState::kPaused);
}

TEST_F(ReconcileTest, UnfinishedCreationsAreRemoved) {
  Vm("aaaaaaaaaaaa", "half-made", DesiredState::kRunning, VmState::kRunning, VmPhase::kCreating);
  Vm("bbbbbbbbbbbb", "not-begun", DesiredState::kRunning, VmState::kRunning, VmPhase::kCreating,
     /*domain=*/false);
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.unfinished_removed, (std::vector<std::string>{"half-made", "not-begun"}));
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(ReconcileTest, OrphanDomainsAreDestroyed) {
  Vm("aaaaaaaaaaaa", "web-one", DesiredState::kRunning, VmState::kRunning);
  Domain("zzzzzzzzzzzz", "stray", VmState::kRunning);
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.orphans_destroyed, (std::vector<std::string>{"zzzzzzzzzzzz"}));
  EXPECT_FALSE(host_.Inspect("zzzzzzzzzzzz").ok());
  EXPECT_TRUE(host_.Inspect("aaaaaaaaaaaa").ok());
}

TEST_F(ReconcileTest, MissingDomainsKeepTheirRecord) {
  Vm("aaaaaaaaaaaa", "web-one", DesiredState::kRunning, VmState::kRunning, VmPhase::kReady,
     /*domain=*/false);
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.missing, (std::vector<std::string>{"web-one"}));
  EXPECT_TRUE(store_->GetVm("aaaaaaaaaaaa").ok());
  EXPECT_EQ(Exec(Alice(), {"ls", "--json"}).Json()["vms"][0]["state"], "missing");
}

TEST_F(ReconcileTest, DesiredStatesAreRestored) {
  Vm("aaaaaaaaaaaa", "should-run", DesiredState::kRunning, VmState::kStopped);
  Vm("bbbbbbbbbbbb", "should-stop", DesiredState::kStopped, VmState::kRunning);
  Vm("cccccccccccc", "should-pause", DesiredState::kPaused, VmState::kRunning);
  Vm("dddddddddddd", "paused-off", DesiredState::kPaused, VmState::kStopped);
  Vm("eeeeeeeeeeee", "run-paused", DesiredState::kRunning, VmState::kPaused);
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(StateOf("aaaaaaaaaaaa"), VmState::kRunning);
  EXPECT_EQ(StateOf("bbbbbbbbbbbb"), VmState::kStopped);
  EXPECT_EQ(StateOf("cccccccccccc"), VmState::kPaused);
  EXPECT_EQ(StateOf("dddddddddddd"), VmState::kPaused);
  EXPECT_EQ(StateOf("eeeeeeeeeeee"), VmState::kRunning);
  EXPECT_EQ(r.stopped, (std::vector<std::string>{"should-stop"}));
  EXPECT_TRUE(r.errors.empty());
}

TEST_F(ReconcileTest, AFailedCleanupIsRetriedNextTime) {
  Vm("aaaaaaaaaaaa", "half-made", DesiredState::kRunning, VmState::kRunning, VmPhase::kCreating);
  host_.FailNext(Unavailable("injected: libvirt busy"));
  ReconcileReport r;
  Status st = Reconcile(*store_, host_, &guests_, clock_, &r);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_TRUE(store_->GetVm("aaaaaaaaaaaa").ok());  // kept for the retry
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_).ok());
  EXPECT_FALSE(store_->GetVm("aaaaaaaaaaaa").ok());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(ReconcileTest, ExpiredJobsAreDropped) {
  Vm("aaaaaaaaaaaa", "web-one", DesiredState::kRunning, VmState::kRunning);
  JobRecord old_job;
  old_job.job = "00000001";
  old_job.vm_id = "aaaaaaaaaaaa";
  old_job.finished = true;
  old_job.ended_at = kStart - 2 * 24 * 3600;
  JobRecord running = old_job;
  running.job = "00000002";
  running.finished = false;
  running.ended_at = 0;
  JobRecord recent = old_job;
  recent.job = "00000003";
  recent.ended_at = kStart - 3600;
  for (const JobRecord& j : {old_job, running, recent}) ASSERT_TRUE(store_->PutJob(j).ok());
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.jobs_expired, 1u);
  EXPECT_EQ(store_->ListJobs("aaaaaaaaaaaa")->size(), 2u);
}

}  // namespace
}  // namespace warren::vmtest
