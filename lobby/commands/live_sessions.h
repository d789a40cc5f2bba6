// LiveSessions: every credential in use right now — each command session the interpreter
// runs, each SSH connection — with a way to end that use. Removing a credential (a key, a
// token label, a user, an OAuth client and its sign-ins) ends what it is doing at once, on
// every surface: the command that made the change calls EndRevokedSessions once its store
// change has committed, which re-checks every live caller against the store with the rule
// each command is checked by (RevalidateCaller) and ends the ones it refuses. So the rule
// has one home, and a surface only says how its use ends (cancel a session, close a
// connection's channels).
//
// Thread-safe. An `end` callback runs at most once, on the thread that swept, with the
// registry's lock held: it must be quick, must not block and must not call back into the
// registry. Once a Registration is destroyed its callback neither runs nor will.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"

namespace warren {

struct CommandSession;
struct Services;

class LiveSessions {
 public:
  // How a use ends; `why` is the refusal (Unauthenticated: "this key has been removed…").
  using EndFn = std::function<void(const Status& why)>;

  // Ends the registration when destroyed. Move-only.
  class Registration {
   public:
    Registration() = default;
    ~Registration() { Reset(); }
    Registration(Registration&& other) noexcept;
    Registration& operator=(Registration&& other) noexcept;
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    void Reset();

   private:
    friend class LiveSessions;
    Registration(LiveSessions* owner, uint64_t id) : owner_(owner), id_(id) {}
    LiveSessions* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // Registers a use of `caller`'s credential until the returned value goes. `tag` names the
  // user of it (a CommandSession*) so that a sweep can leave its own command alone; may be
  // null. A caller without a credential registers nothing.
  [[nodiscard]] Registration Register(const Caller& caller, const void* tag, EndFn end);

  // Ends every registered use whose caller RevalidateCaller now refuses, except those
  // tagged `except`. Returns how many were ended.
  size_t EndRevoked(Store& store, int64_t now, const void* except = nullptr);

  // Ends every registered use by `user` but those tagged `except`, whatever the store says:
  // for a removal that must stop them before it starts (`user rm` removes the VMs their
  // commands run in, and a command should end revoked, not with its VM gone under it).
  size_t EndUser(std::string_view user, const Status& why, const void* except = nullptr);

  size_t size() const;

 private:
  struct Entry {
    Caller caller;
    const void* tag = nullptr;
    EndFn end;
  };
  void Unregister(uint64_t id);
  // With mu_ held: ends the entries of `refused` still registered, logging each.
  size_t EndLocked(std::vector<std::pair<uint64_t, Status>>& refused);

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Entry> entries_;
};

// For a command whose store change may have revoked credentials, once that change has
// committed: ends every live use of them (LiveSessions::EndRevoked) but its own session.
void EndRevokedSessions(Services& services, const CommandSession& session);

}  // namespace warren
