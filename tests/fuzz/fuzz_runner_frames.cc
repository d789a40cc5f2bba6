// Fuzzes what warren reads from the guest runner (vmhost/guest/runner_protocol.h,
// job_stream.h): bytes the untrusted guest controls. Input: one option byte, then the bytes.
//   even: the runner's stdout on a job's channel. FrameReader is fed them in chunks of 1-7
//         bytes, then a JobStream follows them on a real GuestChannel (the bytes pushed as
//         the control session's owner would, then EOF), as `start` or `attach` per the
//         option bits.
//   odd:  the runner's `list` output (ParseJobList).
// Invariants: frames are bounded and the reader holds at most one frame plus one read; the
// stream's offsets count exactly the bytes it delivered; it ends with an end, an error or the
// channel's end, never anything else; a listing is bounded, valid and newest first.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lobby/base/event_waker.h"
#include "tests/fuzz/check.h"
#include "vmhost/guest/guest_channel.h"
#include "vmhost/guest/job_stream.h"
#include "vmhost/guest/runner_protocol.h"

namespace {

using warren::Result;
using warren::fuzz::Fail;
namespace guest = warren::guest;

class CountingSink final : public warren::OutputSink {
 public:
  void Write(std::string_view bytes) override { bytes_ += bytes.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_ = 0;
};

void ReadFrames(std::string_view bytes, size_t chunk) {
  guest::FrameReader reader;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    reader.Feed(bytes.substr(at, chunk));
    for (;;) {
      Result<std::optional<guest::Frame>> next = reader.Next();
      if (!next.ok()) return;  // a malformed stream: unusable from here on
      if (!next->has_value()) break;
      if ((*next)->payload.size() > guest::kMaxFramePayload) Fail("an oversized frame");
    }
    if (reader.buffered() > 5 + guest::kMaxFramePayload + chunk) Fail("the reader hoards bytes");
  }
}

void FollowJob(std::string_view bytes, uint8_t options) {
  static const auto waker = std::make_shared<warren::EventWaker>();
  guest::GuestChannel channel("warren-run start", waker);
  channel.SetOpen(1);
  size_t pushed = channel.PushStdout(bytes.data(), bytes.size(), 0);
  if (pushed != bytes.size()) return;  // over the channel's buffer: not this target's business
  channel.SetStdoutEof();

  const bool expect_start = options & 2;
  const uint64_t from = (options & 4) ? 1000 : 0;
  guest::JobStream stream("0123abcd", from, from, expect_start,
                          /*hand_back_caught_up=*/options & 8);
  CountingSink out, err;
  using Stop = guest::JobStream::Stop;
  Stop stop = Stop::kStarted;
  for (int i = 0; i < 4 && stop == Stop::kStarted; ++i) {
    stop = stream.Follow(channel, out, err, nullptr, guest::JobStream::Clock::time_point::max(),
                         /*stop_at_start=*/options & 16);
  }
  if (stream.stdout_offset() != from + out.bytes() ||
      stream.stderr_offset() != from + err.bytes()) {
    Fail("offsets do not count the bytes delivered");
  }
  switch (stop) {
    case Stop::kEnded:
      if (!stream.end().has_value() || !stream.started()) Fail("ended without an end");
      break;
    case Stop::kRunnerError:
    case Stop::kChannelEnded:
      if (stream.error().ok()) Fail("stopped on an error without one");
      break;
    case Stop::kStarted:
      break;  // a start frame each time it was followed: bounded by the loop above
    default:
      Fail("no deadline or cancel, yet the stream stopped for one");
  }
  warren::GuestProgress p = stream.Progress();
  if (p.finished != stream.end().has_value()) Fail("progress disagrees with the end");
}

void ParseListing(std::string_view text) {
  std::vector<warren::GuestJob> jobs = guest::ParseJobList(text);
  if (jobs.size() > guest::kMaxListedJobs) Fail("too many jobs");
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!guest::ValidJobId(jobs[i].job)) Fail("a job id " + jobs[i].job);
    if (jobs[i].command.size() > guest::kMaxListedCommand) Fail("a long command");
    if (i > 0 && jobs[i - 1].started_at < jobs[i].started_at) Fail("not newest first");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    ReadFrames(bytes, data[0] % 7 + 1);
    FollowJob(bytes, data[0]);
  } else {
    ParseListing(bytes);
  }
  return 0;
}
