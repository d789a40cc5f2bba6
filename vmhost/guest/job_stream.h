// JobStream: follows one job through the runner's frames on one channel (`start` or
// `attach`), delivering its stdout and stderr to the caller's sinks and keeping the offsets,
// until the job ends, the hand-back deadline, cancellation or the channel's end. The frames
// come from the untrusted guest: FrameReader bounds them; here their order is checked
// (Started only first, nothing after End or Error).
// Thread-compatible: one caller thread drives a JobStream (sinks may block it: that is the
// flow control back to the guest).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "lobby/base/status.h"
#include "vmhost/guest/guest_channel.h"
#include "vmhost/guest/runner_protocol.h"
#include "vmhost/guest_control.h"

namespace warren::guest {

class JobStream {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Stop {
    kEnded,         // an End frame: end() holds how
    kStarted,       // the Started frame arrived and stop_at_start was set
    kHandBack,      // the deadline passed (before a Started frame: it did not start in time)
    kCancelled,     // streams.cancel fired
    kRunnerError,   // an Error frame or a malformed stream: error() says which
    kChannelEnded,  // the channel ended or failed without an End frame: error() says why
  };

  // `expect_start`: the channel runs `start` (a Started frame comes first).
  // `hand_back_caught_up`: never hand back before the runner said it has sent everything
  // spooled so far (a CaughtUp frame, or the End) — what `wait` needs, so that a wait of no
  // time on a job that has ended reports its end, not "still running". The runner is given
  // at most kCatchUpLimit past the hand-back deadline for that.
  JobStream(std::string job, uint64_t stdout_from, uint64_t stderr_from, bool expect_start,
            bool hand_back_caught_up = false);

  static constexpr std::chrono::seconds kCatchUpLimit{10};

  // Follows the job on `ch` until one of the stops above. Call again after kStarted, or with a
  // new channel (an `attach` from offsets()) after kChannelEnded.
  Stop Follow(GuestChannel& ch, OutputSink& out, OutputSink& err, const CancelSignal* cancel,
              Clock::time_point hand_back, bool stop_at_start);
  // Starts over on a new (attach) channel: partial frames of the old one are dropped.
  void Reattach();

  bool started() const { return started_; }
  const std::optional<JobEnd>& end() const { return end_; }
  const Status& error() const { return error_; }
  uint64_t stdout_offset() const { return out_off_; }
  uint64_t stderr_offset() const { return err_off_; }
  // Where the stream stands, as the interface reports it.
  GuestProgress Progress() const;

 private:
  std::string job_;
  uint64_t out_off_;
  uint64_t err_off_;
  bool started_;
  bool hand_back_caught_up_;
  bool caught_up_ = false;  // this channel's CaughtUp frame has arrived
  std::optional<JobEnd> end_;
  Status error_;
  FrameReader reader_;
};

// An OutputSink that drops everything (output nobody waits for any more).
class DiscardSink final : public OutputSink {
 public:
  void Write(std::string_view) override {}
};

}  // namespace warren::guest
