#include "lobby/base/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warren {
namespace {

Status Failed(std::string_view what, const std::string& path) {
  return Internal(std::string(what) + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Failed("creating", tmp);
  auto give_up = [&](std::string_view what, const std::string& p) {
    Status st = Failed(what, p);
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  };
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return give_up("writing", tmp);
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) return give_up("syncing", tmp);
  ::close(fd);
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return give_up("renaming into", path);
  return Status::Ok();
}

}  // namespace warren
