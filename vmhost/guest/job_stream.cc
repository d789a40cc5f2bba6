#include "vmhost/guest/job_stream.h"

#include <algorithm>
#include <utility>

namespace warren::guest {
namespace {

// How often a caller with a cancel signal looks at it while the guest is quiet.
constexpr auto kCancelPoll = std::chrono::milliseconds(100);

}  // namespace

JobStream::JobStream(std::string job, uint64_t stdout_from, uint64_t stderr_from, bool expect_start,
                     bool hand_back_caught_up)
    : job_(std::move(job)),
      out_off_(stdout_from),
      err_off_(stderr_from),
      started_(!expect_start),
      hand_back_caught_up_(hand_back_caught_up) {}

void JobStream::Reattach() {
  reader_ = FrameReader();
  error_ = Status::Ok();
  caught_up_ = false;
}

JobStream::Stop JobStream::Follow(GuestChannel& ch, OutputSink& out, OutputSink& err,
                                  const CancelSignal* cancel, Clock::time_point hand_back,
                                  bool stop_at_start) {
  char buf[32 * 1024];
  for (;;) {
    for (;;) {
      Result<std::optional<Frame>> next = reader_.Next();
      if (!next.ok()) {
        error_ = next.status();
        return Stop::kRunnerError;
      }
      if (!next->has_value()) break;
      Frame& f = **next;
      if (!started_ && f.type != FrameType::kStarted && f.type != FrameType::kError) {
        error_ = Internal("the guest runner sent output before starting the job");
        return Stop::kRunnerError;
      }
      switch (f.type) {
        case FrameType::kStarted:
          if (started_ || f.payload != job_) {
            error_ = Internal("the guest runner sent a bad start frame");
            return Stop::kRunnerError;
          }
          started_ = true;
          if (stop_at_start) return Stop::kStarted;
          break;
        case FrameType::kStdout:
          out_off_ += f.payload.size();
          out.Write(f.payload);
          break;
        case FrameType::kStderr:
          err_off_ += f.payload.size();
          err.Write(f.payload);
          break;
        case FrameType::kCaughtUp:
          caught_up_ = true;
          break;
        case FrameType::kEnd: {
          Result<JobEnd> end = ParseJobEnd(f.payload);
          if (!end.ok()) {
            error_ = end.status();
            return Stop::kRunnerError;
          }
          end_ = *end;
          return Stop::kEnded;
        }
        case FrameType::kError:
          error_ = ParseRunnerError(f.payload);
          return Stop::kRunnerError;
      }
    }
    if (cancel != nullptr && cancel->cancelled()) return Stop::kCancelled;
    auto now = Clock::now();
    // A wait that must first hear what the runner has on file holds the hand-back until
    // the CaughtUp frame (bounded: an old or stuck runner cannot hold it for ever).
    Clock::time_point give_back = hand_back;
    if (hand_back_caught_up_ && !caught_up_ && hand_back != Clock::time_point::max()) {
      give_back = hand_back + kCatchUpLimit;
    }
    if (now >= hand_back && (caught_up_ || !hand_back_caught_up_ || now >= give_back)) {
      return Stop::kHandBack;
    }
    // Capped so a "forever" deadline never overflows a clock conversion.
    auto until = std::min(now >= hand_back ? give_back : hand_back, now + std::chrono::hours(1));
    if (cancel != nullptr) until = std::min(until, now + kCancelPoll);
    Result<size_t> n = ch.Read(buf, sizeof buf, until);
    if (!n.ok()) {
      if (n.status().code() == Code::kTimeout) continue;
      error_ = n.status();
      return Stop::kChannelEnded;
    }
    if (*n == 0) {
      error_ = Unavailable("the guest runner's channel ended early");
      return Stop::kChannelEnded;
    }
    reader_.Feed(std::string_view(buf, *n));
  }
}

GuestProgress JobStream::Progress() const {
  GuestProgress p;
  p.job = job_;
  p.finished = end_.has_value();
  if (end_) {
    p.exit_code = end_->exit_code;
    p.signal = end_->signal;
  }
  p.stdout_offset = out_off_;
  p.stderr_offset = err_off_;
  return p;
}

}  // namespace warren::guest
