#include "lobby/relay/byte_stream.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace warren::relay {

namespace {

constexpr auto kSlice = std::chrono::milliseconds(100);

int SliceMs(ByteStream::Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - ByteStream::Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, kSlice.count()));
}

}  // namespace

FdStream::FdStream(int fd) : fd_(fd) {
  int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

FdStream::~FdStream() { ::close(fd_); }

Status FdStream::WaitFor(short events, Clock::time_point deadline) {
  for (;;) {
    if (cancelled_.load()) return Cancelled("the connection was revoked");
    if (Clock::now() >= deadline) return Timeout("the peer was idle too long");
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, SliceMs(deadline));
    if (rc < 0 && errno != EINTR) return Unavailable(std::string("poll: ") + std::strerror(errno));
    if (rc > 0) return Status::Ok();
  }
}

Result<size_t> FdStream::Read(char* buf, size_t len, Clock::time_point deadline) {
  for (;;) {
    if (cancelled_.load()) return Cancelled("the connection was revoked");
    ssize_t n = ::recv(fd_, buf, len, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(std::string("read: ") + std::strerror(errno));
    }
    WARREN_RETURN_IF_ERROR(WaitFor(POLLIN, deadline));
  }
}

Status FdStream::Write(std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (cancelled_.load()) return Cancelled("the connection was revoked");
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(std::string("write: ") + std::strerror(errno));
    }
    WARREN_RETURN_IF_ERROR(WaitFor(POLLOUT, deadline));
  }
  return Status::Ok();
}

Status FdStream::WaitReadable(Clock::time_point deadline) { return WaitFor(POLLIN, deadline); }

void FdStream::CloseWrite() { ::shutdown(fd_, SHUT_WR); }

void FdStream::Cancel() {
  cancelled_.store(true);
  ::shutdown(fd_, SHUT_RDWR);
}

Result<std::unique_ptr<FdStream>> ConnectTcp(const std::string& host, uint16_t port,
                                             ByteStream::Clock::time_point deadline,
                                             const std::atomic<bool>& cancelled) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &raw);
  if (rc != 0) return Unavailable("cannot resolve " + host + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(raw, &::freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    auto stream = std::make_unique<FdStream>(fd);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return stream;
    if (errno != EINPROGRESS) {
      last = std::strerror(errno);
      continue;
    }
    for (;;) {
      if (cancelled.load()) return Cancelled("the connection was revoked");
      if (ByteStream::Clock::now() >= deadline)
        return Timeout("connecting to " + host + " timed out");
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, SliceMs(deadline)) > 0) break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) return stream;
    last = std::strerror(err);
  }
  return Unavailable("cannot connect to " + host + ":" + service + ": " + last);
}

GuestPipeStream::GuestPipeStream(std::shared_ptr<GuestPipe> pipe) : pipe_(std::move(pipe)) {}

GuestPipeStream::~GuestPipeStream() { pipe_->Close(); }

void GuestPipeStream::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++seq_;
  }
  cv_.notify_all();
}

uint64_t GuestPipeStream::seq() {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

bool GuestPipeStream::WaitChange(uint64_t seen, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return seq_ != seen || cancelled_; });
}

void GuestPipeStream::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
  pipe_->Close();
}

Result<size_t> GuestPipeStream::Read(char* buf, size_t len, Clock::time_point deadline) {
  std::string bytes;
  for (;;) {
    uint64_t seen = seq();  // before looking, so no change is missed
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return Cancelled("the connection was revoked");
    }
    if (pipe_->PeekOutput(false, len, &bytes)) {
      std::memcpy(buf, bytes.data(), bytes.size());
      pipe_->ConsumeOutput(false, bytes.size());
      return bytes.size();
    }
    GuestPipe::End end = pipe_->end();
    if (end.output_eof || end.closed) return size_t{0};
    Status st = pipe_->status();
    if (!st.ok()) return st;
    if (!WaitChange(seen, deadline)) return Timeout("the VM was idle too long");
  }
}

Status GuestPipeStream::Write(std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    uint64_t seen = seq();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return Cancelled("the connection was revoked");
    }
    Status st = pipe_->status();
    if (!st.ok()) return st;
    if (pipe_->end().closed) return Unavailable("the VM closed the connection");
    size_t n = pipe_->Write(bytes);
    bytes.remove_prefix(n);
    if (bytes.empty()) break;
    if (n == 0 && !WaitChange(seen, deadline)) return Timeout("the VM did not read in time");
  }
  return Status::Ok();
}

Status GuestPipeStream::WaitReadable(Clock::time_point deadline) {
  std::string bytes;
  for (;;) {
    uint64_t seen = seq();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return Cancelled("the connection was revoked");
    }
    GuestPipe::End end = pipe_->end();
    if (pipe_->PeekOutput(false, 1, &bytes) || end.output_eof || end.closed ||
        !pipe_->status().ok()) {
      return Status::Ok();
    }
    if (!WaitChange(seen, deadline)) return Timeout("the VM was idle too long");
  }
}

void GuestPipeStream::CloseWrite() { pipe_->CloseInput(); }

}  // namespace warren::relay
