#include "lobby/base/user_name.h"

#include <string>

namespace warren {

Status CheckUserName(std::string_view name) {
  auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  bool ok = !name.empty() && name.size() <= kMaxUserNameLength && lower(name[0]);
  for (char c : name) ok = ok && (lower(c) || (c >= '0' && c <= '9') || c == '_' || c == '-');
  if (ok) return Status::Ok();
  return InvalidArgument("user name \"" + std::string(name.substr(0, 64)) +
                         "\" is not valid: 1-32 of a-z, 0-9, _ and -, starting with a letter");
}

}  // namespace warren
