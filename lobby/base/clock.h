// Clock: the source of wall time, behind an interface so tests can move time (expiry of
// keys and tokens, job retention). SystemClock is thread-safe.
#pragma once

#include <cstdint>

namespace warren {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since the Unix epoch.
  virtual int64_t NowUnix() const = 0;
  // Milliseconds since the Unix epoch (metering); clocks that keep only seconds give those.
  virtual int64_t NowUnixMs() const { return NowUnix() * 1000; }
};

class SystemClock final : public Clock {
 public:
  int64_t NowUnix() const override;
  int64_t NowUnixMs() const override;
  static const Clock& Get();
};

}  // namespace warren
