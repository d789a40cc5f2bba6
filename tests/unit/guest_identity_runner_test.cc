// `warren-run identity` (vmhost/guest/runner/identity.c), the built binary run as root on
// this machine, talking to the host's own request builder and report parser
// (vmhost/guest/identity.h). Nothing on this machine changes: each run is in new mount, UTS
// and network namespaces where
//   - /etc/hostname, /etc/hosts, /etc/machine-id and /var/lib/dbus/machine-id are temp files
//     bind-mounted over the real ones (so the runner must write machine-id in place);
//   - /etc, /var/lib and /usr/lib are overlays whose writes land in the test's temp dir, and
//     /usr/lib/warren/{apply-seed,run-setup} are stand-ins that record how they were run;
//   - /dev is a tmpfs holding null, zero, random, urandom and vdb (an idle loop device's
//     node, for BLKFLSBUF); /sys is the new network namespace's (only lo: no NIC);
//   - a seccomp filter turns clock_settime, settimeofday, clock_adjtime and adjtimex into
//     no-ops that succeed: a time namespace virtualizes only CLOCK_MONOTONIC and BOOTTIME,
//     never CLOCK_REALTIME, so the clock is not set here (the step the runner computed is
//     checked instead; the real guest test sets it for real). The filter is proven before
//     the runner starts with a request the real call would refuse.
// What does reach the host: the runner's RNDADDENTROPY and RNDRESEEDCRNG mix 64 bytes into
// this machine's RNG, which is harmless. Skips (saying why) when not root or the namespaces
// cannot be made.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/unit/skip_or_fail.h"
#include "vmhost/guest/identity.h"

namespace warren {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), mode);
}

int64_t RealtimeMinusMonotonicMs() {
  timespec r{}, m{};
  ::clock_gettime(CLOCK_REALTIME, &r);
  ::clock_gettime(CLOCK_MONOTONIC, &m);
  return (int64_t{r.tv_sec} - m.tv_sec) * 1000 + (int64_t{r.tv_nsec} - m.tv_nsec) / 1000000;
}

// The child's side, between fork and exec: everything it needs is prepared before the fork.
struct Sandbox {
  std::string dir;
  std::vector<std::pair<std::string, std::string>> binds;     // temp file -> real path
  std::vector<std::pair<std::string, std::string>> overlays;  // mount point -> options
  dev_t loop_dev = 0;
  bool as_nobody = false;  // the non-root run: no namespaces, just another uid
  bool seccomp = true;
};

[[noreturn]] void ChildFail(int code, const char* what) {
  dprintf(2, "sandbox setup: %s: %s\n", what, std::strerror(errno));
  ::_exit(code);
}

void InstallClockFilter() {
  // Any x86-64 syscall that sets the clock returns 0 without doing anything.
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_settime, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_settimeofday, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_adjtime, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_adjtimex, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(91, "no_new_privs");
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ChildFail(91, "seccomp");
  // Proof, before anything may set the clock: the real call refuses a bad nanosecond count.
  timespec bad{0, 2000000000L};
  if (::syscall(SYS_clock_settime, CLOCK_REALTIME, &bad) != 0) ChildFail(92, "clock filter");
}

// Makes the namespaces and mounts described at the top; _exit(90..99) when one fails.
void EnterSandbox(const Sandbox& s) {
  if (s.as_nobody) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ChildFail(90, "dropping to nobody");
    }
    return;
  }
  if (::unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWNET) != 0) ChildFail(93, "unshare");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    ChildFail(93, "making / private");
  }
  for (const auto& [target, options] : s.overlays) {
    if (::mount("overlay", target.c_str(), "overlay", 0, options.c_str()) != 0) {
      ChildFail(94, "overlay");
    }
  }
  for (const auto& [file, target] : s.binds) {
    if (::mount(file.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      ChildFail(95, "bind mount");
    }
  }
  if (::mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) ChildFail(96, "sysfs");
  if (::mount("tmpfs", "/dev", "tmpfs", 0, "mode=0755") != 0) ChildFail(97, "tmpfs on /dev");
  struct {
    const char* path;
    mode_t mode;
    dev_t dev;
  } nodes[] = {{"/dev/null", S_IFCHR | 0666, makedev(1, 3)},
               {"/dev/zero", S_IFCHR | 0666, makedev(1, 5)},
               {"/dev/random", S_IFCHR | 0666, makedev(1, 8)},
               {"/dev/urandom", S_IFCHR | 0666, makedev(1, 9)},
               {"/dev/vdb", S_IFBLK | 0600, s.loop_dev}};
  for (const auto& n : nodes) {
    if (::mknod(n.path, n.mode, n.dev) != 0) ChildFail(97, "mknod");
  }
  if (s.seccomp) InstallClockFilter();
}

// One run of the runner: pipes on its three streams.
class IdentityRun {
 public:
  IdentityRun(const Sandbox& s, const std::string& binary) {
    int in[2], out[2], err[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    const char* argv[] = {"warren-run", "identity", nullptr};
    const char* envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", nullptr};
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      EnterSandbox(s);
      ::chdir("/");
      ::execve(binary.c_str(), const_cast<char**>(argv), const_cast<char**>(envp));
      ChildFail(98, "exec");
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
  }
  ~IdentityRun() {
    CloseStdin();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
    ::close(err_);
  }

  void Write(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(in_, data.data() + off, data.size() - off);
      if (n <= 0) return;  // it exited: EPIPE (SIGPIPE is ignored in this test)
      off += static_cast<size_t>(n);
    }
  }
  void CloseStdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  // Reads stdout until it holds `want` (true) or ends or 10 s pass (false).
  bool ReadUntil(std::string_view want) {
    auto give_up = Clock::now() + std::chrono::seconds(10);
    while (out_text_.find(want) == std::string::npos) {
      pollfd p{out_, POLLIN, 0};
      if (Clock::now() > give_up || ::poll(&p, 1, 100) < 0) return false;
      if (p.revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return false;
      out_text_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // Waits for the end (10 s at most): the exit status, with stdout and stderr complete.
  int Finish() {
    CloseStdin();
    auto drain = [](int fd, std::string* into) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) into->append(buf, static_cast<size_t>(n));
    };
    for (int i = 0; i < 1000; ++i) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        drain(out_, &out_text_);
        drain(err_, &err_text_);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  const std::string& out() const { return out_text_; }
  const std::string& err() const { return err_text_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_text_, err_text_;
};

class IdentityRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    if (::geteuid() != 0) {
      WARREN_SKIP_OR_FAIL() << "needs root (namespaces, mounts, the runner's own root check)";
    }
    struct stat loop {};
    if (::stat("/dev/loop0", &loop) != 0 || !S_ISBLK(loop.st_mode)) {
      WARREN_SKIP_OR_FAIL() << "no /dev/loop0 to stand in for the seed device";
    }
    char tmpl[] = "/tmp/warren-identity-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    sandbox_.dir = dir_;
    sandbox_.loop_dev = loop.st_rdev;
    // Temp files over the real ones, starting as copies.
    host_machine_id_ = ReadFile("/etc/machine-id");
    for (const char* path :
         {"/etc/hostname", "/etc/hosts", "/etc/machine-id", "/var/lib/dbus/machine-id"}) {
      struct stat st {};
      if (::stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      std::string file = dir_ + "/files" + path;
      WriteFile(file, ReadFile(path));
      sandbox_.binds.emplace_back(file, path);
    }
    for (const char* target : {"/etc", "/var/lib", "/usr/lib"}) {
      std::string name = std::string(target).substr(1);
      std::replace(name.begin(), name.end(), '/', '-');
      std::string up = dir_ + "/" + name + ".up", work = dir_ + "/" + name + ".work";
      fs::create_directories(up);
      fs::create_directories(work);
      sandbox_.overlays.emplace_back(
          target, "lowerdir=" + std::string(target) + ",upperdir=" + up + ",workdir=" + work);
    }
    // The stand-ins, in /usr/lib's upper layer.
    WriteFile(
        dir_ + "/usr-lib.up/warren/apply-seed",
        "#!/bin/sh\n"
        "echo \"$#:$*:${WARREN_SEED_DEVICE-unset}\" >> " +
            dir_ +
            "/apply-seed.args\n"
            "if [ -f " +
            dir_ +
            "/apply-seed.fail ]; then\n"
            "  echo 'warren: applied half'; echo 'warren: cannot mount seed disk /dev/vdb' >&2\n"
            "  exit 1\n"
            "fi\n"
            "echo clone-host > /proc/sys/kernel/hostname\n"
            "echo clone-host > /etc/hostname\n"
            "if [ -f " +
            dir_ +
            "/give-setup ]; then\n"
            "  mkdir -p /etc/warren && echo 'echo hi' > /etc/warren/setup-script\n"
            "fi\n"
            "echo 'warren: applied seed from /dev/vdb'\n",
        0755);
    WriteFile(dir_ + "/usr-lib.up/warren/run-setup",
              "#!/bin/sh\n"
              "{ readlink /proc/$$/fd/0; cut -d ' ' -f 6 /proc/$$/stat; } > " +
                  dir_ +
                  "/run-setup.tmp\n"
                  "mv " +
                  dir_ + "/run-setup.tmp " + dir_ + "/run-setup.ran\n",
              0755);
    // Proves the sandbox can be made here at all.
    Sandbox probe = sandbox_;
    IdentityRun run(probe, "/bin/true");
    int code = run.Finish();
    if (code != 0) {
      WARREN_SKIP_OR_FAIL() << "cannot make the sandbox here (exit " << code << "): " << run.err();
    }
    offset_before_ = RealtimeMinusMonotonicMs();
  }
  void TearDown() override {
    if (dir_.empty()) return;
    // Nothing reached the host.
    EXPECT_EQ(ReadFile("/etc/machine-id"), host_machine_id_);
    EXPECT_LT(std::abs(RealtimeMinusMonotonicMs() - offset_before_), 1000)
        << "this machine's clock moved";
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Binary() const { return WARREN_RUN_BINARY; }
  std::string Request(bool with_mac = false) {
    GuestIdentity id;
    for (size_t i = 0; i < id.random.size(); ++i) id.random[i] = static_cast<uint8_t>(0xa0 + i);
    if (with_mac) id.mac = "52:54:00:12:34:56";
    return *GuestIdentityRequest(id);
  }
  static std::string RandomHex() {
    std::string hex;
    char b[3];
    for (int i = 0; i < 64; ++i) {
      std::snprintf(b, sizeof b, "%02x", 0xa0 + i);
      hex += b;
    }
    return hex;
  }
  std::string BoundFile(const std::string& path) { return ReadFile(dir_ + "/files" + path); }
  bool HasBound(const std::string& path) { return fs::exists(dir_ + "/files" + path); }

  // A run to its report: the request, the clock answered `offset_s` ahead of now.
  struct Ran {
    int code = -1;
    std::string out, err;
    int64_t answered_ns = 0;
  };
  Ran RunToEnd(const std::string& request, int64_t offset_s = 0) {
    Ran r;
    IdentityRun run(sandbox_, Binary());
    run.Write(request);
    if (run.ReadUntil("clock?\n")) {
      timespec now{};
      ::clock_gettime(CLOCK_REALTIME, &now);
      now.tv_sec += offset_s;
      r.answered_ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
      run.Write(GuestClockAnswer(now));
    }
    r.code = run.Finish();
    r.out = run.out();
    r.err = run.err();
    return r;
  }

  std::string dir_;
  Sandbox sandbox_;
  std::string host_machine_id_;
  int64_t offset_before_ = 0;
};

TEST_F(IdentityRunnerTest, AWholeRunReseedsReappliesTheSeedAndAsksTheTime) {
  std::string old_id = BoundFile("/etc/machine-id");
  Ran r = RunToEnd(Request(), /*offset_s=*/1000);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("clock?\n", 0), 0u) << r.out;
  GuestIdentity asked;
  asked.hostname = "clone-host";
  Result<GuestIdentityReport> report = ParseGuestIdentityReport(r.out.substr(7), asked);
  ASSERT_TRUE(report.ok()) << report.status().ToString() << "\n" << r.out;
  // apply-seed ran once, told that this is a restored clone and where its seed is.
  EXPECT_EQ(ReadFile(dir_ + "/apply-seed.args"), "1:--restored:/dev/vdb\n");
  EXPECT_EQ(BoundFile("/etc/hostname"), "clone-host\n");
  // A new machine-id, written in place (the file is a bind mount: a rename over it fails).
  if (HasBound("/etc/machine-id")) {
    EXPECT_EQ(BoundFile("/etc/machine-id"), report->machine_id + "\n");
    EXPECT_NE(BoundFile("/etc/machine-id"), old_id);
    EXPECT_EQ(report->machine_id[12], '4');  // shaped like systemd's (a v4 UUID)
  }
  if (HasBound("/var/lib/dbus/machine-id")) {
    EXPECT_EQ(BoundFile("/var/lib/dbus/machine-id"), report->machine_id + "\n");
  }
  EXPECT_EQ(report->mac, "");
  EXPECT_FALSE(report->setup_started);
  // The step the runner took: the answer (1000 s ahead) plus half the round trip, less its
  // own clock; the call itself was a no-op here.
  EXPECT_NEAR(report->clock_step_ms, 1000 * 1000, 2000) << r.out;
  EXPECT_LT(report->clock_rtt_us, 2'000'000);
  std::fprintf(stderr, "report: %s", r.out.substr(7).c_str());
  // Nothing secret on either stream.
  EXPECT_EQ(r.out.find(RandomHex().substr(0, 16)), std::string::npos);
  EXPECT_EQ(r.err.find(RandomHex().substr(0, 16)), std::string::npos);
}

TEST_F(IdentityRunnerTest, StartsTheSeedsSetupScriptOnlyIfItNeverRan) {
  WriteFile(dir_ + "/give-setup", "");
  Ran r = RunToEnd(Request());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" setup=started "), std::string::npos) << r.out;
  // Detached: stdin /dev/null, a session other than ours.
  for (int i = 0; i < 500 && !fs::exists(dir_ + "/run-setup.ran"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string ran = ReadFile(dir_ + "/run-setup.ran");
  EXPECT_EQ(ran.substr(0, ran.find('\n')), "/dev/null") << ran;
  EXPECT_NE(ran.substr(ran.find('\n') + 1), std::to_string(::getsid(0)) + "\n");

  // Once it ran (the marker is there), never again.
  fs::remove(dir_ + "/run-setup.ran");
  WriteFile(dir_ + "/var-lib.up/warren/setup-done", "2026-01-01T00:00:00Z\n");
  r = RunToEnd(Request());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" setup=none "), std::string::npos) << r.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(dir_ + "/run-setup.ran"));
}

TEST_F(IdentityRunnerTest, BadRequestsAreRefusedBeforeAnyStep) {
  std::string good = Request();
  std::string random_line = "random " + RandomHex() + "\n";
  std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown record", "seed-device /dev/vdb\nhostname x\n" + random_line + "end\n"},
      {"twice", "seed-device /dev/vdb\nseed-device /dev/vdb\n" + random_line + "end\n"},
      {"not a virtio disk", "seed-device /dev/sda\n" + random_line + "end\n"},
      {"no seed device", random_line + "end\n"},
      {"no random", "seed-device /dev/vdb\nend\n"},
      {"short random", "seed-device /dev/vdb\nrandom abcd\nend\n"},
      {"uppercase random", "seed-device /dev/vdb\nrandom " + std::string(128, 'A') + "\nend\n"},
      {"uppercase mac", "seed-device /dev/vdb\nmac 52:54:00:AA:BB:CC\n" + random_line + "end\n"},
      {"multicast mac", "seed-device /dev/vdb\nmac 01:00:5e:00:00:01\n" + random_line + "end\n"},
      {"no end", "seed-device /dev/vdb\n" + random_line},
      {"a long line", "seed-device /dev/vdb\n" + std::string(300, 'x') + "\n"},
      {"a NUL byte", std::string("seed-device /dev/vd\0b\n", 22) + random_line + "end\n"},
      {"bytes after end", good + "clock 1.000000000\n"},
      {"too much", std::string(2000, '\n')},
  };
  for (const auto& [what, request] : cases) {
    IdentityRun run(sandbox_, Binary());
    run.Write(request);
    int code = run.Finish();
    EXPECT_EQ(code, 2) << what << ": " << run.err();
    EXPECT_EQ(run.out(), "") << what;
    EXPECT_NE(run.err().find("bad request"), std::string::npos) << what << ": " << run.err();
    EXPECT_EQ(std::count(run.err().begin(), run.err().end(), '\n'), 1) << what;
    EXPECT_EQ(run.err().find(RandomHex().substr(0, 16)), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir_ + "/apply-seed.args"));
}

TEST_F(IdentityRunnerTest, NotRootIsRefused) {
  Sandbox nobody;
  nobody.as_nobody = true;
  IdentityRun run(nobody, Binary());
  run.Write(Request());
  EXPECT_EQ(run.Finish(), 5) << run.err();
  EXPECT_NE(run.err().find("must run as root"), std::string::npos) << run.err();
  EXPECT_EQ(run.out(), "");
}

TEST_F(IdentityRunnerTest, AFailedStepExitsWithOneLine) {
  // apply-seed fails: its last line is the reason.
  WriteFile(dir_ + "/apply-seed.fail", "");
  Ran r = RunToEnd(Request());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "warren-run identity: apply-seed failed (exit 1): warren: cannot mount seed disk "
            "/dev/vdb\n");
  fs::remove(dir_ + "/apply-seed.fail");

  // A seed device that is not there.
  std::string request = Request();
  request.replace(request.find("/dev/vdb"), 8, "/dev/vdc");
  r = RunToEnd(request);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open the seed device /dev/vdc"), std::string::npos) << r.err;

  // A MAC asked for in a VM without a NIC (this namespace has only lo).
  r = RunToEnd(Request(/*with_mac=*/true));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("there is no NIC"), std::string::npos) << r.err;
}

TEST_F(IdentityRunnerTest, TheClockAnswerIsChecked) {
  for (const std::string& answer :
       {std::string("clock 12.000000000\n"), std::string("clock 1733100000.5\n"),
        std::string("clock 1733100000.0000000001\n"), std::string("clock -1733100000.000000000\n"),
        std::string("time 1733100000.000000000\n"), std::string("clock 1733100000.000000000")}) {
    IdentityRun run(sandbox_, Binary());
    run.Write(Request());
    ASSERT_TRUE(run.ReadUntil("clock?\n")) << run.err();
    run.Write(answer);
    int code = run.Finish();
    EXPECT_NE(code, 0) << answer;
    EXPECT_EQ(run.out(), "clock?\n") << answer;
  }
  // The host goes away instead of answering.
  IdentityRun run(sandbox_, Binary());
  run.Write(Request());
  ASSERT_TRUE(run.ReadUntil("clock?\n"));
  EXPECT_EQ(run.Finish(), 1);
  EXPECT_NE(run.err().find("went away"), std::string::npos) << run.err();
}

}  // namespace
}  // namespace warren
