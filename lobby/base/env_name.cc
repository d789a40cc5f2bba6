#include "lobby/base/env_name.h"

namespace warren {

bool ValidEnvName(std::string_view name) {
  if (name.empty() || name.size() > kMaxEnvNameBytes) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

}  // namespace warren
