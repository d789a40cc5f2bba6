#include "keys/store.h"

#include <string>

namespace warren {
namespace {

constexpr size_t kMaxUserNameBytes = 32;
constexpr size_t kMaxKeyNameBytes = 64;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLower(c) || IsDigit(c) || (c >= 'A' && c <= 'Z'); }

}  // namespace

Status ValidateUserName(std::string_view name) {
  if (name.empty()) return InvalidArgument("user name is empty");
  if (name.size() > kMaxUserNameBytes) {
    return InvalidArgument("user name is longer than " + std::to_string(kMaxUserNameBytes) +
                           " bytes");
  }
  if (!IsLower(name[0])) return InvalidArgument("user name must start with a letter a-z");
  for (char c : name) {
    if (!IsLower(c) && !IsDigit(c) && c != '_' && c != '-') {
      return InvalidArgument("user name may contain only a-z, 0-9, '_' and '-'");
    }
  }
  return Status::Ok();
}

Status ValidateKeyName(std::string_view name) {
  if (name.empty()) return InvalidArgument("key name is empty");
  if (name.size() > kMaxKeyNameBytes) {
    return InvalidArgument("key name is longer than " + std::to_string(kMaxKeyNameBytes) +
                           " bytes");
  }
  if (!IsAlnum(name[0])) return InvalidArgument("key name must start with a letter or digit");
  for (char c : name) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '@' && c != '+' && c != '-') {
      return InvalidArgument("key name may contain only letters, digits and . _ @ + -");
    }
  }
  return Status::Ok();
}

}  // namespace warren
