#include "lobby/sandbox_reaper.h"

#include <chrono>

#include "lobby/commands/sandbox_expiry.h"

namespace warren {

SandboxReaper::SandboxReaper(Services& services) : services_(services) {
  thread_ = std::thread([this] { Loop(); });
}

SandboxReaper::~SandboxReaper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SandboxReaper::Loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
    lock.unlock();
    ExpireSandboxes(services_, services_.clock->NowUnix());
    lock.lock();
  }
}

}  // namespace warren
