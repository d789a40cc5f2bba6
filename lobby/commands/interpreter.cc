#include "lobby/commands/interpreter.h"

#include <cctype>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>

#include <CLI/CLI.hpp>

#include "keys/token.h"
#include "lobby/base/error_map.h"
#include "lobby/base/log.h"
#include "lobby/commands/audit_line.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/help_text.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/live_sessions.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/tokenizer.h"
#include "lobby/commands/vm_access.h"

namespace warren {
namespace {

// Unknown words are echoed in messages; a pasted blob should not be echoed whole.
constexpr size_t kMaxEchoedWordBytes = 64;

class DiscardSink final : public OutputSink {
 public:
  void Write(std::string_view) override {}
};

// What the audit line records about a call, filled in as dispatch learns it.
struct AuditFacts {
  std::string path = "-";  // "-" until a command is identified: never raw argv
  std::string vm;
};

// --json among the arguments, before any "--" (after which words belong to the command).
// Scanned before parsing so that even a parse error is reported in the JSON shape; once
// parsing succeeds the parser's own answer replaces it, because a command may hand words to
// something else ("ssh VM prog --json" runs prog with --json, and is not our --json).
bool WantsJson(const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

// True when everything after the group's words only asks for help ("ssh-key --json").
bool OnlyHelpFlags(const std::vector<std::string>& argv, size_t from) {
  for (size_t i = from; i < argv.size(); ++i) {
    if (argv[i] != "--json" && argv[i] != "--help" && argv[i] != "-h") return false;
  }
  return true;
}

std::string Echo(std::string_view word) {
  if (word.size() <= kMaxEchoedWordBytes) return std::string(word);
  return std::string(word.substr(0, kMaxEchoedWordBytes)) + "…";
}

// How the caller asks for help on `topic` (a command path's words; none for the list), in
// its surface's words; nullopt when it cannot.
std::optional<std::string> HelpFor(const CommandSession& session, const CommandTable& table,
                                   std::vector<std::string> topic) {
  topic.insert(topic.begin(), "help");
  return CommandHint(session, table, topic);
}

Status UnknownCommand(const CommandTable& table, const CommandSession& session,
                      const std::vector<std::string>& argv) {
  size_t group_words = table.GroupWords(argv);
  std::string attempt = Echo(JoinWords({argv.begin(), argv.begin() + group_words + 1}));
  std::string message = "unknown command \"" + attempt + "\"";
  std::string suggestion = table.Suggest(argv, [&](const CommandSpec& spec) {
    return CheckCommandAllowed(session.caller, spec).ok();
  });
  if (!suggestion.empty()) message += "; did you mean \"" + suggestion + "\"?";
  if (auto help = HelpFor(session, table, {argv.begin(), argv.begin() + group_words})) {
    message += "; try " + *help;
  }
  return NotFound(message);
}

// The caller's admin flag as the store has it now; Unauthenticated when its user is gone.
Status RefreshAdmin(Caller& caller, Store& store) {
  Result<User> user = store.GetUser(caller.user);
  if (!user.ok()) {
    if (user.status().code() == Code::kNotFound) {
      return Unauthenticated("user " + caller.user + " no longer exists");
    }
    return user.status().Annotate("checking your account");
  }
  caller.admin = user->admin;
  return Status::Ok();
}

// The credential may have changed since the surface authenticated it — a key removed from
// another session must stop working at once, even inside an open REPL — so it is checked
// again against the store on every command, and the caller's limits and admin flag are
// taken from the store rather than from the session.
Status RefreshCaller(Caller& caller, Store& store, int64_t now) {
  if (caller.user.empty()) return Unauthenticated("not signed in");
  if (!caller.key_fingerprint.empty()) {
    Result<SshKey> key = store.GetKey(caller.key_fingerprint);
    if (!key.ok()) {
      if (key.status().code() == Code::kNotFound) {
        return Unauthenticated("this key has been removed from " + caller.user +
                               "'s account; connect with another key");
      }
      return key.status().Annotate("checking your key");
    }
    if (key->user != caller.user) return Unauthenticated("this key no longer belongs to you");
    caller.scope = key->scope;
    WARREN_RETURN_IF_ERROR(RefreshAdmin(caller, store));
  } else if (!caller.token_label_id.empty()) {
    // The token's limits are signed into it and cannot change; its label and user can.
    Result<TokenLabel> label = store.GetTokenLabel(caller.token_label_id);
    if (!label.ok()) {
      if (label.status().code() == Code::kNotFound) {
        return Unauthenticated("this API token has been revoked (its label was removed)");
      }
      return label.status().Annotate("checking your token");
    }
    if (label->user != caller.user) {
      return Unauthenticated("this API token has been revoked (its label was removed)");
    }
    WARREN_RETURN_IF_ERROR(RefreshAdmin(caller, store));
  }
  if (caller.scope.Expired(now)) {
    return Unauthenticated(CredentialNoun(caller) + " expired at " +
                           FormatTime(caller.scope.expires_at));
  }
  return Status::Ok();
}

// Why a read-only session may not run `spec`, naming the commands it may run instead.
Status ReadOnlyRefusal(const CommandTable& table, const Caller& caller, const CommandSpec& spec) {
  std::string allowed;
  for (const CommandSpec& c : table.commands()) {
    if (!c.read_only || !CheckCommandAllowed(caller, c).ok()) continue;
    allowed += (allowed.empty() ? "" : ", ") + c.path;
  }
  return PermissionDenied("\"" + spec.path +
                          "\" may change things (a command in a VM may change anything), and "
                          "this session runs only commands that change nothing: " +
                          allowed);
}

Result<CommandResult> Dispatch(Services& services, const CommandTable& table,
                               CommandSession& session, bool& json, AuditFacts& audit) {
  if (session.argv.empty()) {
    std::optional<std::string> help = HelpFor(session, table, {});
    return InvalidArgument("no command given" + (help ? "; try " + *help : ""));
  }
  std::vector<std::string> argv = session.argv;
  CommandTable::Match match = table.Lookup(argv);
  // Named in the audit line even when the credential is refused below.
  if (match.spec != nullptr) audit.path = match.spec->path;

  const int64_t now = services.clock->NowUnix();
  WARREN_RETURN_IF_ERROR(RefreshCaller(session.caller, *services.store, now));

  if (match.spec == nullptr) {
    size_t group_words = table.GroupWords(argv);
    if (group_words == 0 || !OnlyHelpFlags(argv, group_words)) {
      return UnknownCommand(table, session, argv);
    }
    // A group word alone ("ssh-key") is a request for that group's help.
    argv.insert(argv.begin(), "help");
    match = table.Lookup(argv);
    if (match.spec == nullptr) return UnknownCommand(table, session, session.argv);
  }
  const CommandSpec& spec = *match.spec;
  audit.path = spec.path;
  WARREN_RETURN_IF_ERROR(CheckCommandAllowed(session, spec));

  std::unique_ptr<Command> handler = spec.make();
  bool json_flag = false;
  std::unique_ptr<CLI::App> app = NewCommandApp(spec, *handler, &json_flag);
  // CLI11 consumes its argument vector from the back.
  std::vector<std::string> args(argv.rbegin(), argv.rend() - match.words);
  try {
    app->parse(args);
  } catch (const CLI::Success&) {
    session.help = !WantsJson(argv);
    CommandResult help;
    help.text = CommandHelpText(spec, services);
    help.data = CommandHelpJson(spec);
    return help;
  } catch (const CLI::ParseError& e) {
    // CLI11 writes sentences ("The following argument was not expected: x"); ours are
    // lowercase fragments after "error: ".
    std::string message = e.what();
    // Only a capitalised word: "KEY is required" names a placeholder and stays as it is.
    if (message.size() > 1 && std::isupper(static_cast<unsigned char>(message[0])) &&
        std::islower(static_cast<unsigned char>(message[1]))) {
      message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
    }
    if (auto help = HelpFor(session, table, PathWords(spec.path)))
      message += " (see " + *help + ")";
    return InvalidArgument(message);
  }
  json = json_flag || session.json;
  if (spec.path == "help") session.help = !json_flag;
  if (session.read_only && !spec.read_only) {
    return ReadOnlyRefusal(table, session.caller, spec);
  }
  CommandContext ctx{session, services, table, spec.path, now, json};
  if (spec.target.need != VmNeed::kNone) {
    const CLI::Option* arg = app->get_option_no_throw(spec.target.arg);
    if (arg == nullptr) return Internal("\"" + spec.path + "\" has no " + spec.target.arg);
    if (!arg->results().empty()) {
      const std::string& name = arg->results().front();
      ctx.audit_vm = Echo(name);
      audit.vm = ctx.audit_vm;
      WARREN_ASSIGN_OR_RETURN(
          ctx.vm, ResolveVm(services, session.caller, name, spec.target.need, SessionHints(ctx)));
    }
  }
  if (session.cancel != nullptr && session.cancel->cancelled()) {
    return Cancelled("cancelled before it started");
  }

  Result<CommandResult> result = handler->Run(ctx);
  audit.vm = ctx.audit_vm;
  return result;
}

// Writes the outcome to the session's sinks, sets its status and logs the audit line.
void Finish(const Services& services, CommandSession& session, bool json,
            const Result<CommandResult>& result, const AuditFacts& audit,
            std::chrono::steady_clock::time_point start) {
  if (result.ok()) {
    const CommandResult& r = result.value();
    session.result = r;
    if (json) {
      session.out->Write(DumpJson(r.data) + "\n");
    } else if (!r.text.empty()) {
      session.out->Write(r.text);
      // Relayed bytes pass through as they came; our own text ends its last line.
      if (!r.relayed.has_value() && r.text.back() != '\n') session.out->Write("\n");
    }
    if (r.exit_status.has_value() && *r.exit_status != 0) {
      session.status =
          Status(Code::kCommandFailed, "exited with status " + std::to_string(*r.exit_status));
      session.exit_status = *r.exit_status;
    } else {
      session.status = Status::Ok();
      session.exit_status = 0;
    }
  } else {
    session.status = result.status();
    session.exit_status = ExitStatusFor(session.status.code());
    if (json) {
      session.out->Write(DumpJson(nlohmann::json{{"error", session.status.message()}}) + "\n");
    } else {
      session.err->Write("error: " + session.status.message() + "\n");
    }
  }

  const auto elapsed = std::chrono::steady_clock::now() - start;
  auto dur_ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
  WriteAuditLine({.path = audit.path,
                  .vm = audit.vm,
                  .credential = session.caller.credential,
                  .user = session.caller.user,
                  .surface = session.caller.surface,
                  .code = session.status.code(),
                  .dur_ms = dur_ms});
  if (services.on_command) {
    services.on_command(CommandEvent{audit.path, session.caller.surface, session.status.code(),
                                     std::chrono::duration<double>(elapsed).count()});
  }
}

// Runs `body` with the session's null streams replaced by harmless ones, so a surface that
// forgot one gets a well-defined command instead of a crash.
template <typename F>
void WithStreams(CommandSession& session, F body) {
  EmptyInput no_input;
  DiscardSink discard;
  InputStream* in = session.in;
  OutputSink* out = session.out;
  OutputSink* err = session.err;
  if (session.in == nullptr) session.in = &no_input;
  if (session.out == nullptr) session.out = &discard;
  if (session.err == nullptr) session.err = &discard;
  body();
  session.in = in;
  session.out = out;
  session.err = err;
}

}  // namespace

Interpreter::Interpreter(Services services)
    : Interpreter(std::move(services), std::make_unique<CommandTable>()) {
  RegisterBuiltinCommands(*table_);
}

Interpreter::Interpreter(Services services, std::unique_ptr<CommandTable> table)
    : services_(std::move(services)), table_(std::move(table)) {
  if (services_.clock == nullptr) services_.clock = &SystemClock::Get();
  if (services_.live_sessions == nullptr)
    services_.live_sessions = std::make_shared<LiveSessions>();
  if (services_.integration_events == nullptr) {
    services_.integration_events = std::make_shared<IntegrationEvents>();
  }
}

Interpreter::~Interpreter() = default;

void Interpreter::Execute(CommandSession& session) {
  const auto start = std::chrono::steady_clock::now();
  session.result.reset();
  session.help = false;
  WithStreams(session, [&] {
    bool json = session.json || WantsJson(session.argv);
    AuditFacts audit;
    Result<CommandResult> result = Internal("not run");
    // While it runs, removing its credential ends it (live_sessions.h): its cancel signal
    // stops whatever it waits on, and it fails with the reason rather than as cancelled.
    if (session.cancel == nullptr) session.cancel = std::make_shared<CancelSignal>();
    std::mutex revoked_mu;
    std::optional<Status> revoked;
    LiveSessions::Registration live = services_.live_sessions->Register(
        session.caller, &session,
        [&revoked_mu, &revoked, cancel = session.cancel](const Status& why) {
          {
            std::lock_guard lock(revoked_mu);
            revoked = why;
          }
          cancel->Cancel();
        });
    // The handler boundary: nothing a command (or CLI11, or nlohmann::json) throws may
    // unwind into a surface's event loop.
    try {
      if (services_.store == nullptr) {
        result = Internal("the interpreter has no store");
      } else {
        result = Dispatch(services_, *table_, session, json, audit);
      }
    } catch (const std::exception& e) {
      LogError("command " + LogQuote(audit.path) + " threw: " + LogQuote(e.what()));
      result = Internal("internal error while running \"" + audit.path + "\"");
    } catch (...) {
      LogError("command " + LogQuote(audit.path) + " threw a non-exception");
      result = Internal("internal error while running \"" + audit.path + "\"");
    }
    live.Reset();
    if (!result.ok() && revoked.has_value()) result = *revoked;
    Finish(services_, session, json, result, audit, start);
  });
}

void Interpreter::ExecuteLine(CommandSession& session, std::string_view line) {
  Result<std::vector<std::string>> words = Tokenize(line);
  if (!words.ok()) {
    const auto start = std::chrono::steady_clock::now();
    session.argv.clear();
    session.result.reset();
    session.help = false;
    WithStreams(session, [&] {
      Finish(services_, session, session.json, Result<CommandResult>(words.status()), AuditFacts{},
             start);
    });
    return;
  }
  session.argv = std::move(words).value();
  Execute(session);
}

Status RevalidateCaller(Caller& caller, Store& store, int64_t now) {
  return RefreshCaller(caller, store, now);
}

Result<Caller> CallerForKey(Store& store, const Clock& clock, std::string_view fingerprint,
                            std::string surface) {
  Result<SshKey> key = store.GetKey(fingerprint);
  if (!key.ok()) {
    if (key.status().code() == Code::kNotFound) return Unauthenticated("unknown key");
    return key.status().Annotate("looking up key");
  }
  const int64_t now = clock.NowUnix();
  if (key->scope.Expired(now)) {
    return Unauthenticated("key " + key->name + " expired at " + FormatTime(key->scope.expires_at));
  }
  Result<User> user = store.GetUser(key->user);
  if (!user.ok()) {
    if (user.status().code() == Code::kNotFound) return Unauthenticated("unknown key");
    return user.status().Annotate("looking up user");
  }
  Status touched = store.TouchKey(key->fingerprint, now);
  if (!touched.ok()) {
    // Last-used is a convenience; a store hiccup recording it must not lock anyone out.
    LogWarn("recording key use: " + LogQuote(touched.ToString()));
  }
  Caller caller;
  caller.user = user->name;
  caller.admin = user->admin;
  caller.credential = "key:" + key->fingerprint;
  caller.key_fingerprint = key->fingerprint;
  caller.scope = key->scope;
  caller.surface = std::move(surface);
  return caller;
}

Result<Caller> CallerForToken(Store& store, const Clock& clock, const TokenSigner& signer,
                              std::string_view token, std::string surface,
                              std::string_view audience) {
  const int64_t now = clock.NowUnix();
  WARREN_ASSIGN_OR_RETURN(CheckedToken checked, CheckToken(store, signer, token, now));
  if (!checked.claims.audience.empty() && checked.claims.audience != audience) {
    // RFC 8707 / MCP: a token issued for another resource is not accepted here.
    return Unauthenticated("this token was issued for another resource (" +
                           checked.claims.audience.substr(0, 200) + "), not this one");
  }
  // Last-used is a convenience: at most one write a minute per label, so a busy agent does
  // not turn every request into a durable write; a failure must not lock anyone out.
  constexpr int64_t kTouchEverySeconds = 60;
  if (checked.label.last_used_at + kTouchEverySeconds <= now) {
    Status touched = store.TouchTokenLabel(checked.label.id, now);
    if (!touched.ok()) LogWarn("recording token use: " + LogQuote(touched.ToString()));
  }
  Caller caller;
  caller.user = checked.user.name;
  caller.admin = checked.user.admin;
  caller.credential = "token:" + checked.label.id;
  caller.token_label_id = checked.label.id;
  caller.scope = checked.claims.scope;
  caller.surface = std::move(surface);
  return caller;
}

Result<Caller> Interpreter::CallerForToken(std::string_view token, std::string surface,
                                           std::string_view audience) {
  if (services_.token_signer == nullptr || services_.store == nullptr) {
    return Unauthenticated("this server does not accept API tokens");
  }
  return warren::CallerForToken(*services_.store, *services_.clock, *services_.token_signer, token,
                                std::move(surface), audience);
}

double GuestSlowdownNow(const Services& services) {
  return services.guest_slowdown ? services.guest_slowdown() : 1.0;
}

}  // namespace warren
