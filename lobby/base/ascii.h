// ASCII for protocol text (host names, header names, schemes): character classes and case,
// locale-free, so a Turkish locale never turns "I" into a dotless i inside a header name;
// and untrusted text made short and printable for an error message.
#pragma once

#include <string>
#include <string_view>

namespace warren {

inline bool IsAsciiLower(char c) { return c >= 'a' && c <= 'z'; }
inline bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAsciiAlpha(char c) { return IsAsciiLower(c) || (c >= 'A' && c <= 'Z'); }
inline bool IsAsciiHex(char c) {
  return IsAsciiDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

inline char AsciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

// `s` without leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r).
inline std::string_view TrimAsciiSpace(std::string_view s) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// Whether `s` starts with `prefix`, ASCII case ignored.
inline bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

// Untrusted text cut to 64 bytes ("…" after), control bytes shown as '?', for a message that
// quotes what was given. Never for a secret.
inline std::string ShownUntrusted(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out;
  for (char c : s.substr(0, kMax)) {
    out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  }
  return s.size() <= kMax ? out : out + "…";
}

}  // namespace warren
