// CommandResult: what one command produced — JSON data for --json and text for people. A
// handler returns it (handlers never print), the interpreter renders it and keeps it on the
// CommandSession for surfaces that render it their own way (MCP). A value type.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace warren {

// Bytes a command relays from elsewhere as they came: what a command in a VM printed (`ssh
// VM CMD`, `wait`), bounded (HeadTailBuffer). They need not be text: `data` carries them
// under the one encoding rule (output_encoding.h: "stdout", or "stdout_base64" when they
// are not UTF-8), `text` is the bytes themselves, and a surface with richer shapes (MCP's
// image content) reads them here.
struct RelayedOutput {
  std::string out;
  std::string err;
  bool truncated = false;  // a stream was cut to its start and end
};

struct CommandResult {
  nlohmann::json data = nlohmann::json::object();
  std::string text;
  // For a command that runs something else which exited non-zero (`ssh VM CMD`): the
  // session then ends with kCommandFailed and this exit status, and the output above is
  // still shown. Unset or 0 means success.
  std::optional<int> exit_status;
  // Set by commands that relay another program's output (`ssh VM CMD`, `wait`).
  std::optional<RelayedOutput> relayed;
};

}  // namespace warren
