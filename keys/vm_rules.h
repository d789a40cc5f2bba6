// The rules for VM names, VM ids and job ids, shared by the store (which enforces them on
// every write, since its index keys rely on them) and the commands (which check them first
// to give friendlier messages). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

inline constexpr size_t kVmIdLength = 12;
inline constexpr size_t kJobIdLength = 8;
inline constexpr size_t kMinVmNameLength = 5;
inline constexpr size_t kMaxVmNameLength = 52;

// A user-facing VM name: 5-52 chars, ^[a-z][a-z0-9]*(-[a-z0-9]+)*$, and not ending in
// -pNNNN (NAME-pPORT.DOMAIN is how the web side addresses a VM's port, so such a name
// would shadow another VM's port URL). InvalidArgument saying which rule failed.
Status CheckVmName(std::string_view name);

// [a-z0-9]{12}.
Status CheckVmId(std::string_view id);

// [0-9a-f]{8}: the guest runner's job ids.
Status CheckJobId(std::string_view job);

}  // namespace warren
