// Standard base64 (RFC 4648 §4, with '=' padding), as OpenSSH writes key blobs. Decoding is
// strict because its input is untrusted: no whitespace, no missing or misplaced padding, no
// non-zero bits after the last byte. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

std::string Base64Encode(std::string_view bytes);
// The encoding without its trailing '=' padding (the form of "SHA256:" fingerprints).
std::string Base64EncodeUnpadded(std::string_view bytes);
// InvalidArgument with the offending position when `text` is not canonical padded base64.
Result<std::string> Base64Decode(std::string_view text);

// The URL-safe alphabet (RFC 4648 §5: '-' and '_' for '+' and '/') without padding, as in
// API tokens. Decoding is as strict: '+', '/', '=' and non-zero trailing bits are refused,
// so every token has exactly one spelling.
std::string Base64UrlEncode(std::string_view bytes);
Result<std::string> Base64UrlDecode(std::string_view text);

}  // namespace warren
