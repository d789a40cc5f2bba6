// Reading an SSH public key that a person or agent hands to a command (`ssh-key add`,
// `user add`), and naming it. Keys arrive as an argument — split into words by the SSH
// client, so the words are joined again — or on stdin. The input is untrusted and bounded.
// Functions are thread-safe apart from reading the session's stdin, which only the thread
// running the command does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "keys/public_key.h"
#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/session.h"

namespace warren {

// Most stdin read for a key: one key line, with room for comments around it.
inline constexpr size_t kMaxKeyInputBytes = 16 * 1024;

// The key from `text` when it is not empty, else from `in`. Exactly one key line is
// accepted (blank lines and # comments around it are ignored). A private key is refused
// without being echoed.
Result<PublicKey> ReadPublicKey(std::string_view text, InputStream& in);

// Key names: ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$.
Status ValidateKeyName(std::string_view name);

// The name a new key gets when none is given: its comment when that is a valid name not yet
// used by `existing`, else the first free "key-N".
std::string DefaultKeyName(std::string_view comment, const std::vector<SshKey>& existing);

// The key among `keys` whose name or fingerprint is `name_or_fp`; NotFound otherwise.
Result<SshKey> FindKey(const std::vector<SshKey>& keys, std::string_view name_or_fp);

}  // namespace warren
