// The VmHost contract: every implementation must pass these, so tests written against the
// fake mean something for the real host. LibvirtHost runs them against real libvirtd +
// QEMU (TCG here) with the tiny guest image, or skips saying what is missing.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "tests/fakes/fake_vm_host.h"
#include "tests/fakes/libvirt_test_env.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

struct HostCase {
  std::string name;
  // Null host plus a reason: this implementation cannot run here.
  std::function<std::unique_ptr<VmHost>(std::string* skip_reason)> make;
  std::function<std::string()> image;  // an image the host can boot
};

// Test names and failure messages show the implementation's name, not the struct's bytes.
void PrintTo(const HostCase& c, std::ostream* os) { *os << c.name; }

class VmHostContractTest : public ::testing::TestWithParam<HostCase> {
 protected:
  void SetUp() override {
    std::string reason;
    host_ = GetParam().make(&reason);
    if (!host_) GTEST_SKIP() << reason;
    image_ = GetParam().image();
  }
  // Nothing a test made outlives it, also when it failed half-way.
  void TearDown() override {
    if (!host_) return;
    Result<std::vector<VmInfo>> vms = host_->List();
    if (!vms.ok()) return;
    for (const VmInfo& vm : *vms) (void)host_->Destroy(vm.id);
  }
  VmSpec Spec(std::string id) {
    VmSpec s;
    s.id = std::move(id);
    s.image = image_;
    s.cpus = 1;
    s.memory_mib = 256;
    s.disk_gib = 1;
    s.egress = Egress::kNone;
    return s;
  }
  VmState StateOf(const std::string& id) { return host_->Inspect(id)->state; }
  std::unique_ptr<VmHost> host_;
  std::string image_;
};

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

HostCase FakeCase() {
  return {"Fake", [](std::string*) { return std::unique_ptr<VmHost>(new FakeVmHost()); },
          [] { return std::string("tiny@1"); }};
}

HostCase LibvirtCase() {
  return {"Libvirt",
          [](std::string* skip_reason) -> std::unique_ptr<VmHost> {
            const LibvirtTestEnv& env = GetLibvirtTestEnv();
            if (!env.available) {
              *skip_reason = env.skip_reason;
              return nullptr;
            }
            return std::make_unique<LibvirtHost>(env.HostOptions());
          },
          [] { return GetLibvirtTestEnv().image; }};
}

INSTANTIATE_TEST_SUITE_P(All, VmHostContractTest, ::testing::Values(FakeCase(), LibvirtCase()),
                         [](const ::testing::TestParamInfo<HostCase>& info) {
                           return info.param.name;
                         });

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

}  // namespace
}  // namespace warren
