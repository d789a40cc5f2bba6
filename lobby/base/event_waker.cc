#include "lobby/base/event_waker.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace warren {

EventWaker::EventWaker() { fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

EventWaker::~EventWaker() { Close(); }

void EventWaker::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  uint64_t one = 1;
  // EAGAIN means the counter is saturated: the owner is certainly going to wake.
  ssize_t ignored = ::write(fd_, &one, sizeof one);
  (void)ignored;
}

void EventWaker::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return;
  uint64_t value;
  ssize_t ignored = ::read(fd_, &value, sizeof value);
  (void)ignored;
}

void EventWaker::WaitFor(int timeout_ms) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fd = fd_;
  }
  if (fd < 0) return;
  // Only the owner closes the fd, and only after its loop ended, so polling it unlocked is
  // safe.
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, timeout_ms) < 0 && errno == EINTR) {
  }
  Drain();
}

void EventWaker::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace warren
