// Owning handles for libssh's C objects (lobby/base/unique_handle.h), so no code path frees
// by hand. Channels are the exception (see ssh_connection.cc): libssh frees a channel only
// once both sides have closed it, so they are released through ssh_channel_free at a point
// the connection chooses.
// Thread-compatible, like the objects they own: a libssh session and everything hanging
// off it belong to one thread at a time.
#pragma once

#include <libssh/libssh.h>
#include <libssh/server.h>

#include "lobby/base/unique_handle.h"

namespace warren::ssh {

using BindPtr = UniqueHandle<ssh_bind, ssh_bind_free>;
using SessionPtr = UniqueHandle<ssh_session, ssh_free>;
using EventPtr = UniqueHandle<ssh_event, ssh_event_free>;
using KeyPtr = UniqueHandle<ssh_key, ssh_key_free>;
using StringPtr = UniqueHandle<ssh_string, ssh_string_free>;
// Strings libssh allocates with malloc (ssh_pki_export_*_base64, ssh_get_fingerprint_hash).
using CharPtr = UniqueHandle<char*, ssh_string_free_char>;

}  // namespace warren::ssh
