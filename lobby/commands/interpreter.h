// Interpreter: the one command interpreter every surface uses. Execute() is the only way
// in: look up the command -> check the caller's permissions -> parse flags (a fresh
// CLI::App per call) -> run the handler -> render text or --json -> one audit line.
// Thread-safe: many sessions may Execute concurrently on one Interpreter.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/session.h"

namespace warren {

// How users reach this server; used in help text and connection hints.
struct ServerInfo {
  std::string ssh_host = "localhost";
  int ssh_port = 2222;
  std::string domain = "warren.localhost";
};

struct Services {
  Store* store = nullptr;
  const Clock* clock = nullptr;
  ServerInfo info;
};

class CommandTable;

class Interpreter {
 public:
  // With the built-in commands (commands.h).
  explicit Interpreter(Services services);
  // With the commands in `table` instead: tests and test-only builds register fixture
  // commands this way. The table must not change afterwards.
  Interpreter(Services services, std::unique_ptr<CommandTable> table);
  ~Interpreter();

  // Runs session.argv. Sets session.status and session.exit_status; writes the command's
  // output (text, or JSON under --json) to session.out and errors to session.err (or, under
  // --json, {"error": "..."} to session.out).
  void Execute(CommandSession& session);

  // Splits `line` with shell-like quoting (never a shell) into session.argv, then Execute.
  void ExecuteLine(CommandSession& session, std::string_view line);

  const CommandTable& table() const { return *table_; }
  Services& services() { return services_; }

 private:
  Services services_;
  std::unique_ptr<CommandTable> table_;
};

// Authenticates a public key: the key must be registered and not expired; records its use.
// Returns the caller with the key's limits. Unauthenticated otherwise.
Result<Caller> CallerForKey(Store& store, const Clock& clock, std::string_view fingerprint,
                            std::string surface);

}  // namespace warren
