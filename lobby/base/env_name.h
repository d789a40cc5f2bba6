// The one rule for the names of environment variables warren sets in a guest, wherever they
// come from (`new --env`, a VM login's SetEnv, a command's env, the runner's start header):
// ASCII `[A-Za-z_][A-Za-z0-9_]*`, at most kMaxEnvNameBytes. Never the locale's idea of a
// letter. Which names a surface then reserves for warren (WARREN_*) is its own policy.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace warren {

// Longer than any real variable name. The guest runner (vmhost/guest/runner/header.c,
// valid_env_name) checks the same characters and bounds a whole NAME=VALUE entry to
// 128 KiB, which a name this long always fits.
inline constexpr size_t kMaxEnvNameBytes = 128;

bool ValidEnvName(std::string_view name);

}  // namespace warren
