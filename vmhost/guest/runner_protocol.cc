#include "vmhost/guest/runner_protocol.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <random>

#include "lobby/base/env_name.h"
#include "lobby/base/hex.h"

namespace warren::guest {
namespace {

void AppendRecord(std::string& out, std::string_view key, std::string_view value) {
  out.append(key);
  out.push_back(' ');
  out.append(std::to_string(value.size()));
  out.push_back('\n');
  out.append(value);
  out.push_back('\n');
}

// A whole decimal number in [lo, hi].
std::optional<int64_t> ParseInt(std::string_view s, int64_t lo, int64_t hi) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace

bool ValidJobId(std::string_view id) {
  return id.size() == 8 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string NewJobId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t v = rng();
  std::string id(8, '0');
  for (char& c : id) {
    c = kHex[v & 0xf];
    v >>= 4;
  }
  return id;
}

std::string RunnerCommandLine(std::string_view args) {
  return std::string(kRunnerPath) + " " + std::string(args);
}

Result<std::string> EncodeStartHeader(const GuestCommand& command, bool has_stdin) {
  if (command.command.size() > kMaxCommandBytes) {
    return TooLarge("the command line is over " + std::to_string(kMaxCommandBytes) + " bytes");
  }
  if (command.command.find('\0') != std::string::npos) {
    return InvalidArgument("the command line contains a NUL byte");
  }
  if (command.cwd.size() > kMaxCwdBytes || command.cwd.find('\0') != std::string::npos) {
    return InvalidArgument("bad working directory");
  }
  if (command.env.size() > kMaxEnvCount) {
    return TooLarge("more than " + std::to_string(kMaxEnvCount) + " environment variables");
  }
  std::string out;
  out.reserve(command.command.size() + 128);
  AppendRecord(out, "warren-run", "1");
  AppendRecord(out, "cmd", command.command);
  if (!command.cwd.empty()) AppendRecord(out, "cwd", command.cwd);
  for (const auto& [name, value] : command.env) {
    if (!ValidEnvName(name)) {
      return InvalidArgument("bad environment variable name \"" + SanitizeGuestText(name, 64) +
                             "\"");
    }
    if (value.find('\0') != std::string::npos) {
      return InvalidArgument("environment variable " + name + " contains a NUL byte");
    }
    if (name.size() + 1 + value.size() > kMaxEnvEntryBytes) {
      return TooLarge("environment variable " + name + " is too large");
    }
    AppendRecord(out, "env", name + "=" + value);
  }
  AppendRecord(out, "stdin", has_stdin ? "1" : "0");
  AppendRecord(out, "end", "");
  return out;
}

void FrameReader::Feed(std::string_view bytes) {
  // Compact before growing, so the buffer holds at most one frame plus one read.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

Result<std::optional<Frame>> FrameReader::Next() {
  size_t avail = buf_.size() - pos_;
  if (avail < 5) return std::optional<Frame>();
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  char type = static_cast<char>(p[0]);
  switch (type) {
    case 'S':
    case 'o':
    case 'e':
    case 'c':
    case 'x':
    case 'E':
      break;
    default:
      return Internal("the guest runner sent a malformed frame");
  }
  uint32_t len = (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | p[4];
  if (len > kMaxFramePayload) return Internal("the guest runner sent an oversized frame");
  if (avail < 5 + size_t{len}) return std::optional<Frame>();
  Frame f{static_cast<FrameType>(type), buf_.substr(pos_ + 5, len)};
  pos_ += 5 + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return std::optional<Frame>(std::move(f));
}

Result<JobEnd> ParseJobEnd(std::string_view payload) {
  JobEnd end;
  if (payload == "lost") return end;
  if (payload.substr(0, 5) == "exit ") {
    auto v = ParseInt(payload.substr(5), 0, 255);
    if (v) {
      end.exit_code = static_cast<int>(*v);
      return end;
    }
  } else if (payload.substr(0, 7) == "signal ") {
    auto v = ParseInt(payload.substr(7), 1, 127);
    if (v) {
      end.signal = static_cast<int>(*v);
      return end;
    }
  }
  return Internal("the guest runner sent a malformed end of job");
}

Status ParseRunnerError(std::string_view payload) {
  size_t sp = payload.find(' ');
  std::string_view kind = payload.substr(0, sp);
  std::string message =
      SanitizeGuestText(sp == std::string_view::npos ? "" : payload.substr(sp + 1), 300);
  if (kind == "notfound") return NotFound(message);
  if (kind == "invalid") return InvalidArgument(message);
  if (kind == "exists") return Conflict(message);
  // Not warren's fault, nor a bug: the guest's disk is full, and says so.
  if (kind == "full") return Unavailable("the VM's disk is full: " + message);
  return Internal("guest runner: " + message);
}

std::string UnescapeListed(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    char c = field[i];
    if (c == '\\' && i + 1 < field.size() && field[i + 1] == '\\') {
      out.push_back('\\');
      ++i;
    } else if (c == '\\' && i + 3 < field.size() && field[i + 1] == 'x' &&
               HexDigitValue(field[i + 2]) >= 0 && HexDigitValue(field[i + 3]) >= 0) {
      out.push_back(
          static_cast<char>(HexDigitValue(field[i + 2]) * 16 + HexDigitValue(field[i + 3])));
      i += 3;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<GuestJob> ParseJobList(std::string_view text) {
  std::vector<GuestJob> jobs;
  if (text.size() > kMaxListBytes) text = text.substr(0, kMaxListBytes);
  size_t start = 0;
  while (start < text.size() && jobs.size() < kMaxListedJobs) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) break;  // a cut-off last line is dropped
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    // ID STARTED STATE CODE ENDED COMMAND
    std::string_view f[5];
    bool ok = true;
    for (auto& field : f) {
      size_t sp = line.find(' ');
      if (sp == std::string_view::npos) {
        ok = false;
        break;
      }
      field = line.substr(0, sp);
      line.remove_prefix(sp + 1);
    }
    if (!ok || !ValidJobId(f[0])) continue;
    auto started = ParseInt(f[1], 0, int64_t{1} << 40);
    auto code = ParseInt(f[3], 0, 255);
    auto ended = ParseInt(f[4], 0, int64_t{1} << 40);
    if (!started || !code || !ended) continue;
    GuestJob job;
    job.job = std::string(f[0]);
    job.started_at = *started;
    if (f[2] == "running") {
      job.finished = false;
    } else if (f[2] == "exit") {
      job.finished = true;
      job.exit_code = static_cast<int>(*code);
      job.finished_at = *ended;
    } else if (f[2] == "signal" || f[2] == "lost") {
      job.finished = true;
      job.finished_at = *ended;
    } else {
      continue;
    }
    std::string command = UnescapeListed(line.substr(0, 4 * kMaxListedCommand));
    if (command.size() > kMaxListedCommand) command.resize(kMaxListedCommand);
    job.command = std::move(command);
    jobs.push_back(std::move(job));
  }
  std::sort(jobs.begin(), jobs.end(), [](const GuestJob& a, const GuestJob& b) {
    if (a.started_at != b.started_at) return a.started_at > b.started_at;
    return a.job < b.job;
  });
  return jobs;
}

std::string ShellQuote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace warren::guest
