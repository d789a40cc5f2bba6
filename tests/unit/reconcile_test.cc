// Reconcile at daemon start against FakeVmHost, a real LmdbStore and FakeGuestControl:
// unfinished creations, orphan domains, missing domains, desired states, expired jobs, and
// a failure that leaves the record for the next start.
#include "lobby/commands/reconcile.h"

#include <algorithm>
#include <tuple>

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

// `rm` killed between destroying the domain and deleting the record (crash points, issue
// 16): the record was kept as "missing" before; a record marked removing is now removed,
// with its domain when it still has one.
TEST_F(ReconcileTest, UnfinishedRemovalsAreFinished) {
  Vm("aaaaaaaaaaaa", "domain-gone", DesiredState::kRunning, VmState::kRunning, VmPhase::kRemoving,
     /*domain=*/false);
  Vm("bbbbbbbbbbbb", "domain-left", DesiredState::kRunning, VmState::kRunning, VmPhase::kRemoving);
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.removals_finished, (std::vector<std::string>{"domain-gone", "domain-left"}));
  EXPECT_TRUE(r.missing.empty());
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

// `rename` (store first) and `egress` (host first) killed half-way (crash points, issue 16):
// the domain kept its old name, or had the NIC the record does not say; it follows the record.
TEST_F(ReconcileTest, ADomainFollowsItsRecordsNameAndEgress) {
  Vm("aaaaaaaaaaaa", "new-name", DesiredState::kRunning, VmState::kRunning);
  ASSERT_TRUE(host_.Rename("aaaaaaaaaaaa", "old-name").ok());
  Vm("bbbbbbbbbbbb", "cut-off", DesiredState::kStopped, VmState::kStopped);
  ASSERT_TRUE(store_
                  ->UpdateVm("bbbbbbbbbbbb",
                             [](VmRecord& vm) {
                               vm.egress = "none";
                               return Status::Ok();
                             })
                  .ok());
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.relabelled, (std::vector<std::string>{"new-name"}));
  EXPECT_EQ(host_.Inspect("aaaaaaaaaaaa")->name, "new-name");
  EXPECT_EQ(host_.DefinitionOf("bbbbbbbbbbbb")->egress, Egress::kNone);
  EXPECT_EQ(host_.DefinitionOf("aaaaaaaaaaaa")->egress, Egress::kAll);  // as it was
  EXPECT_TRUE(r.errors.empty());
}

// `resize` killed after the host resized (wholly, or only the disk) and before the store
// recorded it (crash points, issue 16): the store kept the old sizes. A resize pending in the
// record is asked of the host again and recorded; one the host refuses now is dropped.
TEST_F(ReconcileTest, APendingResizeIsFinished) {
  Vm("aaaaaaaaaaaa", "resized", DesiredState::kRunning, VmState::kRunning);
  Vm("bbbbbbbbbbbb", "not-yet", DesiredState::kStopped, VmState::kStopped);
  Vm("cccccccccccc", "too-big", DesiredState::kRunning, VmState::kRunning);
  const PendingResize grow{2, 512, 3};
  ResizeSpec done;
  done.cpus = 2;
  done.memory_mib = 512;
  done.disk_gib = 3;
  ASSERT_TRUE(host_.Resize("aaaaaaaaaaaa", done).ok());  // the host made it all
  for (const char* id : {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}) {
    ASSERT_TRUE(store_
                    ->UpdateVm(id,
                               [&](VmRecord& vm) {
                                 vm.pending_resize = grow;
                                 return Status::Ok();
                               })
                    .ok());
  }
  ASSERT_TRUE(store_
                  ->UpdateVm("cccccccccccc",
                             [&](VmRecord& vm) {
                               vm.pending_resize = PendingResize{200, 0, 0};  // > the host's cores
                               return Status::Ok();
                             })
                  .ok());
  ReconcileReport r;
  EXPECT_EQ(Reconcile(*store_, host_, &guests_, clock_, &r).code(), Code::kInvalidArgument);
  EXPECT_EQ(r.resized, (std::vector<std::string>{"not-yet", "resized"}));
  for (const char* id : {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}) {
    VmRecord vm = store_->GetVm(id).value();
    EXPECT_EQ((std::tuple{vm.cpus, vm.memory_mib, vm.disk_gib}),
              (std::tuple{2, int64_t{512}, int64_t{3}}));
    EXPECT_FALSE(vm.pending_resize.has_value());
    FakeVmHost::Definition d = *host_.DefinitionOf(id);
    EXPECT_EQ((std::tuple{d.cpus, d.memory_mib, d.disk_gib}),
              (std::tuple{2, int64_t{512}, int64_t{3}}));
  }
  VmRecord refused = store_->GetVm("cccccccccccc").value();
  EXPECT_FALSE(refused.pending_resize.has_value());
  EXPECT_EQ(refused.cpus, 1);
  ASSERT_EQ(r.errors.size(), 1u);
}

// `restart` killed after it pressed the power button (crash points, issue 16): the guest
// powered off a little later by itself, after reconcile had seen it running, and stayed off
// while its record wanted it running. A VM marked restarting is restarted (booted, if it is
// off already) and the mark dropped.
TEST_F(ReconcileTest, AnUnfinishedRestartIsFinished) {
  Vm("aaaaaaaaaaaa", "still-up", DesiredState::kRunning, VmState::kRunning);
  Vm("bbbbbbbbbbbb", "went-down", DesiredState::kRunning, VmState::kStopped);
  for (const char* id : {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}) {
    ASSERT_TRUE(store_
                    ->UpdateVm(id,
                               [](VmRecord& vm) {
                                 vm.restarting = true;
                                 return Status::Ok();
                               })
                    .ok());
  }
  std::vector<std::string> steps;
  host_.SetStepHook([&](std::string_view step, std::string_view id) {
    steps.push_back(std::string(step) + " " + std::string(id));
  });
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.restarted, (std::vector<std::string>{"still-up"}));
  EXPECT_EQ(r.started, (std::vector<std::string>{"went-down"}));
  EXPECT_NE(std::find(steps.begin(), steps.end(), "restart:after aaaaaaaaaaaa"), steps.end());
  for (const char* id : {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}) {
    EXPECT_EQ(StateOf(id), VmState::kRunning);
    EXPECT_FALSE(store_->GetVm(id)->restarting);
  }
}

}  // namespace
}  // namespace warren::vmtest
