// CommandWorld: the command side of a warren server for the fuzz targets that reach the
// interpreter (command_line, mcp_tools, http_request): a real LmdbStore, a fixed clock and
// token signer, an Interpreter with the built-in commands and no VMs (every VM command
// answers Unavailable), and two callers — the admin over SSH and an agent's API token held
// to commands that change nothing while no VM exists, so the agent's inputs never grow the
// store. The store lives in a temp directory removed as soon as LMDB has it open, so a
// crashed run leaves nothing behind.
// One per process (libFuzzer runs one target per process); thread-safe as the Interpreter is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "keys/lmdb_store.h"
#include "keys/token.h"
#include "lobby/base/clock.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "tests/fuzz/check.h"

namespace warren::fuzz {

inline constexpr int64_t kNow = 1'700'000'000;

class FixedClock final : public Clock {
 public:
  int64_t NowUnix() const override { return kNow; }
};

class CommandWorld {
 public:
  // Made on first use; aborts when the store cannot be made (nothing could be fuzzed).
  static CommandWorld& Get();

  // A fresh store and interpreter with the same users, callers and token: for a target whose
  // commands write (the admin's), so that state from earlier inputs does not pile up.
  void Reset();

  Interpreter& interpreter() { return *interpreter_; }
  LmdbStore& store() { return *store_; }
  const TokenSigner& signer() const { return signer_; }
  const Clock& clock() const { return clock_; }
  const Caller& admin() const { return admin_; }  // user "root", admin, SSH key, surface "ssh"
  const Caller& agent() const { return agent_; }  // user "agent", API token, surface "mcp"
  const std::string& agent_token() const { return agent_token_; }

 private:
  CommandWorld();

  FixedClock clock_;
  TokenSigner signer_;
  std::unique_ptr<LmdbStore> store_;
  std::unique_ptr<Interpreter> interpreter_;
  Caller admin_;
  Caller agent_;
  std::string agent_token_;
};

}  // namespace warren::fuzz
