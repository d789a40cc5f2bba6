// WARREN_SKIP_OR_FAIL() << reason: what a test does when something it drives (a peer, a
// tool, an image, libvirt) is missing. A developer's run skips, saying why; under CI (the
// environment variable CI set, as .ci/run has it) it fails: a skip there would be a test
// that did not run. Used like GTEST_SKIP(), from a test body or SetUp(). Thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace warren::test_env {

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0';
}

}  // namespace warren::test_env

// GTEST_SKIP() is GTEST_MESSAGE_AT_ with kSkip; this picks the result type at run time.
#define WARREN_SKIP_OR_FAIL()                                                                \
  return GTEST_MESSAGE_AT_(                                                                  \
      __FILE__, __LINE__,                                                                    \
      ::warren::test_env::InCi() ? "CI is set, so what this test needs must be here: " : "", \
      ::warren::test_env::InCi() ? ::testing::TestPartResult::kFatalFailure                  \
                                 : ::testing::TestPartResult::kSkip)
