#include "vmhost/vm_host.h"

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
  return Status::Ok();
}

}  // namespace warren
