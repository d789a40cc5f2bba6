#include "vmhost/vm_host.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "lobby/base/env_name.h"
#include "lobby/base/vm_name.h"

namespace warren {

std::string_view VmStateName(VmState state) {
  switch (state) {
    case VmState::kRunning:
      return "running";
    case VmState::kPaused:
      return "paused";
    case VmState::kStopped:
      return "stopped";
    case VmState::kCrashed:
      return "crashed";
  }
  return "unknown";
}

std::string_view EgressName(Egress egress) {
  switch (egress) {
    case Egress::kAll:
      return "all";
    case Egress::kNone:
      return "none";
  }
  return "unknown";
}

VmShape ShapeOf(const VmSpec& spec) {
  return {spec.image, spec.cpus, spec.memory_mib, spec.disk_gib, spec.egress};
}

std::string VmShapeKey(const VmShape& shape) {
  std::string key;
  for (char c : shape.image) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-' || c == '_' || c == '@';
    key += plain ? c : '_';
  }
  return key + "-" + std::to_string(shape.cpus) + "c-" + std::to_string(shape.memory_mib) + "m-" +
         std::to_string(shape.disk_gib) + "g-" + std::string(EgressName(shape.egress));
}

Status ValidateVmName(std::string_view name) { return CheckVmName(name); }

Status ValidateResizeSpec(const ResizeSpec& spec) {
  if (spec.cpus == 0 && spec.memory_mib == 0 && spec.disk_gib == 0) {
    return InvalidArgument("nothing to resize: give --cpu, --memory or --disk");
  }
  if (spec.cpus != 0 && (spec.cpus < 1 || spec.cpus > 64)) {
    return InvalidArgument("cpu must be between 1 and 64");
  }
  if (spec.memory_mib != 0 && (spec.memory_mib < 128 || spec.memory_mib > 256 * 1024)) {
    return InvalidArgument("memory must be between 128 MiB and 256 GiB");
  }
  if (spec.disk_gib != 0 && (spec.disk_gib < 1 || spec.disk_gib > 2048)) {
    return InvalidArgument("disk must be between 1 and 2048 GiB");
  }
  return Status::Ok();
}

Status ValidateVmSpec(const VmSpec& spec) {
  if (spec.id.size() < 8 || spec.id.size() > 32) {
    return InvalidArgument("vm id must be 8 to 32 characters");
  }
  for (char c : spec.id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return InvalidArgument("vm id may contain only a-z and 0-9");
    }
  }
  if (spec.image.empty() || spec.image.find('@') == std::string::npos) {
    return InvalidArgument("image must be NAME@VERSION");
  }
  if (spec.cpus < 1 || spec.cpus > 64) return InvalidArgument("cpu must be between 1 and 64");
  if (spec.memory_mib < 128 || spec.memory_mib > 256 * 1024) {
    return InvalidArgument("memory must be between 128 MiB and 256 GiB");
  }
  if (spec.disk_gib < 1 || spec.disk_gib > 2048) {
    return InvalidArgument("disk must be between 1 and 2048 GiB");
  }
  if (!spec.name.empty()) WARREN_RETURN_IF_ERROR(ValidateVmName(spec.name));
  if (spec.authorized_keys.size() > 64 * 1024) {
    return InvalidArgument("authorized keys must be at most 64 KiB");
  }
  if (spec.setup_script.size() > 10 * 1024) {
    return InvalidArgument("setup script must be at most 10 KiB");
  }
  if (spec.ssh_host_key.empty() != spec.ssh_host_key_pub.empty()) {
    return InvalidArgument("ssh host key needs both its private and public part");
  }
  if (spec.ssh_host_key.size() > 16 * 1024 || spec.ssh_host_key_pub.size() > 4096) {
    return InvalidArgument("ssh host key too large");
  }
  if (spec.env.size() > 256) return InvalidArgument("at most 256 env variables");
  size_t env_bytes = 0;
  for (const auto& [key, value] : spec.env) env_bytes += key.size() + value.size() + 2;
  // With the keys and script, well inside the seed image (seed_image.h kMaxSeedContentBytes).
  if (env_bytes > 512 * 1024) return InvalidArgument("env variables must be at most 512 KiB");
  for (const auto& [key, value] : spec.env) {
    if (!ValidEnvName(key)) return InvalidArgument("env name must match [A-Za-z_][A-Za-z0-9_]*");
    if (value.size() > 4096 ||
        value.find_first_of(std::string_view("\n\r\0", 3)) != std::string::npos) {
      return InvalidArgument("env value must be one line of at most 4096 bytes");
    }
  }
  return Status::Ok();
}

Status CheckHostRoom(const HostCapacity& host, const HostDemand& demand) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  if (demand.cpus > host.cpu_cores && host.cpu_cores > 0) {
    return InvalidArgument("this host has " + std::to_string(host.cpu_cores) +
                           " CPU cores: a VM may have at most " + std::to_string(host.cpu_cores) +
                           " vCPUs");
  }
  if (demand.memory_mib > 0) {
    const int64_t uncommitted = host.memory_mib - host.memory_committed_mib;
    const int64_t available = std::max<int64_t>(0, std::min(uncommitted, host.memory_free_mib));
    if (demand.memory_mib > available) {
      std::string figures =
          "running VMs hold " + std::to_string(host.memory_committed_mib) + " MiB";
      if (host.memory_free_mib < INT64_MAX) {
        figures +=
            ", " + std::to_string(std::max<int64_t>(0, host.memory_free_mib)) + " MiB free now";
      }
      return LimitExceeded(
          "not enough memory on the host for " + std::to_string(demand.memory_mib) +
          " MiB: " + std::to_string(available) + " MiB available (" + figures + ")");
    }
  }
  if (demand.disk_gib > 0) {
    // A guest that fills its disk must not fill the host's (every VM would stop on ENOSPC):
    // what the existing disks may still grow by is spoken for.
    const int64_t available_gib =
        std::max<int64_t>(0, host.disk_free_bytes - host.disk_committed_bytes) / kGiB;
    if (demand.disk_gib > available_gib) {
      return LimitExceeded("not enough disk on the host for " + std::to_string(demand.disk_gib) +
                           " GiB: " + std::to_string(available_gib) + " GiB available (" +
                           std::to_string(std::max<int64_t>(0, host.disk_free_bytes) / kGiB) +
                           " GiB free, " + std::to_string(host.disk_committed_bytes / kGiB) +
                           " GiB of it promised to the disks of existing VMs)");
    }
  }
  return Status::Ok();
}

}  // namespace warren
