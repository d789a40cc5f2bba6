// What a session channel can run on its worker thread: one lobby command (an exec request),
// the REPL (a shell request), or a command in a VM (an exec request without a terminal on a
// VM login). Each talks to the client only through a ChannelIo and returns the channel's
// exit status; none touches libssh.
// Each call runs on its own worker thread; the Interpreter is shared and thread-safe.
#pragma once

#include <string>

#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "lobby/ssh/channel_io.h"
#include "vmhost/guest_control.h"

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

// Runs `command` in VM `vm_id` under the guest runner (GuestControl::Exec), streaming the
// channel's stdin in and the command's stdout and stderr out until it ends; closing the
// channel kills its whole process tree. Returns its exit status (128+N when signal N ended
// it); an error is written to stderr and mapped to an exit status.
int RunVmCommand(ChannelIo& io, GuestControl& guests, const std::string& vm_id,
                 const GuestCommand& command);

inline constexpr char kReplPrompt[] = "warren \xE2\x96\xB6 ";  // "warren ▶ "

}  // namespace warren::ssh
