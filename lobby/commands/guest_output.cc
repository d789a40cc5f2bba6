#include "lobby/commands/guest_output.h"

#include "lobby/commands/output_encoding.h"

namespace warren {

GuestOutput::GuestOutput(CommandContext& ctx, std::optional<int> wait_seconds) : ctx_(ctx) {
  streaming_ = ctx.session.streams_output && !ctx.json;
  // The surface's own default (/exec's "wait_seconds") when the command line gives none.
  if (!wait_seconds.has_value()) wait_seconds = ctx.session.wait_seconds;
  if (wait_seconds.has_value()) {
    wait_ms_ = *wait_seconds * 1000;
  } else {
    // A person at a terminal watches the command to its end, as with OpenSSH; an agent
    // gets control back in time to decide what to do next.
    wait_ms_ = streaming_ ? -1 : kMaxWaitSeconds * 1000;
  }
}

GuestStreams GuestOutput::Streams(bool with_stdin) {
  GuestStreams s;
  s.in = with_stdin ? ctx_.session.in : nullptr;
  s.out = streaming_ ? ctx_.session.out : &out_;
  s.err = streaming_ ? ctx_.session.err : &err_;
  s.cancel = ctx_.session.cancel;
  s.wait_ms = wait_ms_;
  return s;
}

Status CheckWaitSeconds(bool given, int value) {
  if (!given || (value >= 0 && value <= kMaxWaitSeconds)) return Status::Ok();
  return InvalidArgument("--wait-seconds must be 0 to " + std::to_string(kMaxWaitSeconds));
}

int GuestExitStatus(const GuestProgress& progress) {
  if (progress.exit_code.has_value()) return *progress.exit_code;
  if (progress.signal > 0) return 128 + progress.signal;
  return 255;
}

std::string GuestOutput::RunningNote(const std::string& vm_name, const std::string& job_name,
                                     GuestCall call) const {
  std::optional<std::string> wait = CommandHint(ctx_, {"wait", job_name});
  if (call == GuestCall::kWait) {
    return wait.has_value() ? "still running; " + *wait + " again for more" : "still running";
  }
  std::optional<std::string> kill = CommandHint(ctx_, {"kill", job_name});
  std::string note = "still running as job " + job_name;
  if (wait.has_value()) note += "; " + *wait + " for the rest";
  if (kill.has_value()) note += (wait.has_value() ? ", " : "; ") + *kill + " to stop it";
  if (wait.has_value() || kill.has_value()) return note;
  // A caller that cannot follow jobs (its credential's --cmds, or a surface without them)
  // still learns that the command goes on, and how it can look, if it can.
  note += ", which goes on in the VM after this call";
  if (std::optional<std::string> look = CommandHint(ctx_, {"ssh", vm_name, "ps"})) {
    note += "; look at it with: " + *look;
  }
  return note;
}

CommandResult GuestOutput::Finish(const GuestProgress& progress, const std::string& vm_name,
                                  const std::string& job_name, GuestCall call) {
  CommandResult r;
  RelayedOutput relayed;
  if (!streaming_) {
    relayed.out = out_.Text();
    relayed.err = err_.Text();
    relayed.truncated = out_.truncated() || err_.truncated();
  }
  r.data = nlohmann::json::object();
  PutBytes(r.data, "stdout", relayed.out);
  PutBytes(r.data, "stderr", relayed.err);
  r.data["finished"] = progress.finished;
  r.data["exit_code"] = progress.finished && progress.exit_code.has_value()
                            ? nlohmann::json(*progress.exit_code)
                            : nlohmann::json();
  if (progress.finished && progress.signal > 0) r.data["signal"] = progress.signal;
  if (!progress.finished || call == GuestCall::kWait) r.data["job"] = job_name;
  if (relayed.truncated) r.data["truncated"] = true;
  if (!progress.finished) r.data["note"] = RunningNote(vm_name, job_name, call);

  if (!streaming_) {
    r.text = relayed.out;
    // Collected stderr goes where stderr goes; --json carries it in the data instead.
    if (!ctx_.json && !relayed.err.empty()) ctx_.session.err->Write(relayed.err);
  }
  if (progress.finished) {
    if (!ctx_.json && progress.signal > 0 && !progress.exit_code.has_value()) {
      ctx_.session.err->Write("warren: ended by signal " + std::to_string(progress.signal) + "\n");
    }
    int status = GuestExitStatus(progress);
    if (status != 0) r.exit_status = status;
  } else if (!ctx_.json) {
    ctx_.session.err->Write("warren: " + r.data["note"].get<std::string>() + "\n");
  }
  // Streamed bytes went straight to the caller; nothing is relayed in the result.
  if (!streaming_) r.relayed = std::move(relayed);
  return r;
}

}  // namespace warren
