#include "keys/secret_file.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lobby/base/file_write.h"
#include "lobby/base/hex.h"

namespace warren {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Status NotOurs(const std::string& path, const SecretFileKind& kind) {
  return Internal(path + " is not a " + std::string(kind.what) + " of warren's");
}

// Reads the whole file, refusing anything but a small regular file only its owner can
// read. O_NOFOLLOW: a symlink planted in the data directory is not followed.
Result<std::string> ReadSecretFile(const std::string& path, size_t max_bytes,
                                   const SecretFileKind& kind) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return Unavailable("opening " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = Unavailable("reading " + path + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(max_bytes)) {
    ::close(fd);
    return NotOurs(path, kind);
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return Unavailable(path + " may be read by other users; chmod 600 it (and consider " +
                       std::string(kind.if_others_read) + ")");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::read(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(off);
  return data;
}

}  // namespace

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Internal("the system random number generator failed");
  }
  return out;
}

Result<std::string> LoadOrCreateSecretFile(const std::string& path, size_t bytes,
                                           const SecretFileKind& kind) {
  // The file: the secret as hex on one line.
  Result<std::string> text = ReadSecretFile(path, 2 * bytes + 1, kind);
  if (!text.ok() && text.status().code() == Code::kNotFound) {
    WARREN_ASSIGN_OR_RETURN(std::string secret, RandomBytes(bytes));
    WARREN_RETURN_IF_ERROR(WriteFileAtomic(path, HexEncode(secret) + "\n", 0600));
    return secret;
  }
  if (!text.ok()) return text.status();
  std::string_view hex = *text;
  if (!hex.empty() && hex.back() == '\n') hex.remove_suffix(1);
  if (hex.size() != 2 * bytes) return NotOurs(path, kind);
  std::string secret;
  secret.reserve(bytes);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexValue(hex[i]);
    int lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return NotOurs(path, kind);
    secret.push_back(static_cast<char>(hi * 16 + lo));
  }
  return secret;
}

}  // namespace warren
