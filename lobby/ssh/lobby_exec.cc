// The exec side of a lobby session channel: one command line, one command session.
#include "lobby/ssh/lobby_workers.h"

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

}  // namespace warren::ssh
