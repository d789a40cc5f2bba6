// The host's half of the guest runner's wire protocol (the runner is runner/warren-run.c;
// vmhost/guest/README.md describes the protocol): the start header the host writes, the
// frames the runner sends back, its job listing and its error replies. Pure functions and a
// small incremental parser, no I/O. Everything read here comes from the untrusted guest, so
// every size is bounded and every field validated.
// Thread-compatible: a FrameReader belongs to one stream; the functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "vmhost/guest_control.h"
#include "vmhost/guest_text.h"

namespace warren::guest {

// Bounds shared with the runner (runner/runner.h); the host refuses more before sending.
inline constexpr size_t kMaxCommandBytes = 1024 * 1024;
inline constexpr size_t kMaxCwdBytes = 4096;
inline constexpr size_t kMaxEnvEntryBytes = 128 * 1024;
inline constexpr size_t kMaxEnvCount = 256;
// The largest frame payload accepted from a guest (the runner sends at most 32 KiB).
inline constexpr size_t kMaxFramePayload = 64 * 1024;
// What a listing may hold before the rest is ignored.
inline constexpr size_t kMaxListBytes = 2 * 1024 * 1024;
inline constexpr size_t kMaxListedJobs = 4096;
inline constexpr size_t kMaxListedCommand = 256;

// Where the runner lives in the guest, relative to the user's home (the exec request's
// command line is run by the user's shell, which expands the ~).
inline constexpr char kRunnerPath[] = "~/.warren/bin/warren-run";

// [0-9a-f]{8}.
bool ValidJobId(std::string_view id);
// A fresh random job id.
std::string NewJobId();

// The command line of an exec request that runs the runner with `args` (already safe words:
// a verb, a job id, decimal offsets).
std::string RunnerCommandLine(std::string_view args);

// The start header for `command`; InvalidArgument / TooLarge for what the runner would refuse
// (NUL bytes, bad env names, sizes over the bounds above).
Result<std::string> EncodeStartHeader(const GuestCommand& command, bool has_stdin);

enum class FrameType : char {
  kStarted = 'S',
  kStdout = 'o',
  kStderr = 'e',
  kCaughtUp = 'c',  // attach: what was spooled has been sent; the job still runs
  kEnd = 'x',
  kError = 'E',
};

struct Frame {
  FrameType type;
  std::string payload;
};

// Splits the runner's stdout into frames. Feed bytes as they arrive; Next returns complete
// frames in order, nullopt when more bytes are needed, or an error for a malformed stream
// (unknown type, oversized frame), after which the stream is unusable.
class FrameReader {
 public:
  void Feed(std::string_view bytes);
  Result<std::optional<Frame>> Next();
  // Bytes received but not yet part of a complete frame.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
};

// How a job ended, from an End frame's payload ("exit N", "signal N", "lost").
struct JobEnd {
  std::optional<int> exit_code;
  int signal = 0;
};
Result<JobEnd> ParseJobEnd(std::string_view payload);

// The Status an Error frame stands for ("notfound ...", "invalid ...", "exists ...",
// "full ..." (the guest's disk: Unavailable, saying so), "internal ..."), its message made
// safe to show.
Status ParseRunnerError(std::string_view payload);

// The runner's `list` output: jobs newest first. Malformed lines are skipped, not fatal:
// one bad job directory must not hide the others.
std::vector<GuestJob> ParseJobList(std::string_view text);

// Unescapes a listing's command field (\\ and \xHH); invalid escapes are kept literally.
std::string UnescapeListed(std::string_view field);

// `value` as one word for the guest's POSIX shell: single-quoted, quotes escaped.
std::string ShellQuote(std::string_view value);

}  // namespace warren::guest
