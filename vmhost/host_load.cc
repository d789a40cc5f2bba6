#include "vmhost/host_load.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace warren {

double GuestSlowdownFor(double load_average, int cpus) {
  if (cpus <= 0 || !std::isfinite(load_average) || load_average <= 0) return 1;
  return std::clamp(load_average / cpus, 1.0, kMaxGuestSlowdown);
}

double GuestSlowdown() {
  double load[1] = {0};
  if (::getloadavg(load, 1) != 1) return 1;
  return GuestSlowdownFor(load[0], static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
}

std::chrono::milliseconds StretchedBy(std::chrono::milliseconds base, double slowdown) {
  const double factor =
      std::clamp(std::isfinite(slowdown) ? slowdown : 1.0, 1.0, kMaxGuestSlowdown);
  return std::chrono::milliseconds(static_cast<long long>(std::llround(base.count() * factor)));
}

}  // namespace warren
