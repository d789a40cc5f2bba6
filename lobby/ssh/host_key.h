// The server's SSH host key: one ed25519 key in DATA/ssh_host_ed25519_key (mode 0600, with
// its public half in ssh_host_ed25519_key.pub), created on the first start and reused on
// every later one, so clients that pinned it keep trusting the server.
// Called once at startup from one thread.
#pragma once

#include <string>

#include "lobby/base/status.h"
#include "lobby/ssh/libssh_handles.h"

namespace warren::ssh {

struct HostKey {
  KeyPtr key;               // the private key, for ssh_bind
  std::string public_line;  // "ssh-ed25519 AAAA..." as in known_hosts
  std::string fingerprint;  // "SHA256:..." for the startup log line
};

// Loads DATA/ssh_host_ed25519_key, or creates it (and the .pub) when absent. A key file
// that exists but cannot be read, or is readable by others, is an error: the server must
// never silently replace its identity.
Result<HostKey> LoadOrCreateHostKey(const std::string& data_dir);

}  // namespace warren::ssh
