// PortPipe (vmhost/guest/port_pipe.h) over a socket pair standing in for a VM's identity
// port: bytes both ways with a notify after each change, the guest's end closing as the end,
// bounded buffers both ways, and Close hanging up with no notify after it.
#include "vmhost/guest/port_pipe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace warren::guest {
namespace {

using std::chrono::milliseconds;

class PortPipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    guest_ = sv[1];
    pipe_ = std::make_unique<PortPipe>(UniqueFd(sv[0]), [this] {
      std::lock_guard<std::mutex> lock(mu_);
      ++notified_;
      cv_.notify_all();
    });
  }
  void TearDown() override {
    pipe_.reset();
    if (guest_ >= 0) ::close(guest_);
  }
  // Waits (up to 5 s) until `done` holds, re-checked at each notify.
  template <typename F>
  bool Until(F done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, milliseconds(5000), [&] {
      lock.unlock();
      bool d = done();
      lock.lock();
      return d;
    });
  }
  std::string TakeOutput() {
    std::string all, chunk;
    while (pipe_->PeekOutput(false, 4096, &chunk)) {
      pipe_->ConsumeOutput(false, chunk.size());
      all += chunk;
    }
    return all;
  }

  int guest_ = -1;
  std::unique_ptr<PortPipe> pipe_;
  std::mutex mu_;
  std::condition_variable cv_;
  int notified_ = 0;
};

TEST_F(PortPipeTest, BytesGoBothWaysAndEachChangeNotifies) {
  EXPECT_FALSE(pipe_->opening());
  EXPECT_TRUE(pipe_->status().ok());
  EXPECT_EQ(pipe_->Write("warren identity\n"), 16u);
  char buf[64];
  ssize_t n = ::read(guest_, buf, sizeof buf);
  ASSERT_EQ(n, 16);
  EXPECT_EQ(std::string(buf, n), "warren identity\n");
  ASSERT_EQ(::write(guest_, "identity here\n", 14), 14);
  std::string got;
  ASSERT_TRUE(Until([&] {
    got += TakeOutput();
    return got == "identity here\n";
  })) << got;
  std::string none;
  EXPECT_FALSE(pipe_->PeekOutput(/*is_stderr=*/true, 10, &none));  // a port has no stderr
  // No half-close: the guest still reads after CloseInput.
  pipe_->CloseInput();
  EXPECT_EQ(pipe_->Write("x\n"), 2u);
  n = ::read(guest_, buf, sizeof buf);
  EXPECT_EQ(n, 2);
  EXPECT_FALSE(pipe_->end().closed);
}

TEST_F(PortPipeTest, TheGuestEndClosingEndsItOnceItsBytesAreRead) {
  ASSERT_EQ(::write(guest_, "exit 0\n", 7), 7);
  ::close(guest_);
  guest_ = -1;
  std::string got;
  ASSERT_TRUE(Until([&] {
    got += TakeOutput();
    return pipe_->end().closed;
  }));
  EXPECT_EQ(got, "exit 0\n");
  EXPECT_TRUE(pipe_->status().ok());
}

TEST_F(PortPipeTest, BuffersAreBoundedBothWays) {
  // A guest that reads nothing: the host's writes stop at the buffer (and the socket's).
  const std::string big(PortPipe::kBufferBytes, 'a');
  size_t taken = 0;
  for (int i = 0; i < 64; ++i) taken += pipe_->Write(big);
  EXPECT_LT(taken, 64 * big.size());
  // A host that consumes nothing: the pipe holds at most its buffer of the guest's bytes,
  // exactly, not a read's worth more. An odd amount first, so reads of whole chunks after it
  // would pass the bound (CI once saw 69632 held).
  const std::string odd(1000, 'o');
  ASSERT_EQ(::send(guest_, odd.data(), odd.size(), 0), static_cast<ssize_t>(odd.size()));
  std::string first;
  ASSERT_TRUE(Until(
      [&] { return pipe_->PeekOutput(false, 1 << 20, &first) && first.size() == odd.size(); }));
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    const std::string chunk(4096, 'g');
    while (!stop && ::send(guest_, chunk.data(), chunk.size(), MSG_DONTWAIT) != -1) {
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  stop = true;
  flood.join();
  std::string held;
  ASSERT_TRUE(pipe_->PeekOutput(false, 1 << 20, &held));
  EXPECT_EQ(held.size(), PortPipe::kBufferBytes);
}

TEST_F(PortPipeTest, CloseHangsUpAndNotifiesNoMore) {
  pipe_->Close();
  const int before = notified_;
  char buf[8];
  EXPECT_EQ(::read(guest_, buf, sizeof buf), 0);             // the host end closed
  EXPECT_EQ(::send(guest_, "late\n", 5, MSG_NOSIGNAL), -1);  // nobody reads: EPIPE
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(notified_, before);
  EXPECT_EQ(pipe_->Write("more"), 0u);
  pipe_->Close();  // idempotent
}

}  // namespace
}  // namespace warren::guest
