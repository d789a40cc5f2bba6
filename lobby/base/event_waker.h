// EventWaker: an eventfd that wakes one owner thread's event loop (it sits in the owner's
// poll set: an SSH connection's ssh_event, a guest control session's loop, the SSH accept
// loop). Any thread may Wake; only the owner Drains, WaitsFor and Closes. Wake after Close
// is a no-op, so a worker or caller that outlives the owner's loop by a moment does no harm.
// Thread-safe.
#pragma once

#include <mutex>

namespace warren {

class EventWaker {
 public:
  EventWaker();
  ~EventWaker();
  EventWaker(const EventWaker&) = delete;
  EventWaker& operator=(const EventWaker&) = delete;

  // False when the eventfd could not be made (the owner then cannot run its loop).
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Wake();
  // Reads away pending wakeups.
  void Drain();
  // Waits up to timeout_ms (-1: forever) for a wake; drains it. For an owner that has
  // nothing else to poll right now.
  void WaitFor(int timeout_ms);
  void Close();

 private:
  std::mutex mu_;
  int fd_ = -1;
};

}  // namespace warren
