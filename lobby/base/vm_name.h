// The rule for a user-facing VM name, in the one library every layer may include: the store
// enforces it on every write (its name index relies on it), the hypervisor layer on every
// domain it names, the commands check it first for a friendlier message. Which names are
// reserved for logins (root, dev, user names) needs the store and lives with the commands
// (lobby/commands/login_names.h). Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

inline constexpr size_t kMinVmNameLength = 1;
inline constexpr size_t kMaxVmNameLength = 52;

// 1-52 chars, ^[a-z][a-z0-9]*(-[a-z0-9]+)*$, and not ending in -pNNNN (NAME-pPORT.DOMAIN is
// how the web side addresses a VM's port, so such a name would shadow another VM's port
// URL). Also a valid hostname label. InvalidArgument saying which rule failed.
Status CheckVmName(std::string_view name);

}  // namespace warren
