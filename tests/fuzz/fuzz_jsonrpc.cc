// Fuzzes the JSON-RPC decoder of MCP's Streamable HTTP transport (bridge/mcp/jsonrpc.h) with a
// POST body. Invariants: every body decodes to a Message or a Fault, never an exception; a
// Fault carries a JSON-RPC error code and an id that is null, a string or an integer; a
// Message has object params and the id its kind calls for; the replies built for it dump
// (even with bytes that are not UTF-8) and decode again to the same method and id.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "bridge/mcp/jsonrpc.h"
#include "lobby/base/error_map.h"
#include "tests/fuzz/check.h"

namespace {

using nlohmann::json;
using warren::fuzz::Fail;
namespace mcp = warren::mcp;

bool IdShaped(const json& id) {
  return id.is_null() || id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

void CheckFault(const mcp::Fault& f) {
  const int too_large = warren::JsonRpcCodeFor(warren::Code::kTooLarge);
  if (f.code != mcp::kParseError && f.code != mcp::kInvalidRequest && f.code != too_large) {
    Fail("fault code " + std::to_string(f.code));
  }
  if (!IdShaped(f.id)) Fail("fault id " + f.id.dump());
  if (f.message.empty()) Fail("fault without a message");
  (void)json::parse(mcp::Dump(mcp::ErrorReply(f.id, f.code, f.message)));  // throws if not JSON
}

void CheckMessage(const mcp::Message& m) {
  if (!m.params.is_object()) Fail("params not an object");
  const bool has_id = !m.id.is_null();
  switch (m.kind) {
    case mcp::Message::Kind::kRequest:
      if (!has_id || m.method.empty()) Fail("request without id or method");
      break;
    case mcp::Message::Kind::kNotification:
      if (has_id || m.method.empty()) Fail("notification with an id, or without a method");
      break;
    case mcp::Message::Kind::kResponse:
      if (!has_id || !m.method.empty()) Fail("response without an id, or with a method");
      return;
  }
  if (!IdShaped(m.id)) Fail("message id " + m.id.dump());
  // The message as a client would send it again, and the replies we would build for it.
  json again = {{"jsonrpc", "2.0"}, {"method", m.method}, {"params", m.params}};
  if (has_id) again["id"] = m.id;
  std::variant<mcp::Message, mcp::Fault> decoded = mcp::Decode(mcp::Dump(again));
  const mcp::Message* back = std::get_if<mcp::Message>(&decoded);
  if (back == nullptr) Fail("re-encoded message refused: " + std::get<mcp::Fault>(decoded).message);
  if (back->method != m.method || back->id != m.id || back->kind != m.kind) {
    Fail("re-encoded message decodes differently");
  }
  (void)json::parse(mcp::Dump(mcp::ResultReply(m.id, m.params)));
  (void)json::parse(mcp::Dump(mcp::StatusReply(m.id, warren::InvalidArgument(m.method))));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::variant<mcp::Message, mcp::Fault> decoded = mcp::Decode(body);
  if (auto* fault = std::get_if<mcp::Fault>(&decoded)) {
    CheckFault(*fault);
  } else {
    CheckMessage(std::get<mcp::Message>(decoded));
  }
  return 0;
}
