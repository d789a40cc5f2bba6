// vmhost/host_load.h: the slowdown a busy host's guests are allowed, and the waits it
// stretches.
#include "vmhost/host_load.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

namespace warren {
namespace {

using std::chrono::milliseconds;

TEST(HostLoadTest, TheSlowdownIsTheLoadPerCpuFromOneToTheCap) {
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(0.3, 2), 1);  // a quiet host waits as set
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(2, 2), 1);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(7, 2), 3.5);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(33, 2), kDefaultMaxGuestSlowdown);  // the soak's guests
}

TEST(HostLoadTest, TheMaximumIsTheOperatorsWithinTheLimit) {
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(33, 2, 1), 1);  // --guest-slowdown-max 1: no stretch
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(33, 2, 4), 4);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(33, 2, 30), 16.5);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(500, 2, 1000), kGuestSlowdownLimit);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(33, 2, 0), 1);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(33, 2, std::numeric_limits<double>::quiet_NaN()),
                   kDefaultMaxGuestSlowdown);
}

TEST(HostLoadTest, ALoadOrCpuCountThatMakesNoSenseMeansNoStretch) {
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(8, 0), 1);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(8, -1), 1);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(-3, 2), 1);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(std::numeric_limits<double>::quiet_NaN(), 2), 1);
  EXPECT_DOUBLE_EQ(GuestSlowdownFor(std::numeric_limits<double>::infinity(), 2), 1);
}

TEST(HostLoadTest, ThisHostsSlowdownIsWithinTheBounds) {
  const double s = GuestSlowdown();
  EXPECT_GE(s, 1);
  EXPECT_LE(s, kDefaultMaxGuestSlowdown);
  EXPECT_DOUBLE_EQ(GuestSlowdown(1), 1);
}

TEST(HostLoadTest, StretchingMultipliesWithinTheBounds) {
  EXPECT_EQ(StretchedBy(milliseconds(10'000), 3.5), milliseconds(35'000));
  EXPECT_EQ(StretchedBy(milliseconds(10'000), 1), milliseconds(10'000));
  EXPECT_EQ(StretchedBy(milliseconds(10'000), 0.2), milliseconds(10'000));    // never shorter
  EXPECT_EQ(StretchedBy(milliseconds(10'000), 1000), milliseconds(600'000));  // the limit
  EXPECT_EQ(StretchedBy(milliseconds(300), std::numeric_limits<double>::quiet_NaN()),
            milliseconds(300));
}

}  // namespace
}  // namespace warren
