#include "lobby/commands/sandbox_view.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "lobby/base/time_format.h"

namespace warren {
namespace {

using nlohmann::json;

// Reads a request's fields, each checked once; the first problem is the answer. Unknown
// fields are refused: a misspelt "timeout_ms" silently ignored would run with the default.
class Fields {
 public:
  Fields(const json& body, const std::vector<std::string_view>& known) : body_(body) {
    if (!body_.is_object()) {
      error_ = InvalidArgument("the request must be a JSON object");
      return;
    }
    for (const auto& [k, v] : body_.items()) {
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        error_ = InvalidArgument("unknown field \"" + k.substr(0, 64) + "\"");
        return;
      }
    }
  }

  // A string field; absent or null is nullopt (an error when required). Empty strings are
  // refused: none of these fields means anything empty.
  std::optional<std::string> String(std::string_view name, bool required) {
    const json* v = Find(name);
    if (v == nullptr) {
      if (required) Fail("\"" + std::string(name) + "\" is required");
      return std::nullopt;
    }
    if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
      Fail("\"" + std::string(name) + "\" must be a non-empty string");
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  // An integer field from `min` to `max`.
  std::optional<int64_t> Integer(std::string_view name, bool required, int64_t min, int64_t max) {
    const json* v = Find(name);
    if (v == nullptr) {
      if (required) Fail("\"" + std::string(name) + "\" is required");
      return std::nullopt;
    }
    // 30.0 is an integer to JSON; 30.5 is not.
    std::optional<int64_t> n;
    if (v->is_number_integer()) {
      n = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)
              ? max + 1
              : v->get<int64_t>();
    } else if (v->is_number_float()) {
      double d = v->get<double>();
      if (d == static_cast<double>(static_cast<int64_t>(d)) && d >= -1e15 && d <= 1e15) {
        n = static_cast<int64_t>(d);
      }
    }
    if (!n.has_value() || *n < min || *n > max) {
      Fail("\"" + std::string(name) + "\" must be an integer from " + std::to_string(min) + " to " +
           std::to_string(max));
      return std::nullopt;
    }
    return n;
  }

  // An object of strings (exec's env), in the order sent.
  std::vector<std::pair<std::string, std::string>> StringMap(std::string_view name) {
    std::vector<std::pair<std::string, std::string>> out;
    const json* v = Find(name);
    if (v == nullptr) return out;
    if (!v->is_object()) {
      Fail("\"" + std::string(name) + "\" must be an object of strings");
      return out;
    }
    for (const auto& [k, value] : v->items()) {
      if (!value.is_string()) {
        Fail("\"" + std::string(name) + "\": the value of \"" + k.substr(0, 64) +
             "\" must be a string");
        return {};
      }
      out.emplace_back(k, value.get<std::string>());
    }
    return out;
  }

  const Status& error() const { return error_; }

 private:
  const json* Find(std::string_view name) const {
    if (!body_.is_object()) return nullptr;
    auto it = body_.find(name);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Fail(std::string message) {
    if (error_.ok()) error_ = InvalidArgument(std::move(message));
  }

  const json& body_;
  Status error_;
};

std::vector<std::string_view> Known(std::initializer_list<std::string_view> fields,
                                    std::string_view id_field) {
  std::vector<std::string_view> out(fields);
  if (!id_field.empty()) out.push_back(id_field);
  return out;
}

// The Unix seconds of a command's expires_at as RFC 3339, or null when it has none.
Result<json> Expiry(const json& data) {
  auto it = data.find("expires_at");
  if (it == data.end() || it->is_null()) return json(nullptr);
  if (!it->is_number_integer()) return Internal("the command's expires_at is not a time");
  return json(FormatRfc3339(it->get<int64_t>()));
}

Result<std::string> NameOf(const json& data) {
  if (!data.is_object()) return Internal("the command's data is not an object");
  auto it = data.find("name");
  if (it == data.end() || !it->is_string()) return Internal("the command's data has no name");
  return it->get<std::string>();
}

}  // namespace

Result<std::vector<std::string>> SandboxCreateArgv(const json& body) {
  Fields f(body, {"size", "timeout_minutes"});
  auto size = f.String("size", false);
  auto minutes = f.Integer("timeout_minutes", false, 1, kMaxSandboxMinutes);
  if (!f.error().ok()) return f.error();
  // Named here, not by `new`: a create that outlives the surface's deadline (a burst of
  // boots) is answered before `new` prints its name, and the caller must still learn it.
  std::vector<std::string> argv = {"new", "--sandbox", "--name=" + NewSandboxName()};
  // NAME=VALUE in one word, so a value is never read as a flag of its own.
  if (size) argv.push_back("--size=" + *size);
  if (minutes) argv.push_back("--timeout=" + std::to_string(*minutes) + "m");
  return argv;
}

std::string SandboxCreateId(const std::vector<std::string>& argv) {
  if (argv.size() < 3 || argv[0] != "new" || argv[1] != "--sandbox") return "";
  constexpr std::string_view kName = "--name=";
  return argv[2].starts_with(kName) ? argv[2].substr(kName.size()) : "";
}

Result<std::vector<std::string>> SandboxExecArgv(std::string_view id, const json& body,
                                                 std::string_view id_field) {
  Fields f(body, Known({"command", "timeout_ms", "cwd", "env"}, id_field));
  auto command = f.String("command", true);
  auto timeout = f.Integer("timeout_ms", false, 1, kMaxSandboxExecTimeoutMs);
  auto cwd = f.String("cwd", false);
  auto env = f.StringMap("env");
  if (!f.error().ok()) return f.error();
  if (id.empty()) return InvalidArgument("the sandbox id is empty");
  std::vector<std::string> argv = {
      "ssh", "--timeout=" + std::to_string(timeout.value_or(kDefaultSandboxExecTimeoutMs)) + "ms"};
  if (cwd) argv.push_back("--cwd=" + *cwd);
  for (const auto& [k, v] : env) argv.push_back("--env=" + k + "=" + v);
  // "--" so an id is never read as a flag; the command is one word, parsed again by the
  // VM's shell.
  argv.insert(argv.end(), {"--", std::string(id), *command});
  return argv;
}

Result<std::vector<std::string>> SandboxExtendArgv(std::string_view id, const json& body,
                                                   std::string_view id_field) {
  Fields f(body, Known({"additional_minutes"}, id_field));
  auto minutes = f.Integer("additional_minutes", true, 1, kMaxSandboxMinutes);
  if (!f.error().ok()) return f.error();
  if (id.empty()) return InvalidArgument("the sandbox id is empty");
  return std::vector<std::string>{"extend", "--minutes=" + std::to_string(*minutes), "--",
                                  std::string(id)};
}

std::vector<std::string> SandboxStatArgv(std::string_view id) {
  return {"stat", "--", std::string(id)};
}
std::vector<std::string> SandboxDestroyArgv(std::string_view id) {
  return {"rm", "--sandbox", "--", std::string(id)};
}
std::vector<std::string> SandboxListArgv() { return {"ls", "--sandbox"}; }

Result<json> SandboxJson(const json& vm) {
  Result<std::string> name = NameOf(vm);
  if (!name.ok()) return name.status();
  if (vm.value("kind", "") != "sandbox") {
    return NotFound(*name +
                    " is an ordinary VM, not a sandbox (sandboxes are made with new "
                    "--sandbox)");
  }
  Result<json> expires = Expiry(vm);
  if (!expires.ok()) return expires.status();
  auto size = vm.find("size");
  return json{{"id", *name},
              {"status", vm.value("state", "unknown")},
              {"size", size != vm.end() && size->is_string() ? *size : json(nullptr)},
              {"expires_at", *expires}};
}

Result<json> SandboxListJson(const json& ls) {
  const json* items = &ls;
  if (ls.is_object() && ls.contains("vms")) items = &ls["vms"];
  if (!items->is_array()) return Internal("ls --sandbox gave no list");
  json out = json::array();
  for (const json& vm : *items) {
    // ls --sandbox lists sandboxes only; anything else is not this API's to show.
    if (vm.is_object() && vm.value("kind", "") != "sandbox") continue;
    Result<json> s = SandboxJson(vm);
    if (!s.ok()) return s.status();
    out.push_back(std::move(s).value());
  }
  return json{{"sandboxes", std::move(out)}};
}

json SandboxExecJson(const json& ssh) {
  json out = {{"stdout", ssh.value("stdout", "")},
              {"stderr", ssh.value("stderr", "")},
              {"exit_code", ssh.contains("exit_code") ? ssh["exit_code"] : json(nullptr)},
              {"duration_ms", ssh.value("duration_ms", int64_t{0})},
              {"truncated", ssh.value("truncated", false)}};
  for (const char* extra : {"timed_out", "stdout_base64", "stderr_base64", "signal"}) {
    if (auto it = ssh.find(extra); it != ssh.end() && !it->is_null()) out[extra] = *it;
  }
  return out;
}

Result<json> SandboxExtendJson(const json& extend) {
  Result<std::string> name = NameOf(extend);
  if (!name.ok()) return name.status();
  Result<json> expires = Expiry(extend);
  if (!expires.ok()) return expires.status();
  json out = {{"id", *name}, {"expires_at", *expires}};
  if (extend.value("capped", false)) out["capped"] = true;
  return out;
}

Result<json> SandboxDestroyJson(const json& rm, std::string_view id) {
  if (rm.is_object()) {
    for (const json& d : rm.value("deleted", json::array())) {
      if (d.is_string() && d.get<std::string>() == id) {
        return json{{"id", std::string(id)}, {"status", "destroyed"}};
      }
    }
    for (const json& f : rm.value("failed", json::array())) {
      if (f.is_object() && f.value("name", "") == id) {
        return Internal(std::string(id) + " was not destroyed: " + f.value("error", "unknown"));
      }
    }
  }
  return Internal("rm did not report " + std::string(id));
}

namespace {

const json kTime = {{"anyOf", {{{"type", "string"}, {"format", "date-time"}}, {{"type", "null"}}}},
                    {"description", "RFC 3339, UTC"}};

}  // namespace

const json& SandboxSchema() {
  static const json schema = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}, {"description", "the sandbox's id, also its VM name"}}},
        {"status",
         {{"type", "string"},
          {"description", "running, creating, paused, stopped, crashed, missing or unknown"}}},
        {"size", {{"anyOf", {{{"type", "string"}}, {{"type", "null"}}}}}},
        {"expires_at", kTime}}},
      {"required", {"id", "status", "size", "expires_at"}}};
  return schema;
}

const json& SandboxExecSchema() {
  static const json schema = {
      {"type", "object"},
      {"properties",
       {{"stdout", {{"type", "string"}}},
        {"stderr", {{"type", "string"}}},
        {"exit_code",
         {{"anyOf", {{{"type", "integer"}}, {{"type", "null"}}}},
          {"description",
           "the command's exit status (124 when timed out); null when it has none"}}},
        {"duration_ms", {{"type", "integer"}}},
        {"truncated",
         {{"type", "boolean"},
          {"description", "output over the limit was cut to its start and end"}}},
        {"timed_out",
         {{"type", "boolean"},
          {"description", "the command ran past timeout_ms and its processes were killed"}}},
        {"stdout_base64",
         {{"type", "string"},
          {"description", "stdout in base64 when it is not UTF-8 text (stdout is then empty)"}}},
        {"stderr_base64",
         {{"type", "string"},
          {"description", "stderr in base64 when it is not UTF-8 text (stderr is then empty)"}}},
        {"signal",
         {{"type", "integer"}, {"description", "the signal that ended it, if one did"}}}}},
      {"required", {"stdout", "stderr", "exit_code", "duration_ms", "truncated"}}};
  return schema;
}

const json& SandboxExtendSchema() {
  static const json schema = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"expires_at", kTime},
        {"capped",
         {{"type", "boolean"},
          {"description", "true when the extension was cut to 24 hours from now"}}}}},
      {"required", {"id", "expires_at"}}};
  return schema;
}

const json& SandboxDestroySchema() {
  static const json schema = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}}, {"status", {{"type", "string"}, {"enum", {"destroyed"}}}}}},
      {"required", {"id", "status"}}};
  return schema;
}

}  // namespace warren
