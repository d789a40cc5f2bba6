// Parsing and checking the values VM commands take on their command lines: sizes ("2G",
// "512M", "2048"), tags, KEY=VALUE environment entries, comments — and making fresh VM ids
// and friendly names. Pure functions apart from the random sources; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

struct VmDefaults;

inline constexpr size_t kMaxCommentBytes = 200;
inline constexpr size_t kMaxTagsPerVm = 32;
inline constexpr size_t kMaxEnvEntries = 64;
inline constexpr size_t kMaxEnvValueBytes = 4096;

// Memory: a bare number is MiB; M/MB/MiB and G/GB/GiB suffixes (any case) are accepted.
Result<int64_t> ParseMemoryMib(std::string_view text);
// Disk: a bare number is GiB; G/GB/GiB and T/TB/TiB suffixes are accepted.
Result<int64_t> ParseDiskGib(std::string_view text);

// What a user limit counts (keys/store.h UserLimits), for parsing and showing one.
enum class LimitKind { kVms, kCpus, kMemoryMib, kDiskGib, kSandboxes };
// A limit as `user add|set --max-*` and `serve --user-max-*` take it: "none" (kNoLimit), "0"
// (none allowed), or a count (VMs, vCPUs) or size (memory as ParseMemoryMib, disk as
// ParseDiskGib). InvalidArgument naming `flag`.
Result<int64_t> ParseUserLimit(LimitKind kind, std::string_view flag, std::string_view text);
// "none", "10", "16", "64 GiB", "1024 GiB".
std::string FormatUserLimit(LimitKind kind, int64_t value);

// --cpu, --memory and --disk against this server's limits (VmDefaults::max_*), for `new`
// and `resize` alike: InvalidArgument naming the range allowed.
Status CheckVmCpus(int cpus, const VmDefaults& limits);
Status CheckVmMemoryMib(int64_t memory_mib, const VmDefaults& limits);
Status CheckVmDiskGib(int64_t disk_gib, const VmDefaults& limits);

// Tags from --tag a,b (repeatable): each ^[a-z][a-z0-9_-]*$; returned sorted, unique.
Result<std::vector<std::string>> ParseTags(const std::vector<std::string>& words);
// Adds `more` to sorted, unique `tags`, keeping them so.
void MergeTags(std::vector<std::string>& tags, const std::vector<std::string>& more);

// KEY=VALUE with KEY ^[A-Za-z_][A-Za-z0-9_]*$ and a VALUE without newlines or NUL.
Result<std::pair<std::string, std::string>> ParseEnvEntry(std::string_view entry);

// At most kMaxCommentBytes, valid UTF-8 without control characters.
Status CheckComment(std::string_view comment);

// A fresh random VM id: 12 of [a-z0-9].
std::string NewVmId();
// A friendly name: two short words and a number, "calm-otter-42". Always passes
// CheckVmName; the caller checks it is free.
std::string NewVmName();

}  // namespace warren
