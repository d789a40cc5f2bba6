#include "keys/scope.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

namespace warren {
namespace {

// Bounds on what a credential can carry. Generous for people, small enough that a scope
// stays a short line in a token and in the store.
constexpr size_t kMaxCommands = 64;
constexpr size_t kMaxCommandPathBytes = 128;
constexpr size_t kMaxTagBytes = 64;
constexpr int64_t kSecondsPerHour = 3600;
constexpr int64_t kSecondsPerYear = 365 * 24 * kSecondsPerHour;
// A credential that outlives its owner by a century is "never" in disguise; ask for "never".
constexpr int64_t kMaxExpirySeconds = 100 * kSecondsPerYear;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// One word of a command path: [a-z][a-z0-9-]*.
bool IsCommandWord(std::string_view w) {
  if (w.empty() || !IsLower(w[0])) return false;
  for (char c : w) {
    if (!IsLower(c) && !IsDigit(c) && c != '-') return false;
  }
  return true;
}

// A normalised command path: words separated by single spaces.
bool IsCommandPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxCommandPathBytes) return false;
  size_t start = 0;
  while (true) {
    size_t sp = path.find(' ', start);
    std::string_view word = path.substr(start, sp == std::string_view::npos ? sp : sp - start);
    if (!IsCommandWord(word)) return false;
    if (sp == std::string_view::npos) return true;
    start = sp + 1;
  }
}

// `entry` allows `path` when equal, or when `path` continues `entry` with a space: "share"
// allows "share show" but not "sharex".
bool EntryAllows(std::string_view entry, std::string_view path) {
  if (path.size() < entry.size() || path.substr(0, entry.size()) != entry) return false;
  return path.size() == entry.size() || path[entry.size()] == ' ';
}

// Collapses runs of blanks to one space and trims both ends.
std::string NormaliseBlanks(std::string_view s) {
  std::string out;
  bool pending_space = false;
  for (char c : s) {
    if (IsBlank(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

// Describes the first character that keeps `path` from being a command path, for a message
// a person can act on.
std::string WhyNotCommandPath(std::string_view path) {
  if (path.size() > kMaxCommandPathBytes) {
    return "is longer than " + std::to_string(kMaxCommandPathBytes) + " bytes";
  }
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    bool word_start = i == 0 || path[i - 1] == ' ';
    if (c >= 'A' && c <= 'Z') return "has an uppercase letter (command paths are lowercase)";
    if (word_start && !IsLower(c)) return "has a word that does not start with a letter a-z";
    if (!IsLower(c) && !IsDigit(c) && c != '-' && c != ' ') {
      return "has a character other than a-z, 0-9, '-' and spaces";
    }
  }
  return "is not a command path";
}

}  // namespace

bool Scope::AllowsCommand(std::string_view path) const {
  if (cmds.empty()) return true;
  for (const std::string& entry : cmds) {
    if (EntryAllows(entry, path)) return true;
  }
  return false;
}

bool Scope::Covers(const Scope& child) const {
  if (!cmds.empty()) {
    // An empty list in the child means "every command", which is wider than ours.
    if (child.cmds.empty()) return false;
    for (const std::string& c : child.cmds) {
      if (!AllowsCommand(c)) return false;
    }
  }
  if (!tag.empty() && child.tag != tag) return false;
  if (expires_at != 0 && (child.expires_at == 0 || child.expires_at > expires_at)) return false;
  return true;
}

nlohmann::json Scope::ToJson() const {
  // Every field is written, even when empty, so a record reads the same to a person
  // looking at the store and to an older binary.
  return nlohmann::json{{"cmds", cmds}, {"tag", tag}, {"expires_at", expires_at}};
}

Result<Scope> Scope::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("scope: expected a JSON object");
  Scope s;
  if (auto it = j.find("cmds"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("scope: \"cmds\" must be an array of strings");
    if (it->size() > kMaxCommands) return InvalidArgument("scope: too many commands");
    for (const auto& c : *it) {
      if (!c.is_string()) return InvalidArgument("scope: \"cmds\" must be an array of strings");
      const std::string& path = c.get_ref<const std::string&>();
      if (!IsCommandPath(path)) {
        return InvalidArgument("scope: command path \"" + path + "\" " + WhyNotCommandPath(path));
      }
      s.cmds.push_back(path);
    }
  }
  if (auto it = j.find("tag"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return InvalidArgument("scope: \"tag\" must be a string");
    s.tag = it->get<std::string>();
    if (!s.tag.empty()) WARREN_RETURN_IF_ERROR(ValidateTag(s.tag).Annotate("scope"));
  }
  if (auto it = j.find("expires_at"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) {
      return InvalidArgument("scope: \"expires_at\" must be an integer (Unix seconds)");
    }
    // is_number_integer covers unsigned values too; a huge unsigned one would wrap.
    if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) {
      return InvalidArgument("scope: \"expires_at\" is out of range");
    }
    s.expires_at = it->get<int64_t>();
    if (s.expires_at < 0) return InvalidArgument("scope: \"expires_at\" must not be negative");
  }
  return s;
}

Result<std::vector<std::string>> ParseCommandList(std::string_view text) {
  std::vector<std::string> out;
  if (NormaliseBlanks(text).empty()) {
    // An empty list would mean "every command": never let a typo widen a credential.
    return InvalidArgument(
        "the command list is empty; give comma-separated command paths such as "
        "\"ls,new,share show\"");
  }
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view raw =
        text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    std::string path = NormaliseBlanks(raw);
    if (path.empty()) {
      return InvalidArgument("the command list has an empty entry (check for a stray comma)");
    }
    if (!IsCommandPath(path)) {
      return InvalidArgument("command path \"" + path + "\" " + WhyNotCommandPath(path) +
                             "; paths are lowercase words like \"share show\"");
    }
    bool seen = false;
    for (const std::string& p : out) seen = seen || p == path;
    if (!seen) out.push_back(std::move(path));
    if (out.size() > kMaxCommands) {
      return InvalidArgument("the command list has more than " + std::to_string(kMaxCommands) +
                             " entries");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<int64_t> ParseExpiry(std::string_view text, int64_t now_unix) {
  const auto bad = [&] {
    return InvalidArgument("expiry \"" + std::string(text) +
                           "\" is not valid; use Nh, Nd, Nw or Ny (e.g. 12h, 30d, 1y) or never");
  };
  if (text == "never") return int64_t{0};
  if (text.size() < 2) return bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 'h':
      unit = kSecondsPerHour;
      break;
    case 'd':
      unit = 24 * kSecondsPerHour;
      break;
    case 'w':
      unit = 7 * 24 * kSecondsPerHour;
      break;
    case 'y':
      unit = kSecondsPerYear;
      break;
    default:
      return bad();
  }
  std::string_view digits = text.substr(0, text.size() - 1);
  for (char c : digits) {
    if (!IsDigit(c)) return bad();
  }
  // At most 7 digits keeps the product far from overflow before the range check below.
  if (digits.size() > 7) {
    return InvalidArgument("expiry \"" + std::string(text) + "\" is more than 100 years away");
  }
  int64_t n = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (n <= 0) return InvalidArgument("expiry \"" + std::string(text) + "\" must be positive");
  if (n * unit > kMaxExpirySeconds) {
    return InvalidArgument("expiry \"" + std::string(text) +
                           "\" is more than 100 years away; use never");
  }
  return now_unix + n * unit;
}

Status ValidateTag(std::string_view tag) {
  if (tag.empty()) return InvalidArgument("tag is empty");
  if (tag.size() > kMaxTagBytes) {
    return InvalidArgument("tag is longer than " + std::to_string(kMaxTagBytes) + " bytes");
  }
  if (!IsLower(tag[0])) {
    return InvalidArgument("tag \"" + std::string(tag) + "\" must start with a letter a-z");
  }
  for (char c : tag) {
    if (!IsLower(c) && !IsDigit(c) && c != '_' && c != '-') {
      return InvalidArgument("tag \"" + std::string(tag) +
                             "\" may contain only a-z, 0-9, '_' and '-'");
    }
  }
  return Status::Ok();
}

}  // namespace warren
