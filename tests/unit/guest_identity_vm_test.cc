// A restored clone's identity (vmhost/guest/identity.h, runner/identity.c) in a real tiny
// guest under QEMU TCG, booted the way guest_vm_test boots one (overlay, seed disk, the
// control port on a unix socket) plus a virtio NIC on QEMU's user networking (slirp), which
// the MAC step needs. It plays a restore's part by hand: the guest boots from seed A
// (hostname seed-a, while the kernel command line says wtest), its identity is spoiled
// through the control connection (hostname, clock set to 2001, a machine-id), and seed A's
// disk image is overwritten in place with seed B (another hostname, env, host key, a setup
// script) while the guest runs — the guest's block cache still holds seed A's blocks, as a
// clone's holds its template's. ApplyGuestIdentity must then leave: seed B's hostname (not
// the command line's), host key and env, the setup script started, a new machine-id, the
// asked MAC, the clock within 0.1 s of the host's, and a working control connection and
// network. Timings go to stderr. The image is the newest tiny in WARREN_TEST_IMAGES (default
// /var/lib/warren-test/images); skips (saying why; fails under CI) when there is none, or
// its apply-seed predates `--restored`, or QEMU is missing.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "lobby/base/unix_socket.h"
#include "tests/unit/guest_test_targets.h"
#include "tests/unit/skip_or_fail.h"
#include "vmhost/guest/control_key.h"
#include "vmhost/guest/identity.h"
#include "vmhost/image_layout.h"

namespace warren::guest::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kBootMac[] = "52:54:00:aa:00:01";

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::trunc | std::ios::binary) << text;
  ::chmod(path.c_str(), mode);
}

double RealtimeSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Runs a command to its end: stdout + stderr, the exit status in *code.
int RunCommand(const std::string& command, std::string* output = nullptr) {
  std::string cmd = command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
    if (output != nullptr) output->append(buf, n);
  }
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A loopback HTTP server answering every request with "hello": what the guest reaches as
// 10.0.2.2:PORT through slirp.
class HelloServer {
 public:
  HelloServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shut down
        char buf[2048];
        ssize_t n = ::read(c, buf, sizeof buf);
        (void)n;
        const char reply[] = "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        ssize_t w = ::write(c, reply, sizeof reply - 1);
        (void)w;
        ::close(c);
      }
    });
  }
  ~HelloServer() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

struct Guest {
  std::string dir, socket, key, seed_img, image;
  ChildProcess qemu;
  std::unique_ptr<SshGuestControl> control;
  std::unique_ptr<HelloServer> hello;
  std::string skip_reason;
  std::string error;
  std::string seed_b_hostkey_pub;

  std::string ConsoleTail() const {
    std::string all = ReadFile(dir + "/console.log");
    return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
  }
};
Guest* g = nullptr;

// stdout (and stderr after it) of a command in the guest; the exit status in *code.
std::string Exec(SshGuestControl& control, const std::string& command, int* code = nullptr) {
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  GuestCommand c;
  c.command = command;
  Result<GuestProgress> p = control.Exec(kTestVm, c, s);
  if (code != nullptr) *code = p.ok() && p->exit_code ? *p->exit_code : -1;
  if (!p.ok()) return "(exec failed: " + p.status().ToString() + ")";
  return out.str() + err.str();
}
std::string Exec(const std::string& command, int* code = nullptr) {
  return Exec(*g->control, command, code);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A seed directory packed into an image with make-seed.sh.
std::string MakeSeed(const std::string& name, const std::string& authorized_keys,
                     const std::string& hostname, const std::string& extra_env,
                     bool with_setup_and_hostkey, std::string* hostkey_pub) {
  std::string d = g->dir + "/" + name;
  fs::create_directories(d);
  WriteFile(d + "/authorized_keys", authorized_keys);
  WriteFile(d + "/hostname", hostname + "\n");
  if (!extra_env.empty()) WriteFile(d + "/env", extra_env + "\n");
  if (with_setup_and_hostkey) {
    WriteFile(d + "/setup-script", "#!/bin/sh\necho \"setup ran as $(id -un) env=$CLONE_ENV\"\n",
              0755);
    std::string out;
    if (RunCommand("ssh-keygen -q -t ed25519 -N '' -C clone-b -f " + d + "/ssh_host_ed25519_key",
                   &out) != 0) {
      return "ssh-keygen failed: " + out;
    }
    *hostkey_pub = Trim(ReadFile(d + "/ssh_host_ed25519_key.pub"));
  }
  std::string out;
  std::string img = g->dir + "/" + name + ".img";
  if (RunCommand(std::string(WARREN_SOURCE_DIR) + "/packaging/images/make-seed.sh " + d + " " + img,
                 &out) != 0) {
    return "make-seed.sh failed: " + out;
  }
  return "";
}

void BootGuestWithNic() {
  std::string images = EnvOr("WARREN_TEST_IMAGES", "/var/lib/warren-test/images");
  std::string ref = NewestInstalledImage(images, "tiny");
  if (ref.empty()) {
    g->skip_reason =
        "no tiny image in " + images + " (packaging/images/build-tiny.sh " + images + ")";
    return;
  }
  for (const char* tool : {"qemu-system-x86_64", "qemu-img", "mke2fs", "ssh-keygen"}) {
    if (RunCommand(std::string("command -v ") + tool) != 0) {
      g->skip_reason = std::string(tool) + " is not installed";
      return;
    }
  }
  const ImageFiles files = ImageFilesOf(images, ref);
  g->image = ref;
  char tmpl[] = "/tmp/warren-guest-test-identity-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    g->error = "mkdtemp failed";
    return;
  }
  g->dir = tmpl;
  g->socket = g->dir + "/control.sock";
  g->key = g->dir + "/control_ed25519";
  Result<std::string> pub = EnsureControlKey(g->key);
  if (!pub.ok()) {
    g->error = pub.status().ToString();
    return;
  }
  std::string none;
  std::string err = MakeSeed("seed-a", *pub + "\n", "seed-a", "", false, &none);
  if (err.empty()) {
    err = MakeSeed("seed-b", *pub + "\n", "clone-b", "CLONE_ENV=b", true, &g->seed_b_hostkey_pub);
  }
  if (!err.empty()) {
    g->error = err;
    return;
  }
  g->seed_img = g->dir + "/seed.img";
  fs::copy_file(g->dir + "/seed-a.img", g->seed_img);
  std::string out;
  if (RunCommand("qemu-img create -q -f qcow2 -F qcow2 -b " + files.rootfs + " " + g->dir +
                     "/disk.qcow2 4G",
                 &out) != 0) {
    g->error = "qemu-img: " + out;
    return;
  }
  std::ifstream meta(files.meta);
  std::string json((std::istreambuf_iterator<char>(meta)), {});
  // "kernel_cmdline": "..." without a JSON library: the image's line is plain.
  size_t k = json.find("\"kernel_cmdline\": \"");
  if (k == std::string::npos) {
    g->error = "unreadable image.json";
    return;
  }
  k += 19;
  std::string cmdline = json.substr(k, json.find('"', k) - k) + " warren.hostname=wtest";
  Status st = g->qemu.Start({"qemu-system-x86_64",
                             "-accel",
                             "tcg",
                             "-m",
                             "512",
                             "-nographic",
                             "-no-reboot",
                             "-kernel",
                             files.kernel,
                             "-initrd",
                             files.initrd,
                             "-append",
                             cmdline,
                             "-drive",
                             "file=" + g->dir + "/disk.qcow2,if=virtio,format=qcow2",
                             "-drive",
                             "file=" + g->seed_img + ",if=virtio,format=raw,readonly=on",
                             "-device",
                             "virtio-serial",
                             "-chardev",
                             "socket,id=c0,path=" + g->socket + ",server=on,wait=off",
                             "-device",
                             "virtserialport,chardev=c0,name=warren.control",
                             "-device",
                             "virtio-rng-pci",
                             "-netdev",
                             "user,id=n0",
                             "-device",
                             std::string("virtio-net-pci,netdev=n0,mac=") + kBootMac},
                            g->dir + "/console.log");
  if (!st.ok()) {
    g->error = st.ToString();
    return;
  }
  for (int i = 0; i < 500 && ::access(g->socket.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  SshGuestControlOptions o;
  std::string socket = g->socket;
  o.dial = [socket](std::string_view vm) -> Result<UniqueFd> {
    if (vm != kTestVm) return NotFound("no VM " + std::string(vm));
    return DialUnixSocket(socket);
  };
  o.key_path = g->key;
  o.user = "dev";
  o.runner_path = RunnerBinaryPath();
  o.reach_timeout = std::chrono::minutes(4);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(o);
  if (!control.ok()) {
    g->error = control.status().ToString();
    return;
  }
  g->control = std::move(*control);
  auto t0 = Clock::now();
  int code = -1;
  std::string hello = Exec("echo up", &code);
  if (code != 0) {
    g->error = "the guest did not come up: " + hello + "\n" + g->ConsoleTail();
    return;
  }
  std::fprintf(stderr, "%s answered on its control port %.1f s after the first try\n", ref.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  g->hello = std::make_unique<HelloServer>();
}

class GuestIdentityVmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Guest;
    BootGuestWithNic();
  }
  static void TearDownTestSuite() {
    if (g == nullptr) return;
    g->control.reset();
    g->qemu.Stop();
    g->hello.reset();
    std::error_code ec;
    if (!g->dir.empty() && EnvOr("WARREN_GUEST_TEST_KEEP", "") != "1") fs::remove_all(g->dir, ec);
    delete g;
    g = nullptr;
  }
  void SetUp() override {
    if (!g->skip_reason.empty()) WARREN_SKIP_OR_FAIL() << g->skip_reason;
    ASSERT_TRUE(g->error.empty()) << g->error;
  }

  // wget of the host's hello server through slirp, retried for up to `seconds`.
  bool NetworkWorks(int seconds) {
    // Bounded by timeout(1): this busybox's wget crashes on -T.
    std::string cmd =
        "timeout 5 wget -q -O - http://10.0.2.2:" + std::to_string(g->hello->port()) + "/";
    auto give_up = Clock::now() + std::chrono::seconds(seconds);
    for (;;) {
      int code = -1;
      std::string out = Exec(cmd, &code);
      if (code == 0 && out == "hello") return true;
      if (Clock::now() > give_up) {
        std::fprintf(stderr, "guest wget: exit %d: %s\n", code, out.c_str());
        return false;
      }
      std::this_thread::sleep_for(milliseconds(500));
    }
  }
};

// Offset of the guest's clock from the host's, measured over one raw channel running a
// clock-reading loop: the smallest of a few round trips bounds the error (±rtt/2).
struct ClockOffset {
  double offset_s = 0;
  double rtt_s = 1e9;
  std::string error;
};
ClockOffset MeasureClockOffset(GuestControl& control, int rounds) {
  ClockOffset best;
  struct Events {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t n = 0;
  };
  auto ev = std::make_shared<Events>();
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kExec;
  // busybox's date has no %N; adjtimex(2) read-only tells the time to the microsecond.
  req.command =
      "while read x; do adjtimex | awk '/time.tv_sec/ {s = $2} /time.tv_usec/ {u = $2} "
      "END {printf \"%d.%06d\\n\", s, u}'; done";
  Result<std::shared_ptr<GuestPipe>> opened = control.OpenChannel(kTestVm, req, [ev] {
    std::lock_guard<std::mutex> lock(ev->mu);
    ++ev->n;
    ev->cv.notify_all();
  });
  if (!opened.ok()) return ClockOffset{0, 0, opened.status().ToString()};
  std::shared_ptr<GuestPipe> pipe = *opened;
  auto wait = [&](auto done, milliseconds timeout) {
    auto give_up = Clock::now() + timeout;
    std::unique_lock<std::mutex> lock(ev->mu);
    while (!done()) {
      if (ev->cv.wait_until(lock, give_up) == std::cv_status::timeout) return done();
    }
    return true;
  };
  if (!wait([&] { return !pipe->opening(); }, milliseconds(30000)) || !pipe->status().ok()) {
    return ClockOffset{0, 0, "the clock channel did not open"};
  }
  for (int i = 0; i < rounds; ++i) {
    double sent = RealtimeSeconds();
    pipe->Write("x\n");
    std::string line;
    bool got = wait(
        [&] {
          std::string chunk;
          while (pipe->PeekOutput(false, 4096, &chunk)) {
            pipe->ConsumeOutput(false, chunk.size());
            line += chunk;
          }
          return line.find('\n') != std::string::npos;
        },
        milliseconds(10000));
    double received = RealtimeSeconds();
    if (!got || line.find('.') == std::string::npos) {
      best.error = "no time from the guest: " + line;
      break;
    }
    double guest = std::strtod(line.c_str(), nullptr);
    double rtt = received - sent;
    if (rtt < best.rtt_s) {
      best.rtt_s = rtt;
      best.offset_s = guest - (sent + received) / 2;
    }
  }
  pipe->Close();
  return best;
}

TEST_F(GuestIdentityVmTest, AppliesASecondSeedAndTheClockToARunningGuest) {
  // An image whose apply-seed predates --restored would take the command line's hostname.
  int code = -1;
  Exec("grep -q -- --restored /usr/lib/warren/apply-seed", &code);
  if (code != 0) {
    WARREN_SKIP_OR_FAIL() << g->image << "'s apply-seed has no --restored: rebuild the image "
                          << "(packaging/images/build-tiny.sh)";
  }
  // As booted: seed A's hostname lost to the command line's, the boot MAC, and a network.
  EXPECT_EQ(Exec("hostname"), "wtest\n");
  EXPECT_EQ(Exec("cat /sys/class/net/eth0/address"), std::string(kBootMac) + "\n");
  ASSERT_TRUE(NetworkWorks(60)) << "no network before the identity change\n" << g->ConsoleTail();

  // Spoil it by hand, as a template's copy would carry its own.
  Exec(
      "sudo -n hostname wrong; sudo -n date -s '2001-01-01 00:00:00' >/dev/null; "
      "echo 11111111111111111111111111111111 | sudo -n tee /etc/machine-id >/dev/null",
      &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(Exec("date +%Y"), "2001\n");
  std::string old_hostkey = Trim(Exec("cut -d ' ' -f 1,2 /etc/ssh/ssh_host_ed25519_key.pub"));

  // Seed B over seed A's disk, in place (QEMU keeps its file open): the guest's block cache
  // still holds seed A's blocks.
  std::string b = ReadFile(g->dir + "/seed-b.img");
  ASSERT_EQ(b.size(), fs::file_size(g->seed_img));
  {
    int fd = ::open(g->seed_img.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
    ::fsync(fd);
    ::close(fd);
  }

  // What the runner check costs on a warm connection (ApplyGuestIdentity's first step).
  auto e0 = Clock::now();
  Exec("true");
  std::fprintf(stderr, "Exec(true) on the warm connection: %.3f s\n",
               std::chrono::duration<double>(Clock::now() - e0).count());

  Result<GuestIdentity> id = NewGuestIdentity(/*with_nic=*/true);
  ASSERT_TRUE(id.ok());
  id->hostname = "clone-b";
  auto t0 = Clock::now();
  Result<GuestIdentityReport> r =
      ApplyGuestIdentity(*g->control, kTestVm, *id, milliseconds(60000));
  double took = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << g->ConsoleTail();
  std::fprintf(
      stderr,
      "ApplyGuestIdentity (warm connection): %.3f s end to end; the guest's steps %lld ms, "
      "clock step %lld ms, clock rtt %lld us\n",
      took, static_cast<long long>(r->work_ms), static_cast<long long>(r->clock_step_ms),
      static_cast<long long>(r->clock_rtt_us));

  // The clock: within 0.1 s of the host's, measured independently.
  ClockOffset clock = MeasureClockOffset(*g->control, 5);
  ASSERT_TRUE(clock.error.empty()) << clock.error;
  std::fprintf(stderr, "guest clock - host clock: %+.4f s (+-%.4f s)\n", clock.offset_s,
               clock.rtt_s / 2);
  EXPECT_LT(std::abs(clock.offset_s), 0.1);
  EXPECT_GT(r->clock_step_ms, int64_t{20} * 365 * 24 * 3600 * 1000);  // 2001 -> now

  // Seed B's identity, not the command line's.
  EXPECT_EQ(r->hostname, "clone-b");
  EXPECT_EQ(Exec("hostname"), "clone-b\n");
  EXPECT_EQ(Exec("cat /etc/hostname"), "clone-b\n");
  EXPECT_NE(Exec("grep '^127.0.1.1' /etc/hosts").find("clone-b"), std::string::npos);
  std::string hostkey = Trim(Exec("cut -d ' ' -f 1,2 /etc/ssh/ssh_host_ed25519_key.pub"));
  EXPECT_EQ(hostkey + " clone-b", g->seed_b_hostkey_pub);
  EXPECT_NE(hostkey, old_hostkey);
  // A new machine-id, and the MAC asked for.
  EXPECT_EQ(r->machine_id.size(), 32u);
  EXPECT_EQ(Exec("cat /etc/machine-id"), r->machine_id + "\n");
  EXPECT_EQ(r->mac, *id->mac);
  EXPECT_EQ(Exec("cat /sys/class/net/eth0/address"), *id->mac + "\n");
  // The seed's setup script, started as the boot path would.
  EXPECT_TRUE(r->setup_started);
  std::string status;
  for (int i = 0; i < 100 && status.empty(); ++i) {
    status = Exec("cat /var/lib/warren/setup.status 2>/dev/null");
    if (status.empty()) std::this_thread::sleep_for(milliseconds(200));
  }
  EXPECT_EQ(status, "0\n");
  EXPECT_NE(Exec("cat /var/log/warren-setup.log").find("setup ran as dev env=b"),
            std::string::npos);

  // The control connection still works, and the network through slirp. The default route
  // is still there: virtio-net took the MAC while up (a down/up would have dropped it).
  EXPECT_EQ(Exec("echo still"), "still\n");
  EXPECT_NE(Exec("ip route").find("default via 10.0.2.2"), std::string::npos) << Exec("ip route");
  auto net0 = Clock::now();
  EXPECT_TRUE(NetworkWorks(30)) << "no network after the MAC change";
  std::fprintf(stderr, "network after the MAC change: answered after %.2f s\n",
               std::chrono::duration<double>(Clock::now() - net0).count());

  // A new connection meets seed B's host key and gets seed B's env.
  std::unique_ptr<SshGuestControl> fresh;
  {
    SshGuestControlOptions o;
    std::string socket = g->socket;
    o.dial = [socket](std::string_view) { return DialUnixSocket(socket); };
    o.key_path = g->key;
    o.runner_path = RunnerBinaryPath();
    Result<std::unique_ptr<SshGuestControl>> c = SshGuestControl::Create(o);
    ASSERT_TRUE(c.ok());
    fresh = std::move(*c);
  }
  g->control->Disconnect(kTestVm);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(Exec(*fresh, "echo $CLONE_ENV"), "b\n");
  std::string fp = fresh->HostKeyFingerprint(kTestVm);
  std::fprintf(stderr, "new connection's host key: %s\n", fp.c_str());

  // Once more on a fresh connection, as right after a restore: the handshake and the runner
  // check are part of it then.
  Result<GuestIdentity> again = NewGuestIdentity(true);
  ASSERT_TRUE(again.ok());
  again->hostname = "clone-b";
  fresh->Disconnect(kTestVm);
  std::this_thread::sleep_for(milliseconds(300));
  t0 = Clock::now();
  r = ApplyGuestIdentity(*fresh, kTestVm, *again, milliseconds(60000));
  took = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::fprintf(stderr,
               "ApplyGuestIdentity (new connection): %.3f s end to end; the guest's steps %lld ms, "
               "clock rtt %lld us\n",
               took, static_cast<long long>(r->work_ms), static_cast<long long>(r->clock_rtt_us));
  EXPECT_FALSE(r->setup_started);  // it ran once already
  EXPECT_EQ(Exec(*fresh, "cat /sys/class/net/eth0/address"), *again->mac + "\n");
  clock = MeasureClockOffset(*fresh, 5);
  ASSERT_TRUE(clock.error.empty()) << clock.error;
  std::fprintf(stderr, "guest clock - host clock: %+.4f s (+-%.4f s)\n", clock.offset_s,
               clock.rtt_s / 2);
  EXPECT_LT(std::abs(clock.offset_s), 0.1);
  g->control = std::move(fresh);
  EXPECT_TRUE(NetworkWorks(30));
}

}  // namespace
}  // namespace warren::guest::testing
