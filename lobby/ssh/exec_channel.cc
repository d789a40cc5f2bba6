// The exec side of a session channel: one command line, one command session.
#include "lobby/ssh/workers.h"

namespace warren::ssh {

int RunExecCommand(ChannelIo& io, Interpreter& interpreter, const Caller& caller,
                   const std::string& command_line, bool pty) {
  ChannelInput in(io);
  ChannelOutput out(io, /*is_stderr=*/false, pty);
  ChannelOutput err(io, /*is_stderr=*/true, pty);
  CommandSession session;
  session.caller = caller;
  session.caller.surface = "ssh";
  session.in = &in;
  session.out = &out;
  session.err = &err;
  session.cancel = io.cancel();
  // The interpreter tokenizes (with its own size limit) and reports every error itself.
  interpreter.ExecuteLine(session, command_line);
  return session.exit_status;
}

}  // namespace warren::ssh
