#include "lobby/base/host_name.h"

#include <string>

namespace warren {

Status CheckHostName(std::string_view name) {
  const std::string shown =
      "\"" + std::string(name.substr(0, 40)) + (name.size() > 40 ? "…" : "") + "\"";
  if (name.empty() || name.size() > kMaxHostNameLength) {
    return InvalidArgument("host name " + shown + " must be 1 to " +
                           std::to_string(kMaxHostNameLength) + " characters long");
  }
  if (name[0] < 'a' || name[0] > 'z') {
    return InvalidArgument("host name " + shown + " must start with a letter a-z");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '-') {
      if (i + 1 == name.size() || name[i + 1] == '-') {
        return InvalidArgument("host name " + shown +
                               " may not end in '-' or have two '-' in a row");
      }
    } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return InvalidArgument("host name " + shown + " may contain only a-z, 0-9 and '-'");
    }
  }
  return Status::Ok();
}

}  // namespace warren
