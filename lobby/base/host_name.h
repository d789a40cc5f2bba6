// The rule for a VM host's name (serve --host NAME=URI): the one place it is written. The
// store checks it on every VM record that names its host, serve on every --host, the
// commands on `new --host`, `hosts drain` and `migrate`. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

inline constexpr size_t kMaxHostNameLength = 32;

// 1-32 chars, ^[a-z][a-z0-9]*(-[a-z0-9]+)*$. InvalidArgument saying which rule failed.
Status CheckHostName(std::string_view name);

}  // namespace warren
