#include "bridge/mcp/tool_parts.h"

#include <chrono>

#include "bridge/mcp/jsonrpc.h"
#include "lobby/base/time_format.h"
#include "lobby/commands/command.h"

namespace warren::mcp {

using nlohmann::json;

json TextContent(std::string text) { return {{"type", "text"}, {"text", std::move(text)}}; }

json ErrorResult(std::string message) {
  return {{"content", json::array({TextContent(std::move(message))})}, {"isError", true}};
}

json Annotations(std::string title, bool read_only, bool destructive, bool idempotent,
                 bool open_world) {
  json a = {{"title", std::move(title)}, {"readOnlyHint", read_only}};
  if (!read_only) a["destructiveHint"] = destructive;
  a["idempotentHint"] = idempotent;
  a["openWorldHint"] = open_world;
  return a;
}

std::string Quoted(const std::string& s) { return DumpJson(json(s), -1); }

std::string ScopeText(const Caller& caller, ToolCommands tools) {
  const Scope& s = caller.scope;
  if (s.Unrestricted()) return "";
  std::string noun = caller.token_label_id.empty() ? "This key" : "This token";
  std::string text = "\n\n" + noun + " is limited.";
  if (!s.tag.empty()) {
    text += " It sees only VMs tagged \"" + s.tag +
            "\": any other VM is \"not found\" to it, and VMs it creates get that tag.";
  }
  if (!s.cmds.empty() && !tools.empty()) {
    // The endpoint's tools, each one command: name the tools, not commands it cannot type.
    std::string list;
    for (const auto& [tool, command] : tools) {
      if (command != "help" && !s.AllowsCommand(command)) continue;
      list += (list.empty() ? "" : ", ") + std::string(tool);
    }
    text += " Of these tools it may use only: " + (list.empty() ? "none" : list) + ".";
  } else if (!s.cmds.empty()) {
    std::string list;
    for (const std::string& c : s.cmds) list += (list.empty() ? "" : ", ") + c;
    text += " It may run only these commands (and help): " + list + ".";
  }
  if (s.expires_at != 0) text += " It expires at " + FormatTime(s.expires_at) + ".";
  return text;
}

ProgressTicker::ProgressTicker(ToolCall& call) : call_(call) {
  if (call_.progress_token.is_null() || !call_.notify) return;
  thread_ = std::thread([this] { Loop(); });
}

ProgressTicker::~ProgressTicker() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressTicker::Loop() {
  const auto start = std::chrono::steady_clock::now();
  int ticks = 0;
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(call_.progress_interval_ms),
                       [this] { return done_; })) {
    ++ticks;
    auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
            .count();
    lock.unlock();
    call_.notify(Notification("notifications/progress",
                              {{"progressToken", call_.progress_token},
                               {"progress", ticks},
                               {"message", "running for " + std::to_string(secs) + " s"}}));
    lock.lock();
  }
}

}  // namespace warren::mcp
