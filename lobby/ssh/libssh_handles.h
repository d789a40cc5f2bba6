// Owning handles for libssh's C objects: a unique_ptr with the matching free function for
// each, so no code path frees by hand. Channels are the exception (see ssh_connection.cc):
// libssh frees a channel only once both sides have closed it, so they are released through
// ssh_channel_free at a point the connection chooses.
// Thread-compatible, like the objects they own: a libssh session and everything hanging
// off it belong to one thread at a time.
#pragma once

#include <libssh/libssh.h>
#include <libssh/server.h>

#include <memory>

namespace warren::ssh {

struct BindDeleter {
  void operator()(ssh_bind b) const { ssh_bind_free(b); }
};
struct SessionDeleter {
  void operator()(ssh_session s) const { ssh_free(s); }
};
struct EventDeleter {
  void operator()(ssh_event e) const { ssh_event_free(e); }
};
struct KeyDeleter {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
struct StringDeleter {
  void operator()(ssh_string s) const { ssh_string_free(s); }
};
// Strings libssh allocates with malloc (ssh_pki_export_*_base64, ssh_get_fingerprint_hash).
struct CharDeleter {
  void operator()(char* p) const { ssh_string_free_char(p); }
};

using BindPtr = std::unique_ptr<std::remove_pointer_t<ssh_bind>, BindDeleter>;
using SessionPtr = std::unique_ptr<std::remove_pointer_t<ssh_session>, SessionDeleter>;
using EventPtr = std::unique_ptr<std::remove_pointer_t<ssh_event>, EventDeleter>;
using KeyPtr = std::unique_ptr<std::remove_pointer_t<ssh_key>, KeyDeleter>;
using StringPtr = std::unique_ptr<std::remove_pointer_t<ssh_string>, StringDeleter>;
using CharPtr = std::unique_ptr<char, CharDeleter>;

}  // namespace warren::ssh
