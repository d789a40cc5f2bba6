// What every fuzz target shares: Fail, for an invariant a target checks beyond what the
// sanitizers catch (libFuzzer reports the abort as a crash and keeps the input), and Note, for
// what a target saw, printed only with WARREN_FUZZ_VERBOSE set: how to check that a seed
// reaches what it was written for (run the target on it).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace warren::fuzz {

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void Note(const std::string& what) {
  static const bool verbose = std::getenv("WARREN_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "fuzz: %s\n", what.substr(0, 300).c_str());
}

}  // namespace warren::fuzz
