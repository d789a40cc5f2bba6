// StateRecorder: a VmHost::WatchStates listener for tests that records what it is told and
// waits for it. Thread-safe (the host calls it on its own thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "vmhost/vm_host.h"

namespace warren {

// What a WatchStates listener was told, per VM, in order.
class StateRecorder {
 public:
  VmStateListener Listener() {
    return [this](const VmStateEvent& e) {
      std::lock_guard lock(mu_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  // The states reported for `id`, a state repeated at once counted once (the real host may
  // report a removal after a stop, the fake only one of them).
  std::vector<VmState> StatesOf(const std::string& id) {
    std::lock_guard lock(mu_);
    return StatesOfLocked(id);
  }
  // Waits (a few seconds at most) until StatesOf(id) is `want`; returns what it is then.
  std::vector<VmState> WaitFor(const std::string& id, const std::vector<VmState>& want) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(15), [&] { return StatesOfLocked(id) == want; });
    return StatesOfLocked(id);
  }
  // Waits (a few seconds at most) until the last state reported for `id` is `state`; returns
  // StatesOf(id) then.
  std::vector<VmState> WaitForLast(const std::string& id, VmState state) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(15), [&] {
      std::vector<VmState> states = StatesOfLocked(id);
      return !states.empty() && states.back() == state;
    });
    return StatesOfLocked(id);
  }
  // Waits until `id` got `n` reports in all (repeats counted); returns how many it got.
  size_t WaitForCount(const std::string& id, size_t n) {
    std::unique_lock lock(mu_);
    auto count = [&] {
      size_t c = 0;
      for (const VmStateEvent& e : events_) c += e.id == id ? 1 : 0;
      return c;
    };
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return count() >= n; });
    return count();
  }
  std::vector<VmStateEvent> All() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::vector<VmState> StatesOfLocked(const std::string& id) {
    std::vector<VmState> out;
    for (const VmStateEvent& e : events_) {
      if (e.id == id && (out.empty() || out.back() != e.state)) out.push_back(e.state);
    }
    return out;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<VmStateEvent> events_;
};

inline std::string Names(const std::vector<VmState>& states) {
  std::string out;
  for (VmState s : states) out += std::string(out.empty() ? "" : ",") + std::string(VmStateName(s));
  return "[" + out + "]";
}

}  // namespace warren
