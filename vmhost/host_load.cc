#include "vmhost/host_load.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace warren {

double GuestSlowdownFor(double load_average, int cpus, double max) {
  if (cpus <= 0 || !std::isfinite(load_average) || load_average <= 0) return 1;
  if (!std::isfinite(max)) max = kDefaultMaxGuestSlowdown;
  return std::clamp(load_average / cpus, 1.0, std::clamp(max, 1.0, kGuestSlowdownLimit));
}

double GuestSlowdown(double max) {
  double load[1] = {0};
  if (::getloadavg(load, 1) != 1) return 1;
  return GuestSlowdownFor(load[0], static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), max);
}

std::chrono::milliseconds StretchedBy(std::chrono::milliseconds base, double slowdown) {
  const double factor =
      std::clamp(std::isfinite(slowdown) ? slowdown : 1.0, 1.0, kGuestSlowdownLimit);
  return std::chrono::milliseconds(static_cast<long long>(std::llround(base.count() * factor)));
}

}  // namespace warren
