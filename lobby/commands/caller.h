// Caller: who runs a command and within which limits. Built by a surface after it has
// authenticated the peer (the SSH lobby from a public key; the bridge from a token).
// A value type; thread-compatible.
#pragma once

#include <string>

#include "keys/scope.h"

namespace warren {

struct Caller {
  std::string user;  // account name
  bool admin = false;
  // The credential in use, safe to log: "key:SHA256:…" or "token:<label id>".
  std::string credential;
  // The SSH key in use, when the credential is a key (for whoami, and so a caller cannot
  // remove the key it is using). Empty otherwise.
  std::string key_fingerprint;
  // The label of the API token in use, when the credential is a token (TokenLabel::id):
  // re-checked on every command so `ssh-key remove LABEL` takes effect at once. Empty
  // otherwise.
  std::string token_label_id;
  Scope scope;          // the credential's limits
  std::string surface;  // "ssh", "repl", "exec", "mcp": for the audit line
};

}  // namespace warren
