// Text a guest sent, made safe to put in an error message or a log line: the guest is
// untrusted, so its bytes are cut to a bound and anything but printable ASCII is replaced.
// Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace warren {

// Printable ASCII, one line (newlines and tabs become spaces, other bytes '?'), at most
// `max_bytes` of it and "..." when cut, trailing spaces dropped.
std::string SanitizeGuestText(std::string_view bytes, size_t max_bytes);

}  // namespace warren
