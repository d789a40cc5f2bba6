// MCP tools: what `tools/list` shows and what `tools/call` runs. Every warren tool is a thin
// mapping onto one lobby command line, run as an in-process command session through
// Interpreter::ExecuteLine or Execute exactly as over SSH (same tokenizer, same permission
// and read-only checks, same audit line, surface "mcp"); the result is read as data from
// the session. The full endpoint (/mcp) has exec, exec_read_only and wait;
// the curated ones (/mcp/claude, /mcp/openai) have list_vms, create_vm, run_vm_command and
// get_cli_help; /mcp/sandbox has the four tools of the sandbox API. Conformance fixture tools exist
// only when asked for (a test-only flag).
//
// A ToolSet is built once and read-only afterwards; calls may run concurrently on any
// threads (each on its own), as the interpreter allows.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lobby/base/streams.h"
#include "lobby/commands/caller.h"

namespace warren {
class Interpreter;
struct SandboxPolicy;
}  // namespace warren

namespace warren::mcp {

// What a running tool may use: the caller, the call's cancel signal, and a way to send
// notifications about this call (progress, log messages) to the client.
struct ToolCall {
  Caller caller;
  std::shared_ptr<CancelSignal> cancel;
  // Sends one JSON-RPC notification on the call's response stream; may be empty (then the
  // client gets none).
  std::function<void(const nlohmann::json& notification)> notify;
  nlohmann::json progress_token;  // from params._meta.progressToken; null when none
  int progress_interval_ms = 1000;
  std::string log_level = "info";  // from logging/setLevel
};

struct Tool {
  // {name, title, description, inputSchema, outputSchema?, annotations}
  nlohmann::json definition;
  // Returns a CallToolResult: {content, structuredContent?, isError}. Failures of the
  // command (bad arguments, a command that failed) are results with isError, never
  // protocol errors.
  std::function<nlohmann::json(const nlohmann::json& arguments, ToolCall& call)> run;
};

class ToolSet {
 public:
  void Add(Tool tool);
  const Tool* Find(std::string_view name) const;
  // The tools/list result's "tools".
  nlohmann::json List() const;

 private:
  std::vector<Tool> tools_;
};

// /mcp: exec, exec_read_only, wait.
ToolSet FullTools(Interpreter& interpreter);
// /mcp/claude and /mcp/openai: list_vms, create_vm, run_vm_command, get_cli_help.
ToolSet CuratedTools(Interpreter& interpreter);
// /mcp/sandbox (sandbox_tools.cc): create_sandbox, exec, extend_sandbox, destroy_sandbox,
// the sandbox API of seed 004 with lobby/commands/sandbox_view.h's shapes.
ToolSet SandboxTools(Interpreter& interpreter);
// The MCP conformance suite's fixture tools (test_simple_text, test_error_handling,
// test_tool_with_progress, …). Test-only: `warren serve --mcp-conformance-fixtures`.
void AddConformanceFixtures(ToolSet& tools);

// The `instructions` of the initialize result: how the tools work and, for a limited
// credential, its tag, commands and expiry, so an agent does not waste turns on the rest.
std::string Instructions(const Caller& caller, bool curated);
// /mcp/sandbox's instructions: the tools, the limits (lifetime, sizes, the per-user
// concurrency limit, exec's timeout) and, for a limited credential, its scope.
// `policy`: the server's sizes (Services::sandboxes).
std::string SandboxInstructions(const Caller& caller, const SandboxPolicy& policy);

}  // namespace warren::mcp
