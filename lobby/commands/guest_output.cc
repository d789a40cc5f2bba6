#include "lobby/commands/guest_output.h"

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

CommandResult GuestOutput::Finish(const GuestProgress& progress, const std::string& job_name,
                                  bool name_job, const std::string& running_note) {
  CommandResult r;
  const std::string out = streaming_ ? "" : out_.Text();
  const std::string err = streaming_ ? "" : err_.Text();
  r.data = {{"stdout", out}, {"stderr", err}, {"finished", progress.finished}};
  r.data["exit_code"] = progress.finished && progress.exit_code.has_value()
                            ? nlohmann::json(*progress.exit_code)
                            : nlohmann::json();
  if (progress.finished && progress.signal > 0) r.data["signal"] = progress.signal;
  if (!progress.finished || name_job) r.data["job"] = job_name;
  if (out_.truncated() || err_.truncated()) r.data["truncated"] = true;

  if (!streaming_) {
    r.text = out;
    // Collected stderr goes where stderr goes; --json carries it in the data instead.
    if (!ctx_.json && !err.empty()) ctx_.session.err->Write(err);
  }
  if (progress.finished) {
    if (!ctx_.json && progress.signal > 0 && !progress.exit_code.has_value()) {
      ctx_.session.err->Write("warren: ended by signal " + std::to_string(progress.signal) + "\n");
    }
    int status = GuestExitStatus(progress);
    if (status != 0) r.exit_status = status;
  } else if (!ctx_.json) {
    ctx_.session.err->Write("warren: " + running_note + "\n");
  }
  return r;
}

}  // namespace warren
