#include "lobby/base/vm_name.h"

#include <string>

namespace warren {
namespace {

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A name cut short for a message: names come from users and may be pasted blobs.
std::string Shown(std::string_view s) {
  constexpr size_t kMax = 64;
  return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "…";
}

}  // namespace

Status CheckVmName(std::string_view name) {
  const std::string quoted = "\"" + Shown(name) + "\"";
  if (name.size() < kMinVmNameLength || name.size() > kMaxVmNameLength) {
    return InvalidArgument("VM name " + quoted + " must be " + std::to_string(kMinVmNameLength) +
                           " to " + std::to_string(kMaxVmNameLength) + " characters long");
  }
  if (!IsLower(name[0])) {
    return InvalidArgument("VM name " + quoted + " must start with a letter a-z");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '-') {
      if (i + 1 == name.size() || name[i + 1] == '-') {
        return InvalidArgument("VM name " + quoted +
                               " may not end in '-' or have two '-' in a row");
      }
    } else if (!IsLower(c) && !IsDigit(c)) {
      return InvalidArgument("VM name " + quoted + " may contain only a-z, 0-9 and '-'");
    }
  }
  // -p followed only by digits at the end: NAME-pPORT is a port URL.
  size_t dash = name.rfind("-p");
  if (dash != std::string_view::npos && dash + 2 < name.size()) {
    bool digits = true;
    for (char c : name.substr(dash + 2)) digits = digits && IsDigit(c);
    if (digits) {
      return InvalidArgument("VM name " + quoted +
                             " may not end in -p and a number (NAME-pPORT addresses a VM's port "
                             "on the web)");
    }
  }
  return Status::Ok();
}

}  // namespace warren
