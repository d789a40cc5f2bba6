// ByteStream: one side of a proxied connection as a proxy's worker sees it (the integrations
// proxy, the web proxy) — blocking reads and writes with a deadline, and a Cancel that any
// other thread may call to make every current and later call fail at once (a revoked
// integration cuts a running download). Implementations: a socket (FdStream: TCP both ways,
// socketpairs in tests), a VM's channel (GuestPipeStream over a GuestPipe), TLS over another
// stream (tls_stream.h).
//
// Threads: Read and Write from the one worker thread (or, for Splice, Read on one thread and
// Write on another); Cancel from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "vmhost/guest_control.h"

namespace warren::relay {

class ByteStream {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~ByteStream() = default;
  // Up to `len` bytes: > 0, or 0 at the peer's EOF; Timeout at the deadline, Cancelled
  // after Cancel, Unavailable when the connection broke.
  virtual Result<size_t> Read(char* buf, size_t len, Clock::time_point deadline) = 0;
  // All of `bytes`, or the error (as Read).
  virtual Status Write(std::string_view bytes, Clock::time_point deadline) = 0;
  // Returns once a Read would not wait (bytes, EOF or an error are there), without taking
  // anything; Timeout at the deadline, Cancelled after Cancel. TLS uses it to wait outside
  // its lock, so one thread may read while another writes (Splice).
  virtual Status WaitReadable(Clock::time_point deadline) = 0;
  // No more bytes from us (the peer sees EOF once written ones are out).
  virtual void CloseWrite() = 0;
  virtual void Cancel() = 0;
};

// A connected socket (the stream owns and closes it). Waits in slices of 100 ms so Cancel
// takes effect at once even where shutdown(2) would not wake a poll.
class FdStream final : public ByteStream {
 public:
  explicit FdStream(int fd);
  ~FdStream() override;
  Result<size_t> Read(char* buf, size_t len, Clock::time_point deadline) override;
  Status Write(std::string_view bytes, Clock::time_point deadline) override;
  Status WaitReadable(Clock::time_point deadline) override;
  void CloseWrite() override;
  void Cancel() override;
  int fd() const { return fd_; }

 private:
  Status WaitFor(short events, Clock::time_point deadline);
  const int fd_;
  std::atomic<bool> cancelled_{false};
};

// Connects to host:port (each address getaddrinfo gives, in turn) with a non-blocking
// connect bounded by `deadline`; `cancelled` is looked at every 100 ms.
Result<std::unique_ptr<FdStream>> ConnectTcp(const std::string& host, uint16_t port,
                                             ByteStream::Clock::time_point deadline,
                                             const std::atomic<bool>& cancelled);

// A VM's channel (forwarded to the host, or opened into the guest). Notify() is the callback
// the control session calls on every change (GuestInboundSink::Accept returns it, or it is
// the one given to OpenChannel); the worker's waits wake on it.
class GuestPipeStream final : public ByteStream {
 public:
  explicit GuestPipeStream(std::shared_ptr<GuestPipe> pipe);
  ~GuestPipeStream() override;  // closes the channel
  Result<size_t> Read(char* buf, size_t len, Clock::time_point deadline) override;
  Status Write(std::string_view bytes, Clock::time_point deadline) override;
  Status WaitReadable(Clock::time_point deadline) override;
  void CloseWrite() override;
  void Cancel() override;
  void Notify();

 private:
  // Waits until Notify or Cancel came after `seen`, or the deadline (false then).
  bool WaitChange(uint64_t seen, Clock::time_point deadline);
  uint64_t seq();

  const std::shared_ptr<GuestPipe> pipe_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t seq_ = 0;
  bool cancelled_ = false;
};

}  // namespace warren::relay
