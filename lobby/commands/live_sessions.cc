#include "lobby/commands/live_sessions.h"

#include <utility>
#include <vector>

#include "lobby/base/log.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/session.h"

namespace warren {

LiveSessions::Registration::Registration(Registration&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), id_(std::exchange(other.id_, 0)) {}

LiveSessions::Registration& LiveSessions::Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void LiveSessions::Registration::Reset() {
  if (owner_ != nullptr) owner_->Unregister(id_);
  owner_ = nullptr;
  id_ = 0;
}

LiveSessions::Registration LiveSessions::Register(const Caller& caller, const void* tag,
                                                  EndFn end) {
  if (caller.credential.empty() || !end) return Registration();
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{caller, tag, std::move(end)});
  return Registration(this, id);
}

void LiveSessions::Unregister(uint64_t id) {
  std::lock_guard lock(mu_);
  entries_.erase(id);
}

size_t LiveSessions::EndRevoked(Store& store, int64_t now, const void* except) {
  // The store is read without the lock, so registering and ending other uses never waits
  // on it; an entry that went meanwhile is simply no longer there to end.
  std::vector<std::pair<uint64_t, Caller>> live;
  {
    std::lock_guard lock(mu_);
    live.reserve(entries_.size());
    for (const auto& [id, e] : entries_) {
      if (except == nullptr || e.tag != except) live.emplace_back(id, e.caller);
    }
  }
  std::vector<std::pair<uint64_t, Status>> refused;
  for (auto& [id, caller] : live) {
    Status st = RevalidateCaller(caller, store, now);
    // Only a refusal ends a session: a store that cannot be read right now is no reason to
    // cut anyone off (the next command checks again).
    if (st.code() == Code::kUnauthenticated) refused.emplace_back(id, std::move(st));
  }
  std::lock_guard lock(mu_);
  return EndLocked(refused);
}

size_t LiveSessions::EndUser(std::string_view user, const Status& why, const void* except) {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint64_t, Status>> ending;
  for (const auto& [id, e] : entries_) {
    if (e.caller.user == user && (except == nullptr || e.tag != except)) {
      ending.emplace_back(id, why);
    }
  }
  return EndLocked(ending);
}

size_t LiveSessions::EndLocked(std::vector<std::pair<uint64_t, Status>>& refused) {
  size_t ended = 0;
  for (auto& [id, why] : refused) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    LogInfo("session ended caller=" + LogQuote(it->second.caller.credential) + " user=" +
            LogQuote(it->second.caller.user) + " surface=" + LogQuote(it->second.caller.surface) +
            " reason=" + LogQuote(why.message()));
    EndFn end = std::move(it->second.end);
    entries_.erase(it);
    end(why);
    ++ended;
  }
  return ended;
}

size_t LiveSessions::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void EndRevokedSessions(Services& services, const CommandSession& session) {
  if (services.live_sessions == nullptr || services.store == nullptr) return;
  services.live_sessions->EndRevoked(*services.store, services.clock->NowUnix(), &session);
}

}  // namespace warren
