// The VmHost contract: every implementation must pass these, so tests written against the
// fake mean something for the real host. LibvirtHost runs them against real libvirtd +
// QEMU (TCG here) with the tiny guest image, or skips saying what is missing (fails under CI).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "tests/fakes/fake_vm_host.h"
#include "tests/unit/real_libvirt_env.h"
#include "tests/unit/skip_or_fail.h"
#include "tests/unit/state_recorder.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/subprocess.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

struct HostCase {
  std::string name;
  // Null host plus a reason: this implementation cannot run here.
  std::function<std::unique_ptr<VmHost>(std::string* skip_reason)> make;
  std::function<std::string()> image;  // an image the host can boot
  // What happens to a VM without warren: it is powered off (virsh destroy).
  std::function<Status(VmHost& host, const std::string& id)> power_off_behind_back;
  // The host's connection to the hypervisor is cut (it has to reconnect).
  std::function<Status(VmHost& host)> cut_connection;
};

// Test names and failure messages show the implementation's name, not the struct's bytes.
void PrintTo(const HostCase& c, std::ostream* os) { *os << c.name; }

class VmHostContractTest : public ::testing::TestWithParam<HostCase> {
 protected:
  void SetUp() override {
    std::string reason;
    host_ = GetParam().make(&reason);
    if (!host_) WARREN_SKIP_OR_FAIL() << reason;
    image_ = GetParam().image();
  }
  // Nothing a test made outlives it, also when it failed half-way.
  void TearDown() override {
    if (!host_) return;
    (void)host_->WatchStates(nullptr);
    DestroyEveryVm(*host_);
  }
  VmSpec Spec(std::string id) { return TinyVmSpec(std::move(id), image_); }
  VmState StateOf(const std::string& id) { return host_->Inspect(id)->state; }
  StateRecorder recorder_;  // before host_: outlives the host's calls into it
  std::unique_ptr<VmHost> host_;
  std::string image_;
};

using S = VmState;

// The names of the volumes in the pool over directory `dir` of the host at `uri`, read afresh,
// through a connection of our own.
Result<std::vector<std::string>> VolumesIn(const std::string& uri, const std::string& dir) {
  WARREN_ASSIGN_OR_RETURN(ConnectHandle conn, OpenLibvirt(uri));
  StoragePoolHandle pool(virStoragePoolLookupByTargetPath(conn.get(), dir.c_str()));
  if (!pool) return LibvirtError("finding the pool over " + dir);
  if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("reading " + dir);
  virStorageVolPtr* vols = nullptr;
  const int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
  if (n < 0) return LibvirtError("listing " + dir);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    StorageVolHandle vol(vols[i]);
    names.emplace_back(virStorageVolGetName(vol.get()));
  }
  free(vols);  // NOLINT: allocated by libvirt
  return names;
}

// Every change warren makes is reported, in order, on the host's own thread.
TEST_P(VmHostContractTest, WatchStatesReportsEveryChangeInOrder) {
  ASSERT_TRUE(host_->WatchStates(recorder_.Listener()).ok());
  const std::string id = "aaaa0050";
  ASSERT_TRUE(host_->Create(Spec(id)).ok());
  EXPECT_EQ(Names(recorder_.WaitFor(id, {S::kRunning})), Names({S::kRunning}));
  ASSERT_TRUE(host_->Pause(id).ok());
  ASSERT_TRUE(host_->Resume(id).ok());
  std::vector<VmState> want = {S::kRunning, S::kPaused, S::kRunning};
  EXPECT_EQ(Names(recorder_.WaitFor(id, want)), Names(want));
  ASSERT_TRUE(host_->Restart(id).ok());  // a power cycle: stopped, then running again
  want.insert(want.end(), {S::kStopped, S::kRunning});
  EXPECT_EQ(Names(recorder_.WaitFor(id, want)), Names(want));
  ASSERT_TRUE(host_->Stop(id).ok());
  ASSERT_TRUE(host_->Start(id).ok());
  want.insert(want.end(), {S::kStopped, S::kRunning});
  EXPECT_EQ(Names(recorder_.WaitFor(id, want)), Names(want));
  ASSERT_TRUE(host_->Destroy(id).ok());  // removed: stopped
  want.push_back(S::kStopped);
  EXPECT_EQ(Names(recorder_.WaitFor(id, want)), Names(want));
  // A refused change changes nothing and reports nothing.
  const std::string other = "aaaa0051";
  ASSERT_TRUE(host_->Create(Spec(other)).ok());
  EXPECT_EQ(host_->Resume(other).code(), Code::kConflict);
  ASSERT_TRUE(host_->Stop(other).ok());
  EXPECT_EQ(Names(recorder_.WaitFor(other, {S::kRunning, S::kStopped})),
            Names({S::kRunning, S::kStopped}));
  ASSERT_TRUE(host_->Destroy(other).ok());  // a stopped VM removed: stopped still
  recorder_.WaitForCount(other, 3);
  EXPECT_EQ(recorder_.All().back().id, other);
  EXPECT_EQ(recorder_.All().back().state, S::kStopped);
  // The host's own domains only.
  for (const VmStateEvent& e : recorder_.All()) {
    EXPECT_TRUE(e.id == id || e.id == other) << e.id;
  }
}

TEST_P(VmHostContractTest, WatchStatesReportsTheCopyRunning) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0052")).ok());
  ASSERT_TRUE(host_->WatchStates(recorder_.Listener()).ok());
  ASSERT_TRUE(host_->Copy("aaaa0052", Spec("aaaa0053")).ok());
  EXPECT_EQ(Names(recorder_.WaitFor("aaaa0053", {S::kRunning})), Names({S::kRunning}));
  // The source ran on throughout: if anything is said of it, it ends running.
  std::vector<VmState> source = recorder_.StatesOf("aaaa0052");
  if (!source.empty()) EXPECT_EQ(source.back(), S::kRunning) << Names(source);
  // A later listener replaces the first; an empty one stops the calls.
  StateRecorder second;
  ASSERT_TRUE(host_->WatchStates(second.Listener()).ok());
  ASSERT_TRUE(host_->Pause("aaaa0053").ok());
  // libvirt may say the copy runs twice (QEMU's resume, then the start), the second after
  // the listener changed: the second listener may see it running first, and ends paused.
  const std::vector<VmState> seen = second.WaitForLast("aaaa0053", S::kPaused);
  EXPECT_TRUE(Names(seen) == Names({S::kPaused}) || Names(seen) == Names({S::kRunning, S::kPaused}))
      << Names(seen);
  ASSERT_TRUE(host_->WatchStates(nullptr).ok());
  ASSERT_TRUE(host_->Resume("aaaa0053").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Names(second.StatesOf("aaaa0053")), Names(seen));
  EXPECT_EQ(Names(recorder_.StatesOf("aaaa0053")), Names({S::kRunning}));
}

// A change warren did not make (the guest powered off, QEMU killed) is reported too.
TEST_P(VmHostContractTest, WatchStatesReportsAChangeBehindWarrensBack) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0054")).ok());
  ASSERT_TRUE(host_->WatchStates(recorder_.Listener()).ok());
  Status off = GetParam().power_off_behind_back(*host_, "aaaa0054");
  ASSERT_TRUE(off.ok()) << off.ToString();
  EXPECT_EQ(Names(recorder_.WaitFor("aaaa0054", {S::kStopped})), Names({S::kStopped}));
  EXPECT_EQ(StateOf("aaaa0054"), S::kStopped);
}

// After the connection to the hypervisor is lost and regained, every VM's state is reported
// once (a change may have gone unseen meanwhile), and later changes still are.
TEST_P(VmHostContractTest, WatchStatesReportsEveryStateAfterAReconnect) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0055")).ok());
  ASSERT_TRUE(host_->Create(Spec("aaaa0056")).ok());
  ASSERT_TRUE(host_->Pause("aaaa0056").ok());
  ASSERT_TRUE(host_->WatchStates(recorder_.Listener()).ok());
  Status cut = GetParam().cut_connection(*host_);
  ASSERT_TRUE(cut.ok()) << cut.ToString();
  EXPECT_EQ(Names(recorder_.WaitFor("aaaa0055", {S::kRunning})), Names({S::kRunning}));
  EXPECT_EQ(Names(recorder_.WaitFor("aaaa0056", {S::kPaused})), Names({S::kPaused}));
  EXPECT_EQ(recorder_.All().size(), 2u);  // once each
  ASSERT_TRUE(host_->Resume("aaaa0056").ok());
  EXPECT_EQ(Names(recorder_.WaitFor("aaaa0056", {S::kPaused, S::kRunning})),
            Names({S::kPaused, S::kRunning}));
}

// Capacity names the host's cores and counts what a new VM holds from the moment it exists
// (its whole disk, its memory while it runs), before its guest touched any of it.
TEST_P(VmHostContractTest, CapacityCountsWhatVmsHold) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  Result<HostCapacity> before = host_->Capacity();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_GT(before->cpu_cores, 0);
  if (before->cpu_cores < 64) {  // the most a spec may ask for
    VmSpec wide = Spec("aaaa0031");
    wide.cpus = before->cpu_cores + 1;
    EXPECT_EQ(host_->Create(wide).code(), Code::kInvalidArgument);
    EXPECT_EQ(host_->Inspect("aaaa0031").status().code(), Code::kNotFound);
  }
  ASSERT_TRUE(host_->Create(Spec("aaaa0032")).ok());  // 1 GiB disk
  Result<HostCapacity> after = host_->Capacity();
  ASSERT_TRUE(after.ok());
  // The overlay holds a little already; the rest of its gigabyte is promised.
  EXPECT_GE(after->disk_committed_bytes - before->disk_committed_bytes, kGiB - 64 * (1 << 20));
  EXPECT_LE(after->disk_committed_bytes - before->disk_committed_bytes, kGiB);
  ASSERT_TRUE(host_->Destroy("aaaa0032").ok());
  EXPECT_EQ(host_->Capacity()->disk_committed_bytes, before->disk_committed_bytes);
}

TEST_P(VmHostContractTest, CreateStartsTheVm) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0001")).ok());
  Result<VmInfo> info = host_->Inspect("aaaa0001");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_EQ(info->cpus, 1);
  EXPECT_EQ(info->memory_mib, 256);
  EXPECT_EQ(info->disk_gib, 1);
  EXPECT_GT(info->started_at, 0);
  EXPECT_EQ(info->name, "aaaa0001");  // no name given: the id
  EXPECT_EQ(info->image, image_);
  EXPECT_TRUE(host_->Destroy("aaaa0001").ok());
}

TEST_P(VmHostContractTest, RenameRelabelsARunningVm) {
  VmSpec spec = Spec("aaaa0010");
  spec.name = "first-name";
  ASSERT_TRUE(host_->Create(spec).ok());
  EXPECT_EQ(host_->Inspect("aaaa0010")->name, "first-name");
  ASSERT_TRUE(host_->Rename("aaaa0010", "second-name").ok());
  EXPECT_EQ(host_->Inspect("aaaa0010")->name, "second-name");
  EXPECT_EQ(host_->Inspect("aaaa0010")->state, VmState::kRunning);
  EXPECT_EQ(host_->Rename("aaaa0010", "Bad Name").code(), Code::kInvalidArgument);
  EXPECT_EQ(host_->Rename("nosuchvm", "whatever").code(), Code::kNotFound);
  EXPECT_TRUE(host_->Destroy("aaaa0010").ok());
}

TEST_P(VmHostContractTest, DuplicateIdConflicts) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0002")).ok());
  EXPECT_EQ(host_->Create(Spec("aaaa0002")).code(), Code::kConflict);
  EXPECT_TRUE(host_->Destroy("aaaa0002").ok());
}

TEST_P(VmHostContractTest, InvalidSpecIsRefusedBeforeAnyWork) {
  VmSpec bad = Spec("BAD!");
  EXPECT_EQ(host_->Create(bad).code(), Code::kInvalidArgument);
  VmSpec no_mem = Spec("aaaa0003");
  no_mem.memory_mib = 1;
  EXPECT_EQ(host_->Create(no_mem).code(), Code::kInvalidArgument);
  EXPECT_TRUE(host_->List()->empty());
}

TEST_P(VmHostContractTest, StateMachine) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0004")).ok());
  EXPECT_EQ(host_->Start("aaaa0004").code(), Code::kConflict);
  EXPECT_EQ(host_->Resume("aaaa0004").code(), Code::kConflict);
  ASSERT_TRUE(host_->Pause("aaaa0004").ok());
  EXPECT_EQ(StateOf("aaaa0004"), VmState::kPaused);
  EXPECT_EQ(host_->Pause("aaaa0004").code(), Code::kConflict);
  ASSERT_TRUE(host_->Resume("aaaa0004").ok());
  ASSERT_TRUE(host_->Restart("aaaa0004").ok());
  EXPECT_EQ(StateOf("aaaa0004"), VmState::kRunning);
  ASSERT_TRUE(host_->Stop("aaaa0004").ok());
  EXPECT_EQ(StateOf("aaaa0004"), VmState::kStopped);
  EXPECT_EQ(host_->Inspect("aaaa0004")->started_at, 0);
  EXPECT_EQ(host_->Stop("aaaa0004").code(), Code::kConflict);
  EXPECT_EQ(host_->Pause("aaaa0004").code(), Code::kConflict);
  ASSERT_TRUE(host_->Start("aaaa0004").ok());
  EXPECT_EQ(StateOf("aaaa0004"), VmState::kRunning);
  EXPECT_TRUE(host_->Destroy("aaaa0004").ok());
}

TEST_P(VmHostContractTest, UnknownIdIsNotFound) {
  EXPECT_EQ(host_->Start("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Destroy("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Inspect("nosuchvm").status().code(), Code::kNotFound);
  EXPECT_EQ(host_->Console("nosuchvm", 10).status().code(), Code::kNotFound);
}

TEST_P(VmHostContractTest, DestroyRemovesWhateverTheState) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0005")).ok());
  ASSERT_TRUE(host_->Pause("aaaa0005").ok());
  ASSERT_TRUE(host_->Destroy("aaaa0005").ok());
  EXPECT_EQ(host_->Inspect("aaaa0005").status().code(), Code::kNotFound);
  EXPECT_TRUE(host_->List()->empty());
}

TEST_P(VmHostContractTest, ListShowsEveryVm) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0006")).ok());
  ASSERT_TRUE(host_->Create(Spec("aaaa0007")).ok());
  ASSERT_TRUE(host_->Stop("aaaa0007").ok());
  Result<std::vector<VmInfo>> all = host_->List();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  EXPECT_TRUE(host_->Destroy("aaaa0006").ok());
  EXPECT_TRUE(host_->Destroy("aaaa0007").ok());
}

TEST_P(VmHostContractTest, ConsoleIsBoundedByLines) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0008")).ok());
  Result<std::string> one = host_->Console("aaaa0008", 1);
  ASSERT_TRUE(one.ok());
  EXPECT_LE(std::count(one->begin(), one->end(), '\n'), 1);
  EXPECT_TRUE(host_->Destroy("aaaa0008").ok());
}

TEST_P(VmHostContractTest, CopyForksARunningVm) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0011")).ok());
  EXPECT_EQ(host_->Inspect("aaaa0011")->disk_layers, 1);
  VmSpec copy = Spec("aaaa0012");
  copy.name = "the-copy";
  ASSERT_TRUE(host_->Copy("aaaa0011", copy).ok());
  Result<VmInfo> c = host_->Inspect("aaaa0012");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->state, VmState::kRunning);
  EXPECT_EQ(c->name, "the-copy");
  EXPECT_EQ(c->image, image_);
  EXPECT_EQ(c->disk_gib, 1);
  EXPECT_EQ(c->disk_layers, 2);
  // The source kept running, one layer deeper.
  EXPECT_EQ(StateOf("aaaa0011"), VmState::kRunning);
  EXPECT_EQ(host_->Inspect("aaaa0011")->disk_layers, 2);
  // Onto an existing id, from an unknown one, onto itself.
  EXPECT_EQ(host_->Copy("aaaa0011", Spec("aaaa0012")).code(), Code::kConflict);
  EXPECT_EQ(host_->Copy("nosuchvm", Spec("aaaa0013")).code(), Code::kNotFound);
  EXPECT_EQ(host_->Copy("aaaa0011", Spec("aaaa0011")).code(), Code::kInvalidArgument);
  EXPECT_EQ(host_->Inspect("aaaa0013").status().code(), Code::kNotFound);
  // Removing the source leaves the copy whole: it can still power-cycle on its chain.
  ASSERT_TRUE(host_->Destroy("aaaa0011").ok());
  ASSERT_TRUE(host_->Restart("aaaa0012").ok());
  EXPECT_EQ(StateOf("aaaa0012"), VmState::kRunning);
  EXPECT_EQ(host_->Inspect("aaaa0012")->disk_layers, 2);
  ASSERT_TRUE(host_->Destroy("aaaa0012").ok());
  Result<int> left = host_->RemoveUnusedDisks();
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, 0);  // Destroy already collected them
}

TEST_P(VmHostContractTest, CopyOfAStoppedVmRuns) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0014")).ok());
  ASSERT_TRUE(host_->Stop("aaaa0014").ok());
  ASSERT_TRUE(host_->Copy("aaaa0014", Spec("aaaa0015")).ok());
  EXPECT_EQ(StateOf("aaaa0015"), VmState::kRunning);
  EXPECT_EQ(StateOf("aaaa0014"), VmState::kStopped);
  ASSERT_TRUE(host_->Start("aaaa0014").ok());
  EXPECT_EQ(host_->Inspect("aaaa0014")->disk_layers, 2);
  ASSERT_TRUE(host_->Destroy("aaaa0014").ok());
  ASSERT_TRUE(host_->Destroy("aaaa0015").ok());
}

TEST_P(VmHostContractTest, DeepChainsAreFlattened) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0016")).ok());
  for (int i = 0; i < kMaxDiskLayers; ++i) {
    std::string id = "bbbb00" + std::to_string(10 + i);
    ASSERT_TRUE(host_->Copy("aaaa0016", Spec(id)).ok()) << i;
    ASSERT_TRUE(host_->Destroy(id).ok());
  }
  // kMaxDiskLayers + 1 layers: the last copy started a live pull onto the image.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int layers = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    layers = host_->Inspect("aaaa0016")->disk_layers;
    if (layers == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(layers, 1);
  EXPECT_EQ(StateOf("aaaa0016"), VmState::kRunning);
  ASSERT_TRUE(host_->RemoveUnusedDisks().ok());  // the freed layers
  ASSERT_TRUE(host_->Restart("aaaa0016").ok());  // and it still boots
  ASSERT_TRUE(host_->Destroy("aaaa0016").ok());
}

TEST_P(VmHostContractTest, ResizeGrowsTheDiskLiveAndTheRestAtTheNextStart) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0017")).ok());
  ResizeSpec disk;
  disk.disk_gib = 2;
  Result<ResizeOutcome> grown = host_->Resize("aaaa0017", disk);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_TRUE(grown->disk_grown);
  EXPECT_FALSE(grown->restart_needed);
  EXPECT_EQ(host_->Inspect("aaaa0017")->disk_gib, 2);
  EXPECT_EQ(StateOf("aaaa0017"), VmState::kRunning);
  ResizeSpec shrink;
  shrink.disk_gib = 1;
  EXPECT_EQ(host_->Resize("aaaa0017", shrink).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(host_->Resize("aaaa0017", ResizeSpec{}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(host_->Resize("nosuchvm", disk).status().code(), Code::kNotFound);

  ResizeSpec more;
  more.cpus = 2;
  more.memory_mib = 384;
  Result<ResizeOutcome> r = host_->Resize("aaaa0017", more);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->restart_needed);
  EXPECT_EQ(host_->Inspect("aaaa0017")->cpus, 1);  // until the next start
  ASSERT_TRUE(host_->Restart("aaaa0017").ok());
  Result<VmInfo> after = host_->Inspect("aaaa0017");
  EXPECT_EQ(after->cpus, 2);
  EXPECT_EQ(after->memory_mib, 384);
  EXPECT_EQ(after->disk_gib, 2);
  // A stopped VM takes everything at once.
  ASSERT_TRUE(host_->Stop("aaaa0017").ok());
  ResizeSpec stopped;
  stopped.cpus = 1;
  stopped.disk_gib = 3;
  r = host_->Resize("aaaa0017", stopped);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->restart_needed);
  EXPECT_EQ(host_->Inspect("aaaa0017")->cpus, 1);
  EXPECT_EQ(host_->Inspect("aaaa0017")->disk_gib, 3);
  EXPECT_TRUE(host_->Destroy("aaaa0017").ok());
}

// The network device comes and goes live on a running VM and in the definition of a stopped
// one; asking for what is already so changes nothing.
TEST_P(VmHostContractTest, SetNetworkPlugsAndUnplugsTheDevice) {
  VmSpec spec = Spec("aaaa0040");  // no network device
  ASSERT_TRUE(host_->Create(spec).ok());
  Result<bool> live = host_->SetNetwork("aaaa0040", Egress::kNone);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_FALSE(*live);
  live = host_->SetNetwork("aaaa0040", Egress::kAll);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(*live);
  EXPECT_FALSE(*host_->SetNetwork("aaaa0040", Egress::kAll));
  live = host_->SetNetwork("aaaa0040", Egress::kNone);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(*live);
  EXPECT_EQ(StateOf("aaaa0040"), VmState::kRunning);
  ASSERT_TRUE(host_->Stop("aaaa0040").ok());
  live = host_->SetNetwork("aaaa0040", Egress::kAll);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_FALSE(*live);  // in the definition: the next start has it
  ASSERT_TRUE(host_->Start("aaaa0040").ok());
  EXPECT_FALSE(*host_->SetNetwork("aaaa0040", Egress::kAll));
  EXPECT_EQ(host_->SetNetwork("nosuchvm", Egress::kAll).status().code(), Code::kNotFound);
  EXPECT_TRUE(host_->Destroy("aaaa0040").ok());
}

// A running VM saved as the template of its shape is gone as a VM; VMs of that shape are
// then restored from it, each under its own id, name, MAC and host key; other shapes are not;
// its clones outlive its removal. On a remote host too (libvirt_host_remote_templates.cc).
TEST_P(VmHostContractTest, TemplatesSaveAVmAndRestoreClonesOfItsShape) {
  VmSpec base = Spec("aaaa0060");
  base.egress = Egress::kAll;  // a NIC: clones get MACs of their own
  ASSERT_TRUE(host_->Create(base).ok());
  EXPECT_EQ(host_->SaveTemplate("nosuchvm", "t1").code(), Code::kNotFound);
  ASSERT_TRUE(host_->SaveTemplate("aaaa0060", "t1").ok());
  EXPECT_EQ(host_->Inspect("aaaa0060").status().code(), Code::kNotFound);
  Result<std::vector<TemplateInfo>> templates = host_->Templates();
  ASSERT_TRUE(templates.ok()) << templates.status().ToString();
  ASSERT_EQ(templates->size(), 1u);
  EXPECT_EQ((*templates)[0].shape, ShapeOf(base));
  EXPECT_EQ((*templates)[0].tag, "t1");
  EXPECT_GT((*templates)[0].bytes, 0);

  VmSpec one = base;
  one.id = "aaaa0061";
  one.name = "clone-one";
  Result<RestoredVm> a = host_->CreateFromTemplate(one);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mac.size(), 17u) << a->mac;
  EXPECT_TRUE(a->host_key_pub.starts_with("ssh-ed25519 ")) << a->host_key_pub;
  Result<VmInfo> info = host_->Inspect("aaaa0061");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_EQ(info->name, "clone-one");
  EXPECT_EQ(info->cpus, base.cpus);
  EXPECT_EQ(info->memory_mib, base.memory_mib);
  EXPECT_EQ(info->image, image_);
  EXPECT_EQ(host_->CreateFromTemplate(one).status().code(), Code::kConflict);

  VmSpec two = base;
  two.id = "aaaa0062";
  Result<RestoredVm> b = host_->CreateFromTemplate(two);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(a->mac, b->mac);
  EXPECT_NE(a->host_key_pub, b->host_key_pub);

  VmSpec other = base;
  other.id = "aaaa0063";
  other.memory_mib = 384;
  EXPECT_EQ(host_->CreateFromTemplate(other).status().code(), Code::kNotFound);
  EXPECT_EQ(host_->Inspect("aaaa0063").status().code(), Code::kNotFound);

  // A paused clone (a warm pool's) takes another identity and runs on: its name, a new host
  // key, its MAC kept. Only of its own shape.
  ASSERT_TRUE(host_->Pause("aaaa0062").ok());
  VmSpec pooled = two;
  pooled.name = "handed-out";
  pooled.env = {{"GREETING", "hi"}};
  other.id = two.id;
  EXPECT_EQ(host_->Reidentify(other, {}).status().code(), Code::kInvalidArgument);
  pooled.id = "aaaa0069";
  EXPECT_EQ(host_->Reidentify(pooled, {}).status().code(), Code::kNotFound);
  pooled.id = two.id;
  Result<RestoredVm> handed = host_->Reidentify(pooled, {});
  ASSERT_TRUE(handed.ok()) << handed.status().ToString();
  EXPECT_EQ(handed->mac, b->mac);
  EXPECT_TRUE(handed->host_key_pub.starts_with("ssh-ed25519 ")) << handed->host_key_pub;
  EXPECT_NE(handed->host_key_pub, b->host_key_pub);
  info = host_->Inspect(two.id);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_EQ(info->name, "handed-out");
  EXPECT_TRUE(handed->seed_has_more);  // its env: the guest must read the seed

  // Without env or a setup script the guest needs nothing from the new seed: the caller's
  // part (its identity) runs once the VM runs, given the private key too; its failure is
  // Reidentify's.
  ASSERT_TRUE(host_->Pause(two.id).ok());
  VmSpec plain = two;
  plain.name = "handed-again";
  std::string seen_key;
  std::optional<VmState> seen_state;
  Result<RestoredVm> again = host_->Reidentify(plain, [&](const RestoredVm& r) {
    seen_key = r.host_key;
    Result<VmInfo> now = host_->Inspect(two.id);
    if (now.ok()) seen_state = now->state;
    return Status::Ok();
  });
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->seed_has_more);
  EXPECT_EQ(seen_key, again->host_key);
  EXPECT_NE(seen_key.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(seen_state, VmState::kRunning);
  EXPECT_EQ(host_->Inspect(two.id)->name, "handed-again");
  ASSERT_TRUE(host_->Pause(two.id).ok());
  EXPECT_EQ(
      host_->Reidentify(plain, [](const RestoredVm&) { return Internal("the guest said no"); })
          .status()
          .code(),
      Code::kInternal);
  ASSERT_TRUE(host_->Resume(two.id).ok() || host_->Inspect(two.id)->state == VmState::kRunning);

  // Removing the template leaves its clones running on their disks.
  ASSERT_TRUE(host_->RemoveTemplate(ShapeOf(base)).ok());
  EXPECT_EQ(host_->RemoveTemplate(ShapeOf(base)).code(), Code::kNotFound);
  EXPECT_TRUE(host_->Templates()->empty());
  VmSpec three = base;
  three.id = "aaaa0064";
  EXPECT_EQ(host_->CreateFromTemplate(three).status().code(), Code::kNotFound);
  EXPECT_TRUE(host_->RemoveUnusedDisks().ok());
  EXPECT_EQ(host_->Inspect("aaaa0061")->state, VmState::kRunning);
  EXPECT_TRUE(host_->Stop("aaaa0062").ok());
  EXPECT_TRUE(host_->Start("aaaa0062").ok());  // boots from its own disk over the base
  EXPECT_EQ(host_->Inspect("aaaa0062")->state, VmState::kRunning);
  EXPECT_TRUE(host_->Destroy("aaaa0061").ok());
  EXPECT_TRUE(host_->Destroy("aaaa0062").ok());
}

// A running VM copied with its memory (cp --live): the copy runs at once under its own id,
// name, MAC and host key, on a disk of its own over the source's frozen top, while the source
// runs on one layer deeper. Only of a running VM, never onto itself or an existing VM; a
// refusal leaves nothing; the copy outlives its source and boots from its own disk.
TEST_P(VmHostContractTest, CopyLiveRestoresARunningVmAsANewOne) {
  VmSpec src = Spec("aaaa0070");
  src.egress = Egress::kAll;  // a NIC: the copy gets a MAC of its own
  ASSERT_TRUE(host_->Create(src).ok());
  VmSpec one = src;
  one.id = "aaaa0071";
  one.name = "live-one";
  Result<RestoredVm> a = host_->CopyLive("aaaa0070", one);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mac.size(), 17u) << a->mac;
  EXPECT_TRUE(a->host_key_pub.starts_with("ssh-ed25519 ")) << a->host_key_pub;
  Result<VmInfo> info = host_->Inspect("aaaa0071");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_EQ(info->name, "live-one");
  EXPECT_EQ(info->cpus, src.cpus);
  EXPECT_EQ(info->memory_mib, src.memory_mib);
  EXPECT_EQ(info->image, image_);
  EXPECT_EQ(info->disk_layers, 2);
  EXPECT_EQ(StateOf("aaaa0070"), S::kRunning);
  EXPECT_EQ(host_->Inspect("aaaa0070")->disk_layers, 2);
  if (auto* libvirt = dynamic_cast<LibvirtHost*>(host_.get())) {
    // The memory file went once restored: DATA/tmp/live-* here, the copy's live.save in its
    // directory on a remote host (seen through libvirt: that directory is not here).
    const auto tmp = std::filesystem::path(libvirt->DisksDir()).parent_path() / "tmp";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(tmp, ec)) {
      EXPECT_FALSE(entry.path().filename().string().starts_with("live-")) << entry.path();
    }
    Result<std::vector<std::string>> files = VolumesIn(libvirt->uri(), libvirt->VmDir("aaaa0071"));
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    EXPECT_NE(std::find(files->begin(), files->end(), "seed.img"), files->end());
    EXPECT_EQ(std::find(files->begin(), files->end(), "live.save"), files->end());
  }

  EXPECT_EQ(host_->CopyLive("aaaa0070", one).status().code(), Code::kConflict);
  EXPECT_EQ(host_->CopyLive("aaaa0070", src).status().code(), Code::kInvalidArgument);
  VmSpec two = src;
  two.id = "aaaa0072";
  EXPECT_EQ(host_->CopyLive("nosuchvm", two).status().code(), Code::kNotFound);
  ASSERT_TRUE(host_->Pause("aaaa0070").ok());
  EXPECT_EQ(host_->CopyLive("aaaa0070", two).status().code(), Code::kConflict);
  EXPECT_EQ(host_->Inspect("aaaa0072").status().code(), Code::kNotFound);
  ASSERT_TRUE(host_->Resume("aaaa0070").ok());
  EXPECT_EQ(host_->List()->size(), 2u);

  ASSERT_TRUE(host_->Destroy("aaaa0070").ok());
  EXPECT_TRUE(host_->RemoveUnusedDisks().ok());
  EXPECT_EQ(StateOf("aaaa0071"), S::kRunning);
  EXPECT_TRUE(host_->Stop("aaaa0071").ok());
  EXPECT_TRUE(host_->Start("aaaa0071").ok());  // boots from its own overlay over the frozen top
  EXPECT_EQ(StateOf("aaaa0071"), S::kRunning);
  EXPECT_TRUE(host_->Destroy("aaaa0071").ok());
}

HostCase FakeCase() {
  return {"Fake", [](std::string*) { return std::unique_ptr<VmHost>(new FakeVmHost()); },
          [] { return std::string("tiny@1"); },
          [](VmHost& host, const std::string& id) {
            return static_cast<FakeVmHost&>(host).SimulateOutOfBand(id, VmState::kStopped);
          },
          [](VmHost& host) {
            static_cast<FakeVmHost&>(host).SimulateReconnect();
            return Status::Ok();
          }};
}

// virsh destroy, on a connection of our own.
Status PowerOffWithLibvirt(const RealLibvirtEnv& env, const std::string& id) {
  WARREN_ASSIGN_OR_RETURN(ConnectHandle conn, OpenLibvirt(env.uri));
  DomainHandle dom(virDomainLookupByName(conn.get(), (env.prefix + id).c_str()));
  if (!dom) return LibvirtError("looking up " + id);
  if (virDomainDestroy(dom.get()) < 0) return LibvirtError("destroying " + id);
  return Status::Ok();
}

// Has libvirtd drop every connection of this process (virt-admin client-disconnect), as a
// daemon restart would, without restarting it under other tests' VMs.
Status CutOurLibvirtConnections() {
  ProcessOptions o;
  o.timeout = std::chrono::milliseconds(20000);
  Result<ProcessResult> list = RunProcess({"virt-admin", "srv-clients-list", "libvirtd"}, o);
  if (!list.ok()) return list.status();
  if (list->exit_code != 0) return Unavailable("virt-admin srv-clients-list: " + list->output);
  std::istringstream lines(list->output);
  std::string line;
  int cut = 0;
  const std::string our_pid = std::to_string(getpid());
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string client;
    if (!(words >> client) || client.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    Result<ProcessResult> info = RunProcess({"virt-admin", "client-info", "libvirtd", client}, o);
    if (!info.ok() || info->exit_code != 0) continue;  // gone meanwhile
    std::istringstream fields(info->output);
    std::string field;
    bool ours = false;
    while (std::getline(fields, field)) {
      if (field.rfind("unix_process_id", 0) != 0) continue;
      const size_t colon = field.find(':');
      std::string pid = colon == std::string::npos ? "" : field.substr(colon + 1);
      pid.erase(0, pid.find_first_not_of(' '));
      ours = pid == our_pid;
    }
    if (!ours) continue;
    Result<ProcessResult> done =
        RunProcess({"virt-admin", "client-disconnect", "libvirtd", client}, o);
    if (!done.ok()) return done.status();
    if (done->exit_code != 0) return Internal("virt-admin client-disconnect: " + done->output);
    ++cut;
  }
  if (cut == 0) return NotFound("libvirtd lists no connection of this process");
  return Status::Ok();
}

// The remote host's daemon drops every client (this process is its only one), through
// virt-admin run where that daemon is: WARREN_TEST_REMOTE_ADMIN is the command prefix that
// gets there (the fixture's `nsenter -t PID -m -n`).
Status CutRemoteConnections() {
  const char* prefix_env = std::getenv("WARREN_TEST_REMOTE_ADMIN");
  if (prefix_env == nullptr || *prefix_env == '\0') {
    return Unavailable("WARREN_TEST_REMOTE_ADMIN is not set");
  }
  std::vector<std::string> prefix;
  std::istringstream words(prefix_env);
  for (std::string w; words >> w;) prefix.push_back(w);
  auto admin = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = prefix;
    argv.push_back("virt-admin");
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions o;
    o.timeout = std::chrono::milliseconds(20000);
    return RunProcess(argv, o);
  };
  Result<ProcessResult> list = admin({"srv-clients-list", "libvirtd"});
  if (!list.ok()) return list.status();
  if (list->exit_code != 0) return Unavailable("virt-admin srv-clients-list: " + list->output);
  std::istringstream lines(list->output);
  int cut = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string client;
    if (!(fields >> client) || client.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    Result<ProcessResult> done = admin({"client-disconnect", "libvirtd", client});
    if (done.ok() && done->exit_code == 0) ++cut;
  }
  if (cut == 0) return NotFound("the remote libvirtd lists no client");
  return Status::Ok();
}

HostCase LibvirtCase(bool remote) {
  auto env = remote ? &GetRemoteLibvirtEnv : &GetRealLibvirtEnv;
  return {
      remote ? "LibvirtRemote" : "Libvirt",
      [env](std::string* skip_reason) -> std::unique_ptr<VmHost> {
        if (!env().available) {
          *skip_reason = env().skip_reason;
          return nullptr;
        }
        return std::make_unique<LibvirtHost>(env().HostOptions());
      },
      [env] { return env().image; },
      [env](VmHost&, const std::string& id) { return PowerOffWithLibvirt(env(), id); },
      [remote](VmHost&) { return remote ? CutRemoteConnections() : CutOurLibvirtConnections(); }};
}

// The remote case only where a remote host is given (tests/integration/
// test_remote_libvirt_host.py runs it with WARREN_TEST_REMOTE_LIBVIRT_URI).
std::vector<HostCase> Cases() {
  std::vector<HostCase> cases = {FakeCase(), LibvirtCase(false)};
  const char* remote = std::getenv("WARREN_TEST_REMOTE_LIBVIRT_URI");
  if (remote != nullptr && *remote != '\0') cases.push_back(LibvirtCase(true));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, VmHostContractTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<HostCase>& info) {
                           return info.param.name;
                         });

// The host's own limits, on the real host: far more memory than this machine has.
TEST(LibvirtHostLimitsTest, ResizeBeyondTheHostIsRefused) {
  const RealLibvirtEnv& env = GetRealLibvirtEnv();
  if (!env.available) WARREN_SKIP_OR_FAIL() << env.skip_reason;
  LibvirtHost host(env.HostOptions());
  VmSpec s;
  s.id = "cccc0001";
  s.image = env.image;
  s.cpus = 1;
  s.memory_mib = 256;
  s.disk_gib = 1;
  s.egress = Egress::kNone;
  ASSERT_TRUE(host.Create(s).ok());
  // A second warren on the same libvirtd, with its own data directory, does not count
  // this VM as its own (its reconcile would destroy it as an orphan).
  LibvirtHostOptions other = env.HostOptions();
  other.data_dir = env.data_dir + "/other";
  EXPECT_TRUE(LibvirtHost(other).List()->empty());
  EXPECT_EQ(host.List()->size(), 1u);
  ResizeSpec huge;
  huge.memory_mib = 250 * 1024;
  EXPECT_EQ(host.Resize("cccc0001", huge).status().code(), Code::kLimitExceeded);
  ResizeSpec disk;
  disk.disk_gib = 2048;
  EXPECT_EQ(host.Resize("cccc0001", disk).status().code(), Code::kLimitExceeded);
  EXPECT_EQ(host.Inspect("cccc0001")->disk_gib, 1);  // nothing changed
  // Every layer is in DATA/disks and goes with the last VM that uses it.
  VmSpec c = s;
  c.id = "cccc0002";
  ASSERT_TRUE(host.Copy("cccc0001", c).ok());
  Result<std::vector<std::string>> chain = host.DiskChain("cccc0002");
  ASSERT_TRUE(chain.ok());
  ASSERT_EQ(chain->size(), 3u);  // copy's top, the frozen layer, the image
  EXPECT_EQ(host.DiskChain("cccc0001")->at(1), chain->at(1));
  ASSERT_TRUE(host.Destroy("cccc0001").ok());
  EXPECT_TRUE(std::filesystem::exists(chain->at(1)));
  ASSERT_TRUE(host.Destroy("cccc0002").ok());
  EXPECT_FALSE(std::filesystem::exists(chain->at(0)));
  EXPECT_FALSE(std::filesystem::exists(chain->at(1)));
  EXPECT_TRUE(std::filesystem::is_empty(host.DisksDir()));
}

TEST(FakeVmHostTest, HostLimits) {
  FakeVmHost host;
  host.SetHostLimits(1024, 20);
  VmSpec s;
  s.id = "aaaa0019";
  s.image = "tiny@1";
  s.memory_mib = 2048;
  EXPECT_EQ(host.Create(s).code(), Code::kLimitExceeded);
  s.memory_mib = 512;
  ASSERT_TRUE(host.Create(s).ok());
  ResizeSpec r;
  r.disk_gib = 100;
  EXPECT_EQ(host.Resize("aaaa0019", r).status().code(), Code::kLimitExceeded);
}

TEST(FakeVmHostTest, FailNextChangesNothing) {
  FakeVmHost host;
  host.FailNext(Unavailable("libvirt went away"));
  VmSpec s;
  s.id = "aaaa0009";
  s.image = "tiny@1";
  EXPECT_EQ(host.Create(s).code(), Code::kUnavailable);
  EXPECT_TRUE(host.List()->empty());
  EXPECT_TRUE(host.Create(s).ok());
}

// Persisted (PersistIn), the fake is the same host again in a new process: VMs, their
// definitions and templates come back, each has its files, and files no VM or template owns
// (what a process killed mid-change leaves) go at the next RemoveUnusedDisks.
TEST(FakeVmHostTest, PersistedStateOutlivesTheObject) {
  char tmpl[] = "/tmp/warren-fake-host-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::vector<std::string> steps;
  {
    FakeVmHost host;
    ASSERT_TRUE(host.PersistIn(dir).ok());
    host.SetStepHook([&](std::string_view step, std::string_view) { steps.emplace_back(step); });
    VmSpec s;
    s.id = "aaaa0101";
    s.image = "tiny@1";
    s.cpus = 1;
    s.memory_mib = 256;
    s.disk_gib = 1;
    ASSERT_TRUE(host.Create(s).ok());
    EXPECT_EQ(steps, (std::vector<std::string>{"create:before", "create:files", "create:after"}));
    ResizeSpec r;
    r.cpus = 2;
    r.disk_gib = 3;
    ASSERT_TRUE(host.Resize(s.id, r).ok());
    ASSERT_TRUE(host.Rename(s.id, "renamed").ok());
    VmSpec t = s;
    t.id = "aaaa0102";
    ASSERT_TRUE(host.Create(t).ok());
    ASSERT_TRUE(host.SaveTemplate(t.id, "runner-1").ok());
    ASSERT_TRUE(host.Stop(s.id).ok());
  }
  FakeVmHost again;
  ASSERT_TRUE(again.PersistIn(dir).ok());
  ASSERT_EQ(again.List()->size(), 1u);
  EXPECT_EQ(again.Inspect("aaaa0101")->state, VmState::kStopped);
  std::optional<FakeVmHost::Definition> d = again.DefinitionOf("aaaa0101");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ((std::tuple{d->name, d->cpus, d->disk_gib}), (std::tuple{"renamed", 2, int64_t{3}}));
  ASSERT_EQ(again.Templates()->size(), 1u);
  namespace fs = std::filesystem;
  EXPECT_TRUE(fs::exists(dir + "/vms/aaaa0101/control.sock"));
  EXPECT_TRUE(fs::exists(dir + "/disks/aaaa0101.qcow2"));
  EXPECT_FALSE(fs::exists(dir + "/vms/aaaa0102"));  // saved: its files went
  // Leftovers of a change cut short: a VM's files without its VM, a live copy's memory.
  fs::create_directories(dir + "/vms/aaaa0199");
  std::ofstream(dir + "/disks/aaaa0199.qcow2") << "x";
  std::ofstream(dir + "/tmp/live-aaaa0199.save") << "x";
  EXPECT_EQ(again.RemoveUnusedDisks().value(), 1);
  EXPECT_FALSE(fs::exists(dir + "/vms/aaaa0199"));
  EXPECT_FALSE(fs::exists(dir + "/tmp/live-aaaa0199.save"));
  EXPECT_TRUE(fs::exists(dir + "/disks/aaaa0101.qcow2"));
  ASSERT_TRUE(again.Destroy("aaaa0101").ok());
  EXPECT_FALSE(fs::exists(dir + "/vms/aaaa0101"));
  EXPECT_FALSE(fs::exists(dir + "/disks/aaaa0101.qcow2"));
  fs::remove_all(dir);
}

// Stop presses the power button first: a process that dies there (here, a hook that throws)
// leaves a guest that powers off by itself later (SettleShutdowns), as a real one does.
TEST(FakeVmHostTest, AShutdownAskedForFinishesWithoutWarren) {
  FakeVmHost host;
  VmSpec s;
  s.id = "aaaa0111";
  s.image = "tiny@1";
  ASSERT_TRUE(host.Create(s).ok());
  host.SetStepHook([](std::string_view step, std::string_view) {
    if (step == "stop:asked") throw std::runtime_error("killed");
  });
  EXPECT_THROW((void)host.Stop(s.id), std::runtime_error);
  host.SetStepHook(nullptr);
  EXPECT_EQ(host.Inspect(s.id)->state, VmState::kRunning);  // not yet
  host.SettleShutdowns();
  EXPECT_EQ(host.Inspect(s.id)->state, VmState::kStopped);
  host.SettleShutdowns();  // once
  ASSERT_TRUE(host.Start(s.id).ok());
  host.SettleShutdowns();
  EXPECT_EQ(host.Inspect(s.id)->state, VmState::kRunning);
}

}  // namespace
}  // namespace warren
