#include "lobby/base/clock.h"

#include <chrono>

namespace warren {

int64_t SystemClock::NowUnix() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::NowUnixMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const Clock& SystemClock::Get() {
  static const SystemClock clock;
  return clock;
}

}  // namespace warren
