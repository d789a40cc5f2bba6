// Owning handles for the libssh client objects the control connection uses: a unique_ptr
// with the matching free function for each, so no path frees by hand. Channels are not here:
// a channel is freed by its control session at a point it chooses (after both sides closed
// it, or all at once when the session goes).
// Thread-compatible, like the objects they own: a libssh session and everything hanging off
// it belong to one thread at a time (the control session's owner thread).
#pragma once

#include <libssh/libssh.h>

#include <memory>
#include <type_traits>

namespace warren::guest {

struct SshSessionDeleter {
  void operator()(ssh_session s) const { ssh_free(s); }
};
struct SshEventDeleter {
  void operator()(ssh_event e) const { ssh_event_free(e); }
};
struct SshKeyDeleter {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
// Strings libssh allocates (ssh_pki_export_*_base64, ssh_get_fingerprint_hash).
struct SshCharDeleter {
  void operator()(char* p) const { ssh_string_free_char(p); }
};
// Hash buffers from ssh_get_publickey_hash.
struct SshHashDeleter {
  void operator()(unsigned char* p) const { ssh_clean_pubkey_hash(&p); }
};

using SshSessionPtr = std::unique_ptr<std::remove_pointer_t<ssh_session>, SshSessionDeleter>;
using SshEventPtr = std::unique_ptr<std::remove_pointer_t<ssh_event>, SshEventDeleter>;
using SshKeyPtr = std::unique_ptr<std::remove_pointer_t<ssh_key>, SshKeyDeleter>;
using SshCharPtr = std::unique_ptr<char, SshCharDeleter>;
using SshHashPtr = std::unique_ptr<unsigned char, SshHashDeleter>;

}  // namespace warren::guest
