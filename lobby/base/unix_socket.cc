#include "lobby/base/unix_socket.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

namespace warren {

Result<UniqueFd> DialUnixSocket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Unavailable("bad unix socket path \"" + path + "\"");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Internal(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    if (e == EAGAIN) {
      return Unavailable("the control socket " + path + " is busy (another client holds it)");
    }
    return Unavailable("cannot connect to " + path + ": " + std::strerror(e));
  }
  return fd;
}

}  // namespace warren
