// The GuestControl scenarios against a local OpenSSH sshd on a unix socket: everything but
// the guest image (launcher, virtio-serial, TCG speed), in milliseconds. See
// guest_vm_test.cc for the same scenarios against a real guest.
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "lobby/base/unix_socket.h"
#include "tests/unit/guest_control_scenarios.h"

namespace warren::guest::testing {
namespace {

std::string ReadProcFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every process of this target: the socat that listens for it (its command line names the
// target's sshd_config) and everything below it; with `sshd_only`, just the sshd processes
// serving connections (sshd's own retitle themselves), not socat itself.
std::set<pid_t> TargetProcesses(const std::string& config_path, bool sshd_only) {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, std::string> comm;
  std::set<pid_t> tree;
  DIR* d = opendir("/proc");
  if (d == nullptr) return tree;
  while (dirent* e = readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::string dir = "/proc/" + std::string(e->d_name);
    std::string stat = ReadProcFile(dir + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
    parent[pid] = ppid;
    comm[pid] = ReadProcFile(dir + "/comm");
    if (ReadProcFile(dir + "/cmdline").find(config_path) != std::string::npos) tree.insert(pid);
  }
  closedir(d);
  for (bool grew = true; grew;) {
    grew = false;
    for (auto [pid, ppid] : parent) {
      if (!tree.count(pid) && tree.count(ppid)) grew = tree.insert(pid).second;
    }
  }
  if (!sshd_only) return tree;
  std::set<pid_t> sshd;
  for (pid_t pid : tree) {
    if (comm[pid].rfind("sshd", 0) == 0) sshd.insert(pid);
  }
  return sshd;
}

std::set<pid_t> TargetSshdProcesses(const std::string& config_path) {
  return TargetProcesses(config_path, /*sshd_only=*/true);
}

// Stops the whole target (socat and its sshds) while alive: a guest whose control link
// stalled. New connections then wait in the listen backlog, unanswered.
class FrozenTarget {
 public:
  explicit FrozenTarget(const std::string& config_path)
      : pids_(TargetProcesses(config_path, /*sshd_only=*/false)) {
    for (pid_t pid : pids_) kill(pid, SIGSTOP);
  }
  ~FrozenTarget() {
    for (pid_t pid : pids_) kill(pid, SIGCONT);
  }
  bool empty() const { return pids_.empty(); }

 private:
  std::set<pid_t> pids_;
};

// Runs `count` Execs of `true` at once, each with its own cancel signal, cancels them all
// `after` later, and returns how long they took to return after the cancel (the slowest)
// and their outcomes.
struct CancelledRuns {
  double seconds_after_cancel = 0;
  std::vector<Outcome> outcomes;
};
CancelledRuns CancelAfter(SshGuestControl& control, int count, std::chrono::milliseconds after) {
  std::vector<std::shared_ptr<CancelSignal>> cancels;
  CancelledRuns r;
  r.outcomes.resize(count);
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    cancels.push_back(std::make_shared<CancelSignal>());
    // Its own signal by value: `cancels` grows (and moves) while earlier threads run.
    threads.emplace_back([&control, &r, i, cancel = cancels.back()] {
      GuestCommand c;
      c.command = "true";
      r.outcomes[i] = RunExec(control, c, -1, nullptr, cancel);
    });
  }
  std::this_thread::sleep_for(after);
  auto cancelled = std::chrono::steady_clock::now();
  for (auto& c : cancels) c->Cancel();
  for (auto& t : threads) t.join();
  r.seconds_after_cancel =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled).count();
  return r;
}

// The guest's sshd freezes in the middle of a command (a virtio-serial port would show no
// hang-up either): the keepalive notices, the connection is remade and the command's output
// is read on to its end from the job the runner kept.
TEST_F(GuestControlTest, AFrozenSshdCostsOneReconnectAndNoOutput) {
  SshGuestControlOptions options = target().ControlOptions();
  options.keepalive_after = std::chrono::milliseconds(300);
  options.keepalive_timeout = std::chrono::milliseconds(300);
  options.reach_timeout = std::chrono::seconds(10);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE(RunExec(**control, "true").progress.ok());  // connected

  Outcome o;
  auto started = std::chrono::steady_clock::now();
  std::thread run([&] { o = RunExec(**control, "echo begin; sleep 2; echo end; exit 7"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  std::set<pid_t> frozen = TargetSshdProcesses(target().dir() + "/sshd_config");
  EXPECT_FALSE(frozen.empty());
  for (pid_t pid : frozen) kill(pid, SIGSTOP);
  run.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (pid_t pid : frozen) kill(pid, SIGKILL);

  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_TRUE(o.progress->finished);
  EXPECT_EQ(o.progress->exit_code, 7);
  EXPECT_EQ(o.out, "begin\nend\n");
  EXPECT_LT(seconds, 8.0) << "the frozen connection was noticed late";
}

// The same freeze, shorter than the keepalive's allowance stretched by the host's load but
// longer than the allowance itself: a guest starved of CPU (here: stopped for 2.5 s) is
// waited for, not taken for dead — the connection it had serves the command to its end.
TEST_F(GuestControlTest, AStarvedGuestKeepsItsConnection) {
  SshGuestControlOptions options = target().ControlOptions();
  options.keepalive_after = std::chrono::milliseconds(300);
  options.keepalive_timeout = std::chrono::milliseconds(300);
  options.reach_timeout = std::chrono::seconds(10);
  std::atomic<int> asked{0};
  options.slowdown = [&asked] {
    ++asked;
    return 30.0;  // 300 ms becomes 9 s: room for a loaded test machine
  };
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE(RunExec(**control, "true").progress.ok());  // connected

  Outcome o;
  std::thread run([&] { o = RunExec(**control, "echo begin; sleep 1; echo end; exit 7"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::set<pid_t> before = TargetSshdProcesses(target().dir() + "/sshd_config");
  ASSERT_FALSE(before.empty());
  {
    FrozenTarget frozen(target().dir() + "/sshd_config");
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  }
  run.join();
  std::set<pid_t> after = TargetSshdProcesses(target().dir() + "/sshd_config");

  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_TRUE(o.progress->finished);
  EXPECT_EQ(o.progress->exit_code, 7);
  EXPECT_EQ(o.out, "begin\nend\n");
  EXPECT_GT(asked.load(), 0) << "the allowance ran out without asking the host's load";
  EXPECT_EQ(after, before) << "the starved guest's connection was dropped and remade";
}

// A call's wait for the guest to answer (reach_timeout: the channel's open, the command's
// start) is stretched the same way: a guest stopped for 1.2 s runs a command asked of it
// meanwhile, against a 0.3 s reach_timeout with slowdown 30 (9 s), and not with 1.
TEST_F(GuestControlTest, AStarvedGuestStartsACommandWithinTheStretchedReach) {
  for (double slowdown : {30.0, 1.0}) {
    SCOPED_TRACE("slowdown " + std::to_string(slowdown));
    SshGuestControlOptions options = target().ControlOptions();
    options.reach_timeout = std::chrono::milliseconds(300);
    // Connecting and the runner check get room (a sanitizer build under a loaded CI took
    // over 0.3 s for them); the slowdown under test applies from the freeze on.
    auto stretch = std::make_shared<std::atomic<double>>(30.0);
    options.slowdown = [stretch] { return stretch->load(); };
    Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
    ASSERT_TRUE(control.ok()) << control.status().ToString();
    ASSERT_TRUE(RunExec(**control, "true").progress.ok());  // connected, runner checked
    stretch->store(slowdown);

    // The whole guest stopped (its sshd and commands) while the command is asked for.
    auto frozen = std::make_unique<FrozenTarget>(target().dir() + "/sshd_config");
    ASSERT_FALSE(frozen->empty());
    Outcome o;
    std::thread run([&] { o = RunExec(**control, "echo started"); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    frozen.reset();
    run.join();
    if (slowdown > 1) {
      ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
      EXPECT_EQ(o.out, "started\n");
    } else {
      EXPECT_EQ(o.progress.status().code(), Code::kUnavailable) << o.progress.status().ToString();
    }
  }
}

// A guest whose control link stalls before warren has connected (the handshake never gets
// an answer): callers waiting for the connection, and for another caller's runner check,
// return as soon as they are cancelled instead of after reach_timeout.
TEST_F(GuestControlTest, CancelReachesCallersWaitingToConnectToAStalledGuest) {
  SshGuestControlOptions options = target().ControlOptions();
  options.reach_timeout = std::chrono::seconds(30);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  CancelledRuns runs;
  {
    FrozenTarget frozen(target().dir() + "/sshd_config");
    ASSERT_FALSE(frozen.empty());
    runs = CancelAfter(**control, 8, std::chrono::milliseconds(700));
  }
  EXPECT_LT(runs.seconds_after_cancel, 1.0);
  for (const Outcome& o : runs.outcomes) {
    EXPECT_EQ(o.progress.status().code(), Code::kCancelled) << o.progress.status().ToString();
  }
  // Thawed, the guest serves again.
  EXPECT_TRUE(RunExec(**control, "true").progress.ok());
}

// The same once connected: the guest stops answering the connection it has, so channel
// opens go unanswered until the keepalive gives up on it; a cancelled caller does not wait.
TEST_F(GuestControlTest, CancelReachesCallersWaitingOnAStalledConnection) {
  SshGuestControlOptions options = target().ControlOptions();
  options.reach_timeout = std::chrono::seconds(30);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE(RunExec(**control, "true").progress.ok());  // connected, runner checked
  CancelledRuns runs;
  {
    FrozenTarget frozen(target().dir() + "/sshd_config");
    runs = CancelAfter(**control, 8, std::chrono::milliseconds(700));
  }
  EXPECT_LT(runs.seconds_after_cancel, 1.0);
  for (const Outcome& o : runs.outcomes) {
    EXPECT_EQ(o.progress.status().code(), Code::kCancelled) << o.progress.status().ToString();
  }
}

// The guest's sshd dies while the connection is idle (frozen here: a virtio-serial port
// shows no hang-up either). The next command's channel open goes unanswered; the connection
// had been silent for keepalive_after already, so the keepalive goes out at once and the
// command runs on a new connection after keepalive_timeout, not keepalive_after more.
TEST_F(GuestControlTest, AnIdleConnectionWhoseSshdStoppedIsProbedAtOnce) {
  SshGuestControlOptions options = target().ControlOptions();
  options.keepalive_after = std::chrono::milliseconds(4000);
  options.keepalive_timeout = std::chrono::milliseconds(1000);
  options.reach_timeout = std::chrono::seconds(20);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE(RunExec(**control, "true").progress.ok());  // connected, runner checked
  std::set<pid_t> frozen = TargetSshdProcesses(target().dir() + "/sshd_config");
  ASSERT_FALSE(frozen.empty());
  for (pid_t pid : frozen) kill(pid, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));  // idle past keepalive_after

  auto started = std::chrono::steady_clock::now();
  Outcome o = RunExec(**control, "echo again");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (pid_t pid : frozen) kill(pid, SIGKILL);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.out, "again\n");
  // keepalive_timeout (1 s) and a new connection; before, keepalive_after + timeout (5 s).
  EXPECT_LT(seconds, 3.5) << "the idle connection's dead sshd was noticed late";
}

// A "guest" on a unix socket that answers every connection with `banner` until the client
// hangs up: a guest whose root put something else than sshd behind the control port.
class HostileBannerGuest {
 public:
  HostileBannerGuest(const std::string& path, std::string banner)
      : path_(path), banner_(std::move(banner)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof addr.sun_path - 1));
    ::unlink(path.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          ::listen(fd_, 8) == 0;
    if (ok_) thread_ = std::thread([this] { Serve(); });
  }
  ~HostileBannerGuest() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  int served() const { return served_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++served_;
      (void)!::write(c, banner_.data(), banner_.size());
      // Until the client hangs up (closing with its bytes unread would reset the
      // connection before the client read the banner).
      timeval tv{2, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[512];
      while (::read(c, buf, sizeof buf) > 0) {
      }
      ::close(c);
    }
  }

  std::string path_;
  std::string banner_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

// The guest's bytes in libssh's errors ("No version of SSH protocol usable (banner: …)", for a
// version line that is not 2.0; other lines before it libssh skips) reach the caller only as
// printable ASCII: no terminal escape of the guest's reaches a person's terminal, and no invalid
// UTF-8 an error's JSON.
TEST_F(GuestControlTest, AHostileBannerIsNotEchoedRaw) {
  HostileBannerGuest guest(target().dir() + "/hostile.sock",
                           "SSH-9.9-HELLO \x1b]0;owned\x07 \x1b[2J\xff\xfe evil\r\n");
  ASSERT_TRUE(guest.ok());
  SshGuestControlOptions options = target().ControlOptions();
  std::string path = target().dir() + "/hostile.sock";
  options.dial = [path](std::string_view) { return DialUnixSocket(path); };
  options.reach_timeout = std::chrono::seconds(2);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(options);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  Outcome o = RunExec(**control, "true");
  ASSERT_FALSE(o.progress.ok());
  const std::string message = o.progress.status().message();
  EXPECT_EQ(o.progress.status().code(), Code::kUnavailable) << message;
  EXPECT_NE(message.find("banner: SSH-9.9-HELLO"), std::string::npos) << message;
  EXPECT_NE(message.find("evil"), std::string::npos) << message;
  for (char c : message) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f)
        << "byte " << int(static_cast<unsigned char>(c)) << " in: " << message;
  }
  EXPECT_GE(guest.served(), 1);
}

}  // namespace

TargetSetup MakeGuestTarget() {
  TargetSetup s;
  Result<std::unique_ptr<GuestTarget>> t = StartLocalSshd();
  if (t.status().code() == Code::kNotFound) {
    s.skip_reason = t.status().message();
  } else if (!t.ok()) {
    s.error = t.status();
  } else {
    s.target = std::move(t).value();
  }
  return s;
}

double TimeScale() { return 1.0; }

}  // namespace warren::guest::testing
