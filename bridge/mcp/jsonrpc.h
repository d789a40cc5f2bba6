// JSON-RPC 2.0 messages as MCP's Streamable HTTP transport carries them: one message per
// POST body (batches were removed in protocol 2025-06-18 and are refused), decoded with
// bounded size and nesting, and the replies built back. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "lobby/base/status.h"

namespace warren::mcp {

// Protocol-level error codes of JSON-RPC itself. Errors from our own Status codes go
// through JsonRpcCodeFor (lobby/base/error_map.h).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;

inline constexpr size_t kMaxMessageBytes = 1024 * 1024;
inline constexpr int kMaxNestingDepth = 64;

struct Message {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  nlohmann::json id;  // string or integer for requests and responses; null otherwise
  std::string method;
  nlohmann::json params = nlohmann::json::object();  // always an object (absent -> {})
};

// A message that could not be accepted: the JSON-RPC error to answer with (id null unless
// the message's id could be read).
struct Fault {
  int code = kInvalidRequest;
  std::string message;
  nlohmann::json id;
};

// Decodes one POST body. A batch (a JSON array) is a Fault: this server speaks 2025-06-18
// and later, which have no batches.
std::variant<Message, Fault> Decode(std::string_view body);

// {"jsonrpc":"2.0","id":…,"result":…}
nlohmann::json ResultReply(const nlohmann::json& id, nlohmann::json result);
// {"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}
nlohmann::json ErrorReply(const nlohmann::json& id, int code, std::string_view message);
// The error reply for a Status, with its code from the one error map.
nlohmann::json StatusReply(const nlohmann::json& id, const Status& status);
// {"jsonrpc":"2.0","method":…,"params":…}
nlohmann::json Notification(std::string_view method, nlohmann::json params);

// Serialises without throwing on invalid UTF-8 (command output may hold any bytes).
std::string Dump(const nlohmann::json& j);

}  // namespace warren::mcp
