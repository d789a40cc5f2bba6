// Linked into every executable of the TSan build only (tests/sanitizers/run.sh): clang 14's
// ThreadSanitizer does not intercept pthread_mutex_clocklock, which libstdc++ 12's
// std::timed_mutex::try_lock_for calls, so TSan missed the lock, reported the unlock as
// "unlock of an unlocked mutex" and lost the happens-before it gives. This definition takes
// the executable's calls instead of glibc's and waits with pthread_mutex_timedlock, which
// TSan intercepts, on a CLOCK_REALTIME deadline as far away as the caller's. Never in the
// product build.
#include <errno.h>
#include <pthread.h>
#include <time.h>

extern "C" int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock,
                                       const struct timespec* abstime) {
  if (clock == CLOCK_REALTIME) return pthread_mutex_timedlock(mutex, abstime);
  timespec now{}, real{};
  if (clock_gettime(clock, &now) != 0 || clock_gettime(CLOCK_REALTIME, &real) != 0) return EINVAL;
  long long left_ns =
      (abstime->tv_sec - now.tv_sec) * 1000000000LL + (abstime->tv_nsec - now.tv_nsec);
  if (left_ns < 0) left_ns = 0;
  long long at_ns = real.tv_sec * 1000000000LL + real.tv_nsec + left_ns;
  timespec deadline{static_cast<time_t>(at_ns / 1000000000LL),
                    static_cast<long>(at_ns % 1000000000LL)};
  return pthread_mutex_timedlock(mutex, &deadline);
}
