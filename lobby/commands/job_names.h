// Job names as users see them: "VM/xxxxxxxx", the VM's current name and the guest runner's
// id, so a job follows its VM through a rename. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "keys/store.h"
#include "lobby/base/status.h"

namespace warren {

// A finished job's output is kept (by the guest runner, and its record by us) for a day.
inline constexpr int64_t kFinishedJobKeepSeconds = 24 * 3600;

std::string JobName(std::string_view vm_name, std::string_view job);

// "web-1/0000000a" -> {"web-1", "0000000a"}. InvalidArgument for anything else.
Result<std::pair<std::string, std::string>> ParseJobName(std::string_view name);

// True when a finished job's record and output are past keeping.
bool JobExpired(const JobRecord& job, int64_t now);

// `command` cut to kMaxJobCommandBytes at a UTF-8 character boundary.
std::string BoundedJobCommand(std::string_view command);

}  // namespace warren
