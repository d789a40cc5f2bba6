// EventWaker: an eventfd that wakes a control session's owner thread (it sits in the
// owner's poll set). Any thread may Wake; only the owner Drains. Wake after Close is a
// no-op, so a caller that outlives the owner's loop by a moment does no harm.
// Thread-safe.
#pragma once

#include <mutex>

namespace warren::guest {

class EventWaker {
 public:
  EventWaker();
  ~EventWaker();
  EventWaker(const EventWaker&) = delete;
  EventWaker& operator=(const EventWaker&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Wake();
  void Drain();
  // Waits up to timeout_ms (-1: forever) for a wake; drains it. For the owner while it has
  // no connection to poll.
  void WaitFor(int timeout_ms);
  void Close();

 private:
  std::mutex mu_;
  int fd_ = -1;
};

}  // namespace warren::guest
