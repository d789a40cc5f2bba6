// The rule for a user name, in the one library every layer may include: the store enforces
// it on every write (its name index joins user and key name with NUL, and the rule keeps the
// name free of it), `user add` checks it first. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

inline constexpr size_t kMaxUserNameLength = 32;

// ^[a-z][a-z0-9_-]{0,31}$: safe in a shell, a path and a URL without quoting. InvalidArgument
// naming the rule (and the name, cut to 64 bytes) otherwise.
Status CheckUserName(std::string_view name);

}  // namespace warren
