// Usage arithmetic (keys/usage.h), no store: days, the split at UTC midnights, time that
// runs backward, marks, units as seed 002 prices them, and the int64 bounds.
#include "keys/usage.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>

namespace warren {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 20'000;  // 2024-10-04, a UTC day number
constexpr int64_t kMidnight = kDay * kMsPerDay;

VmMeter Running(int64_t since, int cpus, int64_t memory_mib, int64_t disk_since) {
  VmMeter m;
  m.running_since_ms = since;
  m.running_cpus = cpus;
  m.running_memory_mib = memory_mib;
  m.disk_since_ms = disk_since;
  return m;
}

TEST(UsageTest, DaysAreUtcAndFloored) {
  EXPECT_EQ(UsageDay(0), 0);
  EXPECT_EQ(UsageDay(kMsPerDay - 1), 0);
  EXPECT_EQ(UsageDay(kMsPerDay), 1);
  EXPECT_EQ(UsageDay(-1), -1);
  EXPECT_EQ(UsageDay(kMidnight + 5), kDay);
}

TEST(UsageTest, SplitsAtMidnight) {
  // Running with 2 vCPUs and 4 GiB from 23:00 to 01:30, a 10 GiB disk since 22:00.
  const VmMeter m = Running(kMidnight - kHour, 2, 4096, kMidnight - 2 * kHour);
  std::map<int64_t, UsageAmounts> by_day;
  AccrueTo(m, 10, kMidnight + kHour + kHour / 2, by_day);
  ASSERT_EQ(by_day.size(), 2u);
  const UsageAmounts& before = by_day[kDay - 1];
  EXPECT_EQ(before.running_ms, kHour);
  EXPECT_EQ(before.vcpu_ms, 2 * kHour);
  EXPECT_EQ(before.memory_mib_ms, 4096 * kHour);
  EXPECT_EQ(before.disk_gib_ms, 10 * 2 * kHour);
  const UsageAmounts& after = by_day[kDay];
  EXPECT_EQ(after.running_ms, kHour + kHour / 2);
  EXPECT_EQ(after.vcpu_ms, 3 * kHour);
  EXPECT_EQ(after.memory_mib_ms, 4096 * (kHour + kHour / 2));
  EXPECT_EQ(after.disk_gib_ms, 10 * (kHour + kHour / 2));
}

TEST(UsageTest, SplitsAcrossManyDaysAndAddsToWhatIsThere) {
  const VmMeter m = Running(kMidnight, 1, 1024, kMidnight);
  std::map<int64_t, UsageAmounts> by_day;
  by_day[kDay].running_ms = 7;
  AccrueTo(m, 1, kMidnight + 3 * kMsPerDay, by_day);
  ASSERT_EQ(by_day.size(), 3u);
  EXPECT_EQ(by_day[kDay].running_ms, kMsPerDay + 7);
  EXPECT_EQ(by_day[kDay + 2].disk_gib_ms, kMsPerDay);
  EXPECT_EQ(by_day.count(kDay + 3), 0u);  // the interval ends at midnight, exclusive
}

TEST(UsageTest, TimeBeforeAMarkAccruesNothing) {
  const VmMeter m = Running(kMidnight + kHour, 2, 4096, kMidnight + 2 * kHour);
  std::map<int64_t, UsageAmounts> by_day;
  AccrueTo(m, 10, kMidnight, by_day);  // before both marks
  EXPECT_TRUE(by_day.empty());
  AccrueTo(m, 10, kMidnight + kHour + kHour / 2, by_day);  // after running, before disk
  ASSERT_EQ(by_day.size(), 1u);
  EXPECT_EQ(by_day[kDay].running_ms, kHour / 2);
  EXPECT_EQ(by_day[kDay].disk_gib_ms, 0);
}

TEST(UsageTest, NoMarksAccrueNothing) {
  std::map<int64_t, UsageAmounts> by_day;
  AccrueTo(VmMeter{}, 10, kMidnight, by_day);  // a record from before metering
  EXPECT_TRUE(by_day.empty());
  VmMeter stopped;
  stopped.disk_since_ms = kMidnight;
  AccrueTo(stopped, 0, kMidnight + kHour, by_day);  // no disk, not running
  EXPECT_TRUE(by_day.empty());
}

TEST(UsageTest, MarkingStartsStopsAndKeepsTheStartShape) {
  VmMeter created;
  created.disk_since_ms = kMidnight;
  VmMeter started = MarkedAt(created, true, 2, 4096, kMidnight + kHour);
  EXPECT_EQ(started.running_since_ms, kMidnight + kHour);
  EXPECT_EQ(started.running_cpus, 2);
  EXPECT_EQ(started.running_memory_mib, 4096);
  EXPECT_EQ(started.disk_since_ms, kMidnight + kHour);

  // Resized while running: it keeps accruing as it started until the next start.
  VmMeter again = MarkedAt(started, true, 8, 16384, kMidnight + 2 * kHour);
  EXPECT_EQ(again.running_since_ms, kMidnight + 2 * kHour);
  EXPECT_EQ(again.running_cpus, 2);
  EXPECT_EQ(again.running_memory_mib, 4096);

  VmMeter stopped = MarkedAt(again, false, 8, 16384, kMidnight + 3 * kHour);
  EXPECT_EQ(stopped.running_since_ms, 0);
  EXPECT_EQ(stopped.running_cpus, 0);
  EXPECT_EQ(stopped.running_memory_mib, 0);
  EXPECT_EQ(stopped.disk_since_ms, kMidnight + 3 * kHour);

  VmMeter restarted = MarkedAt(stopped, true, 8, 16384, kMidnight + 4 * kHour);
  EXPECT_EQ(restarted.running_cpus, 8);
  EXPECT_EQ(restarted.running_memory_mib, 16384);
}

TEST(UsageTest, MarksNeverMoveBackward) {
  const VmMeter m = Running(kMidnight + 2 * kHour, 2, 4096, kMidnight + 2 * kHour);
  VmMeter earlier = MarkedAt(m, true, 2, 4096, kMidnight + kHour);
  EXPECT_EQ(earlier.running_since_ms, kMidnight + 2 * kHour);
  EXPECT_EQ(earlier.disk_since_ms, kMidnight + 2 * kHour);
}

// Accruing in steps (a mark at every transition) gives what one accrual over the whole
// time gives: no millisecond is lost or counted twice.
TEST(UsageTest, StepsSumToTheWhole) {
  const VmMeter start = Running(kMidnight - kHour, 4, 8192, kMidnight - kHour);
  const int64_t end = kMidnight + 5 * kHour + 123;
  std::map<int64_t, UsageAmounts> whole, steps;
  AccrueTo(start, 20, end, whole);
  VmMeter m = start;
  for (int64_t t = kMidnight - kHour + 777; t < end; t += 1'234'567) {
    AccrueTo(m, 20, t, steps);
    m = MarkedAt(m, true, 4, 8192, t);
  }
  AccrueTo(m, 20, end, steps);
  ASSERT_EQ(whole.size(), steps.size());
  for (const auto& [day, a] : whole) {
    EXPECT_EQ(steps[day].running_ms, a.running_ms);
    EXPECT_EQ(steps[day].vcpu_ms, a.vcpu_ms);
    EXPECT_EQ(steps[day].memory_mib_ms, a.memory_mib_ms);
    EXPECT_EQ(steps[day].disk_gib_ms, a.disk_gib_ms);
  }
}

TEST(UsageTest, UnitsAsSeedTwoPricesThem) {
  UsageAmounts one_unit;  // 2 vCPUs and 4 GiB for an hour
  one_unit.vcpu_ms = 2 * kHour;
  one_unit.memory_mib_ms = 4096 * kHour;
  EXPECT_DOUBLE_EQ(UsageUnits(one_unit), 1.0);

  UsageAmounts large;  // 8 vCPUs and 16 GiB for 15 minutes
  large.vcpu_ms = 8 * (kHour / 4);
  large.memory_mib_ms = 16384 * (kHour / 4);
  EXPECT_DOUBLE_EQ(UsageUnits(large), 1.0);

  UsageAmounts disk_only;
  disk_only.disk_gib_ms = 100 * kHour;
  EXPECT_DOUBLE_EQ(UsageUnits(disk_only), 0.0);
}

// 256 GiB running for a year fits in int64 with room to spare (about 1/1100 of the range);
// past the range amounts saturate rather than wrap negative.
TEST(UsageTest, OverflowBound) {
  const int64_t year = 365 * kMsPerDay;
  const VmMeter big = Running(kMidnight, 256, 256 * 1024, kMidnight);
  std::map<int64_t, UsageAmounts> by_day;
  AccrueTo(big, 1 << 20, kMidnight + year, by_day);
  UsageAmounts total;
  for (const auto& [day, a] : by_day) total += a;
  EXPECT_EQ(total.memory_mib_ms, int64_t{256} * 1024 * year);
  EXPECT_EQ(total.disk_gib_ms, (int64_t{1} << 20) * year);  // a 1 PiB disk, too
  EXPECT_LT(total.memory_mib_ms, std::numeric_limits<int64_t>::max() / 1000);

  const int64_t max = std::numeric_limits<int64_t>::max();
  UsageAmounts near_max;
  near_max.memory_mib_ms = max - 1;
  near_max += total;
  EXPECT_EQ(near_max.memory_mib_ms, max);

  const VmMeter absurd = Running(kMidnight, 1, max / 2, kMidnight);
  by_day.clear();
  AccrueTo(absurd, 0, kMidnight + kHour, by_day);
  EXPECT_EQ(by_day[kDay].memory_mib_ms, max);
}

}  // namespace
}  // namespace warren
