#include "lobby/commands/audit_line.h"

#include "lobby/base/log.h"

namespace warren {

void WriteAuditLine(const AuditEntry& e) {
  std::string line = "audit cmd=" + LogQuote(e.path);
  if (!e.vm.empty()) line += " vm=" + LogQuote(e.vm);
  line += " caller=" + LogQuote(e.credential) + " user=" + LogQuote(e.user) +
          " surface=" + LogQuote(e.surface) + " code=" + std::string(CodeName(e.code)) +
          " dur_ms=" + std::to_string(e.dur_ms);
  LogInfo(line);
}

}  // namespace warren
