#include "bridge/mcp/jsonrpc.h"

#include "lobby/base/error_map.h"

namespace warren::mcp {
namespace {

struct TooDeep {};

Fault Invalid(std::string message, nlohmann::json id = nullptr) {
  return Fault{kInvalidRequest, std::move(message), std::move(id)};
}

bool ValidId(const nlohmann::json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

}  // namespace

std::variant<Message, Fault> Decode(std::string_view body) {
  if (body.size() > kMaxMessageBytes) {
    return Fault{JsonRpcCodeFor(Code::kTooLarge), "message too large", nullptr};
  }
  nlohmann::json j;
  try {
    // The callback sees every nesting level as it is opened, so a hostile body cannot make
    // the parser recurse without bound.
    nlohmann::json::parser_callback_t limit = [](int depth, nlohmann::json::parse_event_t,
                                                 nlohmann::json&) {
      if (depth > kMaxNestingDepth) throw TooDeep{};
      return true;
    };
    j = nlohmann::json::parse(body.begin(), body.end(), limit);
  } catch (const TooDeep&) {
    return Fault{kParseError, "JSON nested too deeply", nullptr};
  } catch (const nlohmann::json::exception& e) {
    return Fault{kParseError, "parse error: malformed JSON", nullptr};
  }
  if (j.is_array())
    return Invalid("JSON-RPC batches are not supported; send one message per request");
  if (!j.is_object()) return Invalid("a JSON-RPC message must be an object");

  nlohmann::json id = nullptr;
  auto id_it = j.find("id");
  if (id_it != j.end()) {
    if (!ValidId(*id_it)) return Invalid("id must be a string or an integer");
    id = *id_it;
  }
  auto v = j.find("jsonrpc");
  if (v == j.end() || !v->is_string() || *v != "2.0") return Invalid("jsonrpc must be \"2.0\"", id);

  Message m;
  m.id = id;
  auto method = j.find("method");
  if (method == j.end()) {
    // A response to a request of ours (this server sends none, but it must not fail).
    if (id_it == j.end()) return Invalid("a message needs a method or an id");
    if (j.contains("result") == j.contains("error")) {
      return Invalid("a response has exactly one of result and error", id);
    }
    m.kind = Message::Kind::kResponse;
    return m;
  }
  if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
    return Invalid("method must be a non-empty string", id);
  }
  m.method = method->get<std::string>();
  m.kind = id_it == j.end() ? Message::Kind::kNotification : Message::Kind::kRequest;
  auto params = j.find("params");
  if (params != j.end() && !params->is_null()) {
    // MCP's params are always objects (by-name).
    if (!params->is_object()) return Invalid("params must be an object", id);
    m.params = *params;
  }
  return m;
}

nlohmann::json ResultReply(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json ErrorReply(const nlohmann::json& id, int code, std::string_view message) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"error", {{"code", code}, {"message", std::string(message)}}}};
}

nlohmann::json StatusReply(const nlohmann::json& id, const Status& status) {
  return ErrorReply(id, JsonRpcCodeFor(status.code()), status.message());
}

nlohmann::json Notification(std::string_view method, nlohmann::json params) {
  return {{"jsonrpc", "2.0"}, {"method", std::string(method)}, {"params", std::move(params)}};
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace warren::mcp
