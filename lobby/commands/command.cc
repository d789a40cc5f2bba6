#include "lobby/commands/command.h"

#include <algorithm>

#include <CLI/CLI.hpp>

#include "lobby/commands/command_table.h"
#include "lobby/commands/tokenizer.h"

namespace warren {

Status CheckCommandAllowed(const Caller& caller, const CommandSpec& spec) {
  if (spec.always_allowed) return Status::Ok();
  if (spec.admin_only && !caller.admin) {
    return PermissionDenied("\"" + spec.path + "\" is for admins only");
  }
  if (!caller.scope.AllowsCommand(spec.path)) {
    // Naming what is allowed saves a restricted agent from probing command by command.
    std::string allowed;
    for (const std::string& c : caller.scope.cmds) {
      if (!allowed.empty()) allowed += ", ";
      allowed += c;
    }
    return PermissionDenied(CredentialNoun(caller) + " may not run \"" + spec.path +
                            "\"; it may run only: " + allowed + " (and help)");
  }
  return Status::Ok();
}

Status CheckCommandAllowed(const CommandSession& session, const CommandSpec& spec) {
  Status allowed = CheckCommandAllowed(session.caller, spec);
  if (allowed.ok() || !session.spell_command || (spec.admin_only && !session.caller.admin)) {
    return allowed;
  }
  auto spell = [&](const std::string& path) { return session.spell_command(PathWords(path)); };
  std::string usable;
  for (const std::string& c : session.caller.scope.cmds) {
    if (std::optional<std::string> s = spell(c)) usable += (usable.empty() ? "" : ", ") + *s;
  }
  std::optional<std::string> denied = spell(spec.path);
  std::optional<std::string> help = spell("help");
  std::string message = CredentialNoun(session.caller) + " may not use " +
                        (denied.has_value() ? *denied : "that") + " here";
  if (!usable.empty()) message += "; it may use only: " + usable;
  if (help.has_value()) message += (usable.empty() ? "; it may use " : " (and ") + *help;
  if (help.has_value() && !usable.empty()) message += ")";
  return PermissionDenied(message);
}

std::optional<std::string> CommandHint(const CommandSession& session, const CommandTable& table,
                                       const std::vector<std::string>& argv) {
  CommandTable::Match match = table.Lookup(argv);
  if (match.spec == nullptr || !CheckCommandAllowed(session.caller, *match.spec).ok()) {
    return std::nullopt;
  }
  if (session.read_only && !match.spec->read_only) return std::nullopt;
  if (session.spell_command) return session.spell_command(argv);
  return "\"" + JoinQuoted(argv) + "\"";
}

std::optional<std::string> CommandHint(const CommandContext& ctx,
                                       const std::vector<std::string>& argv) {
  return CommandHint(ctx.session, ctx.table, argv);
}

std::unique_ptr<CLI::App> NewCommandApp(const CommandSpec& spec, Command& handler, bool* json) {
  auto app = std::make_unique<CLI::App>(spec.summary, spec.path);
  app->set_help_flag("-h,--help", "show this help");
  handler.DeclareFlags(*app);
  app->add_flag("--json", *json, "print the result as JSON");
  return app;
}

std::string CredentialNoun(const Caller& caller) {
  return caller.credential.rfind("token:", 0) == 0 ? "this token" : "this key";
}

std::string SshHint(const ServerInfo& info) {
  if (info.ssh_port == 22) return "ssh " + info.ssh_host;
  return "ssh -p " + std::to_string(info.ssh_port) + " " + info.ssh_host;
}

std::string JoinWords(const std::vector<std::string>& words, size_t from) {
  std::string out;
  for (size_t i = from; i < words.size(); ++i) {
    if (i > from) out += ' ';
    out += words[i];
  }
  return out;
}

std::vector<std::string> PathWords(std::string_view path) {
  std::vector<std::string> words;
  for (size_t at = 0; at <= path.size();) {
    size_t space = std::min(path.find(' ', at), path.size());
    words.emplace_back(path.substr(at, space - at));
    at = space + 1;
  }
  return words;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace warren
