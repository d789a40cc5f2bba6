// Stored files tests compare against, in tests/golden/ (the way libvirt's own tests pin
// generated XML): ReadGolden for stored inputs, ExpectGolden for stored outputs. After an
// intended change, WARREN_UPDATE_GOLDEN=1 rewrites the outputs; review the diff like code.
// Needs WARREN_SOURCE_DIR defined by the test target. Header-only; thread-compatible.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace warren {

inline std::string GoldenPath(const std::string& name) {
  return std::string(WARREN_SOURCE_DIR) + "/tests/golden/" + name;
}

// The stored file's bytes; fails the test (and returns "") when it is missing.
inline std::string ReadGolden(const std::string& name) {
  std::ifstream in(GoldenPath(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing " << GoldenPath(name);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void ExpectGolden(const std::string& name, const std::string& actual) {
  const char* update = std::getenv("WARREN_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream out(GoldenPath(name), std::ios::binary | std::ios::trunc);
    out << actual;
    ASSERT_TRUE(out.good()) << "cannot write " << GoldenPath(name);
    return;
  }
  std::ifstream in(GoldenPath(name), std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing " << GoldenPath(name)
                         << "; run with WARREN_UPDATE_GOLDEN=1 to create it";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(expected.str(), actual)
      << "output differs from " << GoldenPath(name) << " (WARREN_UPDATE_GOLDEN=1 rewrites it)";
}

}  // namespace warren
