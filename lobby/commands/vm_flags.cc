#include "lobby/commands/vm_flags.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <random>

#include "keys/scope.h"
#include "lobby/base/env_name.h"
#include "lobby/base/utf8.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/vm_view.h"

namespace warren {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "2G" -> {2, "g"}; the number must be a whole, positive decimal.
Result<std::pair<int64_t, std::string>> SplitSize(std::string_view text, std::string_view what,
                                                  std::string_view examples) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (digits == 0 || digits > 12 || ec != std::errc() || n <= 0) {
    return InvalidArgument(std::string(what) + " \"" + std::string(text.substr(0, 32)) +
                           "\" is not a size; use e.g. " + std::string(examples));
  }
  (void)ptr;
  return std::make_pair(n, Lower(text.substr(digits)));
}

// For names only, which are checked for clashes anyway; ids come straight from the OS.
std::mt19937& Rng() {
  thread_local std::mt19937 rng{std::random_device{}()};
  return rng;
}

constexpr std::array<const char*, 32> kAdjectives = {
    "calm",  "brave", "quiet", "swift", "bright", "gentle", "bold",   "clever",
    "eager", "happy", "jolly", "kind",  "lively", "merry",  "noble",  "proud",
    "witty", "zesty", "sunny", "misty", "rapid",  "tidy",   "cozy",   "lucky",
    "amber", "brisk", "crisp", "fuzzy", "keen",   "mellow", "plucky", "spry"};
constexpr std::array<const char*, 32> kAnimals = {
    "otter",  "badger", "heron",  "fox",   "lynx", "panda", "koala",  "gecko",
    "raven",  "bison",  "crane",  "finch", "hare", "ibis",  "lemur",  "moose",
    "newt",   "owl",    "puffin", "quail", "seal", "tapir", "wombat", "yak",
    "marten", "stoat",  "robin",  "wren",  "orca", "dingo", "egret",  "mole"};

}  // namespace

Result<int64_t> ParseMemoryMib(std::string_view text) {
  constexpr std::string_view kExamples = "2048 (MiB), 512M or 2G";
  WARREN_ASSIGN_OR_RETURN(auto split, SplitSize(text, "memory", kExamples));
  auto [n, unit] = split;
  if (unit.empty() || unit == "m" || unit == "mb" || unit == "mib") return n;
  if (unit == "g" || unit == "gb" || unit == "gib") return n * 1024;
  return InvalidArgument("memory \"" + std::string(text.substr(0, 32)) +
                         "\" has an unknown unit; use e.g. " + std::string(kExamples));
}

Result<int64_t> ParseDiskGib(std::string_view text) {
  constexpr std::string_view kExamples = "10 (GiB), 20G or 1T";
  WARREN_ASSIGN_OR_RETURN(auto split, SplitSize(text, "disk", kExamples));
  auto [n, unit] = split;
  if (unit.empty() || unit == "g" || unit == "gb" || unit == "gib") return n;
  if (unit == "t" || unit == "tb" || unit == "tib") return n * 1024;
  return InvalidArgument("disk \"" + std::string(text.substr(0, 32)) +
                         "\" has an unknown unit (disks come in whole GiB); use e.g. " +
                         std::string(kExamples));
}

Result<int64_t> ParseUserLimit(LimitKind kind, std::string_view flag, std::string_view text) {
  if (text == "none") return kNoLimit;
  if (text == "0") return 0;
  const bool size = kind == LimitKind::kMemoryMib || kind == LimitKind::kDiskGib;
  if (!size) {
    Result<std::pair<int64_t, std::string>> split = SplitSize(text, flag, "10");
    if (split.ok() && split->second.empty()) return split->first;
  } else {
    Result<int64_t> value =
        kind == LimitKind::kMemoryMib ? ParseMemoryMib(text) : ParseDiskGib(text);
    if (value.ok()) return value;
  }
  const char* examples = kind == LimitKind::kMemoryMib ? "64G"
                         : kind == LimitKind::kDiskGib ? "500G or 1T"
                                                       : "10";
  return InvalidArgument(std::string(flag) + " takes a " + (size ? "size" : "number") + " (e.g. " +
                         examples + "), 0 or none, not \"" + std::string(text.substr(0, 32)) +
                         "\"");
}

std::string FormatUserLimit(LimitKind kind, int64_t value) {
  if (value == kNoLimit) return "none";
  switch (kind) {
    case LimitKind::kMemoryMib:
      return value == 0 ? "0" : FormatMib(value);
    case LimitKind::kDiskGib:
      return std::to_string(value) + " GiB";
    default:
      return std::to_string(value);
  }
}

Status CheckVmCpus(int cpus, const VmDefaults& limits) {
  if (cpus >= 1 && cpus <= limits.max_cpus) return Status::Ok();
  return InvalidArgument("--cpu must be 1 to " + std::to_string(limits.max_cpus));
}

Status CheckVmMemoryMib(int64_t memory_mib, const VmDefaults& limits) {
  if (memory_mib >= 256 && memory_mib <= limits.max_memory_mib) return Status::Ok();
  return InvalidArgument("--memory must be 256M to " + FormatMib(limits.max_memory_mib));
}

Status CheckVmDiskGib(int64_t disk_gib, const VmDefaults& limits) {
  if (disk_gib >= 1 && disk_gib <= limits.max_disk_gib) return Status::Ok();
  return InvalidArgument("--disk must be 1G to " + std::to_string(limits.max_disk_gib) + "G");
}

Result<std::vector<std::string>> ParseTags(const std::vector<std::string>& words) {
  std::vector<std::string> tags;
  for (const std::string& word : words) {
    size_t start = 0;
    while (start <= word.size()) {
      size_t comma = word.find(',', start);
      std::string tag = word.substr(start, comma == std::string::npos ? comma : comma - start);
      if (!tag.empty()) {
        WARREN_RETURN_IF_ERROR(ValidateTag(tag));
        tags.push_back(std::move(tag));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  if (tags.size() > kMaxTagsPerVm) {
    return InvalidArgument("a VM may carry at most " + std::to_string(kMaxTagsPerVm) + " tags");
  }
  return tags;
}

void MergeTags(std::vector<std::string>& tags, const std::vector<std::string>& more) {
  tags.insert(tags.end(), more.begin(), more.end());
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
}

Result<std::pair<std::string, std::string>> ParseEnvEntry(std::string_view entry) {
  size_t eq = entry.find('=');
  std::string_view key = entry.substr(0, eq);
  if (eq == std::string_view::npos || !ValidEnvName(key)) {
    return InvalidArgument("--env \"" + std::string(entry.substr(0, 40)) +
                           "\" must be KEY=VALUE with KEY of letters, digits and _, not starting "
                           "with a digit");
  }
  std::string_view value = entry.substr(eq + 1);
  if (value.size() > kMaxEnvValueBytes) {
    return InvalidArgument("--env " + std::string(key) + ": the value is longer than " +
                           std::to_string(kMaxEnvValueBytes) + " bytes");
  }
  if (value.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos) {
    return InvalidArgument("--env " + std::string(key) + ": the value may not hold newlines");
  }
  return std::make_pair(std::string(key), std::string(value));
}

Status CheckComment(std::string_view comment) {
  if (comment.size() > kMaxCommentBytes) {
    return InvalidArgument("a comment is at most " + std::to_string(kMaxCommentBytes) +
                           " bytes (this one is " + std::to_string(comment.size()) + ")");
  }
  if (!IsValidUtf8(comment)) return InvalidArgument("a comment must be valid UTF-8");
  for (char ch : comment) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return InvalidArgument("a comment may not hold control characters");
  }
  return Status::Ok();
}

std::string NewVmId() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  // random_device reads the kernel's generator: ids must not repeat across threads,
  // processes and restarts, which a seeded PRNG cannot promise.
  std::random_device os;
  std::uniform_int_distribution<int> pick(0, 35);
  std::string id(12, 'a');
  for (char& c : id) c = kAlphabet[pick(os)];
  return id;
}

std::string NewVmName() {
  std::uniform_int_distribution<size_t> adjective(0, kAdjectives.size() - 1);
  std::uniform_int_distribution<size_t> animal(0, kAnimals.size() - 1);
  std::uniform_int_distribution<int> number(1, 99);
  return std::string(kAdjectives[adjective(Rng())]) + "-" + kAnimals[animal(Rng())] + "-" +
         std::to_string(number(Rng()));
}

}  // namespace warren
