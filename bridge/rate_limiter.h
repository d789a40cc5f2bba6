// RateLimiter: a token bucket per key (an API token's label id for /exec, a request's source
// for OAuth): `rate` requests a second on average, bursts of up to `burst`. Buckets of keys
// not seen for a while are dropped, so memory stays bounded by the keys active recently.
// Thread-safe.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace warren {

class RateLimiter {
 public:
  // `now_seconds`: a monotonic clock in seconds (tests pass their own).
  RateLimiter(double rate, double burst, std::function<double()> now_seconds = {});

  // Takes one request from `key`'s bucket: false when it is empty.
  bool Allow(std::string_view key);

  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  struct Bucket {
    double tokens = 0;
    double last = 0;
  };

  const double rate_;
  const double burst_;
  std::function<double()> now_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace warren
