// How VM state changes reach a WatchStates listener: VmStateDelivery's order, thread,
// listener swaps, bound and full reports; and which libvirt lifecycle event means which
// state. No hypervisor: the hosts' own event tests are in vm_host_contract_test.cc and
// libvirt_host_test.cc.
#include <gtest/gtest.h>
#include <libvirt/libvirt.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vmhost/libvirt_events.h"
#include "vmhost/vm_state_delivery.h"

namespace warren {
namespace {

using S = VmState;

// A full report of two VMs, counting its calls.
struct Reporter {
  std::atomic<int> calls{0};
  std::atomic<int> failures_left{0};
  VmStateDelivery::ReportAll Fn() {
    return [this](const std::atomic<bool>&) -> Result<std::vector<VmStateEvent>> {
      ++calls;
      if (failures_left > 0) {
        --failures_left;
        return Unavailable("no daemon");
      }
      return std::vector<VmStateEvent>{{"a", S::kRunning}, {"b", S::kPaused}};
    };
  }
};

struct Collected {
  std::mutex mu;
  std::vector<VmStateEvent> events;
  std::vector<std::thread::id> threads;
  VmStateListener Listener() {
    return [this](const VmStateEvent& e) {
      std::lock_guard lock(mu);
      events.push_back(e);
      threads.push_back(std::this_thread::get_id());
    };
  }
  std::vector<std::string> Ids() {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const VmStateEvent& e : events) out.push_back(e.id);
    return out;
  }
};

TEST(VmStateDeliveryTest, InOrderOnItsOwnThread) {
  Reporter r;
  Collected got;
  VmStateDelivery d(r.Fn());
  d.SetListener(got.Listener());
  for (int i = 0; i < 100; ++i) d.Push({std::to_string(i), S::kRunning});
  d.Flush();
  ASSERT_EQ(got.events.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got.events[i].id, std::to_string(i));
  for (std::thread::id t : got.threads) {
    EXPECT_NE(t, std::this_thread::get_id());
    EXPECT_EQ(t, got.threads[0]);
  }
  EXPECT_EQ(r.calls, 0);
}

TEST(VmStateDeliveryTest, AFullReportComesInItsPlace) {
  Reporter r;
  Collected got;
  VmStateDelivery d(r.Fn());
  d.SetListener(got.Listener());
  d.Push({"x", S::kStopped});
  d.Resync();
  d.Push({"y", S::kStopped});
  d.Flush();
  EXPECT_EQ(got.Ids(), (std::vector<std::string>{"x", "a", "b", "y"}));
  EXPECT_EQ(got.events[2].state, S::kPaused);
}

TEST(VmStateDeliveryTest, AFailingFullReportIsRetriedAndHoldsWhatFollows) {
  Reporter r;
  r.failures_left = 1;
  Collected got;
  VmStateDelivery d(r.Fn());
  d.SetListener(got.Listener());
  d.Resync();
  d.Push({"after", S::kRunning});
  d.Flush();  // one retry: about a second
  EXPECT_EQ(r.calls, 2);
  EXPECT_EQ(got.Ids(), (std::vector<std::string>{"a", "b", "after"}));
}

TEST(VmStateDeliveryTest, OverflowBecomesOneFullReport) {
  Reporter r;
  std::mutex gate;
  gate.lock();  // the listener waits here: everything else queues up
  std::atomic<bool> holding{false};
  std::vector<std::string> ids;
  VmStateDelivery d(r.Fn(), /*max_queued=*/4);
  d.SetListener([&](const VmStateEvent& e) {
    if (e.id == "first") {
      holding = true;
      gate.lock();
      gate.unlock();
    }
    ids.push_back(e.id);
  });
  d.Push({"first", S::kRunning});
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // n0..n3 fill the queue, n4 turns them into a full report, n5..n7 fill it again, n8 does
  // the same (one full report, not two), n9 follows it.
  for (int i = 0; i < 10; ++i) d.Push({"n" + std::to_string(i), S::kRunning});
  gate.unlock();
  d.Flush();
  EXPECT_EQ(ids, (std::vector<std::string>{"first", "a", "b", "n9"}));
  EXPECT_EQ(r.calls, 1);
}

TEST(VmStateDeliveryTest, AReplacedListenerIsNotCalledAgain) {
  Reporter r;
  VmStateDelivery d(r.Fn());
  std::atomic<bool> replaced{false};
  std::atomic<int> late_calls{0};
  std::atomic<int> in_first{0};
  d.SetListener([&](const VmStateEvent&) {
    ++in_first;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (replaced) ++late_calls;
  });
  d.Push({"a", S::kRunning});
  while (in_first == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Collected second;
  d.SetListener(second.Listener());  // waits for the call in progress
  replaced = true;
  d.Push({"b", S::kRunning});
  d.Flush();
  EXPECT_EQ(late_calls, 0);
  EXPECT_EQ(second.Ids(), (std::vector<std::string>{"b"}));
  d.SetListener(nullptr);
  d.Push({"c", S::kRunning});
  d.Flush();
  EXPECT_EQ(second.Ids(), (std::vector<std::string>{"b"}));
}

TEST(VmStateDeliveryTest, TheListenerMayReplaceItself) {
  Reporter r;
  VmStateDelivery d(r.Fn());
  Collected after;
  d.SetListener([&](const VmStateEvent&) { d.SetListener(after.Listener()); });
  d.Push({"a", S::kRunning});
  d.Push({"b", S::kRunning});
  d.Flush();
  EXPECT_EQ(after.Ids(), (std::vector<std::string>{"b"}));
}

TEST(VmStateDeliveryTest, AdmitFiltersPushedEventsOnly) {
  Reporter r;
  Collected got;
  VmStateDelivery d(r.Fn(), VmStateDelivery::kDefaultMaxQueued,
                    [](const VmStateEvent& e) { return e.id != "a" && e.id != "theirs"; });
  d.SetListener(got.Listener());
  d.Push({"theirs", S::kRunning});
  d.Push({"mine", S::kRunning});
  d.Resync();  // reports "a" although Admit would refuse it: a full report is the host's own
  d.Flush();
  EXPECT_EQ(got.Ids(), (std::vector<std::string>{"mine", "a", "b"}));
}

TEST(VmStateDeliveryTest, StopsWhileAFullReportKeepsFailing) {
  Reporter r;
  r.failures_left = 1000;
  auto d = std::make_unique<VmStateDelivery>(r.Fn());
  d->Resync();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto start = std::chrono::steady_clock::now();
  d.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(LifecycleEventTest, StateAfterEachEvent) {
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_BOOTED),
            S::kRunning);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_UNPAUSED),
            S::kRunning);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_PAUSED),
            S::kPaused);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_PMSUSPENDED, 0), S::kPaused);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN),
            S::kStopped);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_DESTROYED),
            S::kStopped);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_CRASHED),
            S::kCrashed);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_CRASHED, VIR_DOMAIN_EVENT_CRASHED_PANICKED),
            S::kCrashed);
  EXPECT_EQ(
      StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_CRASHED, VIR_DOMAIN_EVENT_CRASHED_CRASHLOADED),
      std::nullopt);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_UNDEFINED, 0), S::kStopped);
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_DEFINED, 0), std::nullopt);
  // Powering off is not off yet: STOPPED follows.
  EXPECT_EQ(StateAfterLifecycleEvent(VIR_DOMAIN_EVENT_SHUTDOWN, VIR_DOMAIN_EVENT_SHUTDOWN_FINISHED),
            std::nullopt);
  EXPECT_EQ(StateAfterLifecycleEvent(1000, 0), std::nullopt);
}

}  // namespace
}  // namespace warren
