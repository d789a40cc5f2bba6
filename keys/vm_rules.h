// The rules for VM names (lobby/base/vm_name.h, so vmhost can use the same one), VM ids and
// job ids, shared by the store (which enforces them on every write, since its index keys
// rely on them) and the commands (which check them first to give friendlier messages). Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "lobby/base/vm_name.h"

namespace warren {

inline constexpr size_t kVmIdLength = 12;
inline constexpr size_t kJobIdLength = 8;

// [a-z0-9]{12}.
Status CheckVmId(std::string_view id);

// [0-9a-f]{8}: the guest runner's job ids.
Status CheckJobId(std::string_view job);

}  // namespace warren
