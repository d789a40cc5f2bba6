#include "lobby/base/duration.h"

#include <gtest/gtest.h>

namespace warren {
namespace {

TEST(DurationTest, ParsesUnitsAndSequences) {
  EXPECT_EQ(*ParseDurationMs("--timeout", "500ms"), 500);
  EXPECT_EQ(*ParseDurationMs("--timeout", "90s"), 90'000);
  EXPECT_EQ(*ParseDurationMs("--timeout", "15m"), 900'000);
  EXPECT_EQ(*ParseDurationMs("--timeout", "2h"), 7'200'000);
  EXPECT_EQ(*ParseDurationMs("--timeout", "1h30m"), 5'400'000);
  EXPECT_EQ(*ParseDurationMs("--timeout", "1d"), 86'400'000);
}

TEST(DurationTest, RefusesWhatIsNotADuration) {
  for (const char* bad : {"", "15", "m", "15x", "-5m", "1.5h", "15 m", "99999999999999s"}) {
    Result<int64_t> r = ParseDurationMs("--timeout", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--timeout"), std::string::npos) << bad;
  }
  EXPECT_FALSE(ParseDurationMs("--timeout", "0s").ok());
  EXPECT_FALSE(ParseDurationMs("--timeout", "367d").ok());
}

TEST(DurationTest, FormatsTheShortestForm) {
  EXPECT_EQ(FormatDurationMs(900'000), "15m");
  EXPECT_EQ(FormatDurationMs(5'400'000), "1h30m");
  EXPECT_EQ(FormatDurationMs(250), "250ms");
  EXPECT_EQ(FormatDurationMs(90'000), "1m30s");
}

}  // namespace
}  // namespace warren
