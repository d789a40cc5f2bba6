#include "lobby/base/duration.h"

#include <cctype>
#include <utility>

namespace warren {
namespace {

constexpr int64_t kYearMs = 366LL * 24 * 3600 * 1000;

Status Bad(std::string_view flag, std::string_view text) {
  std::string shown(text.substr(0, 32));
  return InvalidArgument(std::string(flag) +
                         " takes a duration such as 90s, 15m, 2h or 1h30m, not \"" + shown + "\"");
}

}  // namespace

Result<int64_t> ParseDurationMs(std::string_view flag, std::string_view text) {
  if (text.empty() || text.size() > 32) return Bad(flag, text);
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    int64_t n = 0;
    size_t digits = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      ++i;
      if (++digits > 12) return Bad(flag, text);
    }
    if (digits == 0) return Bad(flag, text);
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    int64_t scale = 0;
    if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60 * 1000;
    } else if (unit == "h") {
      scale = 3600 * 1000;
    } else if (unit == "d") {
      scale = 24 * 3600 * 1000;
    } else {
      return Bad(flag, text);
    }
    total += n * scale;
    if (total > kYearMs) return InvalidArgument(std::string(flag) + " is longer than a year");
  }
  if (total <= 0) return InvalidArgument(std::string(flag) + " must be longer than zero");
  return total;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms % 1000 != 0) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  std::string out;
  constexpr std::pair<int64_t, const char*> kUnits[] = {
      {86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  for (const auto& [size, name] : kUnits) {
    if (s >= size) {
      out += std::to_string(s / size) + name;
      s %= size;
    }
  }
  return out.empty() ? "0s" : out;
}

}  // namespace warren
