// Logging: one line per event on stderr, "ts level msg". Audit lines are key=value so
// operators can grep them. Never pass a token, private key or secret to these functions.
// Thread-safe: each line is written with a single write(2).
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

void SetLogLevel(LogLevel level);
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

}  // namespace warren
