// What every MCP tool set is built from (tools.cc, sandbox_tools.cc): text content and error
// results, tool annotations, progress notifications while a command runs, and the part of
// an endpoint's instructions that describes a limited credential. Pure functions, except
// ProgressTicker, which owns a thread for its lifetime.
#pragma once

#include <condition_variable>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "bridge/mcp/tools.h"
#include "lobby/commands/caller.h"

namespace warren::mcp {

nlohmann::json TextContent(std::string text);
// A CallToolResult with isError and `message` as its text.
nlohmann::json ErrorResult(std::string message);
// A tool's annotations; destructiveHint only for a tool that is not read-only.
nlohmann::json Annotations(std::string title, bool read_only, bool destructive, bool idempotent,
                           bool open_world);
// `s` as a JSON string, for hints that quote an argument.
std::string Quoted(const std::string& s);

// An endpoint's tools and the one command each runs, for telling a credential held to some
// commands which of the tools it may use.
using ToolCommands = std::span<const std::pair<std::string_view, std::string_view>>;

// What the instructions add for a limited credential: its tag, what it may run (with
// `tools` non-empty, as those tool names; else the commands) and its expiry. "" for an
// unrestricted one; otherwise it starts with a blank line.
std::string ScopeText(const Caller& caller, ToolCommands tools = {});

// Sends notifications/progress every interval while a command runs, from its own thread,
// when the call has a progress token; stops when destroyed.
class ProgressTicker {
 public:
  explicit ProgressTicker(ToolCall& call);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  void Loop();

  ToolCall& call_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace warren::mcp
