// The warm pool (lobby/vm_pool.h) under `new`, over FakeVmHost and FakeGuestControl: it fills
// from its shape's template with paused, connected VMs no user sees; `new` of that shape takes
// one, gives it the caller's identity and the pool refills; a refused `new` puts the VM back;
// a VM that cannot take its identity is removed and the VM restored instead; the pool gives
// way when the host runs short of memory. Also --pool's parsing.
#include "lobby/vm_pool.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "tests/unit/vm_test_fixture.h"
#include "vmhost/guest/identity.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

constexpr char kDefaultShape[] = "debian@20261129-2c-2048m-10g-all";

class VmPoolTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    restore_templates_ = true;
    MakeInterpreter();
    SaveDefaultTemplate(host_);
    guests_.ClonesStartWaiting();  // the template keeper's last step in every template
  }

  void TearDown() override {
    if (pool_ != nullptr) interpreter_->services().pool = nullptr;
    pool_.reset();
    VmCommandTest::TearDown();
  }

  void StartPool(int size, std::chrono::milliseconds interval = std::chrono::milliseconds(20),
                 std::function<bool(const std::string&)> settle_endpoint = {}) {
    VmPoolOptions options;
    options.settle_endpoint = std::move(settle_endpoint);
    PoolTarget t = ParsePoolTarget("debian=" + std::to_string(size), vm_defaults_).value();
    options.targets.push_back(t);
    options.interval = interval;
    options.retry_after = std::chrono::milliseconds(20);
    pool_ = std::make_unique<VmPool>(interpreter_->services(), options);
    interpreter_->services().pool = pool_.get();
  }

  int Idle() { return pool_->Idle()[kDefaultShape]; }

  std::vector<VmInfo> Pooled() { return PooledVms(host_); }

  std::unique_ptr<VmPool> pool_;
};

TEST_F(VmPoolTest, APooledVmRunsItsCommandPathBeforeItPauses) {
  // Its connection's first command, then two more once it took its identity: under TCG the
  // command path is translated per QEMU process, and a hand-out's first command would pay
  // for it.
  StartPool(1);
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
  std::vector<std::string> ran = guests_.commands();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "true"), 3) << ran.size();
  EXPECT_EQ(ran.size(), 3u);
  EXPECT_EQ(Pooled().at(0).state, VmState::kPaused);
}

TEST_F(VmPoolTest, FillsWithPausedVmsNoUserSeesAndNewTakesOne) {
  StartPool(2);
  ASSERT_TRUE(Eventually([&] { return Idle() == 2; }));
  std::vector<VmInfo> pooled = Pooled();
  ASSERT_EQ(pooled.size(), 2u);
  for (const VmInfo& info : pooled) {
    EXPECT_EQ(info.state, VmState::kPaused);
    EXPECT_TRUE(host_.WasRestored(info.id));
    EXPECT_TRUE(Ran(guests_, "true"));  // connected before it was paused
  }
  // No record: not listed (not even to an admin), not counted, not metered.
  EXPECT_TRUE(Exec(Root(), {"ls", "--json"}).Json()["vms"].empty());
  EXPECT_TRUE(store_->ListVms()->empty());

  // Each pooled VM's own host key, pinned when it took its whole identity.
  std::map<std::string, std::string> pooled_keys;
  for (const VmInfo& info : pooled) {
    pooled_keys[info.id] = guests_.PinnedHostKey(info.id);
    EXPECT_TRUE(pooled_keys[info.id].starts_with("ssh-ed25519 ")) << info.id;
    EXPECT_EQ(pooled_keys[info.id], host_.SpecOf(info.id)->ssh_host_key_pub);
  }
  EXPECT_NE(pooled_keys[pooled[0].id], pooled_keys[pooled[1].id]);

  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.err, "taken from the warm pool")) << o.err;
  VmRecord vm = store_->GetVmByName("web-one").value();
  EXPECT_EQ(vm.made, "pool");
  EXPECT_EQ(vm.phase, VmPhase::kReady);
  EXPECT_TRUE(vm.id == pooled[0].id || vm.id == pooled[1].id) << vm.id;
  VmInfo info = host_.Inspect(vm.id).value();
  EXPECT_EQ(info.state, VmState::kRunning);
  EXPECT_EQ(info.name, "web-one");
  EXPECT_EQ(host_.SpecOf(vm.id)->name, "web-one");
  // Its own identity applied in the guest, and its new host key pinned: handed to the root
  // process the pool left waiting before the pause, never through sudo. The whole identity
  // it took when it was pooled (from the template's waiting process); at `new`, a hand-out
  // (the name and host key only).
  std::vector<std::string> applied = guests_.identities_applied();
  ASSERT_EQ(applied.size(), 3u);
  EXPECT_EQ(std::count(applied.begin(), applied.end(), vm.id), 2);
  EXPECT_EQ(applied.back(), vm.id);
  EXPECT_EQ(guests_.handouts_applied(), std::vector<std::string>{vm.id});
  std::vector<std::string> opened;
  for (const GuestChannelRequest& r : guests_.channel_requests()) {
    opened.push_back(r.kind == GuestChannelRequest::Kind::kUnix           ? "unix:" + r.path
                     : r.kind == GuestChannelRequest::Kind::kIdentityPort ? "port"
                                                                          : r.command);
  }
  EXPECT_EQ(std::count(opened.begin(), opened.end(), kGuestIdentityWaitCommand), 2)
      << opened.size();
  // Each at its identity port (every domain has one).
  EXPECT_EQ(std::count(opened.begin(), opened.end(), "port"), 3);
  EXPECT_EQ(std::count(opened.begin(), opened.end(), "unix:" + std::string(kGuestIdentitySocket)),
            0);
  EXPECT_EQ(std::count(opened.begin(), opened.end(), kGuestIdentityHandOverCommand), 0);
  EXPECT_EQ(std::count(opened.begin(), opened.end(), kGuestIdentityCommand), 0);
  // It keeps the host key it took when it was pooled (seen by no one): the hand-out sends
  // none, the pin stands, and the seed its next boot reads holds the same key.
  EXPECT_TRUE(guests_.handouts_with_host_key().empty());
  EXPECT_EQ(guests_.PinnedHostKey(vm.id), pooled_keys[vm.id]);
  EXPECT_EQ(host_.SpecOf(vm.id)->ssh_host_key_pub, pooled_keys[vm.id]);
  EXPECT_EQ(Exec(Alice(), {"stat", "web-one", "--json"}).Json()["made"], "pool");
  // The pool refills behind it; the user's VM is not the pool's any more.
  ASSERT_TRUE(Eventually([&] { return Idle() == 2; }));
  EXPECT_EQ(Pooled().size(), 2u);
  EXPECT_EQ(Exec(Alice(), {"ls", "--json"}).Json()["vms"].size(), 1u);

  // A VM with env: its connection (opened before the seed's env was applied) starts again.
  EXPECT_TRUE(guests_.disconnected().empty());
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "web-env", "--env", "FOO=bar"}).status.ok());
  VmRecord with_env = store_->GetVmByName("web-env").value();
  EXPECT_EQ(with_env.made, "pool");
  EXPECT_EQ(guests_.disconnected(), std::vector<std::string>{with_env.id});
  // Its seed holds the env: it took the whole identity again (its seed read), not a hand-out.
  EXPECT_EQ(guests_.identities_applied().back(), with_env.id);
  EXPECT_EQ(guests_.handouts_applied(), std::vector<std::string>{vm.id});
  ASSERT_TRUE(Eventually([&] { return Idle() == 2; }));

  // Another shape is not the pool's: restored or booted as before.
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "web-two", "--disk", "20"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-two")->made, "boot");
  EXPECT_EQ(Idle(), 2);
}

// A new connection holds its endpoint setup back (ControlSessionOptions::
// endpoint_setup_delay): the pool has it run, and waits for it, before the pause, or it
// would come due at the hand-out beside the VM's identity and first command.
TEST_F(VmPoolTest, AVmIsPausedOnlyOnceItsEndpointSetupIsDone) {
  std::mutex mu;
  std::map<std::string, int> asked;  // per VM: SettleEndpoint calls so far
  std::map<std::string, VmState> state_when_settled;
  StartPool(1, std::chrono::milliseconds(20), [&](const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    // The setup is under way for the first 3 looks, then done.
    if (++asked[id] <= 3) return true;
    state_when_settled[id] = host_.Inspect(id)->state;
    return false;
  });
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
  const std::string id = Pooled().at(0).id;
  EXPECT_EQ(Pooled().at(0).state, VmState::kPaused);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(asked[id], 4);
  EXPECT_EQ(state_when_settled[id], VmState::kRunning);  // settled before the pause
}

TEST_F(VmPoolTest, ARefusedNewPutsTheVmBack) {
  vm_defaults_.user_limits.max_vms = 1;
  MakeInterpreter();
  StartPool(1);
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "web-one", "--disk", "20"}).status.ok());
  Outcome o = Exec(Alice(), {"new", "--name", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_FALSE(store_->GetVmByName("web-two").ok());
  // Back in the pool (the refill its taking woke may have made one more, which the pool
  // trims): one idle VM, paused, and nothing else beside alice's.
  ASSERT_TRUE(Eventually([&] { return Idle() == 1 && Pooled().size() == 1; }));
  EXPECT_EQ(Pooled().at(0).state, VmState::kPaused);
  EXPECT_EQ(host_.List()->size(), 2u);
}

TEST_F(VmPoolTest, AVmThatCannotTakeItsIdentityIsRemovedAndTheNewRestoresInstead) {
  StartPool(1);
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
  const std::string pooled = Pooled().at(0).id;
  const std::string pooled_key = guests_.PinnedHostKey(pooled);
  // The refill's restore would take the failure meant for the hand-out: none while it runs.
  host_.SetHostLimits(2048 * 2, 1000);
  host_.FailNext(Internal("the seed volume is gone"));
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  VmRecord vm = store_->GetVmByName("web-one").value();
  EXPECT_EQ(vm.made, "template");
  EXPECT_EQ(vm.id, pooled);  // made again under the id it was recorded with
  // With a host key of its own, not the removed pooled VM's.
  ASSERT_TRUE(pooled_key.starts_with("ssh-ed25519 "));
  EXPECT_NE(host_.SpecOf(vm.id)->ssh_host_key_pub, pooled_key);
  EXPECT_EQ(guests_.PinnedHostKey(vm.id), host_.SpecOf(vm.id)->ssh_host_key_pub);
  EXPECT_EQ(host_.Inspect(vm.id)->name, "web-one");
  EXPECT_EQ(host_.Inspect(vm.id)->state, VmState::kRunning);
}

TEST_F(VmPoolTest, RefillsOnlyWithRoomForOneMoreAndGivesWayToUsersVms) {
  host_.SetHostLimits(5 * 1024, 1000);
  StartPool(2);
  // A second pooled VM would leave no room for a user's: it is never made.
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Idle(), 1);
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "big-one", "--disk", "20"}).status.ok());
  // A VM of its shape no longer fits: the pool gives its memory back by itself...
  ASSERT_TRUE(Eventually([&] { return Idle() == 0; }));
  EXPECT_TRUE(Pooled().empty());
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "big-two", "--disk", "20"}).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Idle(), 0);
  // ...and refills once there is room again.
  ASSERT_TRUE(Exec(Alice(), {"rm", "big-one", "big-two"}).status.ok());
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
}

TEST_F(VmPoolTest, ANewTheHostHasNoRoomForTakesThePoolsMemory) {
  host_.SetHostLimits(5 * 1024, 1000);
  StartPool(1, std::chrono::hours(1));  // no look of its own after the first fill
  ASSERT_TRUE(Eventually([&] { return Idle() == 1; }));
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "big-one", "--disk", "20"}).status.ok());
  EXPECT_EQ(Idle(), 1);
  Outcome o = Exec(Alice(), {"new", "--name", "big-two", "--disk", "20"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetVmByName("big-two")->made, "boot");
  EXPECT_EQ(Idle(), 0);
  EXPECT_TRUE(Pooled().empty());
  // With nothing left to give, the host's refusal stands.
  Outcome full = Exec(Alice(), {"new", "--name", "big-three", "--disk", "20"});
  EXPECT_EQ(full.status.code(), Code::kLimitExceeded) << full.err;
}

TEST(PoolTargetTest, ParsesImagesShapesAndSizes) {
  VmDefaults d;
  PoolTarget t = ParsePoolTarget("debian=3", d).value();
  EXPECT_EQ(t.image, "debian");
  EXPECT_EQ(t.cpus, 0);  // the default's, capped at the host's cores when resolved
  EXPECT_EQ(t.memory_mib, 2048);
  EXPECT_EQ(t.disk_gib, 10);
  EXPECT_EQ(t.egress, Egress::kAll);
  EXPECT_EQ(t.size, 3);
  t = ParsePoolTarget("tiny@3:1,256M,1G,none=2", d).value();
  EXPECT_EQ(t.image, "tiny@3");
  EXPECT_EQ(t.cpus, 1);
  EXPECT_EQ(t.memory_mib, 256);
  EXPECT_EQ(t.disk_gib, 1);
  EXPECT_EQ(t.egress, Egress::kNone);
  EXPECT_EQ(t.size, 2);
  for (const char* bad :
       {"debian", "=1", "debian=", "debian=x", "debian=65", "tiny:1,256M=1", "tiny:0,256M,1G=1",
        "tiny:1,lots,1G=1", "tiny:1,256M,1G,some=1", "tiny:1,256M,1G,none,x=1"}) {
    EXPECT_EQ(ParsePoolTarget(bad, d).status().code(), Code::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace warren::vmtest
