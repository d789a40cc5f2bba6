#include "bridge/mcp/tools.h"

#include <optional>

#include "bridge/mcp/jsonrpc.h"
#include "bridge/mcp/tool_parts.h"
#include "lobby/commands/command.h"
#include "lobby/commands/guest_output.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/output_encoding.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/tokenizer.h"
#include "lobby/commands/vm_view.h"

namespace warren::mcp {

using nlohmann::json;

void ToolSet::Add(Tool tool) { tools_.push_back(std::move(tool)); }

const Tool* ToolSet::Find(std::string_view name) const {
  for (const Tool& t : tools_) {
    if (t.definition.value("name", "") == name) return &t;
  }
  return nullptr;
}

json ToolSet::List() const {
  json list = json::array();
  for (const Tool& t : tools_) list.push_back(t.definition);
  return list;
}

namespace {

// The curated endpoints' tools and the one command each runs.
constexpr std::pair<std::string_view, std::string_view> kCuratedToolCommands[] = {
    {"list_vms", "ls"},
    {"create_vm", "new"},
    {"run_vm_command", "ssh"},
    {"get_cli_help", "help"},
};

// Tool arguments, checked against what the schema promises. A bad argument is the caller's
// mistake: it comes back as a tool error the model can read and fix.
class Args {
 public:
  Args(const json& args, std::vector<std::string> known) : args_(args) {
    if (!args_.is_object()) {
      error_ = "arguments must be an object";
      return;
    }
    for (const auto& [k, v] : args_.items()) {
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        error_ = "unknown argument \"" + k.substr(0, 64) + "\"";
        return;
      }
    }
  }

  std::optional<std::string> String(const std::string& name, bool required) {
    auto it = args_.is_object() ? args_.find(name) : args_.end();
    if (it == args_.end() || it->is_null()) {
      if (required && error_.empty()) error_ = "\"" + name + "\" is required";
      return std::nullopt;
    }
    if (!it->is_string()) {
      if (error_.empty()) error_ = "\"" + name + "\" must be a string";
      return std::nullopt;
    }
    return it->get<std::string>();
  }

  std::optional<int> WaitSeconds() {
    auto it = args_.is_object() ? args_.find("wait_seconds") : args_.end();
    if (it == args_.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > kMaxWaitSeconds) {
      if (error_.empty()) {
        error_ = "\"wait_seconds\" must be an integer from 0 to " + std::to_string(kMaxWaitSeconds);
      }
      return std::nullopt;
    }
    return static_cast<int>(it->get<int64_t>());
  }

  const std::string& error() const { return error_; }

 private:
  const json& args_;
  std::string error_;
};

std::string JoinOutput(std::string a, const std::string& b) {
  if (b.empty()) return a;
  if (!a.empty() && a.back() != '\n') a += '\n';
  return a + b;
}

// What an agent reads for `ssh VM CMD` and `wait`: the output as the one encoding rule
// (output_encoding.h) says — an image block for an image, base64 for other binary output,
// text otherwise — then how it ended, and how to go on while it runs (the interpreter's
// note, which names only what this endpoint and credential can run).
json GuestContent(const RelayedOutput& relayed, const json& data) {
  json content = json::array();
  std::string text;
  auto add = [&](const std::string& bytes, const char* stream) {
    if (bytes.empty()) return;
    EncodedBytes e = EncodeBytes(bytes, !relayed.truncated);
    if (e.form == BytesForm::kImage) {
      content.push_back({{"type", "image"}, {"data", e.base64}, {"mimeType", e.mime_type}});
    } else if (e.form == BytesForm::kBinary) {
      text = JoinOutput(text, "[" + std::string(stream) + ": " + std::to_string(bytes.size()) +
                                  " bytes that are not text, in base64]\n" + e.base64 + "\n");
    } else {
      text = JoinOutput(text, bytes);
    }
  };
  add(relayed.out, "stdout");
  add(relayed.err, "stderr");
  auto note = [&](const std::string& line) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += line + "\n";
  };
  if (data.value("truncated", false)) note("[output cut to its start and end]");
  if (!data.value("finished", true)) {
    note("[" + data.value("note", "still running as job " + data.value("job", "")) + "]");
  } else if (data.contains("exit_code") && data["exit_code"].is_number_integer()) {
    int code = data["exit_code"].get<int>();
    if (code != 0) note("[remote command exited with status " + std::to_string(code) + "]");
  } else if (data.contains("signal")) {
    note("[remote command ended by signal " + data["signal"].dump() + "]");
  } else {
    note("[remote command ended without an exit status]");
  }
  // An image needs no empty text beside it; no output at all is an empty text.
  if (!text.empty() || content.empty()) content.push_back(TextContent(std::move(text)));
  return content;
}

// The CallToolResult for a finished session: content, structuredContent (the command's
// JSON data; a list comes as {"items": […]}, help as {"text": …}), isError.
json ToolResult(const CommandSession& session, const std::string& err) {
  const bool failed = !session.status.ok();
  json result = {{"isError", failed}};
  if (!session.result.has_value()) {
    // A command that failed before producing anything: the message is the whole answer.
    result["content"] = json::array({TextContent("error: " + session.status.message())});
    return result;
  }
  const CommandResult& r = *session.result;
  if (session.help) {
    // Help is text for people and models alike.
    std::string text = r.text;
    if (!text.empty() && text.back() != '\n') text += '\n';
    result["content"] = json::array({TextContent(JoinOutput(text, err))});
    if (!failed) result["structuredContent"] = {{"text", text}};
    return result;
  }
  const json& data = r.data;
  if (r.relayed.has_value()) {
    result["content"] = GuestContent(*r.relayed, data);
  } else {
    result["content"] = json::array({TextContent(JoinOutput(DumpJson(data) + "\n", err))});
  }
  result["structuredContent"] = data.is_object() ? data : json{{"items", data}};
  return result;
}

// How each endpoint's caller runs a command line, for the hints in results and messages
// (CommandSession::spell_command): the words of that endpoint's own tools.
using Speller = std::function<std::optional<std::string>(const std::vector<std::string>&)>;

// /mcp: `wait` has a tool of its own; everything else is a line for exec.
std::optional<std::string> SpellForFullTools(const std::vector<std::string>& argv) {
  if (argv.size() == 2 && argv[0] == "wait") return "call wait with job " + Quoted(argv[1]);
  return "exec " + Quoted(JoinQuoted(argv));
}

// /mcp/claude, /mcp/openai: four tools, each one command; nothing else can run there.
std::optional<std::string> SpellForCuratedTools(const std::vector<std::string>& argv) {
  std::string tool;
  for (const auto& [name, command] : kCuratedToolCommands) {
    if (!argv.empty() && argv[0] == command) tool = name;
  }
  if (tool.empty()) return std::nullopt;
  // The command alone names its tool (what a credential may use).
  if (argv.size() == 1) return tool;
  if (argv[0] == "ssh") {
    if (argv.size() < 3) return std::nullopt;
    return tool + " with vm " + Quoted(argv[1]) + " and command " + Quoted(JoinWords(argv, 2));
  }
  if (argv[0] == "help") return tool + " with command " + Quoted(JoinWords(argv, 1));
  // list_vms and create_vm take no arguments that spell a command line.
  return std::nullopt;
}

// What a tool runs: a command line as typed (`line`), or words already split (`argv`).
struct ToolCommand {
  std::optional<std::string> line = {};
  std::vector<std::string> argv = {};
  std::string stdin_bytes = {};
  std::optional<int> wait_seconds = {};
  bool read_only = false;
  Speller spell = {};
};

// Runs one command as an MCP call: one session through the interpreter, which tokenizes,
// looks up, checks (read-only included) and runs it; JSON data back; progress
// notifications while it runs.
json RunTool(Interpreter& interpreter, ToolCall& call, ToolCommand command) {
  StringInput in(std::move(command.stdin_bytes));
  StringSink err;
  CommandSession session;
  session.caller = call.caller;
  session.argv = std::move(command.argv);
  session.in = &in;
  session.out = nullptr;  // the result is read as data from the session, not re-parsed
  session.err = &err;
  session.cancel = call.cancel ? call.cancel : std::make_shared<CancelSignal>();
  session.json = true;
  session.wait_seconds = command.wait_seconds;
  session.read_only = command.read_only;
  session.spell_command = std::move(command.spell);
  {
    ProgressTicker ticker(call);
    if (command.line.has_value()) {
      interpreter.ExecuteLine(session, *command.line);
    } else {
      interpreter.Execute(session);
    }
  }
  return ToolResult(session, err.str());
}

const json kWaitSecondsSchema = {
    {"type", "integer"},
    {"minimum", 0},
    {"maximum", kMaxWaitSeconds},
    {"description",
     "how many seconds to stay with a command in a VM before leaving it running on its own, "
     "0 to 45 (default 45)"}};

// The shape of `ssh VM CMD` and `wait` results.
const json kGuestOutputSchema = {
    {"type", "object"},
    {"properties",
     {{"stdout", {{"type", "string"}}},
      {"stderr", {{"type", "string"}}},
      {"stdout_base64",
       {{"type", "string"},
        {"description", "stdout in base64 when it is not UTF-8 text (stdout is then empty)"}}},
      {"stderr_base64",
       {{"type", "string"},
        {"description", "stderr in base64 when it is not UTF-8 text (stderr is then empty)"}}},
      {"exit_code",
       {{"anyOf", {{{"type", "integer"}}, {{"type", "null"}}}},
        {"description", "the command's exit status; null while it runs or when it has none"}}},
      {"finished", {{"type", "boolean"}}},
      {"job",
       {{"type", "string"}, {"description", "the job's name, VM/xxxxxxxx, while it still runs"}}},
      {"note", {{"type", "string"}, {"description", "while it still runs: how to go on"}}},
      {"signal", {{"type", "integer"}}},
      {"truncated", {{"type", "boolean"}}}}},
    {"required", {"stdout", "stderr", "finished"}}};

const json kAnyObjectSchema = {
    {"type", "object"},
    {"description",
     "the command's JSON data: for ssh VM CMD {stdout, stderr, exit_code, finished, job?, "
     "note?} (stdout_base64 and stderr_base64 for output that is not UTF-8 text); "
     "for lobby commands their --json output (a list comes as {items: [...]}); for help "
     "{text}"},
    {"additionalProperties", true}};

}  // namespace

ToolSet FullTools(Interpreter& interpreter) {
  ToolSet tools;
  Interpreter* in = &interpreter;
  tools.Add(Tool{
      {{"name", "exec"},
       {"title", "Run a warren command"},
       {"description",
        "Runs one warren command, as you would type it after `ssh HOST`: `help` lists "
        "commands and `help new` describes one; `images` lists the guest images; `new` "
        "makes a VM; `ssh VM CMD` runs CMD in the VM as its user " +
            VmUserText() +
            " (the shell command is parsed again in the VM, so quote it as one argument). "
            "Lobby commands answer in JSON. What `ssh` prints comes back as text, as an "
            "image when it is one, or as base64 for other binary output. A command in a VM "
            "still running after wait_seconds keeps running as a job: follow it with the "
            "wait tool."},
       {"inputSchema",
        {{"type", "object"},
         {"properties",
          {{"command",
            {{"type", "string"},
             {"description", "the command line, e.g. \"ls\" or \"ssh web-1 'cd /srv && make'\""}}},
           {"stdin",
            {{"type", "string"},
             {"description",
              "sent to the command byte for byte: put file contents here (ssh VM \"cat > "
              "app.py\"), not in the command"}}},
           {"wait_seconds", kWaitSecondsSchema}}},
         {"required", {"command"}},
         {"additionalProperties", false}}},
       {"outputSchema", kAnyObjectSchema},
       {"annotations", Annotations("Run a warren command", false, true, false, true)}},
      [in](const json& arguments, ToolCall& call) {
        Args args(arguments, {"command", "stdin", "wait_seconds"});
        auto command = args.String("command", true);
        auto stdin_bytes = args.String("stdin", false);
        auto wait = args.WaitSeconds();
        if (!args.error().empty()) return ErrorResult("error: " + args.error());
        return RunTool(*in, call,
                       {.line = *command,
                        .stdin_bytes = stdin_bytes.value_or(""),
                        .wait_seconds = wait,
                        .spell = SpellForFullTools});
      }});
  tools.Add(Tool{
      {{"name", "exec_read_only"},
       {"title", "Run a read-only warren command"},
       {"description",
        "Runs one warren command that changes nothing, such as `ls`, `stat VM`, `jobs`, "
        "`whoami` or `help`. It refuses `ssh` and every command that changes something: use "
        "exec for those."},
       {"inputSchema",
        {{"type", "object"},
         {"properties",
          {{"command", {{"type", "string"}, {"description", "the command line, e.g. \"ls\""}}}}},
         {"required", {"command"}},
         {"additionalProperties", false}}},
       {"outputSchema", kAnyObjectSchema},
       {"annotations", Annotations("Run a read-only warren command", true, false, true, false)}},
      [in](const json& arguments, ToolCall& call) {
        Args args(arguments, {"command"});
        auto command = args.String("command", true);
        if (!args.error().empty()) return ErrorResult("error: " + args.error());
        return RunTool(*in, call,
                       {.line = *command, .read_only = true, .spell = SpellForFullTools});
      }});
  tools.Add(Tool{
      {{"name", "wait"},
       {"title", "Follow a job"},
       {"description",
        "Waits for a job that exec left running (named VM/xxxxxxxx) for up to wait_seconds, "
        "then returns the output since the last call and, once the command has ended, its "
        "exit status. Stop a job with exec \"kill JOB\"."},
       {"inputSchema",
        {{"type", "object"},
         {"properties",
          {{"job", {{"type", "string"}, {"description", "the job, VM/xxxxxxxx"}}},
           {"wait_seconds", kWaitSecondsSchema}}},
         {"required", {"job"}},
         {"additionalProperties", false}}},
       {"outputSchema", kGuestOutputSchema},
       {"annotations", Annotations("Follow a job", true, false, false, true)}},
      [in](const json& arguments, ToolCall& call) {
        Args args(arguments, {"job", "wait_seconds"});
        auto job = args.String("job", true);
        auto wait = args.WaitSeconds();
        if (!args.error().empty()) return ErrorResult("error: " + args.error());
        return RunTool(*in, call,
                       {.argv = {"wait", *job}, .wait_seconds = wait, .spell = SpellForFullTools});
      }});
  return tools;
}

ToolSet CuratedTools(Interpreter& interpreter) {
  ToolSet tools;
  Interpreter* in = &interpreter;
  tools.Add(
      Tool{{{"name", "list_vms"},
            {"title", "List VMs"},
            {"description", "Lists your VMs with their state, image, tags and how to reach them."},
            {"inputSchema",
             {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}},
            {"outputSchema", kAnyObjectSchema},
            {"annotations", Annotations("List VMs", true, false, true, false)}},
           [in](const json& arguments, ToolCall& call) {
             Args args(arguments, {});
             if (!args.error().empty()) return ErrorResult("error: " + args.error());
             return RunTool(*in, call, {.argv = {"ls"}, .spell = SpellForCuratedTools});
           }});
  tools.Add(
      Tool{{{"name", "create_vm"},
            {"title", "Create a VM"},
            {"description",
             "Creates a Linux VM and waits until it runs commands. Leave out name to get a free "
             "one."},
            {"inputSchema",
             {{"type", "object"},
              {"properties",
               {{"name", {{"type", "string"}, {"description", "the VM's name (optional)"}}},
                {"image",
                 {{"type", "string"},
                  {"description",
                   "the guest image (optional); get_cli_help with command \"new\" lists the "
                   "images installed"}}}}},
              {"additionalProperties", false}}},
            {"outputSchema", kAnyObjectSchema},
            {"annotations", Annotations("Create a VM", false, false, false, true)}},
           [in](const json& arguments, ToolCall& call) {
             Args args(arguments, {"name", "image"});
             auto name = args.String("name", false);
             auto image = args.String("image", false);
             if (!args.error().empty()) return ErrorResult("error: " + args.error());
             std::vector<std::string> argv = {"new"};
             if (name) argv.push_back("--name=" + *name);
             if (image) argv.push_back("--image=" + *image);
             return RunTool(*in, call, {.argv = std::move(argv), .spell = SpellForCuratedTools});
           }});
  tools.Add(
      Tool{{{"name", "run_vm_command"},
            {"title", "Run a command in a VM"},
            {"description",
             "Runs a shell command in a VM as its user " + VmUserText() +
                 ". What it prints comes back as text, as an image when it is one, or as base64 "
                 "for other binary output. A command still running after wait_seconds goes on "
                 "in the VM on its own and its output so far comes back; nothing here follows "
                 "it further, so let a long command write to a file (nohup CMD > log 2>&1 &) and "
                 "read that with another run_vm_command."},
            {"inputSchema",
             {{"type", "object"},
              {"properties",
               {{"vm", {{"type", "string"}, {"description", "the VM's name"}}},
                {"command", {{"type", "string"}, {"description", "the shell command line"}}},
                {"stdin", {{"type", "string"}, {"description", "sent to the command"}}},
                {"wait_seconds", kWaitSecondsSchema}}},
              {"required", {"vm", "command"}},
              {"additionalProperties", false}}},
            {"outputSchema", kGuestOutputSchema},
            {"annotations", Annotations("Run a command in a VM", false, true, false, true)}},
           [in](const json& arguments, ToolCall& call) {
             Args args(arguments, {"vm", "command", "stdin", "wait_seconds"});
             auto vm = args.String("vm", true);
             auto command = args.String("command", true);
             auto stdin_bytes = args.String("stdin", false);
             auto wait = args.WaitSeconds();
             if (!args.error().empty()) return ErrorResult("error: " + args.error());
             // "--" so a VM name is never read as a flag; the command is one word, parsed again
             // by the VM's shell.
             return RunTool(*in, call,
                            {.argv = {"ssh", "--", *vm, *command},
                             .stdin_bytes = stdin_bytes.value_or(""),
                             .wait_seconds = wait,
                             .spell = SpellForCuratedTools});
           }});
  tools.Add(Tool{
      {{"name", "get_cli_help"},
       {"title", "Explain a warren command"},
       {"description",
        "Explains warren's commands: with no command, lists them; with one (\"new\", "
        "\"ssh-key add\"), describes its flags. It runs nothing."},
       {"inputSchema",
        {{"type", "object"},
         {"properties",
          {{"command", {{"type", "string"}, {"description", "a command, e.g. \"new\""}}}}},
         {"additionalProperties", false}}},
       {"annotations", Annotations("Explain a warren command", true, false, true, false)}},
      [in](const json& arguments, ToolCall& call) {
        Args args(arguments, {"command"});
        auto command = args.String("command", false);
        if (!args.error().empty()) return ErrorResult("error: " + args.error());
        // The interpreter splits the line; `help` takes "help new" as "new".
        return RunTool(*in, call,
                       {.line = "help " + command.value_or(""), .spell = SpellForCuratedTools});
      }});
  return tools;
}

// What every agent should know about a VM's web address before handing it to a person.
constexpr std::string_view kWebText =
    "Each VM has a web address (the url its JSON shows) serving its port 8000 (share port VM "
    "PORT changes it; ports 3000-9999 are at NAME-pPORT, for the owner only). The pages are "
    "private until shared: only the owner, signed in with `ssh HOST browser`, sees them; "
    "`share set-public VM` opens them to everyone, `share add-link VM` makes a link to hand "
    "out, `share show VM` says which. You cannot open a private URL yourself: check a server "
    "from inside the VM with `ssh VM curl -s localhost:8000`. Listen on 0.0.0.0 or localhost; "
    "a systemd unit with Restart=always keeps a server running across reboots and copies.";

std::string Instructions(const Caller& caller, bool curated) {
  std::string text;
  if (curated) {
    text =
        "warren gives you Linux VMs. list_vms shows your VMs; create_vm makes one and waits "
        "until it runs commands; run_vm_command runs a shell command in a VM as its user " +
        VmUserText() +
        "; get_cli_help explains any warren command but runs nothing. What a command prints "
        "comes back as text, as an image when it is one, or as base64 for other binary "
        "output. A command still running after wait_seconds (0 to 45, default 45) goes on in "
        "the VM on its own: let a long one write to a file and read that with another "
        "run_vm_command. " +
        std::string(kWebText);
  } else {
    text =
        "warren gives you Linux VMs. exec runs one warren command, as typed after `ssh HOST`: "
        "`help` lists commands, `help new` describes one, `images` lists the guest images, "
        "`new` makes a VM, `ssh VM CMD` runs CMD in it as its user " +
        VmUserText() +
        " (quote a compound command as one argument: ssh web-1 'cd /srv && make'). Put file "
        "contents in stdin, not in the command. Lobby commands answer in JSON; what `ssh` "
        "prints comes back as text, as an image when it is one, or as base64 for other "
        "binary output. A command in a VM still running after wait_seconds (0 to 45, default "
        "45) keeps running as a job named VM/xxxxxxxx: follow it with wait, stop it with exec "
        "\"kill JOB\". exec_read_only runs only commands that change nothing (ls, stat, jobs, "
        "help) and refuses ssh. " +
        std::string(kWebText);
  }
  return text + ScopeText(caller, curated ? ToolCommands(kCuratedToolCommands) : ToolCommands());
}

}  // namespace warren::mcp
