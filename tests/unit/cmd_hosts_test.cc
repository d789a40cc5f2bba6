// Several VM hosts under one interpreter (vmhost/host_set.h): `hosts`, `hosts drain`,
// placement (vm_placement.h), `new --host`, where `ls`/`stat` say a VM is, a host that stops
// answering (unreachable, unavailable, skipped) and comes back, `cp` on its source's host, and
// reconcile per host, and a warm pool on each host. Two FakeVmHosts; the second behind an
// OutageVmHost.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "lobby/commands/reconcile.h"
#include "lobby/vm_pool.h"
#include "tests/fakes/outage_vm_host.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

class HostsTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    host_.SetHostLimits(8 * 1024, 500);
    two_.SetHostLimits(16 * 1024, 500);
    isolated_two_ = true;
    MakeSet();
  }

  void MakeSet() {
    std::vector<HostMember> members;
    members.push_back({"one", &host_, "tcg", [] { return true; }});
    members.push_back({"two", &outage_, "kvm", [this] { return isolated_two_.load(); },
                       [] { return std::vector<std::string>{"tiny@3"}; }});
    auto set = HostSet::Make(std::move(members));
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    set_ = std::move(set).value();
    hosts_ = set_.get();
    MakeInterpreter();
  }

  std::string HostOf(const std::string& name) {
    Result<VmRecord> vm = store_->GetVmByName(name);
    EXPECT_TRUE(vm.ok());
    return vm.ok() ? vm->host : "";
  }

  FakeVmHost two_{clock_};
  OutageVmHost outage_{two_};
  std::atomic<bool> isolated_two_{true};
  std::unique_ptr<HostSet> set_;
};

TEST_F(HostsTest, HostsListsEachHostForAdminsOnly) {
  New(Alice(), {"--name", "web-one"});
  Outcome o = Exec(Root(), {"hosts"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("one"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("kvm"), std::string::npos) << o.out;
  json j = Exec(Root(), {"hosts", "--json"}).Json();
  ASSERT_EQ(j["hosts"].size(), 2u) << j.dump();
  EXPECT_EQ(j["hosts"][0]["name"], "one");
  EXPECT_EQ(j["hosts"][1]["name"], "two");
  EXPECT_EQ(j["hosts"][1]["state"], "up");
  EXPECT_EQ(j["hosts"][1]["accel"], "kvm");
  EXPECT_EQ(j["hosts"][1]["memory_mib"], 16 * 1024);
  EXPECT_EQ(j["hosts"][1]["images"], json::array({"tiny@3"}));
  EXPECT_EQ(j["hosts"][0]["images"], json::array());
  // web-one went to the host with more memory free.
  EXPECT_EQ(j["hosts"][1]["vms"], 1);
  EXPECT_EQ(j["hosts"][0]["vms"], 0);

  Outcome denied = Exec(Alice(), {"hosts"});
  EXPECT_EQ(denied.status.code(), Code::kPermissionDenied) << denied.err;
  EXPECT_EQ(Exec(Alice(), {"hosts", "drain", "two"}).status.code(), Code::kPermissionDenied);
}

// Each host keeps its own template (TemplateKeeper): `new` there restores from it, and one
// that cannot be restored is removed from that host only (vm_boot.cc RestoreOrBoot).
TEST_F(HostsTest, ATemplateThatFailsOnOneHostIsRemovedThereOnly) {
  restore_templates_ = true;
  MakeSet();
  SaveDefaultTemplate(host_);
  SaveDefaultTemplate(two_);
  Outcome restored = Exec(Root(), {"new", "--name", "a", "--host", "one"});
  ASSERT_TRUE(restored.status.ok()) << restored.err;
  EXPECT_EQ(store_->GetVmByName("a")->made, "template");
  two_.FailNext(Unavailable("the save image has another magic"));  // the restore on two
  Outcome booted = Exec(Root(), {"new", "--name", "b", "--host", "two"});
  ASSERT_TRUE(booted.status.ok()) << booted.err;
  EXPECT_EQ(store_->GetVmByName("b")->made, "boot");
  EXPECT_EQ(HostOf("b"), "two");
  EXPECT_TRUE(two_.Templates()->empty());
  EXPECT_EQ(host_.Templates()->size(), 1u) << "one's template is not two's";
  Result<std::vector<TemplateInfo>> all = set_->Templates();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].host, "one");
}

// The ids of the pooled VMs on one host.
std::vector<std::string> PooledOn(FakeVmHost& host) {
  std::vector<std::string> ids;
  for (const VmInfo& info : PooledVms(host)) ids.push_back(info.id);
  return ids;
}

constexpr std::chrono::seconds kPoolWait{10};

// Each host that takes new VMs keeps its own warm pool (lobby/vm_pool.h), restored from its
// own template; `new` prefers a host where one waits, takes it there, and the pool leaves a
// drained host and forgets a VM its host no longer has.
TEST_F(HostsTest, EachHostKeepsItsOwnWarmPoolAndNewPrefersAHostWhereOneWaits) {
  restore_templates_ = true;
  MakeSet();
  SaveDefaultTemplate(host_);
  SaveDefaultTemplate(two_);
  VmPoolOptions options;
  options.targets.push_back(ParsePoolTarget("debian=1", vm_defaults_).value());
  options.interval = std::chrono::milliseconds(20);
  options.retry_after = std::chrono::milliseconds(20);
  auto pool = std::make_unique<VmPool>(interpreter_->services(), options);
  interpreter_->services().pool = pool.get();
  auto idle_on = [&](const std::string& host) {
    int n = 0;
    for (const auto& [key, count] : pool->Idle()) {
      if (key.starts_with(host + "/")) n += count;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return idle_on("one") == 1 && idle_on("two") == 1; }, kPoolWait));
  ASSERT_EQ(PooledOn(host_).size(), 1u);
  ASSERT_EQ(PooledOn(two_).size(), 1u);
  EXPECT_EQ(host_.Inspect(PooledOn(host_)[0])->state, VmState::kPaused);
  EXPECT_TRUE(two_.WasRestored(PooledOn(two_)[0]));

  // two has the most free memory, and a pooled VM: taken there.
  const std::string on_two = PooledOn(two_)[0];
  New(Alice(), {"--name", "a"});
  EXPECT_EQ(HostOf("a"), "two");
  EXPECT_EQ(store_->GetVmByName("a")->made, "pool");
  EXPECT_EQ(IdOf("a"), on_two);
  EXPECT_EQ(two_.Inspect(on_two)->state, VmState::kRunning);
  // two has none idle now (its refill waits a little): one's is preferred to a boot on two.
  const std::string on_one = PooledOn(host_)[0];
  New(Alice(), {"--name", "b"});
  EXPECT_EQ(HostOf("b"), "one");
  EXPECT_EQ(store_->GetVmByName("b")->made, "pool");
  EXPECT_EQ(IdOf("b"), on_one);
  // Both refill, each from its own template.
  ASSERT_TRUE(Eventually([&] { return idle_on("one") == 1 && idle_on("two") == 1; }, kPoolWait));

  // A drained host keeps no pool; a VM its host lost (a reconcile there) is forgotten and
  // made again.
  ASSERT_TRUE(Exec(Root(), {"hosts", "drain", "two"}).status.ok());
  ASSERT_TRUE(Eventually([&] { return idle_on("two") == 0 && PooledOn(two_).empty(); }, kPoolWait));
  const std::string lost = PooledOn(host_).at(0);
  ASSERT_TRUE(host_.Destroy(lost).ok());
  ASSERT_TRUE(Eventually(
      [&] {
        return idle_on("one") == 1 && PooledOn(host_).size() == 1 && PooledOn(host_)[0] != lost;
      },
      kPoolWait));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(PooledOn(two_).empty());
  interpreter_->services().pool = nullptr;
  pool.reset();
  EXPECT_TRUE(PooledOn(host_).empty());  // removed when the pool stops
}

TEST_F(HostsTest, NewGoesToTheHostWithTheMostFreeMemoryAndSaysWhere) {
  New(Alice(), {"--name", "a", "--memory", "6G"});  // two: 16 GiB, now 10 free
  EXPECT_EQ(HostOf("a"), "two");
  New(Alice(), {"--name", "b", "--memory", "4G"});  // two 10 free, one 8 free
  EXPECT_EQ(HostOf("b"), "two");
  const int lists_before = host_.ListCalls() + two_.ListCalls();
  New(Alice(), {"--name", "c", "--memory", "4G"});  // two 6 free, one 8 free
  EXPECT_EQ(HostOf("c"), "one");
  // Placement asks each host its room, never for a listing of its VMs.
  EXPECT_EQ(host_.ListCalls() + two_.ListCalls(), lists_before);
  EXPECT_TRUE(host_.Inspect(IdOf("c")).ok());
  EXPECT_FALSE(two_.Inspect(IdOf("c")).ok());

  json stat = Exec(Alice(), {"stat", "a", "--json"}).Json();
  EXPECT_EQ(stat["host"], "two");
  Outcome ls = Exec(Alice(), {"ls", "-l"});
  EXPECT_NE(ls.out.find("HOST"), std::string::npos) << ls.out;
  EXPECT_NE(Exec(Alice(), {"stat", "c"}).out.find("host:     one"), std::string::npos);
}

TEST_F(HostsTest, NoHostWithRoomIsRefusedWithTheFigures) {
  Outcome o = Exec(Alice(), {"new", "--name", "huge", "--memory", "20G"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_NE(o.err.find("MiB"), std::string::npos) << o.err;
  EXPECT_FALSE(store_->GetVmByName("huge").ok());  // nothing recorded
}

TEST_F(HostsTest, NewHostIsForAdminsAndChecksTheHost) {
  Outcome alice = Exec(Alice(), {"new", "--name", "x", "--host", "one"});
  EXPECT_EQ(alice.status.code(), Code::kPermissionDenied) << alice.err;
  EXPECT_FALSE(store_->GetVmByName("x").ok());

  New(Root(), {"--name", "pinned", "--host", "one"});
  EXPECT_EQ(HostOf("pinned"), "one");
  EXPECT_EQ(Exec(Root(), {"new", "--host", "three"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Root(), {"new", "--host", "Bad_Name"}).status.code(), Code::kInvalidArgument);
}

TEST_F(HostsTest, ADrainedHostTakesNoNewVmAndTheDrainSurvivesARestart) {
  New(Alice(), {"--name", "before"});
  ASSERT_EQ(HostOf("before"), "two");
  Outcome drain = Exec(Root(), {"hosts", "drain", "two"});
  ASSERT_TRUE(drain.status.ok()) << drain.err;
  New(Alice(), {"--name", "after"});
  EXPECT_EQ(HostOf("after"), "one");
  // Its VMs stay, and run.
  EXPECT_EQ(Exec(Alice(), {"stat", "before", "--json"}).Json()["state"], "running");
  Outcome pinned = Exec(Root(), {"new", "--name", "p", "--host", "two"});
  EXPECT_EQ(pinned.status.code(), Code::kConflict) << pinned.err;
  EXPECT_NE(pinned.err.find("drained"), std::string::npos) << pinned.err;

  // Kept in the store: a new interpreter (a restarted warren) still sees it.
  OpenStore();
  MakeSet();
  json j = Exec(Root(), {"hosts", "--json"}).Json();
  EXPECT_EQ(j["hosts"][1]["state"], "drained") << j.dump();
  EXPECT_EQ(j["hosts"][1]["drained_by"], "root");
  New(Alice(), {"--name", "later"});
  EXPECT_EQ(HostOf("later"), "one");

  ASSERT_TRUE(Exec(Root(), {"hosts", "undrain", "two"}).status.ok());
  New(Alice(), {"--name", "again"});
  EXPECT_EQ(HostOf("again"), "two");
  EXPECT_EQ(Exec(Root(), {"hosts", "drain", "nine"}).status.code(), Code::kNotFound);
}

TEST_F(HostsTest, AHostWithoutIsolationTakesNoVm) {
  isolated_two_ = false;
  New(Alice(), {"--name", "safe"});
  EXPECT_EQ(HostOf("safe"), "one");
  Outcome o = Exec(Root(), {"new", "--name", "unsafe", "--host", "two"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_NE(o.err.find("isolation"), std::string::npos) << o.err;
  EXPECT_EQ(Exec(Root(), {"hosts", "--json"}).Json()["hosts"][1]["isolated"], false);
}

TEST_F(HostsTest, AHostThatStopsAnsweringIsUnreachableAndComesBack) {
  New(Alice(), {"--name", "far"});
  ASSERT_EQ(HostOf("far"), "two");
  New(Root(), {"--name", "near", "--host", "one"});
  outage_.SetDown(true);

  json ls = Exec(Alice(), {"ls", "--json"}).Json();
  std::map<std::string, std::string> states;
  for (const auto& vm : ls["vms"]) states[vm["name"]] = vm["state"];
  EXPECT_EQ(states["far"], "unreachable") << ls.dump();
  EXPECT_EQ(Exec(Root(), {"stat", "near", "--json"}).Json()["state"], "running");
  EXPECT_EQ(Exec(Alice(), {"stat", "far", "--json"}).Json()["state"], "unreachable");

  Outcome stop = Exec(Alice(), {"stop", "far"});
  EXPECT_EQ(stop.status.code(), Code::kUnavailable) << stop.err;
  EXPECT_NE(stop.err.find("two"), std::string::npos) << stop.err;
  Outcome run = Exec(Alice(), {"ssh", "far", "true"});
  EXPECT_EQ(run.status.code(), Code::kUnavailable) << run.err;

  json hosts = Exec(Root(), {"hosts", "--json"}).Json();
  EXPECT_EQ(hosts["hosts"][1]["state"], "unreachable");
  EXPECT_FALSE(hosts["hosts"][1]["error"].get<std::string>().empty());
  // Placement skips it, though it has more room.
  New(Alice(), {"--name", "meanwhile"});
  EXPECT_EQ(HostOf("meanwhile"), "one");
  EXPECT_EQ(Exec(Root(), {"new", "--host", "two"}).status.code(), Code::kUnavailable);

  // Nothing was lost: it is back as it was.
  outage_.SetDown(false);
  EXPECT_EQ(Exec(Alice(), {"stat", "far", "--json"}).Json()["state"], "running");
  EXPECT_TRUE(Exec(Alice(), {"stop", "far"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"stat", "far", "--json"}).Json()["state"], "stopped");
}

TEST_F(HostsTest, ACopyIsMadeOnItsSourcesHost) {
  New(Root(), {"--name", "src", "--host", "one"});
  Outcome cp = Exec(Alice(), {"cp", "src", "dst"});
  // src is root's; alice cannot see it. Root copies it.
  EXPECT_FALSE(cp.status.ok());
  ASSERT_TRUE(Exec(Root(), {"cp", "src", "dst"}).status.ok());
  EXPECT_EQ(HostOf("dst"), "one");
  EXPECT_TRUE(host_.Inspect(IdOf("dst")).ok());
  // Also from a drained host: the disk it shares is there.
  ASSERT_TRUE(Exec(Root(), {"hosts", "drain", "one"}).status.ok());
  ASSERT_TRUE(Exec(Root(), {"cp", "src", "dst2"}).status.ok());
  EXPECT_EQ(HostOf("dst2"), "one");
}

TEST_F(HostsTest, ReconcileOfOneHostLeavesTheOthersRecordsAlone) {
  New(Alice(), {"--name", "far"});
  New(Root(), {"--name", "near", "--host", "one"});
  ASSERT_EQ(HostOf("far"), "two");
  // A half-made VM on two, and a record from before several hosts (no host: the default).
  HalfMade("half");
  ASSERT_TRUE(store_
                  ->UpdateVm(IdOf("half"),
                             [](VmRecord& r) {
                               r.host = "two";
                               return Status::Ok();
                             })
                  .ok());
  ASSERT_TRUE(store_
                  ->UpdateVm(IdOf("near"),
                             [](VmRecord& r) {
                               r.host.clear();
                               return Status::Ok();
                             })
                  .ok());
  outage_.SetDown(true);

  ReconcileReport one;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &one, {"one", "one"}).ok());
  EXPECT_TRUE(one.missing.empty());             // far is two's, not missing from one
  EXPECT_TRUE(one.unfinished_removed.empty());  // half is two's to settle
  EXPECT_TRUE(one.orphans_destroyed.empty());
  EXPECT_EQ(HostOf("near"), "one");  // named now
  EXPECT_TRUE(store_->GetVmByName("half").ok());

  outage_.SetDown(false);
  ReconcileReport two;
  ASSERT_TRUE(Reconcile(*store_, two_, &guests_, clock_, &two, {"two", "one"}).ok());
  EXPECT_EQ(two.unfinished_removed, std::vector<std::string>{"half"});
  EXPECT_TRUE(two.missing.empty());
  EXPECT_TRUE(two.orphans_destroyed.empty());  // near's domain is on one, not an orphan here
  EXPECT_EQ(Exec(Alice(), {"stat", "far", "--json"}).Json()["state"], "running");
}

TEST(HostSetTest, RefusesBadMembers) {
  FakeVmHost a, b;
  EXPECT_FALSE(HostSet::Make({}).ok());
  EXPECT_FALSE(HostSet::Make({{"a", &a}, {"a", &b}}).ok());
  EXPECT_FALSE(HostSet::Make({{"A", &a}}).ok());
  EXPECT_FALSE(HostSet::Make({{"a", nullptr}}).ok());
  EXPECT_TRUE(HostSet::Make({{"a", &a}, {"b", &b}}).ok());
}

TEST(HostSetTest, RoutesByVmAndFindsAVmItWasNotTold) {
  FakeVmHost a, b;
  auto set = HostSet::Make({{"a", &a}, {"b", &b}});
  ASSERT_TRUE(set.ok());
  VmSpec spec;
  spec.id = "vmonb0001";
  spec.image = "tiny@1";
  spec.cpus = 1;
  spec.memory_mib = 256;
  spec.disk_gib = 1;
  // Made behind the set's back: it asks each host.
  ASSERT_TRUE(b.Create(spec).ok());
  Result<VmInfo> info = (*set)->Inspect(spec.id);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->host, "b");
  EXPECT_EQ(*(*set)->HostOf(spec.id), "b");
  EXPECT_TRUE((*set)->Stop(spec.id).ok());
  EXPECT_EQ(b.Inspect(spec.id)->state, VmState::kStopped);
  // A copy stays on its source's host, and says so when asked for another.
  VmSpec copy = spec;
  copy.id = "vmonb0002";
  copy.host = "a";
  EXPECT_EQ((*set)->Copy(spec.id, copy).code(), Code::kInvalidArgument);
  copy.host.clear();
  ASSERT_TRUE((*set)->Copy(spec.id, copy).ok());
  EXPECT_TRUE(b.Inspect(copy.id).ok());
  // Every VM, with its host.
  Result<std::vector<VmInfo>> all = (*set)->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  for (const VmInfo& vm : *all) EXPECT_EQ(vm.host, "b");
  EXPECT_TRUE((*set)->Destroy(spec.id).ok());
  EXPECT_EQ((*set)->Inspect(spec.id).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace warren::vmtest
