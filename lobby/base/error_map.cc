#include "lobby/base/error_map.h"

#include <array>

namespace warren {
namespace {

// Exit statuses are small, distinct and stable: scripts may test for them. 1 is "internal"
// like most tools; 2 is a usage error like most tools. kCommandFailed normally carries the
// guest command's own status instead (see Command results); 1 is its fallback.
constexpr std::array<ErrorMapping, 14> kMappings = {{
    {Code::kOk, 0, 200, 0},
    {Code::kInvalidArgument, 2, 400, -32602},
    {Code::kUnauthenticated, 3, 401, -32001},
    {Code::kPermissionDenied, 4, 403, -32003},
    {Code::kNotFound, 5, 404, -32004},
    {Code::kMethodNotAllowed, 6, 405, -32601},
    {Code::kConflict, 7, 409, -32009},
    {Code::kTooLarge, 8, 413, -32013},
    {Code::kCommandFailed, 1, 422, -32022},
    {Code::kLimitExceeded, 9, 429, -32029},
    {Code::kInternal, 10, 500, -32603},
    {Code::kUnavailable, 11, 503, -32053},
    {Code::kTimeout, 12, 504, -32054},
    {Code::kCancelled, 13, 499, -32800},
}};

}  // namespace

std::span<const ErrorMapping> ErrorMappings() { return kMappings; }

const ErrorMapping& MappingFor(Code code) {
  for (const auto& m : kMappings) {
    if (m.code == code) return m;
  }
  return kMappings[static_cast<size_t>(Code::kInternal)];
}

}  // namespace warren
