// Small secret files in the data directory — the API token signing key, the integration
// key — read, or made on first use: N random bytes as lowercase hex on one line, mode 0600,
// written atomically. One home for the rules both follow (owner-only, never a symlink, never
// logged). Stateless functions; thread-compatible per path.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

// What a secret file is, for its messages.
struct SecretFileKind {
  // "token signing key", as in "PATH is not a token signing key of warren's".
  std::string_view what;
  // What else to do when others could read it, as in "chmod 600 it (and consider
  // removing it, which revokes every API token)".
  std::string_view if_others_read;
};

// The `bytes` random bytes in `path`, made (random, mode 0600, written atomically) when the
// file does not exist. Refuses a file that others may read (Unavailable, saying chmod 600)
// or that is not exactly such a secret (Internal); messages name the path, never the content.
Result<std::string> LoadOrCreateSecretFile(const std::string& path, size_t bytes,
                                           const SecretFileKind& kind);

// `n` bytes from OpenSSL's generator; Internal when it fails.
Result<std::string> RandomBytes(size_t n);

}  // namespace warren
