#include "bridge/rate_limiter.h"

#include <algorithm>
#include <chrono>

namespace warren {
namespace {

// Past this many buckets, full ones (keys idle long enough to refill) are dropped.
constexpr size_t kPruneAbove = 10'000;

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

RateLimiter::RateLimiter(double rate, double burst, std::function<double()> now_seconds)
    : rate_(std::max(rate, 0.001)),
      burst_(std::max(burst, 1.0)),
      now_(now_seconds ? std::move(now_seconds) : SteadySeconds) {}

bool RateLimiter::Allow(std::string_view key) {
  const double now = now_();
  std::lock_guard lock(mu_);
  if (buckets_.size() > kPruneAbove) {
    std::erase_if(buckets_, [&](const auto& kv) {
      return kv.second.tokens + (now - kv.second.last) * rate_ >= burst_;
    });
  }
  auto [it, fresh] = buckets_.try_emplace(std::string(key), Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst_, b.tokens + (now - b.last) * rate_);
    b.last = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace warren
