// DialUnixSocket (lobby/base/unix_socket.h) and UniqueFd: a listening socket is reached
// without waiting and the socket is non-blocking; no listener, no socket file and a path too
// long are Unavailable; a full backlog is "busy", not a wait.
#include "lobby/base/unix_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace warren {
namespace {

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-unix-socket-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::unlink((dir_ + "/s").c_str());
    ::rmdir(dir_.c_str());
  }
  UniqueFd Listen(int backlog) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = dir_ + "/s";
    std::memcpy(addr.sun_path, path.data(), path.size());
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd.get(), backlog), 0);
    return fd;
  }
  std::string dir_;
};

TEST_F(UnixSocketTest, ConnectsToAListenerNonBlocking) {
  UniqueFd listener = Listen(4);
  Result<UniqueFd> fd = DialUnixSocket(dir_ + "/s");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(::fcntl(fd->get(), F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC);
  UniqueFd accepted(::accept(listener.get(), nullptr, nullptr));
  ASSERT_TRUE(accepted.valid());
  ASSERT_EQ(::write(accepted.get(), "x", 1), 1);
  char c = 0;
  for (int i = 0; i < 100 && ::read(fd->get(), &c, 1) != 1; ++i) ::usleep(1000);
  EXPECT_EQ(c, 'x');
}

TEST_F(UnixSocketTest, NothingThereIsUnavailable) {
  Result<UniqueFd> none = DialUnixSocket(dir_ + "/s");
  EXPECT_EQ(none.status().code(), Code::kUnavailable);
  EXPECT_NE(none.status().message().find("cannot connect to " + dir_ + "/s"), std::string::npos);
  EXPECT_EQ(DialUnixSocket(std::string(200, 'a')).status().code(), Code::kUnavailable);
  EXPECT_EQ(DialUnixSocket("").status().code(), Code::kUnavailable);
}

TEST_F(UnixSocketTest, AFullBacklogIsBusyNotAWait) {
  UniqueFd listener = Listen(0);
  std::vector<UniqueFd> held;
  auto t0 = std::chrono::steady_clock::now();
  Status last;
  for (int i = 0; i < 8 && last.ok(); ++i) {
    Result<UniqueFd> fd = DialUnixSocket(dir_ + "/s");
    if (fd.ok()) {
      held.push_back(std::move(*fd));
    } else {
      last = fd.status();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(last.code(), Code::kUnavailable);
  EXPECT_NE(last.message().find("is busy"), std::string::npos) << last.ToString();
}

TEST(UniqueFdTest, ClosesOnceAndMoves) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd a(pair[0]);
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT: moved-from is empty by contract
  EXPECT_EQ(b.get(), pair[0]);
  int raw = b.release();
  EXPECT_FALSE(b.valid());
  { UniqueFd c(raw); }
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);  // closed by c
  UniqueFd d(pair[1]);
  d.reset();
  EXPECT_EQ(::fcntl(pair[1], F_GETFD), -1);
}

}  // namespace
}  // namespace warren
