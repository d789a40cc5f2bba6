#include "vmhost/vm_state_delivery.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "lobby/base/log.h"

namespace warren {

VmStateDelivery::VmStateDelivery(ReportAll report_all, size_t max_queued, Admit admit)
    : report_all_(std::move(report_all)),
      max_queued_(std::max<size_t>(max_queued, 1)),
      admit_(std::move(admit)),
      thread_([this] { Run(); }) {}

VmStateDelivery::~VmStateDelivery() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void VmStateDelivery::SetListener(VmStateListener listener) {
  std::lock_guard lock(listener_mu_);  // waits for a call in progress (unless it is ours)
  listener_ = std::move(listener);
}

void VmStateDelivery::Push(VmStateEvent event) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (queue_.size() >= max_queued_) {
      // The listener is far behind: what it has not seen yet becomes one full report
      // instead of a queue that grows without bound.
      LogWarn("vmhost: " + std::to_string(queue_.size()) +
              " vm state changes not yet delivered; replacing them with a full report");
      queue_.clear();
      queue_.emplace_back(FullReport{});
    } else {
      queue_.emplace_back(std::move(event));
    }
  }
  cv_.notify_all();
}

void VmStateDelivery::Resync() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.emplace_back(FullReport{});
  }
  cv_.notify_all();
}

void VmStateDelivery::Flush() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return stopping_ || (queue_.empty() && !busy_); });
}

void VmStateDelivery::Deliver(const VmStateEvent& event) {
  std::lock_guard lock(listener_mu_);
  // A copy: the listener may replace itself (SetListener from inside the call).
  VmStateListener listener = listener_;
  if (listener) listener(event);
}

std::vector<VmStateEvent> VmStateDelivery::ReportAllRetrying() {
  auto backoff = std::chrono::seconds(1);
  while (!stopping_) {
    Result<std::vector<VmStateEvent>> all = report_all_(stopping_);
    if (all.ok()) return std::move(all).value();
    LogWarn("vmhost: reporting every vm's state: " + all.status().ToString() + " (again in " +
            std::to_string(backoff.count()) + " s)");
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, backoff, [this] { return stopping_.load(); });
    backoff = std::min(backoff * 2, std::chrono::seconds(10));
  }
  return {};
}

void VmStateDelivery::Run() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu_);
      busy_ = false;
      cv_.notify_all();  // Flush waiters
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    if (const auto* event = std::get_if<VmStateEvent>(&item)) {
      if (!admit_ || admit_(*event)) Deliver(*event);
      continue;
    }
    for (const VmStateEvent& event : ReportAllRetrying()) {
      if (stopping_) return;
      Deliver(event);
    }
  }
}

}  // namespace warren
