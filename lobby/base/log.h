// Logging: one line per event on stderr, "ts level msg" (or, with LogFormat::kJson, one JSON
// object per line: {"ts","level","msg"} and the key=value fields of the message). Audit lines
// are key=value so operators can grep them. Never pass a token, private key or secret to these
// functions, at any level. Thread-safe: each line is written with a single write(2).
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

enum class LogFormat { kText, kJson };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void SetLogFormat(LogFormat format);
// "debug", "info", "warn" or "error" (the names --log-level takes).
Result<LogLevel> ParseLogLevel(std::string_view name);
const char* LogLevelName(LogLevel level);
void Log(LogLevel level, std::string_view message);

inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarn(std::string_view m) { Log(LogLevel::kWarn, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }
inline void LogDebug(std::string_view m) { Log(LogLevel::kDebug, m); }

// Sends the log (everything on stderr) to `path`, appended: made 0640 when new, and an
// existing regular file readable or writable by others is narrowed to 0640 (the audit lines name
// users and credentials' fingerprints). Call before any thread starts.
Status OpenLogFile(const std::string& path);

// Quotes a value for a key=value log line when it has spaces, quotes or control bytes,
// and escapes control bytes so a caller cannot forge log lines.
std::string LogQuote(std::string_view value);

// The line Log writes for `message` (without the newline): "TS LEVEL MESSAGE" as text, or the
// JSON object. A message that is a few words and then only `key=value` pairs (values plain or
// as LogQuote writes them) becomes msg (the words) and one field per pair; any other message is
// msg whole. Bytes that are not UTF-8 become U+FFFD in JSON.
std::string FormatLogLine(LogFormat format, std::string_view ts, LogLevel level,
                          std::string_view message);

}  // namespace warren
