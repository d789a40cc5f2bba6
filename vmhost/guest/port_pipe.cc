#include "vmhost/guest/port_pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace warren::guest {

PortPipe::PortPipe(UniqueFd socket, std::function<void()> notify)
    : fd_(std::move(socket)), notify_(std::move(notify)) {
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    failure_ = Unavailable(std::string("the port's socket: ") + strerror(errno));
  } else if (!waker_.ok()) {
    failure_ = Unavailable("no eventfd for the port's thread");
  } else {
    thread_ = std::thread([this] { Run(); });
  }
}

PortPipe::~PortPipe() { Close(); }

Status PortPipe::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

size_t PortPipe::Write(std::string_view bytes) {
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok() || stop_) return 0;
    n = std::min(bytes.size(), kBufferBytes - to_guest_.size());
    to_guest_.append(bytes.substr(0, n));
  }
  if (n > 0) waker_.Wake();
  return n;
}

bool PortPipe::PeekOutput(bool is_stderr, size_t max, std::string* bytes) {
  if (is_stderr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (from_guest_.empty()) return false;
  bytes->assign(from_guest_, 0, max);
  return true;
}

void PortPipe::ConsumeOutput(bool is_stderr, size_t n) {
  if (is_stderr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    from_guest_.erase(0, std::min(n, from_guest_.size()));
  }
  waker_.Wake();  // room to read again
}

GuestPipe::End PortPipe::end() {
  std::lock_guard<std::mutex> lock(mu_);
  End e;
  e.output_eof = e.closed = eof_ && from_guest_.empty();
  return e;
}

void PortPipe::Close() {
  {
    std::lock_guard<std::mutex> lock(notify_mu_);
    notify_ = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  waker_.Wake();
  std::lock_guard<std::mutex> lock(close_mu_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  fd_.reset();
}

void PortPipe::Notify() {
  std::lock_guard<std::mutex> lock(notify_mu_);
  if (notify_) notify_();
}

void PortPipe::Run() {
  char buf[16 * 1024];
  for (;;) {
    short events = 0;
    size_t room = 0;  // what the buffer of the guest's bytes can still take
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      room = std::min(sizeof buf, kBufferBytes - std::min(kBufferBytes, from_guest_.size()));
      if (failure_.ok() && !eof_ && room > 0) events |= POLLIN;
      if (failure_.ok() && !to_guest_.empty()) events |= POLLOUT;
    }
    // Nothing to wait for on the socket (ended, or its buffer full): only the waker, so a
    // hang-up is not reported again and again.
    pollfd p[2] = {{events != 0 ? fd_.get() : -1, events, 0}, {waker_.fd(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::lock_guard<std::mutex> lock(mu_);
      failure_ = Unavailable(std::string("polling the port: ") + strerror(errno));
    }
    if (p[1].revents != 0) waker_.Drain();
    bool changed = false;
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (events & POLLIN) != 0) {
      const ssize_t n = ::read(fd_.get(), buf, room);
      const int err = errno;
      std::lock_guard<std::mutex> lock(mu_);
      if (n > 0) {
        from_guest_.append(buf, static_cast<size_t>(n));
        changed = true;
      } else if (n == 0) {
        eof_ = true;
        changed = true;
      } else if (err != EAGAIN && err != EINTR) {
        failure_ = Unavailable(std::string("reading the port: ") + strerror(err));
        changed = true;
      }
    }
    if ((p[0].revents & POLLOUT) != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      const ssize_t n = ::send(fd_.get(), to_guest_.data(), to_guest_.size(), MSG_NOSIGNAL);
      if (n > 0) {
        to_guest_.erase(0, static_cast<size_t>(n));
        changed = true;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        failure_ = Unavailable(std::string("writing to the port: ") + strerror(errno));
        changed = true;
      }
    }
    if (changed) Notify();
  }
}

}  // namespace warren::guest
