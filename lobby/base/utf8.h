// UTF-8 validity, the one check every layer uses (key comments, VM comments, and whether a
// command's output can travel as JSON text or must go as base64). Pure; thread-safe.
#pragma once

#include <string_view>

namespace warren {

// Well-formed UTF-8 (RFC 3629): no stray continuation bytes, no truncated sequences, no
// overlong forms, no surrogates, nothing past U+10FFFF. NUL is a character like any other.
bool IsValidUtf8(std::string_view s);

}  // namespace warren
