// WarmMemory (vmhost/warm_memory.h): memory held touched for the next VM start, freed by
// Release and taken again after a quiet spell, only while the host has room; the flag's parse;
// the sysfs check for a balloon that reports free memory.
#include "vmhost/warm_memory.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace warren {
namespace {

using std::chrono::milliseconds;
constexpr int64_t kMiB = int64_t{1} << 20;

// Waits up to 10 s for `done`.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

// This process's resident memory, bytes (/proc/self/status VmRSS).
int64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

struct Room {
  std::atomic<int64_t> available{int64_t{64} << 30};
  std::function<int64_t()> reader() {
    return [this] { return available.load(); };
  }
};

WarmMemoryOptions Options(int64_t bytes, Room& room) {
  WarmMemoryOptions o;
  o.bytes = bytes;
  o.quiet = milliseconds(200);
  o.check_every = milliseconds(20);
  o.floor_bytes = int64_t{1} << 30;
  o.available_bytes = room.reader();
  return o;
}

TEST(WarmMemoryTest, HoldsTouchedMemoryAndFreesItOnRelease) {
  Room room;
  const int64_t before = ResidentBytes();
  WarmMemory warm(Options(64 * kMiB, room));
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 1; }));
  EXPECT_EQ(warm.held_bytes(), 64 * kMiB);
  // Touched, not just mapped.
  EXPECT_GE(ResidentBytes() - before, 56 * kMiB);
  warm.Release();
  EXPECT_EQ(warm.held_bytes(), 0);
  EXPECT_LT(ResidentBytes() - before, 32 * kMiB);
}

// The quiet spell runs from a Release, not from the machine's boot: however long it is, the
// memory is taken at start (a spell of an hour once kept it from a machine up for less).
TEST(WarmMemoryTest, TakesItAtStartHoweverLongTheQuietSpell) {
  Room room;
  WarmMemoryOptions o = Options(4 * kMiB, room);
  o.quiet = std::chrono::hours(24 * 365 * 100);
  WarmMemory warm(o);
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 1; }));
  warm.Release();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(warm.held_bytes(), 0);
}

TEST(WarmMemoryTest, TakesItAgainOnlyAfterAQuietSpell) {
  Room room;
  WarmMemoryOptions o = Options(8 * kMiB, room);
  o.quiet = milliseconds(600);
  WarmMemory warm(o);
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 1; }));
  const auto released = std::chrono::steady_clock::now();
  warm.Release();
  std::this_thread::sleep_for(milliseconds(300));
  // Another start may come: nothing taken yet.
  EXPECT_EQ(warm.held_bytes(), 0);
  EXPECT_EQ(warm.fills(), 1);
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 2; }));
  EXPECT_GE(std::chrono::steady_clock::now() - released, milliseconds(600));
  EXPECT_EQ(warm.held_bytes(), 8 * kMiB);
}

TEST(WarmMemoryTest, HoldsNothingWhileTheHostIsShortAndLetsGoWhenItRunsShort) {
  Room room;
  room.available = (int64_t{1} << 30) + 4 * kMiB;  // the floor, and less than the floor plus it
  WarmMemory warm(Options(8 * kMiB, room));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(warm.held_bytes(), 0);
  room.available = int64_t{2} << 30;
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 1; }));
  // Held; the host runs short: it lets go at its next look.
  room.available = (int64_t{1} << 30) - 1;
  ASSERT_TRUE(Eventually([&] { return warm.held_bytes() == 0; }));
  EXPECT_EQ(warm.fills(), 1);
  // And takes it again once there is room, after its quiet spell.
  room.available = int64_t{2} << 30;
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 2; }));
}

TEST(WarmMemoryTest, ReleaseDuringAFillAndStopDuringAFillLeaveNothingHeld) {
  Room room;
  WarmMemoryOptions o = Options(256 * kMiB, room);
  o.quiet = milliseconds(0);
  {
    WarmMemory warm(o);
    // Releases while it takes the memory again and again: each returns with nothing held.
    for (int i = 0; i < 40; ++i) {
      std::this_thread::sleep_for(milliseconds(i % 7));
      warm.Release();
      EXPECT_EQ(warm.held_bytes(), 0);
    }
  }
  // Destroyed mid-fill: the destructor returns (and frees).
  for (int i = 0; i < 5; ++i) {
    WarmMemory warm(o);
    std::this_thread::sleep_for(milliseconds(i));
  }
}

TEST(WarmMemoryTest, ZeroBytesHoldsNothing) {
  Room room;
  WarmMemory warm(Options(0, room));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(warm.held_bytes(), 0);
  EXPECT_EQ(warm.fills(), 0);
  warm.Release();
}

TEST(WarmMemoryTest, RoundsUpToWholeHugePages) {
  Room room;
  WarmMemory warm(Options(3 * kMiB, room));
  EXPECT_EQ(warm.bytes(), 4 * kMiB);
  ASSERT_TRUE(Eventually([&] { return warm.fills() == 1; }));
  EXPECT_EQ(warm.held_bytes(), 4 * kMiB);
}

TEST(WarmMemoryFlagTest, AutoNumbersAndErrors) {
  EXPECT_EQ(*ParseWarmMemory("auto", true), kAutoWarmMemoryMib * kMiB);
  EXPECT_EQ(*ParseWarmMemory("auto", false), 0);
  EXPECT_EQ(*ParseWarmMemory("0", true), 0);
  EXPECT_EQ(*ParseWarmMemory("768", false), 768 * kMiB);
  EXPECT_EQ(*ParseWarmMemory("65536", false), 65536 * kMiB);
  for (const char* bad : {"", "-1", "65537", "512M", "1.5", " 5", "auto ", "x"}) {
    Result<int64_t> r = ParseWarmMemory(bad, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("warm memory is MiB"), std::string::npos);
  }
}

// A sysfs tree of virtio devices bound to the balloon driver, removed with the test.
class BalloonSysfs {
 public:
  BalloonSysfs() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sysfs.XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
  }
  ~BalloonSysfs() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void Device(const std::string& name, const std::string& id, const std::string& features) {
    namespace fs = std::filesystem;
    const fs::path dev = fs::path(root_) / "bus/virtio/devices" / name;
    fs::create_directories(dev);
    std::ofstream(dev / "device") << id << "\n";
    std::ofstream(dev / "features") << features << "\n";
    const fs::path driver = fs::path(root_) / "bus/virtio/drivers/virtio_balloon";
    fs::create_directories(driver);
    std::ofstream(driver / "uevent") << "DRIVER=virtio_balloon\n";
    fs::create_directory_symlink(dev, driver / name);
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(HostReportsFreeMemoryTest, ABalloonWithReportingNegotiated) {
  BalloonSysfs sysfs;
  sysfs.Device("virtio0", "0x0005", "0110010100000000000000000000000010000000");
  EXPECT_TRUE(HostReportsFreeMemory(sysfs.root()));
}

TEST(HostReportsFreeMemoryTest, ABalloonWithoutReporting) {
  BalloonSysfs sysfs;
  sysfs.Device("virtio0", "0x0005", "0110000100000000000000000000000010000000");
  EXPECT_FALSE(HostReportsFreeMemory(sysfs.root()));
}

TEST(HostReportsFreeMemoryTest, NoBalloonOrAnotherDevice) {
  BalloonSysfs none;
  EXPECT_FALSE(HostReportsFreeMemory(none.root()));
  BalloonSysfs other;
  other.Device("virtio3", "0x0002", "0110010100000000");
  EXPECT_FALSE(HostReportsFreeMemory(other.root()));
  BalloonSysfs short_features;
  short_features.Device("virtio0", "0x0005", "0110");
  EXPECT_FALSE(HostReportsFreeMemory(short_features.root()));
}

}  // namespace
}  // namespace warren
