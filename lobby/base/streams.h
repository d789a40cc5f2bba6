// Byte streams and cancellation shared by every layer: a command's stdin and output
// sinks, and the cancel signal a surface sets when its client goes away. Interfaces here are
// implemented by surfaces (SSH channels, HTTP requests) and consumed by commands and by the
// guest control connection. Thread-safety is per class, below.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

// Bytes flowing into a command (or a guest process). Read blocks until some bytes, EOF (returns 0)
// or cancellation (returns Cancelled).
class InputStream {
 public:
  virtual ~InputStream() = default;
  virtual Result<size_t> Read(char* buf, size_t len) = 0;
  // Like Read, but returns Timeout when no byte came within `timeout_ms`, so a reader can
  // stop once it no longer needs the input (a command that ended while an interactive
  // client keeps its stdin open). The default blocks like Read: right for streams that
  // always reach EOF soon (strings, request bodies).
  virtual Result<size_t> ReadFor(char* buf, size_t len, int timeout_ms) {
    (void)timeout_ms;
    return Read(buf, len);
  }
};

// Bytes flowing out of a command (or a guest process). Write may block for flow control.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void Write(std::string_view bytes) = 0;
};

// Set once by a surface when the client goes away or cancels; commands poll it or wait on it.
class CancelSignal {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }
  // Waits up to `timeout_ms`; returns true if cancelled.
  bool WaitFor(int timeout_ms);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

// An InputStream with no bytes (immediate EOF).
class EmptyInput final : public InputStream {
 public:
  Result<size_t> Read(char*, size_t) override { return size_t{0}; }
};

// An InputStream over a fixed string (the bridge's `stdin` field; tests).
class StringInput final : public InputStream {
 public:
  explicit StringInput(std::string data) : data_(std::move(data)) {}
  Result<size_t> Read(char* buf, size_t len) override;

 private:
  std::string data_;
  size_t pos_ = 0;
};

// An OutputSink that collects into a string (the bridge; tests). Thread-safe.
class StringSink final : public OutputSink {
 public:
  void Write(std::string_view bytes) override;
  std::string str() const;

 private:
  mutable std::mutex mu_;
  std::string data_;
};

// An OutputSink that drops everything (a command run for its exit status alone).
class DiscardSink final : public OutputSink {
 public:
  void Write(std::string_view) override {}
};

// Reads all of `in` up to `limit` bytes; TooLarge beyond it.
Result<std::string> ReadAll(InputStream& in, size_t limit);

}  // namespace warren
