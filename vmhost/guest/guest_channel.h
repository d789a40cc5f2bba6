// GuestChannel: one channel on a VM's control connection, as handed between the control
// session's owner thread (the only thread that touches libssh) and the caller's thread that
// runs the command's logic. Two kinds: the runner's exec channels (blocking Write/Read for a
// caller thread; stderr kept only as diagnostics), and raw channels (shell, exec, subsystem,
// direct-tcpip: non-blocking TryWrite/PeekOutput for an event loop, told of changes by a
// notify callback; stderr is real output). Bounded buffers both ways give per-channel flow
// control: a caller that reads slowly leaves bytes in libssh, which then stops widening the
// guest's window for this channel only; a caller that writes faster than the guest reads
// blocks in Write (or gets 0 from TryWrite). Other channels on the connection are unaffected.
//
// Thread-safe: the "caller" methods are for the thread that opened the channel (Write may
// come from one more thread, e.g. a stdin pump; Close from any), the "owner" methods for
// the control session's owner thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/event_waker.h"
#include "lobby/base/status.h"
#include "vmhost/guest_control.h"

namespace warren::guest {

class GuestChannel {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kStdinCapacity = 256 * 1024;
  static constexpr size_t kStdoutCapacity = 256 * 1024;
  // stderr is only diagnostics for us (the runner multiplexes the job's stderr into its
  // stdout frames): its first bytes are kept, the rest counted and dropped, so it never
  // stalls the channel.
  static constexpr size_t kStderrKeep = 16 * 1024;
  // How often a cancellable wait looks at its cancel signal.
  static constexpr std::chrono::milliseconds kCancelPoll{50};

  // A runner exec channel running `command`.
  GuestChannel(std::string command, std::shared_ptr<EventWaker> waker);
  // A runner channel (blocking, stderr only diagnostics) opened by `request`: the runner's
  // server socket (kUnix), which gives no stderr and no exit status.
  GuestChannel(GuestChannelRequest request, std::shared_ptr<EventWaker> waker);
  // A raw channel; `notify` is called (no lock held, from the owner or a caller thread)
  // after every change an event loop may act on.
  GuestChannel(GuestChannelRequest request, std::shared_ptr<EventWaker> waker,
               std::function<void()> notify);
  GuestChannel(const GuestChannel&) = delete;
  GuestChannel& operator=(const GuestChannel&) = delete;

  const std::string& command() const { return request_.command; }
  const GuestChannelRequest& request() const { return request_; }
  bool raw() const { return raw_; }
  // Which connection of its control session the channel was opened on (once open).
  uint64_t generation();

  // ---- Caller ----

  // Waits until the guest accepted the exec request (OK) or the channel failed; Timeout
  // at the deadline; Cancelled within kCancelPoll of `cancel` firing (when given).
  Status WaitOpen(Clock::time_point deadline, const CancelSignal* cancel = nullptr);
  // Queues bytes for the command's stdin; blocks while the queue is full. Unavailable once
  // the channel is closed or failed.
  Status Write(std::string_view bytes);
  // EOF for the command's stdin, sent once the queued bytes are out.
  void CloseStdin();
  // Up to `len` bytes of the command's stdout: > 0 bytes, 0 at EOF, Timeout when nothing
  // came by the deadline, or the channel's failure (Unavailable when the connection died).
  Result<size_t> Read(char* buf, size_t len, Clock::time_point deadline);
  // After stdout's EOF: waits for the command's exit status. Internal when it was killed by
  // a signal, Unavailable when the connection died first.
  Result<int> WaitExit(Clock::time_point deadline);
  // The first kStderrKeep bytes the command wrote to stderr.
  std::string StderrText();
  // The caller is done: the owner closes the channel (the command on the other side sees
  // its output pipe closed). Idempotent; unblocks Write. A raw channel's notify is never
  // called once Close returned. Not from inside the notify callback.
  void Close();

  // ---- Caller, raw channels (non-blocking) ----

  bool opening();
  Status status();
  // Queues what fits of `bytes` for the guest; returns how many bytes were taken.
  size_t TryWrite(std::string_view bytes);
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes);
  void ConsumeOutput(bool is_stderr, size_t n);
  void Resize(const GuestTerminal& size);
  void Signal(std::string_view name);
  GuestPipe::End End();

  // ---- Owner ----

  bool caller_closed();
  // Installs the notify of a raw channel made without one (a forwarded connection the guest
  // opened, whose consumer is known only once it is open) and calls it once; nothing once
  // the channel was closed.
  void SetNotify(std::function<void()> notify);
  void SetOpen(uint64_t generation);
  // The channel failed (refused, or the connection went): every wait returns `status`.
  void Fail(Status status);
  // Appends up to `len` stdout bytes; returns how many fitted. When not all did, or the
  // owner still holds `held_back` more, the caller wakes the owner once it has made room.
  size_t PushStdout(const char* data, size_t len, size_t held_back);
  size_t StdoutSpace();
  // Runner channels keep the first kStderrKeep bytes and take everything; raw channels
  // take what fits (as PushStdout) and return how many.
  size_t PushStderr(const char* data, size_t len, size_t held_back);
  size_t StderrSpace();
  // Window changes and signals the caller asked for since the last call (raw channels).
  struct ControlRequests {
    std::optional<GuestTerminal> resize;
    std::vector<std::string> signals;
  };
  ControlRequests TakeControlRequests();
  void SetStdoutEof();
  void SetExitStatus(int status);
  void SetExitSignal(std::string signal);
  // The guest closed the channel (everything it sent has been pushed).
  void SetRemoteClosed();
  // The next queued stdin bytes (at most `max`), left queued until ConsumeStdin.
  bool PeekStdin(size_t max, std::string* bytes);
  void ConsumeStdin(size_t n);
  // The caller closed stdin and every queued byte is out.
  bool StdinEofDue();
  // The caller closed stdin (CloseStdin / CloseInput), whether or not the bytes are out:
  // a Close after it is graceful, and what was queued is still delivered.
  bool StdinClosed();
  // The guest closed the channel, whatever output is still unread (a runner channel's
  // stderr is never "read": End().closed does not tell it).
  bool RemoteClosed();

 private:
  bool failed_or_closed() const { return !failure_.ok() || caller_closed_; }
  void Notify();

  const GuestChannelRequest request_;
  const bool raw_;
  const std::shared_ptr<EventWaker> waker_;
  std::mutex notify_mu_;          // held while notify_ runs; taken by Close to turn it off
  std::function<void()> notify_;  // guarded by notify_mu_
  bool notify_off_ = false;

  std::mutex mu_;
  std::condition_variable cv_;  // any change a caller may wait for
  bool open_ = false;
  uint64_t generation_ = 0;
  Status failure_;
  bool caller_closed_ = false;
  std::string stdin_;
  size_t stdin_pos_ = 0;
  bool stdin_closed_ = false;
  std::string stdout_;
  size_t stdout_pos_ = 0;
  bool stdout_eof_ = false;
  bool owner_wants_room_ = false;
  std::string stderr_;
  size_t stderr_pos_ = 0;  // raw channels: stderr is a queue like stdout
  bool remote_closed_ = false;
  ControlRequests control_;
  std::optional<int> exit_status_;
  std::string exit_signal_;
};

}  // namespace warren::guest
