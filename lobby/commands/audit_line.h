// The audit line: one per command, and one per act warren takes on its own (a sandbox
// expiring), in one format — `audit cmd=… vm=… caller=… user=… surface=… code=… dur_ms=…`,
// never argv, never a secret (the caller is a key's fingerprint or a label's id).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

struct AuditEntry {
  std::string_view path;  // "ssh-key add", "expire"
  std::string_view vm;    // "" when none
  std::string_view credential;
  std::string_view user;
  std::string_view surface;  // "ssh", "exec", "mcp", "warren" for warren's own acts
  Code code = Code::kOk;
  int64_t dur_ms = 0;
};

// Logs the line (LogInfo).
void WriteAuditLine(const AuditEntry& entry);

}  // namespace warren
