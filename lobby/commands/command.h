// Command: one lobby command — its table entry (CommandSpec: path, help text, attributes,
// a factory) and its handler (Command: flags bound to its own members, and Run returning a
// CommandResult). A handler is made fresh for every call and used by one thread, so it may
// keep parse state in members; a CommandSpec is immutable once registered and shared by all
// threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/command_result.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/session.h"

namespace CLI {
class App;
}

namespace warren {

class CommandTable;

// The one VM a command acts on, declared in its table entry (CommandSpec::target) and
// resolved at dispatch, once, before Run — as tmux resolves a command's target from its
// cmd_entry. The caller must see the VM (else "no VM named …", as for one that does not
// exist) and it must be in the state asked for.
enum class VmNeed {
  kNone,     // no target: the command takes no VM, or several (rm VM…), and resolves them
             // itself through FindVisibleVm (vm_access.h)
  kExists,   // any phase or state (stat, console, tag, comment, jobs VM)
  kReady,    // finished being created (start, stop, rename, resize, cp SRC)
  kRunning,  // ready and running (ssh VM CMD): "NAME is stopped; start it with: …"
};

struct VmTarget {
  // The positional that names the VM ("VM", "SRC"). An optional positional left out
  // resolves nothing (CommandContext::vm stays empty).
  std::string arg = {};
  VmNeed need = VmNeed::kNone;
};

// What a handler may use while it runs.
struct CommandContext {
  CommandSession& session;  // stdin (session.in), cancel, and out for streamed progress
  Services& services;
  const CommandTable& table;
  std::string path;   // the command being run: "ssh-key add"
  int64_t now = 0;    // Unix seconds, read once per call
  bool json = false;  // --json was given (streamed progress should stay quiet then)
  // The VM the table entry's target names, resolved before Run; empty without a target.
  std::optional<VmRecord> vm = {};
  // The VM acted on, for the audit line: set at dispatch for a target, by the command
  // otherwise.
  std::string audit_vm = {};

  const Caller& caller() const { return session.caller; }
  Store& store() const { return *services.store; }
};

class Command {
 public:
  virtual ~Command() = default;
  // Declares flags and positionals on a fresh App, bound to this handler's members.
  // --json and --help are added by the interpreter.
  virtual void DeclareFlags(CLI::App& app) {}
  // Runs after a successful parse and permission check.
  virtual Result<CommandResult> Run(CommandContext& ctx) = 0;
};

struct CommandSpec {
  std::string path = {};         // "ssh-key add": words separated by single spaces
  std::string summary = {};      // one line, lowercase, no full stop: for listings
  std::string args = {};         // positional synopsis after the path: "[KEY…]", "NAME NEWNAME"
  std::string description = {};  // a paragraph or two: what, why, examples
  bool read_only = false;        // changes nothing (exec_read_only may run it)
  bool admin_only = false;
  // Runs for every authenticated caller whatever its --cmds: only `help`, so a restricted
  // agent can discover what it may do.
  bool always_allowed = false;
  VmTarget target = {};  // the VM it acts on, resolved at dispatch
  std::function<std::unique_ptr<Command>()> make = {};
  // What its help adds from the server's state when asked (`new`: the images installed
  // here); optional. Must be thread-safe.
  std::function<std::string(const Services&)> live_help = {};
};

// Whether `caller` may run `spec` (admin and --cmds limits). Credential validity (expiry,
// a removed key) is checked separately, once per Execute.
Status CheckCommandAllowed(const Caller& caller, const CommandSpec& spec);
// The same for a session's caller at dispatch; on a surface with its own words
// (CommandSession::spell_command) a --cmds refusal names what the caller may use there.
Status CheckCommandAllowed(const CommandSession& session, const CommandSpec& spec);

// How the caller of `session` can run the command line `argv` next, in its surface's words
// (CommandSession::spell_command): nullopt when it cannot — no such command, its credential
// or a read-only session rules it out, or its surface does not offer it — so that hints
// name only what the caller can do.
std::optional<std::string> CommandHint(const CommandSession& session, const CommandTable& table,
                                       const std::vector<std::string>& argv);
std::optional<std::string> CommandHint(const CommandContext& ctx,
                                       const std::vector<std::string>& argv);

// A fresh App for one call of `spec`: the handler's flags plus --json (bound to *json) and
// -h/--help. CLI11 keeps parse state in an App, so one is never reused.
std::unique_ptr<CLI::App> NewCommandApp(const CommandSpec& spec, Command& handler, bool* json);

// "this key" or "this token", for messages about the caller's credential.
std::string CredentialNoun(const Caller& caller);

// How to reach the lobby: "ssh -p 2222 HOST", or "ssh HOST" on port 22.
std::string SshHint(const ServerInfo& info);

// Words joined by single spaces.
std::string JoinWords(const std::vector<std::string>& words, size_t from = 0);
// A command path's words: "ssh-key add" -> {"ssh-key", "add"}.
std::vector<std::string> PathWords(std::string_view path);

// nlohmann::json::dump that never throws on invalid UTF-8 (user input ends up in messages).
std::string DumpJson(const nlohmann::json& j, int indent = 2);

}  // namespace warren
