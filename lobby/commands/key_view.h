// How SSH keys and credential limits are shown by `whoami`, `ssh-key list` and friends: one
// JSON shape and one table layout, so every command describes a key the same way. Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/scope.h"
#include "keys/store.h"

namespace warren {

// {"name","fingerprint","algorithm","comment","added_at","last_used_at",
//  "restrictions":{"cmds","tag","expires_at"},"in_use"}. Never the key blob: a listing need
// not carry it, and an agent should not copy keys around.
nlohmann::json KeyJson(const SshKey& key, std::string_view in_use_fingerprint);

// "none", or e.g. "cmds: ls, whoami; tag: ci; expires 2025-01-01 00:00 UTC".
std::string DescribeScope(const Scope& scope);

// The key table: a "*" marks the key in use, with a note under the table when one does.
std::string KeyTableText(const std::vector<SshKey>& keys, std::string_view in_use_fingerprint);

// {"label","id","created_at","last_used_at","tokens":[{"restrictions","issued_at"}],
//  "in_use"}. Never a token: they are shown once, when minted.
nlohmann::json TokenLabelJson(const TokenLabel& label, std::string_view in_use_label_id);

// The API token label table: NAME, ID, CREATED, LAST USED, TOKENS, LIMITS (the newest
// token's); "*" marks the label of the token in use.
std::string TokenLabelTableText(const std::vector<TokenLabel>& labels,
                                std::string_view in_use_label_id);

}  // namespace warren
