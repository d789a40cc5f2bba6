#include "lobby/base/status.h"

namespace warren {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kNotFound:
      return "not_found";
    case Code::kMethodNotAllowed:
      return "method_not_allowed";
    case Code::kConflict:
      return "conflict";
    case Code::kTooLarge:
      return "too_large";
    case Code::kCommandFailed:
      return "command_failed";
    case Code::kLimitExceeded:
      return "limit_exceeded";
    case Code::kInternal:
      return "internal";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kTimeout:
      return "timeout";
    case Code::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

}  // namespace warren
