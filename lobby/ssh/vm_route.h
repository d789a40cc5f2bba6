// VmRoute: the half of an SSH connection that leads into a VM. A login as NAME (or
// vm+NAME) that names one of the caller's VMs gets one VmRoute, and every channel of the
// connection goes into that VM. Each channel is authorized on its own through
// lobby/commands/vm_stream.h, the one sanctioned way into a guest, which also writes its
// audit line: a key removed or narrowed since the login stops at its next channel.
// - A command without a terminal (what `ssh NAME@HOST CMD` and `scp -O` send) runs under the
//   guest runner on a worker thread, exactly like the lobby's `ssh VM CMD`: exact stdout,
//   stderr and exit status, and closing the channel kills its process tree.
// - A shell, a command with a terminal, the sftp subsystem and `-L`/`-W` are raw channels
//   (GuestPipe) that this object bridges itself on the connection's thread, with flow
//   control per channel both ways (no thread per channel).
// Threading: connection thread only, like the SessionChannels it serves (so every libssh
// call stays on the session's owner). A worker touches only its channel's ChannelIo and its
// own copy of the VmExecTarget; pipes wake the connection through its EventWaker.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lobby/base/event_waker.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/vm_stream.h"
#include "lobby/ssh/session_channel.h"

#include <libssh/libssh.h>
#include <libssh/server.h>

namespace warren::ssh {

class VmRoute {
 public:
  // `caller` authenticated for this connection; `vm_name` is the VM its login name asked for
  // (lobby/commands/vm_login.h VmLoginTarget).
  VmRoute(Interpreter& interpreter, Caller caller, std::string vm_name,
          std::shared_ptr<EventWaker> waker, std::string peer);

  const std::string& vm_name() const { return vm_name_; }

  // An env request (SetEnv, LANG…) before the channel's shell or command: false refuses it.
  // Names by the one env-name rule (lobby/base/env_name.h) but never WARREN_* (ours, e.g.
  // WARREN_JOB), at most 64 per channel, values up to 4 KiB without NUL.
  bool TakeEnv(SessionChannel& c, std::string_view name, std::string_view value);

  // A shell (kShell), exec (kExec) or subsystem (kSubsystem, only sftp) request. False
  // refuses the request itself (a second one on the channel, an unknown subsystem). Any
  // other refusal (not allowed, VM not running…) is accepted as a request and then written
  // to the client's stderr with its exit status, which tells the user more than "request
  // failed".
  bool StartSession(SessionChannel& c, GuestChannelRequest::Kind kind, std::string command);

  // A direct-tcpip open (`-L`, `-W`): only to a port of the VM itself. On success the open
  // is accepted and `new_channel` makes the SessionChannel that carries it; false lets libssh
  // refuse the open ("administratively prohibited").
  bool OpenTcp(ssh_message message, const std::function<SessionChannel*(ssh_channel)>& new_channel);

  // Client bytes for a channel with a pipe (libssh's data callback): returns how many the
  // pipe took; libssh keeps the rest, which holds the client's window (flow control).
  static size_t PushInput(SessionChannel& c, const void* data, size_t len);

  // After each poll, for a channel with a pipe: moves what libssh held back into the pipe,
  // the guest's output to the client as its window allows, and passes the guest's end on
  // (EOF, exit-status or exit-signal, close).
  void Service(SessionChannel& c);

 private:
  void FlushOutput(SessionChannel& c);

  Interpreter& interpreter_;
  Caller caller_;  // refreshed from the store at every channel
  const std::string vm_name_;
  const std::shared_ptr<EventWaker> waker_;
  const std::string peer_;  // for log lines
};

}  // namespace warren::ssh
