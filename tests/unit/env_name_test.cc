// The one env-name rule: ASCII [A-Za-z_][A-Za-z0-9_]*, at most kMaxEnvNameBytes.
#include "lobby/base/env_name.h"

#include <gtest/gtest.h>

#include <string>

namespace warren {
namespace {

TEST(EnvNameTest, LettersDigitsAndUnderscoreNotStartingWithADigit) {
  for (const char* ok : {"A", "a", "_", "PATH", "LC_ALL", "_x9", "WARREN_JOB", "a1b2"}) {
    EXPECT_TRUE(ValidEnvName(ok)) << ok;
  }
  // Bytes past ASCII are never letters, whatever the locale would say.
  for (const char* bad : {"", "1A", "9", "A-B", "A B", "A=B", "A.B", "\xc3\xa9", "A\xff", "$A"}) {
    EXPECT_FALSE(ValidEnvName(bad)) << bad;
  }
  EXPECT_FALSE(ValidEnvName(std::string_view("A\0B", 3)));
}

TEST(EnvNameTest, LengthIsCapped) {
  EXPECT_TRUE(ValidEnvName(std::string(kMaxEnvNameBytes, 'A')));
  EXPECT_FALSE(ValidEnvName(std::string(kMaxEnvNameBytes + 1, 'A')));
}

}  // namespace
}  // namespace warren
