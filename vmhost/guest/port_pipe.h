// PortPipe: a GuestPipe over a socket connected to one of a VM's virtio-serial ports other
// than its control connection's: the identity port (kIdentityChannelName), on which the
// guest's root process waiting for a restored VM's identity reads it
// (runner/identity_wait.c) while the SSH handshake runs beside it. One thread of its own
// moves bytes between the socket and two bounded buffers and calls `notify` after each
// change, as a control connection's owner thread does for a raw channel.
//
// A port is not a channel: it is open from the start (the dial connected it), has no
// stderr, exit status, terminal or signals, and no half-close (the host end closing is the
// guest's hang-up), so CloseInput does nothing; the protocol on it says where it ends. The
// guest's bytes are untrusted: they are only buffered here (kBufferBytes each way).
// Thread-safe; `notify` is never called once Close returned.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "lobby/base/event_waker.h"
#include "lobby/base/status.h"
#include "lobby/base/unique_fd.h"
#include "vmhost/guest_control.h"

namespace warren::guest {

class PortPipe final : public GuestPipe {
 public:
  static constexpr size_t kBufferBytes = 64 * 1024;

  // Takes the connected socket (made non-blocking) and starts the thread.
  PortPipe(UniqueFd socket, std::function<void()> notify);
  ~PortPipe() override;  // Close
  PortPipe(const PortPipe&) = delete;
  PortPipe& operator=(const PortPipe&) = delete;

  bool opening() override { return false; }
  Status status() override;
  size_t Write(std::string_view bytes) override;
  void CloseInput() override {}
  void Resize(const GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override;
  void ConsumeOutput(bool is_stderr, size_t n) override;
  End end() override;
  // Stops the thread and closes the socket (the guest sees the host end close).
  void Close() override;

 private:
  void Run();
  void Notify();

  UniqueFd fd_;
  EventWaker waker_;
  std::mutex mu_;
  std::string to_guest_;
  std::string from_guest_;
  Status failure_;
  bool eof_ = false;
  bool stop_ = false;
  std::mutex notify_mu_;  // held while notify_ runs; Close takes it to turn it off
  std::function<void()> notify_;
  std::mutex close_mu_;
  std::thread thread_;
};

}  // namespace warren::guest
