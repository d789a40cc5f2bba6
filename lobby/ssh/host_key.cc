#include "lobby/ssh/host_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "keys/public_key.h"
#include "lobby/base/file_write.h"

namespace warren::ssh {
namespace {

constexpr char kKeyFile[] = "ssh_host_ed25519_key";

std::string Errno(std::string_view what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

Result<HostKey> Describe(KeyPtr key) {
  char* b64_raw = nullptr;
  if (ssh_pki_export_pubkey_base64(key.get(), &b64_raw) != SSH_OK || b64_raw == nullptr) {
    return Internal("cannot export the host public key");
  }
  CharPtr b64(b64_raw);
  HostKey hk;
  hk.public_line = std::string(ssh_key_type_to_char(ssh_key_type(key.get()))) + " " + b64.get();
  WARREN_ASSIGN_OR_RETURN(hk.fingerprint, FingerprintOfBase64Blob(b64.get()));
  hk.key = std::move(key);
  return hk;
}

Result<HostKey> Load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Internal(Errno("stat", path));
  if ((st.st_mode & 077) != 0) {
    return PermissionDenied("host key " + path + " is readable by other users; run: chmod 600 " +
                            path);
  }
  ssh_key raw = nullptr;
  if (ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, &raw) != SSH_OK ||
      raw == nullptr) {
    return Internal("cannot read the host key " + path);
  }
  KeyPtr key(raw);
  if (ssh_key_type(key.get()) != SSH_KEYTYPE_ED25519) {
    return InvalidArgument("host key " + path + " is not an ed25519 key");
  }
  return Describe(std::move(key));
}

Result<HostKey> Create(const std::string& path) {
  ssh_key raw = nullptr;
  if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &raw) != SSH_OK || raw == nullptr) {
    return Internal("cannot generate an ed25519 host key");
  }
  KeyPtr key(raw);
  char* pem_raw = nullptr;
  if (ssh_pki_export_privkey_base64(key.get(), nullptr, nullptr, nullptr, &pem_raw) != SSH_OK ||
      pem_raw == nullptr) {
    return Internal("cannot encode the new host key");
  }
  CharPtr pem(pem_raw);
  std::string text = pem.get();
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  WARREN_ASSIGN_OR_RETURN(HostKey hk, Describe(std::move(key)));
  // Public half first: a crash between the two writes leaves no private key, so the next
  // start simply creates a fresh pair.
  WARREN_RETURN_IF_ERROR(WriteFileAtomic(path + ".pub", hk.public_line + "\n", 0644));
  WARREN_RETURN_IF_ERROR(WriteFileAtomic(path, text, 0600));
  return hk;
}

}  // namespace

Result<HostKey> LoadOrCreateHostKey(const std::string& data_dir) {
  std::string path = data_dir + "/" + kKeyFile;
  if (::access(path.c_str(), F_OK) == 0) {
    WARREN_ASSIGN_OR_RETURN(HostKey hk, Load(path));
    // The .pub is a convenience for operators and tests; rewrite it if it went missing.
    if (::access((path + ".pub").c_str(), F_OK) != 0) {
      WARREN_RETURN_IF_ERROR(WriteFileAtomic(path + ".pub", hk.public_line + "\n", 0644));
    }
    return hk;
  }
  if (errno != ENOENT) return Internal(Errno("checking", path));
  return Create(path);
}

}  // namespace warren::ssh
