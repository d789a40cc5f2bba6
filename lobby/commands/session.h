// CommandSession: one command invocation from any surface — the caller, argv, stdin,
// stdout/stderr sinks, a cancel signal, what the surface is (whether output may stream,
// whether only read-only commands may run), and the outcome: status, exit status and the
// command's result as data. The SSH lobby builds one per exec channel (and per REPL line);
// the bridge builds one per tool call or /exec request. Surfaces set properties and read
// the outcome; every rule about commands stays in the interpreter. A session is used by one thread
// at a time; CancelSignal may be set from any thread; sinks and streams must be safe to call from
// the thread running the command.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/command_result.h"

namespace warren {

struct CommandSession {
  Caller caller;
  std::vector<std::string> argv;
  InputStream* in = nullptr;  // never null while executing
  OutputSink* out = nullptr;
  OutputSink* err = nullptr;
  std::shared_ptr<CancelSignal> cancel = std::make_shared<CancelSignal>();
  // Render as under --json whatever argv says (/exec, MCP: callers that always want data).
  // Unlike appending "--json" to argv, this never reaches a command run in a VM.
  bool json = false;
  // How long `ssh VM CMD` and `wait` stay attached when the command line gives no
  // --wait-seconds (0..45; /exec's "wait_seconds"). Unset: the surface's default.
  std::optional<int> wait_seconds;
  // A command that sets its own time limit (`ssh --timeout`, up to 10 minutes) calls this
  // with it before it starts waiting, so a surface with a deadline of its own (/exec's
  // --exec-timeout, a REST call's) can move it past the command's limit rather than answer
  // 504 first. Empty: the surface has no deadline to move.
  std::function<void(int64_t ms)> extend_deadline;
  // The peer is a live byte stream (an SSH channel or the REPL), so a command in a VM may
  // stream its output to out/err as it comes (unless --json) instead of collecting it and
  // returning it in one piece. /exec and MCP leave it off.
  bool streams_output = false;
  // Only commands whose table entry is read_only may run (requests for help always may);
  // any other is refused with PermissionDenied at dispatch. MCP's exec_read_only.
  bool read_only = false;
  // How this surface asks for a command line, for the hints in messages and results that
  // name one ("\"wait web-1/0000002a\" for the rest"): the words to show for `argv`, or
  // nullopt when the surface has no way to run it (MCP's curated endpoints offer four tools,
  // not every command). Unset: the command line in quotes, as typed after `ssh HOST`, in
  // the REPL or to /exec. Whether the caller may run it at all the interpreter checks
  // first (CommandHint, command.h), so no message points where the caller cannot go.
  std::function<std::optional<std::string>(const std::vector<std::string>& argv)> spell_command;

  // Set by Interpreter::Execute.
  Status status;
  int exit_status = 0;
  // What the command returned, for surfaces that render it themselves (MCP); unset when it
  // failed without producing anything (status says why).
  std::optional<CommandResult> result;
  // The line only asked for help ("help …", "CMD --help") and not with --json on its
  // command line: result->text is the answer, for people and models alike.
  bool help = false;
};

}  // namespace warren
