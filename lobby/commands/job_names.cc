#include "lobby/commands/job_names.h"

#include "keys/vm_rules.h"

namespace warren {

std::string JobName(std::string_view vm_name, std::string_view job) {
  return std::string(vm_name) + "/" + std::string(job);
}

Result<std::pair<std::string, std::string>> ParseJobName(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0) {
    return InvalidArgument("a job is named VM/JOB, e.g. web-1/0a1b2c3d (see jobs)");
  }
  std::string_view job = name.substr(slash + 1);
  if (!CheckJobId(job).ok()) {
    return InvalidArgument(
        "a job is named VM/JOB with JOB 8 hex digits, e.g. web-1/0a1b2c3d "
        "(see jobs)");
  }
  return std::make_pair(std::string(name.substr(0, slash)), std::string(job));
}

bool JobExpired(const JobRecord& job, int64_t now) {
  return job.finished && job.ended_at > 0 && now - job.ended_at > kFinishedJobKeepSeconds;
}

std::string BoundedJobCommand(std::string_view command) {
  if (command.size() <= kMaxJobCommandBytes) return std::string(command);
  size_t end = kMaxJobCommandBytes;
  // Back off continuation bytes so the cut does not split a character.
  while (end > 0 && (static_cast<unsigned char>(command[end]) & 0xC0) == 0x80) --end;
  return std::string(command.substr(0, end));
}

}  // namespace warren
