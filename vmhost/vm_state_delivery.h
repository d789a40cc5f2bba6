// VmStateDelivery: how a VmHost hands its VM state changes to the one WatchStates listener —
// in order, one at a time, on a thread of its own, so whoever reports a change (libvirt's
// event loop thread, an API call) never waits on the listener (usage metering writes the
// store). Both hosts use it (LibvirtHost, and the fake in tests/fakes), so both keep the
// same delivery rules.
//
// The queue is bounded: when a listener falls that far behind, the queued events are dropped
// and replaced by one full report (`report_all`: every VM's current state), which is what
// a lost connection ends with too. Nothing is lost that way but intermediate states of a VM
// between two reports, which the contract allows (vm_host.h WatchStates).
//
// Thread-safe: any thread may Push, Resync or SetListener; the listener is only ever called
// on the delivery thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "lobby/base/status.h"
#include "vmhost/vm_host.h"

namespace warren {

class VmStateDelivery {
 public:
  // Every VM's current state, for a full report; run on the delivery thread. `stopping`
  // turns true when the delivery shuts down, for a report that has to wait (a reconnect).
  // A failure is retried (1 s, doubling to 10 s) until it succeeds or the delivery stops;
  // the events queued after it wait meanwhile.
  using ReportAll =
      std::function<Result<std::vector<VmStateEvent>>(const std::atomic<bool>& stopping)>;

  // Whether a pushed event is passed on at all (a host's own VMs only); run on the delivery
  // thread, where it may ask the hypervisor. Full reports are not filtered.
  using Admit = std::function<bool(const VmStateEvent& event)>;

  static constexpr size_t kDefaultMaxQueued = 10000;

  explicit VmStateDelivery(ReportAll report_all, size_t max_queued = kDefaultMaxQueued,
                           Admit admit = nullptr);
  // Stops the thread (an event being delivered finishes first); nothing queued is delivered.
  ~VmStateDelivery();
  VmStateDelivery(const VmStateDelivery&) = delete;
  VmStateDelivery& operator=(const VmStateDelivery&) = delete;

  // Replaces the listener; an empty one drops events from now on. Once this returns, the
  // previous listener is not called again, unless this was called from inside it.
  void SetListener(VmStateListener listener);
  // Queues one change. Never blocks on the listener.
  void Push(VmStateEvent event);
  // Queues a full report, delivered after what is queued before it.
  void Resync();
  // Waits until everything queued so far has been delivered (tests: a deterministic point).
  void Flush();

 private:
  struct FullReport {};
  using Item = std::variant<VmStateEvent, FullReport>;
  void Run();
  void Deliver(const VmStateEvent& event);
  // The full report, retried while it fails; empty when the delivery stops first.
  std::vector<VmStateEvent> ReportAllRetrying();

  const ReportAll report_all_;
  const size_t max_queued_;
  const Admit admit_;
  std::mutex mu_;  // guards queue_, busy_
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool busy_ = false;  // an item is being delivered
  std::atomic<bool> stopping_{false};
  // Held while the listener runs, so SetListener can promise no later call; recursive so
  // the listener may call SetListener itself.
  std::recursive_mutex listener_mu_;
  VmStateListener listener_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace warren
