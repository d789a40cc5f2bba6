#include "lobby/base/clock.h"

#include <chrono>

namespace warren {

int64_t SystemClock::NowUnix() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const Clock& SystemClock::Get() {
  static const SystemClock clock;
  return clock;
}

}  // namespace warren
