// SessionTable: MCP sessions (Mcp-Session-Id) of the Streamable HTTP transport. A session is
// made by `initialize`, bound to the credential that made it and to its endpoint, and ends
// with DELETE or after it has been idle too long. It holds the negotiated protocol version
// and the cancel signals of its calls in flight, so `notifications/cancelled` can stop them.
// The table is bounded in all and per user: a user at their cap who opens one more loses
// their own oldest idle session (so a client that never says DELETE keeps working and costs
// others nothing); one whose sessions all have calls in flight is refused. Ids are 128
// random bits from the kernel's CSPRNG. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"

namespace warren::mcp {

struct SessionInfo {
  std::string id;
  std::string endpoint;    // "/mcp", "/mcp/claude"…
  std::string credential;  // who made it (Caller::credential): another one cannot use it
  std::string user;        // whose share it counts against (Caller::user)
  std::string protocol_version;
  std::string log_level = "info";
};

class SessionTable {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  SessionTable(size_t max_sessions, size_t max_per_user, std::chrono::seconds idle_limit,
               Clock clock = nullptr);

  // A new session. At `user`'s cap, their least recently used session without a call in
  // flight goes first; LimitExceeded when none can go, or when max_sessions are open (after
  // dropping the expired ones).
  Result<SessionInfo> Create(std::string endpoint, std::string credential, std::string user,
                             std::string protocol_version);
  // The live session `id` for this endpoint and credential, touched; NotFound otherwise
  // (unknown, ended, expired, or someone else's: all look the same).
  Result<SessionInfo> Use(std::string_view id, std::string_view endpoint,
                          std::string_view credential);
  // Ends a session, cancelling its calls in flight. NotFound like Use.
  Status End(std::string_view id, std::string_view endpoint, std::string_view credential);
  Status SetLogLevel(std::string_view id, std::string level);

  // Registers a call in flight under its JSON-RPC id (dumped) with the signal that stops it.
  void BeginCall(std::string_view session_id, const std::string& call_id,
                 std::shared_ptr<CancelSignal> cancel);
  void EndCall(std::string_view session_id, const std::string& call_id);
  // notifications/cancelled: true when a call in flight was found and cancelled.
  bool CancelCall(std::string_view session_id, const std::string& call_id);
  // Cancels every call in flight (shutdown).
  void CancelAll();

  size_t size() const;
  size_t size_of(std::string_view user) const;

 private:
  struct Entry {
    SessionInfo info;
    std::chrono::steady_clock::time_point last_used;
    std::map<std::string, std::shared_ptr<CancelSignal>> calls;
  };
  using Map = std::map<std::string, Entry, std::less<>>;
  void DropIdleLocked(std::chrono::steady_clock::time_point now);
  void EraseLocked(Map::iterator it);

  const size_t max_sessions_;
  const size_t max_per_user_;
  const std::chrono::seconds idle_limit_;
  Clock clock_;
  mutable std::mutex mu_;
  Map sessions_;
  std::map<std::string, size_t, std::less<>> per_user_;  // open sessions by user
};

// 32 lowercase hex characters from getrandom(2).
std::string NewSessionId();

}  // namespace warren::mcp
