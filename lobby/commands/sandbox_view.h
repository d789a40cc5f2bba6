// The sandbox API's shapes (seed 004), the one home of them: what REST /v1/sandboxes
// (bridge/sandbox_handler.h) and MCP /mcp/sandbox (bridge/mcp/sandbox_tools.cc) accept and
// answer. A request becomes the argv of one lobby command (new --sandbox, ls --sandbox, stat,
// ssh --timeout, extend, rm), run by Interpreter::Execute like any other, so scopes apply
// alike; the command's --json data is then mapped to the wire. Policy (sizes, lifetimes,
// limits, env names) stays in the commands: the builders here check types and the API's
// published ranges only, and refuse fields they do not know. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lobby/base/status.h"
#include "lobby/commands/sandbox.h"

namespace warren {

// The API's published ranges (seed 004). timeout_minutes and additional_minutes: 1 to 24 h,
// as `new --timeout` and `extend` allow at most (sandbox.h); exec's timeout_ms: up to 10
// minutes, as `ssh --timeout` allows, 60 s when absent.
inline constexpr int64_t kMaxSandboxMinutes = kMaxSandboxSeconds / 60;
inline constexpr int64_t kMaxSandboxExecTimeoutMs = 10 * 60 * 1000;
inline constexpr int64_t kDefaultSandboxExecTimeoutMs = 60 * 1000;

// Requests → argv. `body` is the request's JSON object (REST body or MCP arguments); an
// InvalidArgument names the field and what it must be.
// {size?, timeout_minutes?} → new --sandbox --name=sbx-xxxxxxxx [--size=S] [--timeout=Nm]
// (a fresh NewSandboxName: the id is known before the sandbox exists; see SandboxCreateId)
Result<std::vector<std::string>> SandboxCreateArgv(const nlohmann::json& body);
// The id a create argv names (its --name=), "" for any other argv.
std::string SandboxCreateId(const std::vector<std::string>& argv);
// {command, timeout_ms?, cwd?, env?} → ssh --timeout=Nms [--cwd=D] [--env=K=V]… -- ID CMD.
// `id_field` is what the request calls the sandbox ("sandbox_id" over MCP; "" for REST,
// where it is in the path): that field is taken as the id and allowed in `body`.
Result<std::vector<std::string>> SandboxExecArgv(std::string_view id, const nlohmann::json& body,
                                                 std::string_view id_field = "");
// {additional_minutes} → extend --minutes=N -- ID
Result<std::vector<std::string>> SandboxExtendArgv(std::string_view id, const nlohmann::json& body,
                                                   std::string_view id_field = "");
// stat -- ID, rm --sandbox -- ID (an ordinary VM is not the API's to destroy), ls --sandbox.
std::vector<std::string> SandboxStatArgv(std::string_view id);
std::vector<std::string> SandboxDestroyArgv(std::string_view id);
std::vector<std::string> SandboxListArgv();

// Command data → the wire.
// {id, status, size, expires_at} from one VM's JSON (vm_view.h VmJson with kind, size and
// expires_at): id is the name, status the state, expires_at RFC 3339 UTC
// ("2026-12-01T23:59:00Z"). NotFound for an ordinary VM: it is not one of the API's
// sandboxes (though, being a VM the caller sees, exec and destroy reach it by name).
Result<nlohmann::json> SandboxJson(const nlohmann::json& vm);
// {"sandboxes": [...]} from `ls --sandbox` data (an array, or {"vms": [...]}).
Result<nlohmann::json> SandboxListJson(const nlohmann::json& ls);
// {stdout, stderr, exit_code, duration_ms, truncated}, plus timed_out and
// stdout_base64/stderr_base64 (output that is not UTF-8: stdout/stderr are then "") when
// the command's data has them, from `ssh` data. A non-zero exit_code is a result, not an
// error.
nlohmann::json SandboxExecJson(const nlohmann::json& ssh);
// {id, expires_at} from `extend` data ({name, expires_at, capped}), with capped: true when
// the 24 h cap cut the extension.
Result<nlohmann::json> SandboxExtendJson(const nlohmann::json& extend);
// {id, status: "destroyed"} from `rm` data ({deleted, failed}) for `id`.
Result<nlohmann::json> SandboxDestroyJson(const nlohmann::json& rm, std::string_view id);

// JSON Schemas of the shapes above (MCP outputSchema; the REST docs say the same).
const nlohmann::json& SandboxSchema();
const nlohmann::json& SandboxExecSchema();
const nlohmann::json& SandboxExtendSchema();
const nlohmann::json& SandboxDestroySchema();

}  // namespace warren
