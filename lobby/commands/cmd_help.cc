// help [COMMAND…]: the command list, one group's commands, or one command's usage and flags.
// Only commands the caller may run are listed, but `help` itself always runs, so an agent
// holding a narrow token can discover exactly what it may do.
#include <CLI/CLI.hpp>

#include "lobby/base/error_map.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/help_text.h"

namespace warren {
namespace {

// The error model, from its one home (lobby/base/error_map.cc): what each code means on
// each surface, so a script or test harness reads it from the binary instead of the source.
nlohmann::json ErrorModelJson() {
  nlohmann::json errors = nlohmann::json::array();
  for (const ErrorMapping& m : ErrorMappings()) {
    errors.push_back({{"code", std::string(CodeName(m.code))},
                      {"exit_status", m.exit_status},
                      {"http_status", m.http_status}});
  }
  return errors;
}

struct Section {
  std::string title;  // empty for the ungrouped commands at the top
  std::vector<const CommandSpec*> commands;
};

// The registered group a command sits in, or "" for a top-level command.
std::string GroupOf(const CommandTable& table, const CommandSpec& spec) {
  std::string best;
  for (const CommandGroup& g : table.groups()) {
    if (PathIsUnder(spec.path, g.path) && g.path.size() > best.size()) best = g.path;
  }
  return best;
}

std::string Synopsis(const CommandSpec& spec) {
  return spec.args.empty() ? spec.path : spec.path + " " + spec.args;
}

std::string RenderSections(const std::vector<Section>& sections) {
  size_t width = 0;
  for (const Section& s : sections) {
    for (const CommandSpec* c : s.commands) width = std::max(width, Synopsis(*c).size());
  }
  std::string out;
  for (const Section& s : sections) {
    if (s.commands.empty()) continue;
    if (!out.empty()) out += "\n";
    if (!s.title.empty()) out += s.title + "\n";
    for (const CommandSpec* c : s.commands) {
      std::string syn = Synopsis(*c);
      // Synopses hold "…" (3 bytes, 1 column): pad by columns, not bytes.
      size_t cols = 0;
      for (char ch : syn) cols += (ch & 0xC0) != 0x80;
      out += "  " + syn + std::string(width - std::min(width, cols) + 2, ' ') + c->summary + "\n";
    }
  }
  return out;
}

class HelpCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("COMMAND", words_, "a command or group to describe, e.g. ssh-key add");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const CommandTable& table = ctx.table;
    auto visible = [&](const CommandSpec& spec) {
      return CheckCommandAllowed(ctx.caller(), spec).ok();
    };
    // "help help new" is "help new": a caller (MCP's get_cli_help) may pass on a line that
    // already starts with help. "help help" still describes help.
    if (words_.size() > 1 && words_.front() == "help") words_.erase(words_.begin());
    if (words_.empty()) return Listing(ctx, "");

    const std::string path = JoinWords(words_);
    if (const CommandSpec* spec = table.Find(path)) {
      WARREN_RETURN_IF_ERROR(CheckCommandAllowed(ctx.caller(), *spec));
      CommandResult r;
      r.text = CommandHelpText(*spec, ctx.services);
      r.data = {{"commands", nlohmann::json::array({CommandHelpJson(*spec)})}};
      return r;
    }
    if (table.IsGroup(path)) {
      bool any = false;
      for (const CommandSpec* c : table.InGroup(path)) any = any || visible(*c);
      if (!any) return PermissionDenied("you may not run any \"" + path + "\" command");
      return Listing(ctx, path);
    }
    std::string message = "unknown command \"" + path.substr(0, 64) + "\"";
    std::string suggestion = table.Suggest(words_, visible);
    if (!suggestion.empty()) message += "; did you mean \"" + suggestion + "\"?";
    if (std::optional<std::string> help = CommandHint(ctx, {"help"})) message += "; try " + *help;
    return NotFound(message);
  }

 private:
  // Every visible command, or those under `group`.
  Result<CommandResult> Listing(CommandContext& ctx, const std::string& group) {
    const CommandTable& table = ctx.table;
    std::vector<Section> sections(1);
    nlohmann::json commands = nlohmann::json::array();
    for (const CommandGroup& g : table.groups()) {
      std::string title = g.path + ": " + g.summary;
      sections.push_back({std::move(title), {}});
    }
    for (const CommandSpec& spec : table.commands()) {
      if (!CheckCommandAllowed(ctx.caller(), spec).ok()) continue;
      if (!group.empty() && !PathIsUnder(spec.path, group)) continue;
      std::string g = GroupOf(table, spec);
      Section* section = &sections[0];
      for (size_t i = 0; i < table.groups().size(); ++i) {
        if (table.groups()[i].path == g) section = &sections[i + 1];
      }
      section->commands.push_back(&spec);
      commands.push_back(CommandHelpJson(spec));
    }

    CommandResult r;
    r.data = {{"commands", std::move(commands)}};
    if (!group.empty()) {
      r.text = RenderSections(sections) + "\n\"help " + group +
               " COMMAND\" or \"COMMAND --help\" shows a command's flags.\n";
      return r;
    }
    r.data["errors"] = ErrorModelJson();
    std::string out = "warren: Linux VMs for people and agents.\nRun a command with: " +
                      SshHint(ctx.services.info) + " COMMAND [ARGS…]\n";
    const Scope& scope = ctx.caller().scope;
    if (!scope.cmds.empty()) {
      std::string cmds;
      for (const std::string& c : scope.cmds) cmds += (cmds.empty() ? "" : ", ") + c;
      out += CredentialNoun(ctx.caller()) + " may run only: " + cmds + " (and help)\n";
    }
    out += "\n" + RenderSections(sections);
    out +=
        "\nEvery command takes --json. \"help COMMAND\" or \"COMMAND --help\" shows its flags.\n";
    r.text = std::move(out);
    return r;
  }

  std::vector<std::string> words_;
};

}  // namespace

void RegisterHelpCommand(CommandTable& table) {
  table.Add({
      .path = "help",
      .summary = "list commands, or describe one",
      .args = "[COMMAND…]",
      .description = "With no argument, lists the commands you may run with a one-line summary "
                     "each.\nWith a command (help ssh-key add) or a group (help ssh-key), shows "
                     "its usage, arguments and flags.\n\"help --json\" describes every command "
                     "and flag in machine-readable form, and the error model: each error "
                     "code with its exit status and HTTP status.\n",
      .read_only = true,
      .always_allowed = true,
      .make = [] { return std::make_unique<HelpCommand>(); },
  });
}

}  // namespace warren
