// The exec side of a session channel: one command line, one command session; or, on a VM
// login, one command in the VM.
#include "lobby/base/error_map.h"
#include "lobby/ssh/workers.h"

namespace warren::ssh {

int RunExecCommand(ChannelIo& io, Interpreter& interpreter, const Caller& caller,
                   const std::string& command_line, bool pty) {
  ChannelInput in(io);
  ChannelOutput out(io, /*is_stderr=*/false, pty);
  // A pty has a single stream (as under sshd, where stderr is the same tty): keeping
  // errors in order with the output matters more there than telling them apart.
  ChannelOutput err(io, /*is_stderr=*/!pty, pty);
  CommandSession session;
  session.caller = caller;
  session.caller.surface = "ssh";
  session.streams_output = true;  // a channel: `ssh VM CMD` streams to it
  session.in = &in;
  session.out = &out;
  session.err = &err;
  session.cancel = io.cancel();
  // The interpreter tokenizes (with its own size limit) and reports every error itself.
  interpreter.ExecuteLine(session, command_line);
  return session.exit_status;
}

int RunVmCommand(ChannelIo& io, GuestControl& guests, const std::string& vm_id,
                 const GuestCommand& command) {
  ChannelInput in(io);
  ChannelOutput out(io, /*is_stderr=*/false, /*crlf=*/false);
  ChannelOutput err(io, /*is_stderr=*/true, /*crlf=*/false);
  GuestStreams streams;
  streams.in = &in;
  streams.out = &out;
  streams.err = &err;
  streams.cancel = io.cancel();
  streams.wait_ms = -1;  // streams until it ends, like sshd
  Result<GuestProgress> progress = guests.Exec(vm_id, command, streams);
  if (!progress.ok()) {
    if (progress.status().code() != Code::kCancelled) {
      err.Write("error: " + progress.status().message() + "\n");
    }
    return ExitStatusFor(progress.status().code());
  }
  if (progress->exit_code.has_value()) return *progress->exit_code;
  if (progress->signal > 0) return 128 + progress->signal;
  err.Write("error: the command ended without an exit status (its VM restarted?)\n");
  return ExitStatusFor(Code::kUnavailable);
}

}  // namespace warren::ssh
