// Scope: the limits a credential (an SSH key now, an API token later) carries — the command
// paths it may run, the one tag whose VMs it may see, and its expiry. A value type;
// thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lobby/base/status.h"

namespace warren {

struct Scope {
  // Allowed command paths ("ls", "share show"). Empty means every command. An entry also
  // allows the commands below it: "share" allows "share show".
  std::vector<std::string> cmds;
  // When set, only VMs carrying this tag exist for the caller, VMs it creates get the tag,
  // and it cannot change tags.
  std::string tag;
  // Unix seconds; 0 means never.
  int64_t expires_at = 0;

  bool Unrestricted() const { return cmds.empty() && tag.empty() && expires_at == 0; }
  bool AllowsCommand(std::string_view path) const;
  bool Expired(int64_t now_unix) const { return expires_at != 0 && now_unix >= expires_at; }
  // True when every power of `child` is also a power of *this (child is no wider).
  bool Covers(const Scope& child) const;

  nlohmann::json ToJson() const;
  static Result<Scope> FromJson(const nlohmann::json& j);

  bool operator==(const Scope&) const = default;
};

// "--cmds" value: comma-separated command paths, each normalised to single spaces.
Result<std::vector<std::string>> ParseCommandList(std::string_view text);
// "--exp" value: Nh | Nd | Nw | Ny | never  ->  absolute Unix time (0 for never).
Result<int64_t> ParseExpiry(std::string_view text, int64_t now_unix);
// Tags: ^[a-z][a-z0-9_-]*$, at most 64 bytes.
Status ValidateTag(std::string_view tag);

}  // namespace warren
