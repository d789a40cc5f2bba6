// Durations as people type them on a command line: "90s", "15m", "2h", "1h30m", "500ms".
// The one parser of them, for `new --timeout` (a sandbox's lifetime) and `ssh --timeout`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

// Milliseconds of `text`: one or more NUMBER UNIT pairs, units ms, s, m, h (d for days),
// numbers whole. A bare number has no unit and is refused (is "15" seconds or minutes?).
// InvalidArgument naming `flag`, with an example, otherwise; also for zero and for more
// than a year.
Result<int64_t> ParseDurationMs(std::string_view flag, std::string_view text);

// "15m", "1h30m", "90s", "250ms": the shortest form of a duration, for messages.
std::string FormatDurationMs(int64_t ms);

}  // namespace warren
