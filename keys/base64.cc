#include "keys/base64.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>

namespace warren {
namespace {

// 0..63 for alphabet characters, -1 for everything else ('=' included: padding is handled
// by position, not by lookup).
constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr std::array<int8_t, 256> kDecode = MakeDecodeTable();

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  if (bytes.empty()) return {};
  // EVP_EncodeBlock writes 4 bytes per 3 input bytes and a NUL, without newlines.
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::string Base64EncodeUnpadded(std::string_view bytes) {
  std::string out = Base64Encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

// Written by hand rather than with EVP_DecodeBlock, which accepts whitespace, cannot say
// how much padding it saw, and so returns trailing zero bytes a caller must guess about.
Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return InvalidArgument("base64 length " + std::to_string(text.size()) +
                           " is not a multiple of 4 (truncated or mangled?)");
  }
  size_t pad = 0;
  if (!text.empty() && text.back() == '=')
    pad = (text.size() >= 2 && text[text.size() - 2] == '=') ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  const size_t data_len = text.size() - pad;
  uint32_t acc = 0;
  for (size_t i = 0; i < data_len; ++i) {
    int8_t v = kDecode[static_cast<unsigned char>(text[i])];
    if (v < 0) {
      return InvalidArgument("base64 has an invalid character at offset " + std::to_string(i));
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if (i % 4 == 3) {
      out.push_back(static_cast<char>((acc >> 16) & 0xff));
      out.push_back(static_cast<char>((acc >> 8) & 0xff));
      out.push_back(static_cast<char>(acc & 0xff));
      acc = 0;
    }
  }
  // The last quantum: 2 characters (12 bits) carry one byte, 3 (18 bits) carry two; the
  // leftover low bits must be zero or the text is not the canonical encoding.
  if (pad == 2) {
    if ((acc & 0xf) != 0) return InvalidArgument("base64 has non-zero bits in its padding");
    out.push_back(static_cast<char>((acc >> 4) & 0xff));
  } else if (pad == 1) {
    if ((acc & 0x3) != 0) return InvalidArgument("base64 has non-zero bits in its padding");
    out.push_back(static_cast<char>((acc >> 10) & 0xff));
    out.push_back(static_cast<char>((acc >> 2) & 0xff));
  }
  return out;
}

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out = Base64EncodeUnpadded(bytes);
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

Result<std::string> Base64UrlDecode(std::string_view text) {
  if (text.size() % 4 == 1) {
    return InvalidArgument("base64url length " + std::to_string(text.size()) + " is impossible");
  }
  std::string standard(text);
  for (size_t i = 0; i < standard.size(); ++i) {
    char& c = standard[i];
    if (c == '+' || c == '/' || c == '=') {
      return InvalidArgument("base64url has an invalid character at offset " + std::to_string(i));
    }
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (standard.size() % 4 != 0) standard.push_back('=');
  return Base64Decode(standard);
}

}  // namespace warren
