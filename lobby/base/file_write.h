// Writing a file so it is never seen half-written or with looser permissions than meant:
// used for key files (the SSH host key, the guest control key). Thread-compatible per path.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

// Writes `data` to `path` atomically: a temp file created with `mode` and O_EXCL, fsync,
// then rename over `path`. Internal with the errno text on failure; no temp file is left.
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode);

}  // namespace warren
