// /mcp/sandbox: the sandbox API of seed 004 as four MCP tools — create_sandbox, exec,
// extend_sandbox, destroy_sandbox — each one lobby command session (new --sandbox, ssh
// --timeout, extend, rm) with the request fields and result shapes of
// lobby/commands/sandbox_view.h, the same as REST /v1/sandboxes.
#include <optional>

#include "bridge/mcp/tool_parts.h"
#include "bridge/mcp/tools.h"
#include "lobby/commands/command.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox_view.h"
#include "lobby/commands/session.h"
#include "lobby/commands/vm_view.h"

namespace warren::mcp {
namespace {

using nlohmann::json;

// The tools and the one command each runs.
constexpr std::pair<std::string_view, std::string_view> kSandboxToolCommands[] = {
    {"create_sandbox", "new"},
    {"exec", "ssh"},
    {"extend_sandbox", "extend"},
    {"destroy_sandbox", "rm"},
};

// The VM a command of this endpoint names: the word after "--" (every argv built here has
// one before the id).
std::optional<std::string> IdIn(const std::vector<std::string>& argv, size_t* next = nullptr) {
  for (size_t i = 1; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--") {
      if (next != nullptr) *next = i + 2;
      return argv[i + 1];
    }
  }
  // "rm VM", "ssh VM CMD" as a hint may spell them.
  for (size_t i = 1; i < argv.size(); ++i) {
    if (!argv[i].starts_with("-")) {
      if (next != nullptr) *next = i + 1;
      return argv[i];
    }
  }
  return std::nullopt;
}

// How a hint names a command here (CommandSession::spell_command): only as one of the four
// tools; nothing else can run on this endpoint.
std::optional<std::string> SpellForSandboxTools(const std::vector<std::string>& argv) {
  std::string tool;
  for (const auto& [name, command] : kSandboxToolCommands) {
    if (!argv.empty() && argv[0] == command) tool = name;
  }
  if (tool.empty()) return std::nullopt;
  if (argv.size() == 1) return tool;  // the command alone names its tool
  size_t next = 0;
  std::optional<std::string> id = IdIn(argv, &next);
  if (argv[0] == "new") return tool;
  if (!id.has_value()) return std::nullopt;
  if (argv[0] == "ssh") {
    if (next >= argv.size()) return std::nullopt;
    return tool + " with sandbox_id " + Quoted(*id) + " and command " +
           Quoted(JoinWords(argv, next));
  }
  return tool + " with sandbox_id " + Quoted(*id);
}

// Runs `argv` as one command session of the call (surface "mcp"), with progress
// notifications while it runs; the session holds the outcome.
void RunSession(Interpreter& interpreter, ToolCall& call, std::vector<std::string> argv,
                CommandSession& session, StringInput& in, StringSink& err) {
  session.caller = call.caller;
  session.argv = std::move(argv);
  session.in = &in;
  session.out = nullptr;  // the result is read as data from the session
  session.err = &err;
  session.cancel = call.cancel ? call.cancel : std::make_shared<CancelSignal>();
  session.json = true;
  session.spell_command = SpellForSandboxTools;
  ProgressTicker ticker(call);
  interpreter.Execute(session);
}

json Success(const json& structured) {
  return {{"content", json::array({TextContent(DumpJson(structured) + "\n")})},
          {"structuredContent", structured},
          {"isError", false}};
}

json Failure(const Status& st) { return ErrorResult("error: " + st.message()); }

// A tool's run: argv from the arguments, one session, its data mapped by `shape`.
using Shape = std::function<Result<json>(const CommandSession&, const json& data)>;

json Run(Interpreter& interpreter, ToolCall& call, Result<std::vector<std::string>> argv,
         const Shape& shape, bool command_failure_is_result = false) {
  if (!argv.ok()) return Failure(argv.status());
  StringInput in("");
  StringSink err;
  CommandSession session;
  RunSession(interpreter, call, std::move(argv).value(), session, in, err);
  const json* data = session.result.has_value() ? &session.result->data : nullptr;
  const bool result_anyway =
      command_failure_is_result && data != nullptr && session.status.code() == Code::kCommandFailed;
  if (!session.status.ok() && !result_anyway) return Failure(session.status);
  if (data == nullptr) return Failure(Internal("the command gave no data"));
  Result<json> shaped = shape(session, *data);
  if (!shaped.ok()) return Failure(shaped.status());
  return Success(*shaped);
}

// The sandbox_id argument: a non-empty string.
Result<std::string> SandboxId(const json& arguments) {
  if (!arguments.is_object()) return InvalidArgument("arguments must be an object");
  auto it = arguments.find("sandbox_id");
  if (it == arguments.end() || it->is_null()) return InvalidArgument("\"sandbox_id\" is required");
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    return InvalidArgument("\"sandbox_id\" must be a non-empty string");
  }
  return it->get<std::string>();
}

const json kSandboxIdSchema = {{"type", "string"},
                               {"description", "the sandbox's id, as create_sandbox returned it"}};

json Schema(json properties, std::vector<std::string> required) {
  json s = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) s["required"] = std::move(required);
  s["additionalProperties"] = false;
  return s;
}

}  // namespace

ToolSet SandboxTools(Interpreter& interpreter) {
  ToolSet tools;
  Interpreter* in = &interpreter;
  const SandboxPolicy& policy = interpreter.services().sandboxes;
  tools.Add(Tool{
      {{"name", "create_sandbox"},
       {"title", "Create a sandbox"},
       {"description",
        "Provisions a dedicated Linux VM and waits until it runs commands. It is destroyed with "
        "its disk when it expires (timeout_minutes, default 15, at most 1440 = 24 h; "
        "extend_sandbox pushes that out). Returns {id, status, size, expires_at}; the id is what "
        "the other tools take."},
       {"inputSchema",
        Schema({{"size",
                 {{"type", "string"},
                  {"description",
                   "one of " + SandboxSizesText(policy) + "; default " + policy.default_size}}},
                {"timeout_minutes",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", kMaxSandboxMinutes},
                  {"description", "minutes until it is destroyed, 1 to 1440 (default 15)"}}}},
               {})},
       {"outputSchema", SandboxSchema()},
       {"annotations", Annotations("Create a sandbox", false, false, false, true)}},
      [in](const json& arguments, ToolCall& call) {
        return Run(*in, call, SandboxCreateArgv(arguments),
                   [](const CommandSession&, const json& data) { return SandboxJson(data); });
      }});
  tools.Add(Tool{
      {{"name", "exec"},
       {"title", "Run a command in a sandbox"},
       {"description",
        "Runs one shell command in a sandbox as its user " + VmUserText() +
            ". State persists between calls (files written by one command are there for the "
            "next); cwd and env apply to this call only. At timeout_ms the command's processes "
            "are killed and timed_out is true (exit_code 124). Output over the limit is cut to "
            "its start and end (truncated). A non-zero exit_code is a result, not an error. "
            "Returns {stdout, stderr, exit_code, duration_ms, truncated}; output that is not "
            "UTF-8 text comes as stdout_base64/stderr_base64."},
       {"inputSchema",
        Schema({{"sandbox_id", kSandboxIdSchema},
                {"command",
                 {{"type", "string"},
                  {"description", "the shell command line, e.g. \"npm test 2>&1 | tail -n 40\""}}},
                {"timeout_ms",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", kMaxSandboxExecTimeoutMs},
                  {"description",
                   "how long the command may run, up to 600000 (10 minutes); "
                   "default 60000"}}},
                {"cwd",
                 {{"type", "string"},
                  {"description", "the directory to run in (default the user's home)"}}},
                {"env",
                 {{"type", "object"},
                  {"additionalProperties", {{"type", "string"}}},
                  {"description", "environment variables for this call only"}}}},
               {"sandbox_id", "command"})},
       {"outputSchema", SandboxExecSchema()},
       {"annotations", Annotations("Run a command in a sandbox", false, true, false, true)}},
      [in](const json& arguments, ToolCall& call) {
        Result<std::string> id = SandboxId(arguments);
        if (!id.ok()) return Failure(id.status());
        return Run(
            *in, call, SandboxExecArgv(*id, arguments, "sandbox_id"),
            [](const CommandSession&, const json& data) -> Result<json> {
              return SandboxExecJson(data);
            },
            /*command_failure_is_result=*/true);
      }});
  tools.Add(Tool{
      {{"name", "extend_sandbox"},
       {"title", "Extend a sandbox's lifetime"},
       {"description",
        "Pushes a sandbox's expiry out by additional_minutes (at most 24 h from now), for a job "
        "running longer than planned. Returns {id, expires_at}."},
       {"inputSchema", Schema({{"sandbox_id", kSandboxIdSchema},
                               {"additional_minutes",
                                {{"type", "integer"},
                                 {"minimum", 1},
                                 {"maximum", kMaxSandboxMinutes},
                                 {"description", "minutes to add, 1 to 1440"}}}},
                              {"sandbox_id", "additional_minutes"})},
       {"outputSchema", SandboxExtendSchema()},
       {"annotations", Annotations("Extend a sandbox's lifetime", false, false, false, false)}},
      [in](const json& arguments, ToolCall& call) {
        Result<std::string> id = SandboxId(arguments);
        if (!id.ok()) return Failure(id.status());
        return Run(*in, call, SandboxExtendArgv(*id, arguments, "sandbox_id"),
                   [](const CommandSession&, const json& data) { return SandboxExtendJson(data); });
      }});
  tools.Add(
      Tool{{{"name", "destroy_sandbox"},
            {"title", "Destroy a sandbox"},
            {"description",
             "Destroys a sandbox with its disk at once; there is no undo. Returns {id, status}."},
            {"inputSchema", Schema({{"sandbox_id", kSandboxIdSchema}}, {"sandbox_id"})},
            {"outputSchema", SandboxDestroySchema()},
            {"annotations", Annotations("Destroy a sandbox", false, true, true, false)}},
           [in](const json& arguments, ToolCall& call) {
             Result<std::string> id = SandboxId(arguments);
             if (!id.ok()) return Failure(id.status());
             for (const auto& [k, v] : arguments.items()) {
               if (k != "sandbox_id")
                 return Failure(InvalidArgument("unknown field \"" + k + "\""));
             }
             return Run(*in, call, SandboxDestroyArgv(*id),
                        [id = *id](const CommandSession&, const json& data) {
                          return SandboxDestroyJson(data, id);
                        });
           }});
  return tools;
}

std::string SandboxInstructions(const Caller& caller, const SandboxPolicy& policy) {
  std::string text =
      "warren gives you sandboxes: disposable Linux VMs of your own. create_sandbox makes one "
      "and waits until it runs commands; exec runs one shell command in it as its user " +
      VmUserText() +
      ", with files and installed packages kept between calls and cwd and env for that call "
      "only; extend_sandbox pushes its expiry out; destroy_sandbox ends it at once. "
      "Limits: a sandbox lives timeout_minutes (default 15, at most 1440 = 24 hours) and is "
      "then destroyed with its disk, so call extend_sandbox (at most 24 hours from now) for a "
      "longer job and destroy_sandbox when done. Sizes: " +
      SandboxSizesText(policy) + " (default " + policy.default_size +
      "); a sandbox the host has no room to reserve is refused. Each user may have at most " +
      std::to_string(kDefaultMaxSandboxes) +
      " sandboxes at once (the default; the operator may set another limit); more are "
      "refused. exec's timeout_ms is at most 600000 (10 minutes, "
      "default 60000): then the command's processes are killed and timed_out is true. A "
      "non-zero exit_code is a result, not an error.";
  return text + ScopeText(caller, kSandboxToolCommands);
}

}  // namespace warren::mcp
