// ChannelIo: the hand-off between one SSH channel, owned by its connection's thread, and
// the worker thread that runs the channel's command (or REPL). libssh sessions are not
// thread-safe, so the worker never touches libssh: it reads stdin from a bounded buffer the
// connection thread fills from the channel, and queues output that the connection thread
// writes to the channel as the client's window allows. Both buffers are bounded, so a
// client that sends too fast stalls in its SSH window and a command that writes too fast
// blocks in Write: flow control end to end.
//
// Thread-safe: the "owner" methods are called by the connection thread, the "worker"
// methods by the worker; Cancel() from either. EventWaker::Wake may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/base/event_waker.h"
#include "lobby/base/status.h"
#include "lobby/commands/session.h"

namespace warren::ssh {

class ChannelIo {
 public:
  static constexpr size_t kStdinCapacity = 256 * 1024;
  static constexpr size_t kOutputCapacity = 256 * 1024;

  // `waker` wakes the connection's event loop (an eventfd in its ssh_event). Workers share
  // it and may outlive the loop by a moment: a Wake after its Close is a no-op.
  explicit ChannelIo(std::shared_ptr<EventWaker> waker);

  std::shared_ptr<CancelSignal> cancel() const { return cancel_; }

  // ---- Owner (connection thread) ----

  // Appends up to `len` bytes of client data to stdin; returns how many it took. When not
  // all fitted, the worker wakes the owner once it has made room. While a command armed
  // for Ctrl-C runs (SetCommand), a 0x03 in `data` cancels that command and is taken with
  // every byte typed before it, as a tty's interrupt flushes its input.
  size_t PushStdin(const char* data, size_t len);
  size_t StdinSpace();
  // No more stdin: the client sent EOF (and everything before it was pushed).
  void SetStdinEof();
  // The client closed the channel or went away: cancels the command, unblocks its reads
  // (Cancelled) and writes (dropped).
  void Cancel();

  // The next piece of output, at most `max` bytes, without removing it. False when the
  // queue is empty.
  bool PeekOutput(size_t max, std::string* bytes, bool* is_stderr);
  // Removes `n` bytes from the front of the queue (after they were written).
  void ConsumeOutput(size_t n);
  // True once the worker has finished and all of its output has been taken.
  bool Drained(int* exit_status);
  bool worker_done();

  // ---- Worker ----

  // Blocks until stdin has bytes (returns how many were copied), EOF (0) or the channel is
  // cancelled (Cancelled).
  Result<size_t> ReadStdin(char* buf, size_t len);
  // As ReadStdin, but Timeout after `timeout_ms` without a byte.
  Result<size_t> ReadStdinFor(char* buf, size_t len, int timeout_ms);
  // Queues output; blocks while the queue is full. Dropped once cancelled.
  void WriteOutput(bool is_stderr, std::string_view bytes);
  // The command ended with `exit_status`; the owner sends exit-status, EOF and close once
  // the output is out.
  void Finish(int exit_status);
  // The REPL, around each line's command: `command` is that command's cancel signal,
  // cancelled when the channel is and, with `ctrl_c`, when the client types Ctrl-C (with a
  // pty the client sends the byte 0x03, not a signal). Null once the command has ended, so
  // that Ctrl-C at the prompt is input again.
  void SetCommand(std::shared_ptr<CancelSignal> command, bool ctrl_c);

 private:
  struct Chunk {
    bool is_stderr;
    std::string data;
  };

  std::shared_ptr<EventWaker> waker_;
  std::shared_ptr<CancelSignal> cancel_ = std::make_shared<CancelSignal>();

  std::mutex mu_;
  std::condition_variable stdin_cv_;   // worker waits for stdin bytes / EOF / cancel
  std::condition_variable output_cv_;  // worker waits for output room / cancel
  std::string stdin_;
  size_t stdin_pos_ = 0;
  bool stdin_eof_ = false;
  bool owner_wants_room_ = false;  // the owner left bytes in libssh's buffer
  bool cancelled_ = false;
  std::deque<Chunk> output_;
  size_t output_bytes_ = 0;
  bool done_ = false;
  int exit_status_ = 0;
  std::shared_ptr<CancelSignal> command_;  // the REPL line's command, while it runs
  bool ctrl_c_ = false;
};

// The command's view of the channel: an InputStream over ChannelIo's stdin.
class ChannelInput final : public InputStream {
 public:
  explicit ChannelInput(ChannelIo& io) : io_(io) {}
  Result<size_t> Read(char* buf, size_t len) override { return io_.ReadStdin(buf, len); }
  Result<size_t> ReadFor(char* buf, size_t len, int timeout_ms) override {
    return io_.ReadStdinFor(buf, len, timeout_ms);
  }

 private:
  ChannelIo& io_;
};

// The command's stdout or stderr. With a pty the client's terminal is in raw mode, so a
// bare "\n" becomes "\r\n" (as a tty's ONLCR would do).
class ChannelOutput final : public OutputSink {
 public:
  ChannelOutput(ChannelIo& io, bool is_stderr, bool crlf)
      : io_(io), is_stderr_(is_stderr), crlf_(crlf) {}
  void Write(std::string_view bytes) override;

 private:
  ChannelIo& io_;
  bool is_stderr_;
  bool crlf_;
  std::mutex mu_;  // a command may write from more than one thread
  bool last_was_cr_ = false;
};

}  // namespace warren::ssh
