#include "keys/usage.h"

#include <algorithm>
#include <limits>

namespace warren {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Amounts saturate instead of wrapping. Real ones stay far below the bound (256 GiB running
// for a whole year is 262'144 MiB × 3.15e10 ms ≈ 8.3e15 MiB·ms, about 1/1100 of it), but
// the factors come from stored records, and a corrupt one must not turn a bill negative.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? kMax : std::numeric_limits<int64_t>::min();
  return out;
}

// `factor` × `ms` for a non-negative ms; a negative factor (never stored by this binary)
// accrues nothing.
int64_t Product(int64_t factor, int64_t ms) {
  if (factor <= 0 || ms <= 0) return 0;
  int64_t out = 0;
  if (__builtin_mul_overflow(factor, ms, &out)) return kMax;
  return out;
}

// Calls add(day, ms) for each UTC day's share of [from_ms, to_ms); nothing when the
// interval is empty or backward.
template <typename Add>
void SplitByDay(int64_t from_ms, int64_t to_ms, const Add& add) {
  int64_t t = from_ms;
  while (t < to_ms) {
    const int64_t day = UsageDay(t);
    // The next midnight; a day near the end of int64 ends at to_ms instead of overflowing.
    const int64_t midnight = day < kMax / kMsPerDay - 1 ? (day + 1) * kMsPerDay : to_ms;
    const int64_t end = std::min(to_ms, midnight);
    add(day, end - t);
    t = end;
  }
}

}  // namespace

UsageAmounts& UsageAmounts::operator+=(const UsageAmounts& o) {
  running_ms = SaturatingAdd(running_ms, o.running_ms);
  vcpu_ms = SaturatingAdd(vcpu_ms, o.vcpu_ms);
  memory_mib_ms = SaturatingAdd(memory_mib_ms, o.memory_mib_ms);
  disk_gib_ms = SaturatingAdd(disk_gib_ms, o.disk_gib_ms);
  return *this;
}

int64_t UsageDay(int64_t unix_ms) {
  // Floor, not truncation: a time before the epoch belongs to the day before day 0.
  int64_t day = unix_ms / kMsPerDay;
  if (unix_ms % kMsPerDay < 0) --day;
  return day;
}

void AccrueTo(const VmMeter& meter, int64_t disk_gib, int64_t to_ms,
              std::map<int64_t, UsageAmounts>& by_day) {
  // A mark of 0 is no mark: a VM not running, or a record from before metering whose disk
  // time starts at its first mark.
  if (meter.running_since_ms > 0) {
    SplitByDay(meter.running_since_ms, to_ms, [&](int64_t day, int64_t ms) {
      UsageAmounts a;
      a.running_ms = ms;
      a.vcpu_ms = Product(meter.running_cpus, ms);
      a.memory_mib_ms = Product(meter.running_memory_mib, ms);
      by_day[day] += a;
    });
  }
  if (meter.disk_since_ms > 0 && disk_gib > 0) {
    SplitByDay(meter.disk_since_ms, to_ms, [&](int64_t day, int64_t ms) {
      UsageAmounts a;
      a.disk_gib_ms = Product(disk_gib, ms);
      by_day[day] += a;
    });
  }
}

VmMeter MarkedAt(const VmMeter& meter, bool running, int cpus, int64_t memory_mib, int64_t at_ms) {
  VmMeter out = meter;
  out.disk_since_ms = std::max(meter.disk_since_ms, at_ms);
  if (!running) {
    out.running_since_ms = 0;
    out.running_cpus = 0;
    out.running_memory_mib = 0;
  } else if (meter.running_since_ms > 0) {
    out.running_since_ms = std::max(meter.running_since_ms, at_ms);  // keeps its start shape
  } else {
    out.running_since_ms = at_ms;
    out.running_cpus = cpus;
    out.running_memory_mib = memory_mib;
  }
  return out;
}

double UsageUnits(const UsageAmounts& amounts) {
  constexpr double kMsPerHour = 3'600'000.0;
  const double vcpu_hours = static_cast<double>(amounts.vcpu_ms) / kMsPerHour;
  const double gib_hours = static_cast<double>(amounts.memory_mib_ms) / 1024.0 / kMsPerHour;
  return (vcpu_hours / 2.0 + gib_hours / 4.0) / 2.0;
}

}  // namespace warren
