// What every fuzz target shares: Fail, for an invariant a target checks beyond what the
// sanitizers catch. libFuzzer reports the abort as a crash and keeps the input.
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

}  // namespace warren::fuzz
