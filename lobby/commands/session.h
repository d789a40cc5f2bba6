// CommandSession: one command invocation from any surface — the caller, argv, stdin,
// stdout/stderr sinks, a cancel signal and the resulting exit status. The SSH lobby builds
// one per exec channel (and per REPL line); the bridge builds one per tool call or /exec
// request. A session is used by one thread at a time; CancelSignal may be set from any
// thread; sinks and streams must be safe to call from the thread running the command.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"
#include "lobby/commands/caller.h"

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

  // Set by Interpreter::Execute.
  Status status;
  int exit_status = 0;
};

}  // namespace warren
