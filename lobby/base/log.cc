#include "lobby/base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace warren {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }

void Log(LogLevel level, std::string_view message) {
  if (level < g_level.load()) return;
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[40];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  std::string line;
  line.reserve(message.size() + 48);
  line.append(ts).append(" ").append(LevelName(level)).append(" ");
  for (char c : message) line.push_back(c == '\n' ? ' ' : c);
  line.push_back('\n');
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

Status OpenLogFile(const std::string& path) {
  constexpr mode_t kLogMode = 0640;
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, kLogMode);
  if (fd < 0) return Unavailable("cannot open log " + path + ": " + std::strerror(errno));
  struct stat st {};
  Status result = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    result = Unavailable("cannot stat log " + path + ": " + std::strerror(errno));
  } else if (S_ISREG(st.st_mode) && (st.st_mode & 07777 & ~kLogMode) != 0 &&
             ::fchmod(fd, st.st_mode & 07777 & kLogMode) != 0) {
    result =
        Unavailable("cannot narrow the mode of log " + path + " to 0640: " + std::strerror(errno));
  } else if (fd == STDERR_FILENO) {
    ::fcntl(fd, F_SETFD, 0);  // stderr was closed; the new file took its place
    return result;
  } else if (::dup2(fd, STDERR_FILENO) < 0) {
    result = Unavailable("cannot log to " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  return result;
}

std::string LogQuote(std::string_view value) {
  bool plain = !value.empty();
  for (unsigned char c : value) {
    if (c <= ' ' || c == '"' || c == '\\' || c == '=' || c >= 0x7f) plain = false;
  }
  if (plain) return std::string(value);
  std::string out = "\"";
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < ' ' || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out.append(buf);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace warren
