// A VM's control port through libvirt (vmhost/libvirt_channel.h: virDomainOpenChannel and
// the socket-pair pump on libvirt's event loop), with warren's guest control on top: an
// SshGuestControl whose dialer opens the channel runs commands, moves a few MiB each way
// (sha256-checked), reconnects over a second channel once the first is closed, is refused a
// second channel while one is held (no stealing), and leaves no descriptor or pump behind;
// and a guest that stops reading its port while megabytes are pushed into it stalls neither
// libvirt's event loop nor another VM's channel (fair under abuse: the guest is untrusted).
//
// Where the VM is:
//   - by default a tiny VM booted for this process on the real local libvirt
//     (real_libvirt_env.h: WARREN_TEST_IMAGES, WARREN_TEST_LIBVIRT_URI), its channel opened
//     on a qemu:///system connection of the test's own: virDomainOpenChannel works locally
//     too, through the same remote driver and daemon as a remote URI;
//   - with WARREN_CHANNEL_URI, WARREN_CHANNEL_DOMAIN and WARREN_CHANNEL_KEY set, a running
//     domain already there (tests/integration/test_second_host.py sets them for a tiny VM on
//     its second host, once over qemu+ssh and once over qemu+tls), reached as user `dev`
//     with that private key.
// The stall tests also boot a second tiny VM on the local libvirt (in both modes: in the
// remote mode it is "another host's VM" beside the remote one that stalls).
// Skips (saying why; fails under CI) when no local VM can be had.
#include <dirent.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "lobby/base/streams.h"
#include "lobby/base/unique_fd.h"
#include "lobby/base/unix_socket.h"
#include "tests/unit/real_libvirt_env.h"
#include "tests/unit/skip_or_fail.h"
#include "vmhost/guest/control_key.h"
#include "vmhost/guest/ssh_guest_control.h"
#include "vmhost/libvirt_channel.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirt_host.h"

namespace warren {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr char kVm[] = "chan0001";
constexpr char kOtherVm[] = "chan0002";  // the stall tests' bystander, always local
constexpr size_t kBulkBytes = size_t{4} << 20;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

int OpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the directory's own
}

// Waits (up to 10 s) for every channel's pump to be cleaned up.
bool PumpsGone() {
  auto give_up = Clock::now() + std::chrono::seconds(10);
  while (OpenDomainChannelCount() != 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return OpenDomainChannelCount() == 0;
}

// The VM the tests reach, found or booted once per process.
struct Target {
  std::string skip;
  Status error;
  std::string uri;
  std::string domain;
  std::string key_path;
  std::string scratch;                // a temp dir of ours (the local mode's key)
  std::unique_ptr<LibvirtHost> host;  // the local mode's
  ConnectHandle conn;
  // The bystander VM (kOtherVm) on the local libvirt: booted with the target in the local
  // mode, on first use in the remote mode (other_host then owns its own LibvirtHost).
  std::unique_ptr<LibvirtHost> other_host;
  std::string other_skip;
  Status other_error;
  std::string other_uri;
  std::string other_domain;
  std::string other_key;
  bool other_made = false;
};

// Boots the bystander on `host` (the local libvirt), with a key of its own in t.scratch.
void MakeOther(Target& t, LibvirtHost* host, const RealLibvirtEnv& env) {
  t.other_made = true;
  t.other_uri = env.uri;
  t.other_domain = env.prefix + kOtherVm;
  t.other_key = t.scratch + "/other_ed25519";
  Result<std::string> pub = guest::EnsureControlKey(t.other_key);
  if (!pub.ok()) {
    t.other_error = pub.status();
    return;
  }
  VmSpec spec = TinyVmSpec(kOtherVm, env.image);
  spec.authorized_keys = *pub + "\n";
  if (Status st = host->Create(spec); !st.ok())
    t.other_error = st.Annotate("booting the bystander");
}

Target MakeTarget() {
  Target t;
  if (!Env("WARREN_CHANNEL_URI").empty()) {
    t.uri = Env("WARREN_CHANNEL_URI");
    t.domain = Env("WARREN_CHANNEL_DOMAIN");
    t.key_path = Env("WARREN_CHANNEL_KEY");
  }
  char tmpl[] = "/tmp/warren-channel-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    t.error = Internal("mkdtemp failed");
    return t;
  }
  t.scratch = tmpl;
  if (t.uri.empty()) {
    const RealLibvirtEnv& env = GetRealLibvirtEnv();
    if (!env.available) {
      t.skip = env.skip_reason;
      return t;
    }
    t.key_path = t.scratch + "/control_ed25519";
    Result<std::string> pub = guest::EnsureControlKey(t.key_path);
    if (!pub.ok()) {
      t.error = pub.status();
      return t;
    }
    t.uri = env.uri;
    t.domain = env.prefix + kVm;
    t.host = std::make_unique<LibvirtHost>(env.HostOptions());
    VmSpec spec = TinyVmSpec(kVm, env.image);
    spec.authorized_keys = *pub + "\n";
    if (Status st = t.host->Create(spec); !st.ok()) {
      t.error = st.Annotate("booting the tiny VM");
      return t;
    }
    MakeOther(t, t.host.get(), env);  // boots beside the first
  }
  Result<ConnectHandle> conn = OpenLibvirt(t.uri);
  if (!conn.ok()) {
    t.error = conn.status();
    return t;
  }
  t.conn = std::move(*conn);
  return t;
}

Target& TheTarget() {
  static Target* t = new Target(MakeTarget());  // lives until exit; Cleanup tears it down
  return *t;
}

class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    Target& t = TheTarget();
    if (t.host != nullptr) (void)t.host->Destroy(kVm);
    if (t.other_made) {
      LibvirtHost* h = t.other_host != nullptr ? t.other_host.get() : t.host.get();
      if (h != nullptr) (void)h->Destroy(kOtherVm);
    }
    t.other_host.reset();
    t.host.reset();
    t.conn.reset();
    if (!t.scratch.empty()) {
      std::error_code ec;
      fs::remove_all(t.scratch, ec);
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new Cleanup);

struct Outcome {
  Result<GuestProgress> progress = Internal("not run");
  std::string out;
  std::string err;
};

class ChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Target& t = TheTarget();
    if (!t.skip.empty()) WARREN_SKIP_OR_FAIL() << t.skip;
    ASSERT_TRUE(t.error.ok()) << t.error.ToString();
    control_ = NewControl();
    ASSERT_NE(control_, nullptr);
  }

  // A fresh SshGuestControl reaching the VM through channels opened on the test's connection.
  std::unique_ptr<guest::SshGuestControl> NewControl() {
    Target& t = TheTarget();
    guest::SshGuestControlOptions o;
    virConnectPtr conn = t.conn.get();
    std::string domain = t.domain;
    auto dials = dials_;
    o.dial = [conn, domain, dials](std::string_view) -> Result<UniqueFd> {
      ++*dials;
      return OpenDomainChannel(conn, domain);
    };
    o.key_path = t.key_path;
    o.user = "dev";
    o.runner_path = WARREN_RUN_BINARY;
    o.reach_timeout = std::chrono::minutes(4);  // the first one waits for the boot
    Result<std::unique_ptr<guest::SshGuestControl>> c = guest::SshGuestControl::Create(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  Outcome Run(guest::SshGuestControl& c, const std::string& command, InputStream* in = nullptr) {
    Outcome o;
    StringSink out;
    StringSink err;
    GuestStreams s;
    s.in = in;
    s.out = &out;
    s.err = &err;
    o.progress = c.Exec(kVm, GuestCommand{command, {}, ""}, s);
    o.out = out.str();
    o.err = err.str();
    return o;
  }

  // Connects (one `true`) and says how many dials that took: the channel the previous
  // test's control held may not be released yet by a remote libvirtd when this one first
  // dials, so a first connection may take two. "All on one channel" counts from here.
  int Connected() {
    Outcome o = Run(*control_, "true");
    EXPECT_TRUE(o.progress.ok()) << o.progress.status().ToString();
    return *dials_;
  }

  std::shared_ptr<int> dials_ = std::make_shared<int>(0);
  std::unique_ptr<guest::SshGuestControl> control_;
};

TEST_F(ChannelTest, ExecRoundTrip) {
  Outcome o = Run(*control_, "echo hello-$((6 * 7)); echo to-stderr >&2; exit 3");
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.out, "hello-42\n");
  EXPECT_EQ(o.err, "to-stderr\n");
  EXPECT_TRUE(o.progress->finished);
  EXPECT_EQ(o.progress->exit_code, 3);
  EXPECT_EQ(*dials_, 1);
}

TEST_F(ChannelTest, BulkBothWaysKeepsEveryByte) {
  const int dialed = Connected();
  // Up: 4 MiB of stdin, far more than the pump buffers, hashed in the guest.
  std::string blob(kBulkBytes, '\0');
  std::mt19937_64 rng(18);
  for (size_t i = 0; i < blob.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&blob[i], &v, 8);
  }
  StringInput in(blob);
  auto t0 = Clock::now();
  Outcome up = Run(*control_, "sha256sum", &in);
  double up_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(up.progress.ok()) << up.progress.status().ToString();
  EXPECT_EQ(up.out.substr(0, 64), Sha256Hex(blob)) << up.out << up.err;

  // Down: 4 MiB made in the guest, its hash on stderr.
  t0 = Clock::now();
  Outcome down = Run(*control_, "f=$(mktemp) && head -c " + std::to_string(kBulkBytes) +
                                    " /dev/urandom > $f && sha256sum < $f >&2 && cat $f; rm -f $f");
  double down_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(down.progress.ok()) << down.progress.status().ToString();
  EXPECT_EQ(down.progress->exit_code, 0) << down.err;
  ASSERT_EQ(down.out.size(), kBulkBytes);
  EXPECT_EQ(down.err.substr(0, 64), Sha256Hex(down.out));
  std::printf("[timing] 4 MiB up %.2f s (%.2f MiB/s), down %.2f s (%.2f MiB/s) via %s\n", up_s,
              4 / up_s, down_s, 4 / down_s, TheTarget().uri.c_str());
  EXPECT_EQ(*dials_, dialed);  // all on one channel
}

// Both ways at once: `cat` echoes 4 MiB of stdin while it is still coming, so the sender
// thread's (blocking) sends and the event loop's (non-blocking) receives run on the stream
// together, for seconds (a blocking send and a blocking receive on two threads deadlocked
// in the bench: docs/multi_host_transport.md).
TEST_F(ChannelTest, EchoBothWaysAtOnceKeepsEveryByte) {
  std::string blob(kBulkBytes, '\0');
  std::mt19937_64 rng(1818);
  for (size_t i = 0; i < blob.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&blob[i], &v, 8);
  }
  const int dialed = Connected();
  StringInput in(blob);
  auto t0 = Clock::now();
  Outcome o = Run(*control_, "cat", &in);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.progress->exit_code, 0) << o.err;
  ASSERT_EQ(o.out.size(), blob.size());
  EXPECT_TRUE(o.out == blob);
  std::printf("[timing] 4 MiB echoed (both ways at once) in %.2f s via %s\n", s,
              TheTarget().uri.c_str());
  EXPECT_EQ(*dials_, dialed);
}

TEST_F(ChannelTest, ReconnectsOverASecondChannelOnceTheFirstIsClosed) {
  Outcome first = Run(*control_, "echo one");
  ASSERT_TRUE(first.progress.ok()) << first.progress.status().ToString();
  EXPECT_EQ(OpenDomainChannelCount(), 1);
  control_->Disconnect(kVm);
  EXPECT_TRUE(PumpsGone());
  Outcome second = Run(*control_, "echo two");
  ASSERT_TRUE(second.progress.ok()) << second.progress.status().ToString();
  EXPECT_EQ(second.out, "two\n");
  EXPECT_GE(*dials_, 2);
  EXPECT_EQ(OpenDomainChannelCount(), 1);
}

TEST_F(ChannelTest, ASecondOpenWhileOneIsHeldIsRefusedNotStolen) {
  const int dialed = Connected();
  Target& t = TheTarget();
  Result<UniqueFd> other = OpenDomainChannel(t.conn.get(), t.domain);
  EXPECT_EQ(other.status().code(), Code::kUnavailable) << other.status().ToString();
  // The holder's session goes on, on the channel it had.
  Outcome o = Run(*control_, "echo still-mine");
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.out, "still-mine\n");
  EXPECT_EQ(*dials_, dialed);
}

// LibvirtHost::DialControl: a local host connects the VM's socket itself (no channel); a
// remote one opens the channel on its connection.
TEST_F(ChannelTest, TheHostDialsItsVmsControlPort) {
  Target& t = TheTarget();
  std::unique_ptr<LibvirtHost> remote;
  LibvirtHost* host = t.host.get();
  std::string id = kVm;
  if (host == nullptr) {  // the remote mode: a host of that URI, its prefix empty
    LibvirtHostOptions o;
    o.uri = t.uri;
    o.domain_prefix = "";
    o.data_dir = "/var/lib/warren-channel-test-unused";
    remote = std::make_unique<LibvirtHost>(o);
    host = remote.get();
    id = t.domain;
  }
  control_.reset();
  ASSERT_TRUE(PumpsGone());
  guest::SshGuestControlOptions o;
  o.dial = [host](std::string_view vm) { return host->DialControl(vm); };
  o.key_path = t.key_path;
  o.user = "dev";
  o.runner_path = WARREN_RUN_BINARY;
  o.reach_timeout = std::chrono::minutes(1);
  Result<std::unique_ptr<guest::SshGuestControl>> c = guest::SshGuestControl::Create(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  Result<GuestProgress> p = (*c)->Exec(id, GuestCommand{"echo dialed", {}, ""}, s);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(out.str(), "dialed\n");
  EXPECT_EQ(OpenDomainChannelCount(), remote != nullptr ? 1 : 0);
  c->reset();
  EXPECT_TRUE(PumpsGone());
}

// Not a bound, a measurement in one run (docs/multi_host_transport.md): `true` as a new exec
// on a kept session, over the VM's unix socket and over its channel, alternated (socket,
// channel, socket, channel) so drift counts for both. The port takes one client at a time,
// so each session is dropped before the other dials. Local mode only (no socket remotely).
TEST_F(ChannelTest, ExecTrueOverTheSocketAndOverTheChannel) {
  Target& t = TheTarget();
  if (t.host == nullptr) return;  // remote mode: nothing to compare with
  control_.reset();
  ASSERT_TRUE(PumpsGone());
  std::string socket = t.host->VmDir(kVm) + "/control.sock";
  std::unique_ptr<guest::SshGuestControl> channel = NewControl();
  guest::SshGuestControlOptions o;
  o.dial = [socket](std::string_view) { return DialUnixSocket(socket); };
  o.key_path = t.key_path;
  o.user = "dev";
  o.runner_path = WARREN_RUN_BINARY;
  o.reach_timeout = std::chrono::minutes(1);
  Result<std::unique_ptr<guest::SshGuestControl>> local = guest::SshGuestControl::Create(o);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  constexpr int kRuns = 15;
  std::vector<double> ms[2];
  for (int round = 0; round < 4; ++round) {
    guest::SshGuestControl& c = round % 2 == 0 ? **local : *channel;
    ASSERT_TRUE(Run(c, "true").progress.ok());  // connected (and the runner checked)
    for (int i = 0; i < kRuns; ++i) {
      auto t0 = Clock::now();
      Outcome r = Run(c, "true");
      ASSERT_TRUE(r.progress.ok()) << r.progress.status().ToString();
      ms[round % 2].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    c.Disconnect(kVm);
    ASSERT_TRUE(PumpsGone());
  }
  double p50[2];
  for (int k = 0; k < 2; ++k) {
    std::sort(ms[k].begin(), ms[k].end());
    p50[k] = ms[k][ms[k].size() / 2];
  }
  std::printf("[timing] exec true p50 over %zu each: socket %.1f ms, channel %.1f ms (x%.2f)\n",
              ms[0].size(), p50[0], p50[1], p50[1] / p50[0]);
}

TEST_F(ChannelTest, UnknownDomainIsNotFound) {
  Result<UniqueFd> r = OpenDomainChannel(TheTarget().conn.get(), "warren-test-no-such-domain");
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().ToString();
}

TEST_F(ChannelTest, NoDescriptorOrPumpOutlivesItsSession) {
  ASSERT_TRUE(Run(*control_, "true").progress.ok());
  control_.reset();
  ASSERT_TRUE(PumpsGone());
  const int before = OpenFds();
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<guest::SshGuestControl> c = NewControl();
    ASSERT_NE(c, nullptr);
    Outcome o = Run(*c, "echo " + std::to_string(i));
    ASSERT_TRUE(o.progress.ok()) << i << ": " << o.progress.status().ToString();
    EXPECT_EQ(o.out, std::to_string(i) + "\n");
  }
  // A channel closed by its caller at once, and one whose caller only shut it for writing.
  Target& t = TheTarget();
  for (int how = 0; how < 2; ++how) {
    ASSERT_TRUE(PumpsGone());
    Result<UniqueFd> raw = OpenDomainChannel(t.conn.get(), t.domain);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    if (how == 1) ::shutdown(raw->get(), SHUT_WR);
  }
  EXPECT_TRUE(PumpsGone());
  EXPECT_EQ(OpenFds(), before);
}

// --- A guest that stops reading its port (fair under abuse) ---------------------------------

// A timer on libvirt's event loop every kBeatMs: the longest gap between two beats is how
// long the loop was held. Leaked on purpose (a late beat may still be running at removal).
constexpr int kBeatMs = 20;
struct Heartbeat {
  std::atomic<int64_t> last_ns{0};
  std::atomic<int64_t> max_gap_ns{0};
  int timer = -1;
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }
  static void Beat(int /*timer*/, void* opaque) {
    auto* h = static_cast<Heartbeat*>(opaque);
    int64_t now = Now();
    int64_t gap = now - h->last_ns.exchange(now);
    int64_t max = h->max_gap_ns.load();
    while (gap > max && !h->max_gap_ns.compare_exchange_weak(max, gap)) {
    }
  }
  void Start() {
    last_ns = Now();
    max_gap_ns = 0;
    timer = virEventAddTimeout(kBeatMs, &Heartbeat::Beat, this, nullptr);
  }
  double MaxGapMs() const { return max_gap_ns.load() / 1e6; }
  void Stop() {
    if (timer >= 0) virEventRemoveTimeout(timer);
    timer = -1;
  }
};

// Lifecycle events of one domain, as they arrive on the event loop.
struct LifecycleSeen {
  std::atomic<int> last_event{-1};
  std::atomic<int> count{0};
  static int OnEvent(virConnectPtr, virDomainPtr, int event, int, void* opaque) {
    auto* l = static_cast<LifecycleSeen*>(opaque);
    l->last_event = event;
    l->count.fetch_add(1);
    return 0;
  }
};

// How long until `seen` reports `event` (after `before` events), up to 10 s (then 10 s).
double WaitForEvent(const LifecycleSeen& seen, int before, int event) {
  auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::seconds(10)) {
    if (seen.count.load() > before && seen.last_event.load() == event) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct StallFigures {
  double loop_max_gap_ms = 0;   // the event loop's longest stop
  double other_max_rtt_ms = 0;  // the bystander's slowest `true`
  double other_p50_rtt_ms = 0;
  int other_runs = 0;
  double suspended_event_ms = -1;  // the bystander's lifecycle events, suspend/resume to seen
  double resumed_event_ms = -1;    // (-1: not got to)
  size_t pushed = 0;               // bytes the pusher got into the stalled channel
};

constexpr auto kStall = std::chrono::seconds(12);
constexpr size_t kPushBytes = size_t{64} << 20;

class StallTest : public ChannelTest {
 protected:
  void SetUp() override {
    ChannelTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    Target& t = TheTarget();
    if (!t.other_made) {  // the remote mode: the bystander on this machine's libvirt
      const RealLibvirtEnv& env = GetRealLibvirtEnv();
      if (!env.available) {
        t.other_made = true;
        t.other_skip = env.skip_reason;
      } else {
        t.other_host = std::make_unique<LibvirtHost>(env.HostOptions());
        MakeOther(t, t.other_host.get(), env);
      }
    }
    if (!t.other_skip.empty()) WARREN_SKIP_OR_FAIL() << "no bystander VM: " << t.other_skip;
    ASSERT_TRUE(t.other_error.ok()) << t.other_error.ToString();
  }

  // A guest control of the bystander whose channels open on `conn`.
  std::unique_ptr<guest::SshGuestControl> OtherControl(virConnectPtr conn) {
    Target& t = TheTarget();
    guest::SshGuestControlOptions o;
    std::string domain = t.other_domain;
    o.dial = [conn, domain](std::string_view) { return OpenDomainChannel(conn, domain); };
    o.key_path = t.other_key;
    o.user = "dev";
    o.runner_path = WARREN_RUN_BINARY;
    o.reach_timeout = std::chrono::minutes(4);
    Result<std::unique_ptr<guest::SshGuestControl>> c = guest::SshGuestControl::Create(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // The target's guest stops reading (its domain suspended, so QEMU stops draining the
  // port) while a thread pushes up to kPushBytes into a channel of its, for kStall; then
  // the domain resumes. Meanwhile: the event loop's heartbeat, `true` round trips on the
  // bystander (its channels on `other_conn`: the target's connection or another one), and
  // the bystander suspended and resumed once (its lifecycle events on a connection of
  // their own). Suspends and resumes go through control connections of their own too, as
  // the target's connection is the one the daemon may stop reading.
  void Stall(virConnectPtr other_conn, StallFigures* f) {
    Target& t = TheTarget();
    control_.reset();
    ASSERT_TRUE(PumpsGone());
    std::unique_ptr<guest::SshGuestControl> other = OtherControl(other_conn);
    ASSERT_NE(other, nullptr);
    ASSERT_TRUE(Run(*other, "true").progress.ok());  // booted and reached

    Result<ConnectHandle> ctl = OpenLibvirt(t.uri);  // the target's suspend and resume
    ASSERT_TRUE(ctl.ok()) << ctl.status().ToString();
    Result<ConnectHandle> events = OpenLibvirt(t.other_uri);  // the bystander's
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    DomainHandle target(virDomainLookupByName(ctl->get(), t.domain.c_str()));
    ASSERT_NE(target, nullptr);
    DomainHandle bystander(virDomainLookupByName(events->get(), t.other_domain.c_str()));
    ASSERT_NE(bystander, nullptr);
    static LifecycleSeen* seen = new LifecycleSeen;  // leaked: a late event may still come
    int cb = virConnectDomainEventRegisterAny(
        events->get(), bystander.get(), VIR_DOMAIN_EVENT_ID_LIFECYCLE,
        VIR_DOMAIN_EVENT_CALLBACK(&LifecycleSeen::OnEvent), seen, nullptr);
    ASSERT_GE(cb, 0) << LibvirtError("registering for lifecycle events").ToString();

    // The target's channel, left to its sshd, which is then frozen with its domain.
    Result<UniqueFd> raw = OpenDomainChannel(t.conn.get(), t.domain);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(virDomainSuspend(target.get()), 0) << LibvirtError("suspending").ToString();

    static Heartbeat* beat = new Heartbeat;  // leaked, as above
    beat->Start();
    std::atomic<bool> stop{false};
    std::atomic<size_t> pushed{0};
    const int fd = raw->get();
    std::thread pusher([fd, &stop, &pushed] {
      std::string junk(size_t{64} * 1024, 'j');
      while (!stop.load() && pushed.load() < kPushBytes) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        ssize_t n = ::send(fd, junk.data(), junk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          pushed.fetch_add(static_cast<size_t>(n));
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          break;
        }
      }
    });
    // The watchdog ends the stall after kStall whatever else is stuck (before the fix the
    // bystander's round trip waited for it, on a loop held by the stalled send).
    const auto deadline = Clock::now() + kStall;
    std::thread watchdog([&] {
      std::this_thread::sleep_until(deadline);
      stop = true;
      virDomainResume(target.get());
    });

    // Halfway, the bystander suspended and resumed: how soon each event is seen.
    std::thread bouncer([&] {
      std::this_thread::sleep_until(deadline - kStall / 2);
      int before = seen->count.load();
      EXPECT_EQ(virDomainSuspend(bystander.get()), 0);
      f->suspended_event_ms = WaitForEvent(*seen, before, VIR_DOMAIN_EVENT_SUSPENDED);
      before = seen->count.load();
      EXPECT_EQ(virDomainResume(bystander.get()), 0);
      f->resumed_event_ms = WaitForEvent(*seen, before, VIR_DOMAIN_EVENT_RESUMED);
    });

    std::vector<double> rtt;
    while (Clock::now() < deadline) {
      auto t0 = Clock::now();
      Outcome r = Run(*other, "true");
      EXPECT_TRUE(r.progress.ok()) << r.progress.status().ToString();
      rtt.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    watchdog.join();
    bouncer.join();
    pusher.join();
    f->loop_max_gap_ms = beat->MaxGapMs();
    beat->Stop();
    f->pushed = pushed.load();
    std::sort(rtt.begin(), rtt.end());
    f->other_runs = static_cast<int>(rtt.size());
    f->other_max_rtt_ms = rtt.empty() ? 0 : rtt.back();
    f->other_p50_rtt_ms = rtt.empty() ? 0 : rtt[rtt.size() / 2];
    virConnectDomainEventDeregisterAny(events->get(), cb);
    raw->reset();  // the junk's channel ends (the resumed sshd also hangs up on it)
    other.reset();
    EXPECT_TRUE(PumpsGone());
    // And the target answers again, on a fresh channel.
    control_ = NewControl();
    ASSERT_NE(control_, nullptr);
    Outcome o = Run(*control_, "echo back");
    ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
    EXPECT_EQ(o.out, "back\n");
  }

  static void Print(const char* what, const StallFigures& f) {
    std::printf(
        "[timing] stall (%s, %s): %.1f MiB pushed in %lld s; event loop's longest stop %.0f ms; "
        "bystander `true` p50 %.0f ms, max %.0f ms over %d; its suspend/resume events after "
        "%.1f / %.1f ms\n",
        what, TheTarget().uri.c_str(), f.pushed / 1048576.0, static_cast<long long>(kStall.count()),
        f.loop_max_gap_ms, f.other_p50_rtt_ms, f.other_max_rtt_ms, f.other_runs,
        f.suspended_event_ms, f.resumed_event_ms);
  }
};

// The bystander on a connection of its own (another host's, or a second one to this host):
// nothing of the stalled channel may reach it. Before the fix the event loop stopped for
// the whole stall, the bystander's round trips and events with it.
TEST_F(StallTest, AGuestThatStopsReadingStallsNoOtherConnection) {
  Result<ConnectHandle> conn = OpenLibvirt(TheTarget().other_uri);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  StallFigures f;
  Stall(conn->get(), &f);
  Print("bystander on another connection", f);
  EXPECT_GT(f.pushed, kChannelBufferBytes);  // more than ours: the stall reached libvirt
  EXPECT_LT(f.loop_max_gap_ms, 1000);
  EXPECT_LT(f.other_max_rtt_ms, 3000);
  EXPECT_GE(f.other_runs, 5);
  EXPECT_GE(f.suspended_event_ms, 0);
  EXPECT_LT(f.suspended_event_ms, 2000);
  EXPECT_GE(f.resumed_event_ms, 0);
  EXPECT_LT(f.resumed_event_ms, 2000);
}

// The bystander on the stalled channel's own connection (two VMs of one host): libvirtd
// stops reading a client connection while one of its streams has max_client_requests
// packets queued for a guest that does not drain (remote_daemon_stream.c), so its round
// trips wait for the stalled guest whatever this process does; the event loop must not,
// nor the bystander's lifecycle events (another connection). Local mode only (the
// bystander is a local VM).
TEST_F(StallTest, OnTheSameConnectionTheLoopStillRuns) {
  if (TheTarget().host == nullptr) return;  // remote mode: the bystander is on another host
  StallFigures f;
  Stall(TheTarget().conn.get(), &f);
  Print("bystander on the same connection", f);
  EXPECT_LT(f.loop_max_gap_ms, 1000);
  EXPECT_GE(f.suspended_event_ms, 0);
  EXPECT_LT(f.suspended_event_ms, 2000);
  EXPECT_GE(f.resumed_event_ms, 0);
  EXPECT_LT(f.resumed_event_ms, 2000);
}

}  // namespace
}  // namespace warren
