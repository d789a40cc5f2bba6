#include "lobby/commands/sandbox.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "lobby/base/duration.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_view.h"

namespace warren {
namespace {

bool ValidSizeName(std::string_view name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string SizeText(const SandboxSize& s) {
  return s.name + " (" + std::to_string(s.cpus) + " vCPU, " + FormatMib(s.memory_mib) + ")";
}

std::mutex& RoomMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

Result<SandboxSize> FindSandboxSize(const SandboxPolicy& policy, std::string_view name) {
  for (const SandboxSize& s : policy.sizes) {
    if (s.name == name) return s;
  }
  return InvalidArgument("no sandbox size \"" + std::string(name.substr(0, 32)) +
                         "\": the sizes are " + SandboxSizesText(policy));
}

Result<SandboxSize> ParseSandboxSize(std::string_view text) {
  const size_t eq = text.find('=');
  const size_t comma = text.find(',', eq == std::string_view::npos ? 0 : eq);
  if (eq == std::string_view::npos || comma == std::string_view::npos) {
    return InvalidArgument("--sandbox-size takes NAME=CPU,MEMORY[,DISK], such as test=1,512M,2G");
  }
  SandboxSize size;
  size.name = std::string(text.substr(0, eq));
  if (!ValidSizeName(size.name)) {
    return InvalidArgument(
        "--sandbox-size: a size's name is 1-32 of a-z, 0-9 and '-', starting with a letter");
  }
  const std::string_view cpus = text.substr(eq + 1, comma - eq - 1);
  if (cpus.empty() || cpus.size() > 3 ||
      !std::all_of(cpus.begin(), cpus.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgument("--sandbox-size " + size.name + ": the vCPUs are a number, 1 to 64");
  }
  size.cpus = std::stoi(std::string(cpus));
  if (size.cpus < 1 || size.cpus > 64) {
    return InvalidArgument("--sandbox-size " + size.name + ": the vCPUs are a number, 1 to 64");
  }
  std::string_view memory = text.substr(comma + 1);
  if (const size_t disk = memory.find(','); disk != std::string_view::npos) {
    WARREN_ASSIGN_OR_RETURN(size.disk_gib, ParseDiskGib(memory.substr(disk + 1)));
    if (size.disk_gib < 1)
      return InvalidArgument("--sandbox-size " + size.name + ": at least 1 GiB of disk");
    memory = memory.substr(0, disk);
  }
  WARREN_ASSIGN_OR_RETURN(size.memory_mib, ParseMemoryMib(memory));
  if (size.memory_mib < 128) {
    return InvalidArgument("--sandbox-size " + size.name + ": at least 128 MiB of memory");
  }
  return size;
}

void PutSandboxSize(SandboxPolicy& policy, SandboxSize size) {
  for (SandboxSize& s : policy.sizes) {
    if (s.name == size.name) {
      s = std::move(size);
      return;
    }
  }
  policy.sizes.push_back(std::move(size));
}

std::string SandboxSizesText(const SandboxPolicy& policy) {
  std::string out;
  for (const SandboxSize& s : policy.sizes) out += (out.empty() ? "" : ", ") + SizeText(s);
  return out;
}

Result<int64_t> ParseSandboxLifetime(std::string_view flag, std::string_view text) {
  WARREN_ASSIGN_OR_RETURN(int64_t ms, ParseDurationMs(flag, text));
  if (ms < 60'000 || ms > kMaxSandboxSeconds * 1000) {
    return InvalidArgument(std::string(flag) + " must be from 1m to 24h, not " +
                           FormatDurationMs(ms));
  }
  return ms / 1000;
}

std::string NewSandboxName() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device os;
  std::uniform_int_distribution<int> pick(0, 35);
  std::string name = "sbx-";
  for (int i = 0; i < 8; ++i) name += kAlphabet[pick(os)];
  return name;
}

bool IsSandbox(const VmRecord& vm) { return vm.kind == kSandboxKind; }

SandboxReservation ReservedBySandboxes(const std::vector<VmRecord>& vms,
                                       std::string_view except_id) {
  SandboxReservation r;
  for (const VmRecord& vm : vms) {
    if (!IsSandbox(vm) || vm.id == except_id || vm.desired_state == DesiredState::kStopped) {
      continue;
    }
    r.cpus += vm.cpus;
    r.memory_mib += vm.memory_mib;
    ++r.count;
  }
  return r;
}

Status CheckSandboxRoom(const HostCapacity& host, const SandboxPolicy& policy,
                        const SandboxReservation& reserved, int cpus, int64_t memory_mib) {
  const double ratio = policy.overcommit > 0 ? policy.overcommit : 1.0;
  // In doubles, clamped, so a host that says "unlimited" (INT64_MAX) cannot overflow.
  auto room = [ratio](double have) {
    const double r = std::floor(std::max(0.0, have) * ratio + 1e-9);
    return r >= 9e15 ? int64_t{9'000'000'000'000'000} : static_cast<int64_t>(r);
  };
  const int64_t cpu_room = room(static_cast<double>(host.cpu_cores) - policy.reserve_cpus);
  const int64_t memory_room =
      room(static_cast<double>(host.memory_mib) - static_cast<double>(policy.reserve_memory_mib));
  const std::string in_use = " (" + std::to_string(reserved.count) + " sandboxes reserve " +
                             std::to_string(reserved.cpus) + " vCPUs and " +
                             FormatMib(reserved.memory_mib) + " now)";
  if (reserved.cpus + cpus > cpu_room) {
    return LimitExceeded("no room for a sandbox of " + std::to_string(cpus) +
                         " vCPUs: sandboxes may reserve " + std::to_string(cpu_room) +
                         " vCPUs on this host" + in_use +
                         "; remove or stop a sandbox, or choose a smaller size");
  }
  if (reserved.memory_mib + memory_mib > memory_room) {
    return LimitExceeded("no room for a sandbox of " + FormatMib(memory_mib) +
                         ": sandboxes may reserve " + FormatMib(memory_room) +
                         " of memory on this host" + in_use +
                         "; remove or stop a sandbox, or choose a smaller size");
  }
  return Status::Ok();
}

SandboxRoomLock::SandboxRoomLock() : lock_(RoomMutex()) {}

ExtendedExpiry ExtendExpiry(int64_t now, int64_t expires_at, int64_t minutes) {
  ExtendedExpiry e;
  const int64_t wanted = std::max(now, expires_at) + minutes * 60;
  const int64_t cap = now + kMaxSandboxSeconds;
  e.capped = wanted > cap;
  e.expires_at = std::min(wanted, cap);
  return e;
}

}  // namespace warren
