// How warren writes a moment: for people "2024-05-01 12:00 UTC" — in command output, in
// messages about expiry (keys, tokens) and in MCP instructions alike — and for machines RFC
// 3339. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace warren {

// "2024-05-01 12:00 UTC" for Unix seconds; `never_text` for 0 (an unset time).
std::string FormatTime(int64_t unix_seconds, const std::string& never_text = "never");

// "2024-05-01T12:00:00Z": RFC 3339 in UTC, to the second, for machines (the sandbox API's
// expires_at).
std::string FormatRfc3339(int64_t unix_seconds);

}  // namespace warren
