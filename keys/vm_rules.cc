#include "keys/vm_rules.h"

namespace warren {
namespace {

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

// A name cut short for a message: names come from users and may be pasted blobs.
std::string Shown(std::string_view s) {
  constexpr size_t kMax = 64;
  return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "…";
}

}  // namespace

Status CheckVmId(std::string_view id) {
  bool ok = id.size() == kVmIdLength;
  for (char c : id) ok = ok && (IsLower(c) || IsDigit(c));
  if (ok) return Status::Ok();
  return InvalidArgument("VM id \"" + Shown(id) + "\" is not 12 of a-z and 0-9");
}

Status CheckJobId(std::string_view job) {
  bool ok = job.size() == kJobIdLength;
  for (char c : job) ok = ok && IsHex(c);
  if (ok) return Status::Ok();
  return InvalidArgument("job id \"" + Shown(job) + "\" is not 8 hex digits");
}

}  // namespace warren
