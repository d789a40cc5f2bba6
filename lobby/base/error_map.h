// The one mapping from an error Code to what each surface reports: the SSH exit status,
// the HTTP status and the JSON-RPC error code. Surfaces never invent their own numbers.
// Pure functions; thread-safe.
#pragma once

#include <span>

#include "lobby/base/status.h"

namespace warren {

struct ErrorMapping {
  Code code;
  int exit_status;  // SSH exit-status / process exit code
  int http_status;
  int jsonrpc_code;  // for protocol-level MCP errors; tool failures use isError results
};

const ErrorMapping& MappingFor(Code code);
// Every code's mapping, in Code order: what `help --json` publishes as the error model.
std::span<const ErrorMapping> ErrorMappings();

inline int ExitStatusFor(Code code) { return MappingFor(code).exit_status; }
inline int HttpStatusFor(Code code) { return MappingFor(code).http_status; }
inline int JsonRpcCodeFor(Code code) { return MappingFor(code).jsonrpc_code; }

// The HTTP success statuses. kOk is 200, except for a request that made a resource (REST
// POST /v1/sandboxes), which answers 201 Created when it succeeds; every other outcome is
// HttpStatusFor's. The only place an HTTP surface gets a success status from.
enum class HttpSuccess { kOk, kCreated };
inline constexpr int kHttpCreated = 201;
inline int HttpStatusFor(Code code, HttpSuccess success) {
  return code == Code::kOk && success == HttpSuccess::kCreated ? kHttpCreated : HttpStatusFor(code);
}

}  // namespace warren
