// Owning handles for the libssh client objects the control connection uses
// (lobby/base/unique_handle.h), so no path frees by hand. Channels are not here: a channel
// is freed by its control session at a point it chooses (after both sides closed it, or all
// at once when the session goes).
// Thread-compatible, like the objects they own: a libssh session and everything hanging off
// it belong to one thread at a time (the control session's owner thread).
#pragma once

#include <libssh/libssh.h>

#include "lobby/base/unique_handle.h"

namespace warren::guest {

// Hash buffers from ssh_get_publickey_hash: their free function takes the pointer's address.
inline void FreeSshHash(unsigned char* p) { ssh_clean_pubkey_hash(&p); }

using SshSessionPtr = UniqueHandle<ssh_session, ssh_free>;
using SshEventPtr = UniqueHandle<ssh_event, ssh_event_free>;
using SshKeyPtr = UniqueHandle<ssh_key, ssh_key_free>;
// Strings libssh allocates (ssh_pki_export_*_base64, ssh_get_fingerprint_hash).
using SshCharPtr = UniqueHandle<char*, ssh_string_free_char>;
using SshHashPtr = UniqueHandle<unsigned char*, FreeSshHash>;

}  // namespace warren::guest
