// Lowercase hexadecimal of bytes (two digits per byte), for ids and digests shown as text.
// Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace warren {

std::string HexEncode(std::string_view bytes);
// The value of one hexadecimal digit (either case), or -1.
int HexDigitValue(char c);

}  // namespace warren
