// EventWaker: wakes an owner's poll from another thread, and is harmless after Close.
#include "lobby/base/event_waker.h"

#include <poll.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace warren {
namespace {

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(EventWakerTest, WakeMakesTheFdReadableUntilDrained) {
  EventWaker w;
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(Readable(w.fd()));
  w.Wake();
  w.Wake();  // wakeups coalesce
  EXPECT_TRUE(Readable(w.fd()));
  w.Drain();
  EXPECT_FALSE(Readable(w.fd()));
}

TEST(EventWakerTest, WaitForReturnsOnAWakeFromAnotherThreadOrAtTheTimeout) {
  EventWaker w;
  ASSERT_TRUE(w.ok());
  auto t0 = std::chrono::steady_clock::now();
  w.WaitFor(30);  // nobody wakes it
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(25));

  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.Wake();
  });
  t0 = std::chrono::steady_clock::now();
  w.WaitFor(-1);
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_FALSE(Readable(w.fd()));  // WaitFor drained it
}

TEST(EventWakerTest, EverythingAfterCloseIsANoOp) {
  EventWaker w;
  w.Close();
  EXPECT_FALSE(w.ok());
  w.Wake();
  w.Drain();
  w.WaitFor(-1);  // returns at once: there is nothing to wait on
  w.Close();
}

}  // namespace
}  // namespace warren
