// How warren writes a moment for people: "2024-05-01 12:00 UTC" — in command output, in
// messages about expiry (keys, tokens) and in MCP instructions alike. Pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace warren {

// "2024-05-01 12:00 UTC" for Unix seconds; `never_text` for 0 (an unset time).
std::string FormatTime(int64_t unix_seconds, const std::string& never_text = "never");

}  // namespace warren
