// GuestOutput: how `ssh VM CMD` and `wait JOB` deliver a guest command's output. To a
// session that streams output (CommandSession::streams_output: the SSH channel, the REPL)
// without --json the bytes go straight to the caller; everywhere else (--json, /exec, MCP)
// they are collected, bounded (HeadTailBuffer) and returned in one piece. It also decides
// how long to stay attached before handing the command back as a job, and turns the
// guest's answer into the command's result. One per command call; used by the thread running it.
#pragma once

#include <optional>
#include <string>

#include "lobby/commands/command.h"
#include "lobby/commands/head_tail.h"
#include "vmhost/guest_control.h"

namespace warren {

inline constexpr int kMaxWaitSeconds = 45;

class GuestOutput {
 public:
  // `wait_seconds`: --wait-seconds when given (already checked to be 0..kMaxWaitSeconds).
  GuestOutput(CommandContext& ctx, std::optional<int> wait_seconds);

  bool streaming() const { return streaming_; }
  // Sinks, cancel and deadline for GuestControl::Exec/Wait; with_stdin passes the
  // session's stdin to the command.
  GuestStreams Streams(bool with_stdin);

  // The command's result once Exec or Wait returned: {stdout, stderr, exit_code} (+ "job"
  // when it is still running or `name_job` is set, + "finished", + "truncated"), its exit
  // status propagated, and a note on stderr saying how to go on when it still runs.
  CommandResult Finish(const GuestProgress& progress, const std::string& job_name, bool name_job,
                       const std::string& running_note);

 private:
  CommandContext& ctx_;
  bool streaming_ = false;
  int wait_ms_ = -1;
  HeadTailBuffer out_;
  HeadTailBuffer err_;
};

// InvalidArgument unless a given --wait-seconds is 0..kMaxWaitSeconds.
Status CheckWaitSeconds(bool given, int value);

// The exit status a finished guest command reports to our caller: its own status, else
// 128+signal as a shell would, else 255 as OpenSSH does when none came back.
int GuestExitStatus(const GuestProgress& progress);

}  // namespace warren
