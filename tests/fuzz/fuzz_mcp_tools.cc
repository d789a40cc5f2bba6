// Fuzzes MCP's tool-argument mapping (bridge/mcp/tools.h, sandbox_tools.cc): the params of a
// tools/call — {"name": TOOL, "arguments": {...}, "_meta": {"progressToken": ...}} — run on
// one of the endpoints' tool sets, as McpHandler::CallTool runs them, by the agent's token
// (command_world.h: a real interpreter and store, the fake VM host and guest). Input: one
// byte choosing the endpoint (/mcp, /mcp/claude, /mcp/sandbox), then the params as JSON.
// Invariants: a tool never throws; its result is a CallToolResult — a content array and a
// boolean isError, structuredContent an object when present — that dumps as JSON.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bridge/mcp/jsonrpc.h"
#include "bridge/mcp/tools.h"
#include "tests/fuzz/command_world.h"

namespace {

using nlohmann::json;
using warren::fuzz::Fail;
namespace mcp = warren::mcp;

void CheckResult(const json& result) {
  if (!result.is_object()) Fail("tool result not an object");
  auto content = result.find("content");
  auto is_error = result.find("isError");
  if (content == result.end() || !content->is_array()) Fail("tool result without content");
  if (is_error == result.end() || !is_error->is_boolean()) Fail("tool result without isError");
  auto structured = result.find("structuredContent");
  if (structured != result.end() && !structured->is_object()) Fail("structuredContent");
  (void)json::parse(mcp::Dump(result));  // throws (a crash here) if it is not JSON
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  warren::fuzz::CommandWorld& world = warren::fuzz::CommandWorld::Get();
  // The endpoints' tool sets hold the interpreter: made again with each world.
  static std::unique_ptr<std::array<mcp::ToolSet, 3>> endpoints;
  if (world.Due()) {
    endpoints.reset();
    world.Reset();
  }
  if (!endpoints) {
    endpoints = std::make_unique<std::array<mcp::ToolSet, 3>>(std::array<mcp::ToolSet, 3>{
        mcp::FullTools(world.interpreter()), mcp::CuratedTools(world.interpreter()),
        mcp::SandboxTools(world.interpreter())});
  }

  const mcp::ToolSet& tools = (*endpoints)[data[0] % endpoints->size()];
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  json params = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!params.is_object()) return 0;  // Decode hands CallTool only object params
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) return 0;
  const mcp::Tool* tool = tools.Find(name->get<std::string>());
  if (tool == nullptr) return 0;

  mcp::ToolCall call;
  call.caller = world.agent();
  call.cancel = std::make_shared<warren::CancelSignal>();
  call.progress_interval_ms = 1;
  if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    auto token = meta->find("progressToken");
    if (token != meta->end() && (token->is_string() || token->is_number_integer())) {
      call.progress_token = *token;
      call.notify = [](const json& n) { (void)json::parse(mcp::Dump(n)); };
    }
  }
  json result = tool->run(params.value("arguments", json::object()), call);
  warren::fuzz::Note(mcp::Dump(result));
  CheckResult(result);
  return 0;
}
