#include "vmhost/guest/control_key.h"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "lobby/base/file_write.h"
#include "vmhost/guest/libssh_handles.h"

namespace warren::guest {
namespace {

constexpr char kComment[] = "warren-control";

std::string Errno(std::string_view what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

Result<std::string> PublicLine(ssh_key key) {
  char* raw = nullptr;
  if (ssh_pki_export_pubkey_base64(key, &raw) != SSH_OK || raw == nullptr) {
    return Internal("cannot export the control public key");
  }
  SshCharPtr b64(raw);
  return std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + b64.get() + " " + kComment;
}

}  // namespace

Result<std::string> EnsureControlKey(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if ((st.st_mode & 077) != 0) {
      return PermissionDenied("control key " + path +
                              " is readable by other users; run: chmod 600 " + path);
    }
    ssh_key raw = nullptr;
    if (ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, &raw) != SSH_OK ||
        raw == nullptr) {
      return Internal("cannot read the control key " + path);
    }
    SshKeyPtr key(raw);
    if (ssh_key_type(key.get()) != SSH_KEYTYPE_ED25519) {
      return InvalidArgument("control key " + path + " is not an ed25519 key");
    }
    WARREN_ASSIGN_OR_RETURN(std::string line, PublicLine(key.get()));
    if (::access((path + ".pub").c_str(), F_OK) != 0) {
      WARREN_RETURN_IF_ERROR(WriteFileAtomic(path + ".pub", line + "\n", 0644));
    }
    return line;
  }
  if (errno != ENOENT) return Internal(Errno("checking", path));

  ssh_key raw = nullptr;
  if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &raw) != SSH_OK || raw == nullptr) {
    return Internal("cannot generate an ed25519 control key");
  }
  SshKeyPtr key(raw);
  char* pem_raw = nullptr;
  if (ssh_pki_export_privkey_base64(key.get(), nullptr, nullptr, nullptr, &pem_raw) != SSH_OK ||
      pem_raw == nullptr) {
    return Internal("cannot encode the new control key");
  }
  SshCharPtr pem(pem_raw);
  std::string text = pem.get();
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  WARREN_ASSIGN_OR_RETURN(std::string line, PublicLine(key.get()));
  // Public half first: a crash between the two writes leaves no private key, so the next
  // start simply makes a fresh pair.
  WARREN_RETURN_IF_ERROR(WriteFileAtomic(path + ".pub", line + "\n", 0644));
  WARREN_RETURN_IF_ERROR(WriteFileAtomic(path, text, 0600));
  return line;
}

}  // namespace warren::guest
