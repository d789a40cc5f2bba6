#include "lobby/base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>
#include <vector>

namespace warren {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};

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

// The length of the UTF-8 sequence at s[i], or 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF included).
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out.append(buf);
      ++i;
    } else if (size_t n = Utf8SequenceAt(s, i); n == 0) {
      out.append("\xef\xbf\xbd");  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  out.push_back('"');
}

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// A value as LogQuote wrote it, quoted: from the opening quote at s[*i] to the closing one,
// unescaped; *i ends past the closing quote.
std::optional<std::string> ReadQuoted(std::string_view s, size_t* i) {
  std::string value;
  for (size_t k = *i + 1; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '"') {
      *i = k + 1;
      return value;
    }
    if (c != '\\') {
      value.push_back(c);
      continue;
    }
    if (k + 1 >= s.size()) return std::nullopt;
    const char e = s[++k];
    if (e == '"' || e == '\\') {
      value.push_back(e);
    } else if (e == 'x' && k + 2 < s.size()) {
      unsigned int byte = 0;
      if (std::sscanf(std::string(s.substr(k + 1, 2)).c_str(), "%2x", &byte) != 1) {
        return std::nullopt;
      }
      value.push_back(static_cast<char>(byte));
      k += 2;
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

struct SplitMessage {
  std::string_view words;
  std::vector<std::pair<std::string_view, std::string>> fields;
};

// "some words key=value key2=\"quoted value\"": the words, then the pairs; nullopt when the
// message is not of that shape (no words, no pairs, a word after a pair, a repeated key, or
// a key the JSON object has already).
std::optional<SplitMessage> SplitFields(std::string_view m) {
  SplitMessage out;
  size_t i = 0;
  size_t words_end = 0;
  while (i < m.size()) {
    size_t end = m.find(' ', i);
    if (end == std::string_view::npos) end = m.size();
    const std::string_view token = m.substr(i, end - i);
    const size_t eq = token.find('=');
    if (eq == std::string_view::npos) {
      if (!out.fields.empty() || token.empty()) return std::nullopt;
      words_end = end;
      i = end + 1;
      continue;
    }
    const std::string_view key = token.substr(0, eq);
    if (key.empty()) return std::nullopt;
    for (char c : key) {
      if (!IsKeyChar(c)) return std::nullopt;
    }
    if (key == "ts" || key == "level" || key == "msg") return std::nullopt;
    for (const auto& [k, v] : out.fields) {
      if (k == key) return std::nullopt;
    }
    size_t value_start = i + eq + 1;
    std::string value;
    if (value_start < m.size() && m[value_start] == '"') {
      size_t after = value_start;
      std::optional<std::string> quoted = ReadQuoted(m, &after);
      if (!quoted || (after < m.size() && m[after] != ' ')) return std::nullopt;
      value = std::move(*quoted);
      end = after;
    } else {
      value = std::string(m.substr(value_start, end - value_start));
    }
    out.fields.emplace_back(key, std::move(value));
    i = end + 1;
  }
  if (words_end == 0 || out.fields.empty()) return std::nullopt;
  out.words = m.substr(0, words_end);
  return out;
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }

LogLevel GetLogLevel() { return g_level.load(); }

void SetLogFormat(LogFormat format) { g_format.store(format); }

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

Result<LogLevel> ParseLogLevel(std::string_view name) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (name == LogLevelName(l)) return l;
  }
  return InvalidArgument("log level " + std::string(name) +
                         ": expected debug, info, warn or error");
}

std::string FormatLogLine(LogFormat format, std::string_view ts, LogLevel level,
                          std::string_view message) {
  std::string line;
  line.reserve(message.size() + 48);
  if (format == LogFormat::kText) {
    line.append(ts).append(" ").append(LevelName(level)).append(" ");
    for (char c : message) line.push_back(c == '\n' ? ' ' : c);
    return line;
  }
  line.append("{\"ts\":");
  AppendJsonString(line, ts);
  line.append(",\"level\":");
  AppendJsonString(line, LogLevelName(level));
  line.append(",\"msg\":");
  std::optional<SplitMessage> split = SplitFields(message);
  AppendJsonString(line, split ? split->words : message);
  if (split) {
    for (const auto& [key, value] : split->fields) {
      line.push_back(',');
      AppendJsonString(line, key);
      line.push_back(':');
      AppendJsonString(line, value);
    }
  }
  line.push_back('}');
  return line;
}

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
  std::string line = FormatLogLine(g_format.load(), ts, level, message);
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
