// The sandbox rules (lobby/commands/sandbox.h): sizes, lifetimes, names, the host's room for
// sandboxes and how `extend` moves an expiry.
#include "lobby/commands/sandbox.h"

#include <gtest/gtest.h>

#include "lobby/base/vm_name.h"

namespace warren {
namespace {

TEST(SandboxSizeTest, TheDefaultsAreSmallMediumLarge) {
  SandboxPolicy p;
  EXPECT_EQ(FindSandboxSize(p, "small")->cpus, 2);
  EXPECT_EQ(FindSandboxSize(p, "small")->memory_mib, 4096);
  EXPECT_EQ(FindSandboxSize(p, "medium")->cpus, 4);
  EXPECT_EQ(FindSandboxSize(p, "large")->memory_mib, 16384);
  Result<SandboxSize> none = FindSandboxSize(p, "huge");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
  EXPECT_NE(none.status().message().find("small (2 vCPU, 4 GiB)"), std::string::npos)
      << none.status().message();
}

TEST(SandboxSizeTest, ParsesTheServeFlag) {
  Result<SandboxSize> s = ParseSandboxSize("test=1,512M");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "test");
  EXPECT_EQ(s->cpus, 1);
  EXPECT_EQ(s->memory_mib, 512);
  EXPECT_EQ(ParseSandboxSize("big=16,32G")->memory_mib, 32768);
  EXPECT_EQ(ParseSandboxSize("big=16,32G")->disk_gib, 0);
  Result<SandboxSize> disk = ParseSandboxSize("test=1,256M,2G");
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  EXPECT_EQ(disk->memory_mib, 256);
  EXPECT_EQ(disk->disk_gib, 2);
  EXPECT_FALSE(ParseSandboxSize("test=1,256M,0").ok());
  EXPECT_FALSE(ParseSandboxSize("test=1,256M,lots").ok());
  for (const char* bad : {"test", "test=1", "=1,512M", "Test=1,512M", "t=0,512M", "t=65,1G",
                          "t=x,1G", "t=1,64M", "t=1,lots"}) {
    EXPECT_FALSE(ParseSandboxSize(bad).ok()) << bad;
  }
}

TEST(SandboxSizeTest, AFlagReplacesOrAddsASize) {
  SandboxPolicy p;
  PutSandboxSize(p, *ParseSandboxSize("small=1,1G"));
  PutSandboxSize(p, *ParseSandboxSize("test=1,512M"));
  EXPECT_EQ(FindSandboxSize(p, "small")->cpus, 1);
  EXPECT_EQ(FindSandboxSize(p, "test")->memory_mib, 512);
  EXPECT_EQ(p.sizes.size(), 4u);
}

TEST(SandboxLifetimeTest, OneMinuteToADay) {
  EXPECT_EQ(*ParseSandboxLifetime("--timeout", "15m"), 900);
  EXPECT_EQ(*ParseSandboxLifetime("--timeout", "1m"), 60);
  EXPECT_EQ(*ParseSandboxLifetime("--timeout", "24h"), 86400);
  EXPECT_FALSE(ParseSandboxLifetime("--timeout", "59s").ok());
  EXPECT_FALSE(ParseSandboxLifetime("--timeout", "24h1s").ok());
  EXPECT_FALSE(ParseSandboxLifetime("--timeout", "15").ok());
}

TEST(SandboxNameTest, MadeUpNamesAreValidVmNames) {
  for (int i = 0; i < 200; ++i) {
    const std::string name = NewSandboxName();
    EXPECT_EQ(name.rfind("sbx-", 0), 0u) << name;
    EXPECT_EQ(name.size(), 12u);
    EXPECT_TRUE(CheckVmName(name).ok()) << name;
  }
  EXPECT_NE(NewSandboxName(), NewSandboxName());
}

VmRecord Sandbox(const std::string& id, int cpus, int64_t mib, DesiredState state) {
  VmRecord vm;
  vm.id = id;
  vm.kind = "sandbox";
  vm.cpus = cpus;
  vm.memory_mib = mib;
  vm.desired_state = state;
  return vm;
}

TEST(SandboxRoomTest, CountsSandboxesMeantToRunOnly) {
  VmRecord plain;
  plain.id = "vm";
  plain.cpus = 8;
  plain.memory_mib = 8192;
  std::vector<VmRecord> vms = {Sandbox("a", 2, 4096, DesiredState::kRunning),
                               Sandbox("b", 2, 4096, DesiredState::kPaused),
                               Sandbox("c", 4, 8192, DesiredState::kStopped), plain};
  SandboxReservation r = ReservedBySandboxes(vms);
  EXPECT_EQ(r.cpus, 4);
  EXPECT_EQ(r.memory_mib, 8192);
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(ReservedBySandboxes(vms, "a").cpus, 2);
}

TEST(SandboxRoomTest, AdmitsUpToTheHostLessItsReserveTimesTheRatio) {
  HostCapacity host;
  host.cpu_cores = 8;
  host.memory_mib = 32768;
  SandboxPolicy p;
  SandboxReservation held{6, 8192, 3};
  EXPECT_TRUE(CheckSandboxRoom(host, p, held, 2, 4096).ok());
  Status full = CheckSandboxRoom(host, p, held, 4, 4096);
  ASSERT_EQ(full.code(), Code::kLimitExceeded);
  EXPECT_NE(full.message().find("may reserve 8 vCPUs"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("3 sandboxes reserve 6 vCPUs"), std::string::npos);
  p.reserve_cpus = 2;
  EXPECT_EQ(CheckSandboxRoom(host, p, held, 1, 1024).code(), Code::kLimitExceeded);
  p.overcommit = 2.0;  // (8 - 2) × 2 = 12 vCPUs
  EXPECT_TRUE(CheckSandboxRoom(host, p, held, 6, 1024).ok());
  EXPECT_EQ(CheckSandboxRoom(host, p, held, 7, 1024).code(), Code::kLimitExceeded);
  p = SandboxPolicy{};
  p.reserve_memory_mib = 16384;  // 16 GiB left, 8 held
  EXPECT_TRUE(CheckSandboxRoom(host, p, {0, 8192, 1}, 1, 8192).ok());
  Status memory = CheckSandboxRoom(host, p, {0, 8192, 1}, 1, 8193);
  ASSERT_EQ(memory.code(), Code::kLimitExceeded);
  EXPECT_NE(memory.message().find("16 GiB of memory"), std::string::npos) << memory.message();
}

TEST(SandboxRoomTest, ASizeLargerThanTheHostIsRefusedCleanly) {
  HostCapacity host;
  host.cpu_cores = 2;
  host.memory_mib = 24000;
  SandboxPolicy p;
  EXPECT_TRUE(CheckSandboxRoom(host, p, {}, 2, 4096).ok());
  EXPECT_EQ(CheckSandboxRoom(host, p, {}, 8, 16384).code(), Code::kLimitExceeded);
}

TEST(ExtendExpiryTest, AddsToTheLaterOfNowAndTheExpiryCappedAtADay) {
  const int64_t now = 1'000'000;
  EXPECT_EQ(ExtendExpiry(now, now + 600, 30).expires_at, now + 600 + 1800);
  EXPECT_FALSE(ExtendExpiry(now, now + 600, 30).capped);
  EXPECT_EQ(ExtendExpiry(now, now - 50, 10).expires_at, now + 600);
  ExtendedExpiry capped = ExtendExpiry(now, now + 23 * 3600, 120);
  EXPECT_TRUE(capped.capped);
  EXPECT_EQ(capped.expires_at, now + 24 * 3600);
}

}  // namespace
}  // namespace warren
