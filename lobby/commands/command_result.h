// CommandResult: what one command produced — JSON data for --json and text for people. A
// handler returns it (handlers never print), the interpreter renders it and keeps it on the
// CommandSession for surfaces that render it their own way (MCP). A value type.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace warren {

struct CommandResult {
  nlohmann::json data = nlohmann::json::object();
  std::string text;
  // For a command that runs something else which exited non-zero (`ssh VM CMD`): the
  // session then ends with kCommandFailed and this exit status, and the output above is
  // still shown. Unset or 0 means success.
  std::optional<int> exit_status;
};

}  // namespace warren
