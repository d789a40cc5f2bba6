// The VmHost contract: every implementation (the fake now, LibvirtHost with the VM issue)
// must pass these, so tests written against the fake mean something for the real host.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "tests/fakes/fake_vm_host.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

using HostFactory = std::function<std::unique_ptr<VmHost>()>;

class VmHostContractTest : public ::testing::TestWithParam<HostFactory> {
 protected:
  void SetUp() override { host_ = GetParam()(); }
  VmSpec Spec(std::string id) {
    VmSpec s;
    s.id = std::move(id);
    s.image = "tiny@1";
    s.cpus = 1;
    s.memory_mib = 256;
    s.disk_gib = 1;
    return s;
  }
  VmState StateOf(const std::string& id) { return host_->Inspect(id)->state; }
  std::unique_ptr<VmHost> host_;
};

TEST_P(VmHostContractTest, CreateStartsTheVm) {
  ASSERT_TRUE(host_->Create(Spec("aaaa0001")).ok());
  Result<VmInfo> info = host_->Inspect("aaaa0001");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_EQ(info->cpus, 1);
  EXPECT_EQ(info->memory_mib, 256);
  EXPECT_GT(info->started_at, 0);
  EXPECT_TRUE(host_->Destroy("aaaa0001").ok());
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

INSTANTIATE_TEST_SUITE_P(Fake, VmHostContractTest, ::testing::Values(HostFactory([] {
                           return std::unique_ptr<VmHost>(std::make_unique<FakeVmHost>());
                         })));

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
