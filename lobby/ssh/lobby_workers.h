// What a lobby session channel runs on its worker thread: one lobby command (an exec
// request, lobby_exec.cc) or the REPL (a shell request, repl.cc). Each talks to the client
// only through a ChannelIo and returns the channel's exit status; none touches libssh. (A VM
// login's worker, a command under the guest runner, is vm_route.cc's.)
// Each call runs on its own worker thread; the Interpreter is shared and thread-safe.
#pragma once

#include <string>

#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "lobby/ssh/channel_io.h"

namespace warren::ssh {

// Runs one exec request's command line through the interpreter, with the channel's stdin,
// stdout and stderr. `pty`: the client asked for a terminal, so newlines become CRLF.
int RunExecCommand(ChannelIo& io, Interpreter& interpreter, const Caller& caller,
                   const std::string& command_line, bool pty);

// The REPL: with a pty, a prompt ("warren ▶ ") and line editing; without one (`ssh HOST <
// script`) it reads lines from stdin and runs them with no echo and no prompt. Each line is
// one command session whose stdin is empty. Returns 0 after `exit`, `quit` or Ctrl-D; at
// the end of a script, the last command's status.
int RunRepl(ChannelIo& io, Interpreter& interpreter, const Caller& caller, bool pty);

inline constexpr char kReplPrompt[] = "warren \xE2\x96\xB6 ";  // "warren ▶ "

}  // namespace warren::ssh
