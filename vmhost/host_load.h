// How much slower than alone a guest answers while the host's CPUs are busy, so that a wait
// meaning "the guest is gone" (an unanswered keepalive, an unopened channel, an in-guest
// `sync`) can tell a CPU-starved guest from a dead one.
//
// A guest's vCPUs (under TCG, threads that translate as they run) share the host's cores
// with everything else runnable: at a 1-minute load average L on N online CPUs a runnable
// guest gets about N/L of the CPU it would have alone, so it answers about L/N times slower.
// Such waits are stretched by that factor, capped so that a dead guest is still noticed on
// a swamped host. Thread-safe.
#pragma once

#include <chrono>

namespace warren {

// The largest stretch by default (serve --guest-slowdown-max): a 10 s allowance never grows
// past 2 minutes. 1 turns stretching off.
inline constexpr double kDefaultMaxGuestSlowdown = 12;
// What any maximum is held to.
inline constexpr double kGuestSlowdownLimit = 60;

// L/N of a load average and a CPU count, at least 1 and at most `max` (1 for a load or count
// that makes no sense). Pure.
double GuestSlowdownFor(double load_average, int cpus, double max = kDefaultMaxGuestSlowdown);

// GuestSlowdownFor this host's 1-minute load average and online CPUs now (1 when either
// cannot be read). Reads /proc/loadavg: call it once per call into a guest, or when a wait
// is about to give up, not per poll.
double GuestSlowdown(double max = kDefaultMaxGuestSlowdown);

// `base` stretched by `slowdown` (held to 1..kGuestSlowdownLimit).
std::chrono::milliseconds StretchedBy(std::chrono::milliseconds base, double slowdown);

}  // namespace warren
