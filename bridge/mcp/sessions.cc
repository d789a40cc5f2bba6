#include "bridge/mcp/sessions.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "lobby/base/hex.h"

namespace warren::mcp {

std::string NewSessionId() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    // Without a CSPRNG no session id can be trusted; that is not a state to run on.
    if (n <= 0) std::abort();
    got += static_cast<size_t>(n);
  }
  return HexEncode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

SessionTable::SessionTable(size_t max_sessions, size_t max_per_user,
                           std::chrono::seconds idle_limit, Clock clock)
    : max_sessions_(max_sessions),
      max_per_user_(max_per_user),
      idle_limit_(idle_limit),
      clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

void SessionTable::EraseLocked(Map::iterator it) {
  auto count = per_user_.find(it->second.info.user);
  if (count != per_user_.end() && --count->second == 0) per_user_.erase(count);
  sessions_.erase(it);
}

void SessionTable::DropIdleLocked(std::chrono::steady_clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    // A session with a call in flight is in use however long the call takes.
    if (it->second.calls.empty() && now - it->second.last_used > idle_limit_) {
      EraseLocked(it++);
    } else {
      ++it;
    }
  }
}

Result<SessionInfo> SessionTable::Create(std::string endpoint, std::string credential,
                                         std::string user, std::string protocol_version) {
  auto now = clock_();
  std::lock_guard lock(mu_);
  auto count = per_user_.find(user);
  if (count != per_user_.end() && count->second >= max_per_user_) {
    // The user's own least recently used idle session makes room: a linear scan, but only
    // for a user at their cap, and bounded by the table.
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.info.user != user || !it->second.calls.empty()) continue;
      if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) {
        oldest = it;
      }
    }
    if (oldest == sessions_.end()) {
      return LimitExceeded("you have " + std::to_string(max_per_user_) +
                           " MCP sessions open, each with a call in flight; end one with "
                           "DELETE or wait for a call to finish");
    }
    EraseLocked(oldest);
  }
  if (sessions_.size() >= max_sessions_) DropIdleLocked(now);
  if (sessions_.size() >= max_sessions_) {
    return LimitExceeded("too many MCP sessions are open (" + std::to_string(max_sessions_) +
                         "); end one with DELETE or try again later");
  }
  Entry e;
  e.info.id = NewSessionId();
  e.info.endpoint = std::move(endpoint);
  e.info.credential = std::move(credential);
  e.info.user = std::move(user);
  e.info.protocol_version = std::move(protocol_version);
  e.last_used = now;
  SessionInfo info = e.info;
  ++per_user_[info.user];
  sessions_.emplace(info.id, std::move(e));
  return info;
}

Result<SessionInfo> SessionTable::Use(std::string_view id, std::string_view endpoint,
                                      std::string_view credential) {
  auto now = clock_();
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.info.endpoint != endpoint ||
      it->second.info.credential != credential) {
    return NotFound("no such MCP session; initialize a new one");
  }
  if (it->second.calls.empty() && now - it->second.last_used > idle_limit_) {
    EraseLocked(it);
    return NotFound("the MCP session expired; initialize a new one");
  }
  it->second.last_used = now;
  return it->second.info;
}

Status SessionTable::End(std::string_view id, std::string_view endpoint,
                         std::string_view credential) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.info.endpoint != endpoint ||
      it->second.info.credential != credential) {
    return NotFound("no such MCP session");
  }
  for (auto& [call, cancel] : it->second.calls) cancel->Cancel();
  EraseLocked(it);
  return Status::Ok();
}

Status SessionTable::SetLogLevel(std::string_view id, std::string level) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return NotFound("no such MCP session");
  it->second.info.log_level = std::move(level);
  return Status::Ok();
}

void SessionTable::BeginCall(std::string_view session_id, const std::string& call_id,
                             std::shared_ptr<CancelSignal> cancel) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) it->second.calls[call_id] = std::move(cancel);
}

void SessionTable::CancelAll() {
  std::lock_guard lock(mu_);
  for (auto& [id, e] : sessions_) {
    for (auto& [call, cancel] : e.calls) cancel->Cancel();
  }
}

void SessionTable::EndCall(std::string_view session_id, const std::string& call_id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  it->second.calls.erase(call_id);
  it->second.last_used = clock_();
}

bool SessionTable::CancelCall(std::string_view session_id, const std::string& call_id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return false;
  auto call = it->second.calls.find(call_id);
  if (call == it->second.calls.end()) return false;
  call->second->Cancel();
  return true;
}

size_t SessionTable::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

size_t SessionTable::size_of(std::string_view user) const {
  std::lock_guard lock(mu_);
  auto it = per_user_.find(user);
  return it == per_user_.end() ? 0 : it->second;
}

}  // namespace warren::mcp
