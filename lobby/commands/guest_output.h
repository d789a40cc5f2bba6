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

// Which call delivers a guest command's output: `ssh VM CMD`, which started it, or `wait
// JOB`, which follows a job.
enum class GuestCall { kStart, kWait };

class GuestOutput {
 public:
  // `wait_seconds`: --wait-seconds when given (already checked to be 0..kMaxWaitSeconds).
  GuestOutput(CommandContext& ctx, std::optional<int> wait_seconds);

  bool streaming() const { return streaming_; }
  // The command's own time limit (`ssh --timeout`): stay attached this long whatever the
  // surface's default, and the caller kills it if it still runs then.
  void SetTimeoutMs(int ms) { wait_ms_ = ms; }
  // Sinks, cancel and deadline for GuestControl::Exec/Wait; with_stdin passes the
  // session's stdin to the command.
  GuestStreams Streams(bool with_stdin);

  // The command's result once Exec or Wait returned: {stdout (or stdout_base64), stderr (or
  // stderr_base64), exit_code, finished} (+ "job" when it still runs or for `wait`, +
  // "truncated", + "note" saying how to go on while it still runs, naming only what the
  // caller can run — on stderr too for people), the bytes as they came (relayed), and the
  // command's exit status propagated.
  CommandResult Finish(const GuestProgress& progress, const std::string& vm_name,
                       const std::string& job_name, GuestCall call);

 private:
  // How to go on with a job that still runs, in the words of the caller's surface.
  std::string RunningNote(const std::string& vm_name, const std::string& job_name,
                          GuestCall call) const;

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
