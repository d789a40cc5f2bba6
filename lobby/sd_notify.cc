// sd_notify(3) without libsystemd (lobby/sd_notify.h).
#include "lobby/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace warren {

SdNotifier SdNotifier::FromEnvironment() {
  SdNotifier n;
  if (const char* s = std::getenv("NOTIFY_SOCKET"); s != nullptr) n.socket_ = s;
  ::unsetenv("NOTIFY_SOCKET");
  return n;
}

Status SdNotifier::Notify(std::string_view state) const {
  if (socket_.empty()) return Status::Ok();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((socket_[0] != '/' && socket_[0] != '@') || socket_.size() >= sizeof addr.sun_path) {
    return InvalidArgument("NOTIFY_SOCKET " + socket_ + ": not a unix socket path");
  }
  std::memcpy(addr.sun_path, socket_.data(), socket_.size());
  if (socket_[0] == '@') addr.sun_path[0] = '\0';  // abstract: no trailing NUL counted
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size() +
                                               (socket_[0] == '@' ? 0 : 1));
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("sd_notify: socket: ") + std::strerror(errno));
  ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                          reinterpret_cast<const sockaddr*>(&addr), len);
  const int err = errno;
  ::close(fd);
  if (sent < 0) {
    return Unavailable("sd_notify to " + socket_ + ": " + std::strerror(err));
  }
  return Status::Ok();
}

std::string MonotonicUsecField() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long usec = static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  return "MONOTONIC_USEC=" + std::to_string(usec);
}

}  // namespace warren
