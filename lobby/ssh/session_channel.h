// SessionChannel: one SSH channel of a connection, as the connection's thread sees it — the
// libssh handle and callbacks, what the client asked for, and where the channel's bytes go:
// a worker's ChannelIo (a lobby command, the REPL, or a VM command under the guest runner)
// or a GuestPipe (a raw channel into a VM, bridged by lobby/ssh/vm_route.h). libssh's
// callbacks only record facts here; the connection acts on them after each poll, because
// libssh may run callbacks re-entrantly from inside its own functions.
// Connection thread only. A worker holds just `io`; a pipe is thread-safe on its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lobby/commands/vm_stream.h"
#include "lobby/ssh/channel_io.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

namespace warren::ssh {

class SshConnection;

// The most one ssh_channel_write sends, so one busy channel cannot hold up the others.
inline constexpr size_t kMaxWriteChunk = size_t{32} * 1024;

// How many bytes may be written to the client right now without libssh waiting for a window
// adjust: 0 when the channel is closed or its window is shut (the loop resumes when the
// client's window adjust wakes it).
inline size_t WritableNow(ssh_channel ch) {
  if (!ssh_channel_is_open(ch)) return 0;
  return std::min<size_t>(ssh_channel_window_size(ch), kMaxWriteChunk);
}

// Writes `bytes` (at most WritableNow) to the client's stdout or stderr: ssh_channel_write's
// result.
inline int WriteToClient(ssh_channel ch, bool is_stderr, const std::string& bytes) {
  auto len = static_cast<uint32_t>(bytes.size());
  return is_stderr ? ssh_channel_write_stderr(ch, bytes.data(), len)
                   : ssh_channel_write(ch, bytes.data(), len);
}

struct SessionChannel {
  SshConnection* conn = nullptr;
  int id = 0;
  ssh_channel ch = nullptr;
  ssh_channel_callbacks_struct callbacks{};
  std::shared_ptr<ChannelIo> io;
  std::thread worker;

  bool started = false;  // an exec, shell or subsystem request was accepted
  bool pty = false;
  size_t backlog = 0;  // client bytes libssh still holds because stdin (or the pipe) was full
  bool remote_eof = false;
  bool eof_delivered = false;
  bool remote_closed = false;
  bool finished = false;  // exit-status, EOF and close were sent
  bool broken = false;    // writing to the channel failed

  // Into a VM only (vm_route.h).
  GuestTerminal terminal;  // from pty-req and window-change
  std::vector<std::pair<std::string, std::string>> env;
  std::shared_ptr<GuestPipe> pipe;  // a raw channel into the VM (shell, pty, sftp, TCP)
  std::string pending_in;           // client bytes read from libssh that the pipe had no room for
  bool tcp = false;                 // a direct-tcpip channel
  bool eof_sent = false;            // EOF to the client
};

}  // namespace warren::ssh
