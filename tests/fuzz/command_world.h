// CommandWorld: the command side of a warren server for the fuzz targets that reach the
// interpreter (command_line, mcp_tools, http_request): a real LmdbStore, a fixed clock, token
// signer and integration key, an Interpreter with the built-in commands over the fake VM host
// and guest of tests/fakes (VMs are made at once, commands in them exit 0), two VMs (the
// admin's web-1, the agent's agent-1), and two callers: the admin over SSH and an agent's API
// token held to the VM commands and those that read. The store lives in a temp directory
// removed as soon as LMDB has it open, so a crashed run leaves nothing behind.
// Inputs change the world (users, keys, VMs, jobs): a target resets it every kInputsPerWorld
// inputs so earlier inputs decide later ones only for a while, rebuilding what it made over
// the interpreter. One per process (libFuzzer runs one target per process); thread-safe as
// the Interpreter is, except Reset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "keys/lmdb_store.h"
#include "keys/secret_box.h"
#include "keys/token.h"
#include "lobby/base/clock.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "tests/fakes/fake_guest_control.h"
#include "tests/fakes/fake_vm_host.h"
#include "tests/fuzz/check.h"

namespace warren::fuzz {

inline constexpr int64_t kNow = 1'700'000'000;
inline constexpr int kInputsPerWorld = 2000;

class FixedClock final : public Clock {
 public:
  int64_t NowUnix() const override { return kNow; }
};

class CommandWorld {
 public:
  // Made on first use; aborts when the store cannot be made (nothing could be fuzzed).
  static CommandWorld& Get();

  // Starts over: a fresh store, host, guest and interpreter with the same users, VMs, callers
  // and token. Everything made over the old interpreter must be gone first.
  void Reset();
  // Counts an input; true when it is time for the caller to Reset (every kInputsPerWorld).
  bool Due();

  Interpreter& interpreter() { return *interpreter_; }
  LmdbStore& store() { return *store_; }
  const TokenSigner& signer() const { return signer_; }
  const Clock& clock() const { return clock_; }
  const Caller& admin() const { return admin_; }  // user "root", admin, SSH key, surface "ssh"
  const Caller& agent() const { return agent_; }  // user "agent", API token, surface "mcp"
  const std::string& agent_token() const { return agent_token_; }

 private:
  CommandWorld();
  void MakeVm(const Caller& caller, const std::string& name);

  FixedClock clock_;
  TokenSigner signer_;
  SecretKey integration_key_;
  std::unique_ptr<LmdbStore> store_;
  std::unique_ptr<FakeVmHost> host_;
  std::unique_ptr<FakeGuestControl> guests_;
  std::unique_ptr<Interpreter> interpreter_;
  Caller admin_;
  Caller agent_;
  std::string agent_token_;
  int inputs_ = 0;
};

}  // namespace warren::fuzz
