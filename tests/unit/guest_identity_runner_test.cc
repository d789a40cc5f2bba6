// `warren-run identity` (vmhost/guest/runner/identity.c), the built binary run as root on
// this machine, talking to the host's own request builder and report parser
// (vmhost/guest/identity.h), in the sandbox of tests/unit/guest_runner_sandbox.h: nothing on
// this machine changes. There
//   - /etc/machine-id and /var/lib/dbus/machine-id are temp files bind-mounted over the real
//     ones (so the runner must write machine-id in place);
//   - /etc, /var/lib and /usr/lib are overlays whose writes land in the test's temp dir; the
//     seed's outcome (hostname, /etc/hosts, /etc/warren, the host key) is read there, and
//     /usr/lib/warren/run-setup is a stand-in that records how it was run;
//   - /dev/vdb is a real seed disk: the product's seed image (vmhost/seed_image.h) on a
//     read-only loop device, which identity flushes (BLKFLSBUF), mounts and applies in
//     process; /sys is the new network namespace's (only lo: no NIC);
//   - the clock calls are no-ops (seccomp): the step the runner computed is checked instead
//     (the real guest test sets the clock for real).
// What does reach the host: the runner's RNDADDENTROPY and RNDRESEEDCRNG mix 64 bytes into
// this machine's RNG, which is harmless. Skips (saying why; fails under CI) when not root or
// the namespaces or a loop device cannot be had.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "lobby/base/hex.h"
#include "tests/unit/guest_runner_sandbox.h"
#include "tests/unit/skip_or_fail.h"
#include "vmhost/guest/identity.h"
#include "vmhost/seed_image.h"

namespace warren {
namespace {

namespace fs = std::filesystem;
using runner_sandbox::ExpectRootFile;
using runner_sandbox::LoopDevice;
using runner_sandbox::Mode;
using runner_sandbox::ReadFile;
using runner_sandbox::Sandbox;
using runner_sandbox::WriteFile;
using IdentityRun = runner_sandbox::SandboxRun;

int64_t RealtimeMinusMonotonicMs() {
  timespec r{}, m{};
  ::clock_gettime(CLOCK_REALTIME, &r);
  ::clock_gettime(CLOCK_MONOTONIC, &m);
  return (int64_t{r.tv_sec} - m.tv_sec) * 1000 + (int64_t{r.tv_nsec} - m.tv_nsec) / 1000000;
}

// The clone's seed in these tests (UseSeed may give another): no setup script.
SeedContents CloneSeed() {
  SeedContents seed;
  seed.hostname = "clone-host";
  seed.authorized_keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIClone warren-control\n";
  seed.env = {{"GREETING", "hello \"clone\" \\o/"}, {"EMPTY", ""}};
  seed.ssh_host_key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nclone\n-----END OPENSSH PRIVATE KEY-----\n";
  seed.ssh_host_key_pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey root@clone-host\n";
  return seed;
}

class IdentityRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    if (::geteuid() != 0) {
      WARREN_SKIP_OR_FAIL() << "needs root (namespaces, mounts, the runner's own root check)";
    }
    char tmpl[] = "/tmp/warren-identity-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    host_machine_id_ = ReadFile("/etc/machine-id");
    host_hosts_ = ReadFile("/etc/hosts");
    host_hostname_ = Uname();
    // Temp files over the real ones, starting as copies.
    for (const char* path : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
      struct stat st {};
      if (::stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      std::string file = dir_ + "/files" + path;
      WriteFile(file, ReadFile(path));
      sandbox_.binds.emplace_back(file, path);
    }
    runner_sandbox::AddOverlays(dir_, &sandbox_);
    sandbox_.seccomp = true;
    // The stand-in, in /usr/lib's upper layer.
    WriteFile(dir_ + "/usr-lib.up/warren/run-setup",
              "#!/bin/sh\n"
              "{ readlink /proc/$$/fd/0; cut -d ' ' -f 6 /proc/$$/stat; } > " +
                  dir_ +
                  "/run-setup.tmp\n"
                  "mv " +
                  dir_ + "/run-setup.tmp " + dir_ + "/run-setup.ran\n",
              0755);
    // What the template left: a setup script this seed does not carry, other keys.
    WriteFile(Etc("/warren/setup-script"), "echo template\n", 0755);
    WriteFile(Etc("/warren/authorized_keys"), "ssh-ed25519 AAAATemplate\n");
    UseSeed(CloneSeed());
    if (HasFatalFailure() || IsSkipped()) return;
    // Proves the sandbox can be made here at all.
    Sandbox probe = sandbox_;
    IdentityRun run(probe, "/bin/true", {"true"});
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
    EXPECT_EQ(ReadFile("/etc/hosts"), host_hosts_);
    EXPECT_EQ(Uname(), host_hostname_);
    EXPECT_LT(std::abs(RealtimeMinusMonotonicMs() - offset_before_), 1000)
        << "this machine's clock moved";
    seed_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string Uname() {
    char name[256] = "";
    ::gethostname(name, sizeof name - 1);
    return name;
  }
  // /dev/vdb: an image of `seed` made by the product's builder, on a loop device.
  void UseSeed(const SeedContents& seed) {
    std::string image = dir_ + "/seed.img";
    std::string error = runner_sandbox::BuildSeedFile(seed, dir_ + "/scratch", image);
    ASSERT_EQ(error, "");
    UseDisk(image);
  }
  // /dev/vdb: the image file `image`, whatever it holds.
  void UseDisk(const std::string& image) {
    seed_.reset();
    auto loop = std::make_unique<LoopDevice>(image);
    if (!loop->ok()) {
      WARREN_SKIP_OR_FAIL() << "no loop device for the seed disk: " << loop->error();
    }
    sandbox_.block_nodes = {{"/dev/vdb", loop->dev()}};
    seed_ = std::move(loop);
  }
  // A path under /etc as the sandbox left it (the overlay's upper layer).
  std::string Etc(const std::string& path) const { return dir_ + "/etc.up" + path; }

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
    IdentityRun run(sandbox_, Binary(), {"warren-run", "identity"});
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
  std::unique_ptr<LoopDevice> seed_;
  std::string host_machine_id_, host_hosts_, host_hostname_;
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
  // The seed was applied in process, as a restored clone's: the seed's hostname (never this
  // machine's kernel command line), its keys, env and host key, each root-owned with its
  // mode; the template's setup script, which the seed lacks, is gone.
  EXPECT_EQ(ReadFile(Etc("/hostname")), "clone-host\n");
  std::string hosts = ReadFile(Etc("/hosts"));
  EXPECT_NE(hosts.find("\n127.0.1.1\tclone-host\n"), std::string::npos) << hosts;
  EXPECT_EQ(hosts.find("127.0.1.1\t" + host_hostname_ + "\n"), std::string::npos) << hosts;
  SeedContents seed = CloneSeed();
  struct {
    std::string path, text;
    mode_t mode;
  } files[] = {
      {"/warren/authorized_keys", seed.authorized_keys, 0644},
      {"/warren/env", "GREETING=hello \"clone\" \\o/\nEMPTY=\n", 0644},
      {"/warren/sshd_env.conf",
       "# Generated at boot from /etc/warren/env by apply-seed.\n"
       "SetEnv \"GREETING=hello \\\"clone\\\" \\\\o/\" \"EMPTY=\"\n",
       0644},
      {"/ssh/ssh_host_ed25519_key", seed.ssh_host_key, 0600},
      {"/ssh/ssh_host_ed25519_key.pub", seed.ssh_host_key_pub, 0644},
  };
  for (const auto& f : files) ExpectRootFile(Etc(f.path), f.text, f.mode);
  EXPECT_FALSE(fs::exists(Etc("/warren/setup-script")));
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

TEST_F(IdentityRunnerTest, AHandOutTakesTheNameAndAnyHostKeyFromTheRequestAlone) {
  // No seed disk at all: a hand-out reads none.
  seed_.reset();
  sandbox_.block_nodes.clear();
  const std::string old_id = BoundFile("/etc/machine-id");
  GuestIdentity id;
  for (size_t i = 0; i < id.random.size(); ++i) id.random[i] = static_cast<uint8_t>(0xa0 + i);
  id.handout = true;
  id.hostname = "handed-out";
  id.host_key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nhanded out\n-----END OPENSSH PRIVATE KEY-----\n";
  id.host_key_pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHandedOut root@handed-out\n";
  Result<std::string> request = GuestIdentityRequest(id);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  Ran r = RunToEnd(*request, /*offset_s=*/30);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("clock?\n", 0), 0u) << r.out;
  Result<GuestIdentityReport> report = ParseGuestIdentityReport(r.out.substr(7), id);
  ASSERT_TRUE(report.ok()) << report.status().ToString() << "\n" << r.out;
  EXPECT_EQ(report->hostname, "handed-out");
  EXPECT_EQ(ReadFile(Etc("/hostname")), "handed-out\n");
  std::string hosts = ReadFile(Etc("/hosts"));
  EXPECT_NE(hosts.find("\n127.0.1.1\thanded-out\n"), std::string::npos) << hosts;
  ExpectRootFile(Etc("/ssh/ssh_host_ed25519_key"), id.host_key, 0600);
  ExpectRootFile(Etc("/ssh/ssh_host_ed25519_key.pub"), id.host_key_pub, 0644);
  // The rest is the pooled VM's, as it was: its keys, env, machine-id; no setup started.
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "ssh-ed25519 AAAATemplate\n");
  EXPECT_FALSE(fs::exists(Etc("/warren/sshd_env.conf")));
  if (HasBound("/etc/machine-id")) {
    EXPECT_EQ(BoundFile("/etc/machine-id"), old_id);
    const bool shaped = old_id.size() == 33 && old_id.find_first_not_of("0123456789abcdef") == 32;
    EXPECT_EQ(report->machine_id, shaped ? old_id.substr(0, 32) : "") << old_id;
  }
  EXPECT_FALSE(report->setup_started);
  EXPECT_NEAR(report->clock_step_ms, 30 * 1000, 2000) << r.out;

  // A pooled VM keeps the key it has: the request names none, and the files stay as they are.
  GuestIdentity keeps = id;
  keeps.hostname = "kept-key";
  keeps.host_key.clear();
  keeps.host_key_pub.clear();
  request = GuestIdentityRequest(keeps);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(request->find("host-key"), std::string::npos);
  auto inode = [&](const std::string& path) {
    struct stat st {};
    return ::stat(Etc(path).c_str(), &st) == 0 ? st.st_ino : 0;
  };
  const ino_t hostname_inode = inode("/hostname"), hosts_inode = inode("/hosts");
  ASSERT_NE(hostname_inode, 0u);
  ASSERT_NE(hosts_inode, 0u);
  Ran kept = RunToEnd(*request);
  ASSERT_EQ(kept.code, 0) << kept.err;
  ASSERT_TRUE(ParseGuestIdentityReport(kept.out.substr(7), keeps).ok()) << kept.out;
  // Both rewritten in place (no flush on the path), cut to the shorter name: nothing of the
  // longer one is left.
  EXPECT_EQ(ReadFile(Etc("/hostname")), "kept-key\n");
  hosts = ReadFile(Etc("/hosts"));
  EXPECT_TRUE(hosts.ends_with("\n127.0.1.1\tkept-key\n")) << hosts;
  EXPECT_EQ(hosts.find("handed-out"), std::string::npos) << hosts;
  // In place: the same files, not new ones renamed over them.
  EXPECT_EQ(inode("/hostname"), hostname_inode);
  EXPECT_EQ(inode("/hosts"), hosts_inode);
  ExpectRootFile(Etc("/ssh/ssh_host_ed25519_key"), id.host_key, 0600);
  ExpectRootFile(Etc("/ssh/ssh_host_ed25519_key.pub"), id.host_key_pub, 0644);

  // A template's clone: a new machine-id too, written in place.
  id.new_machine_id = true;
  id.hostname = "a-clone";
  request = GuestIdentityRequest(id);
  ASSERT_TRUE(request.ok());
  EXPECT_NE(request->find("\nmachine-id new\n"), std::string::npos);
  Ran clone = RunToEnd(*request);
  ASSERT_EQ(clone.code, 0) << clone.err;
  Result<GuestIdentityReport> cloned = ParseGuestIdentityReport(clone.out.substr(7), id);
  ASSERT_TRUE(cloned.ok()) << cloned.status().ToString() << "\n" << clone.out;
  EXPECT_EQ(ReadFile(Etc("/hostname")), "a-clone\n");
  if (HasBound("/etc/machine-id")) {
    EXPECT_EQ(BoundFile("/etc/machine-id"), cloned->machine_id + "\n");
    EXPECT_NE(BoundFile("/etc/machine-id"), old_id);
  }
  // Nothing secret on either stream.
  for (const std::string& stream : {r.out, r.err}) {
    EXPECT_EQ(stream.find("handed out"), std::string::npos) << stream;
    EXPECT_EQ(stream.find(HexEncode("handed out")), std::string::npos) << stream;
    EXPECT_EQ(stream.find(RandomHex().substr(0, 16)), std::string::npos) << stream;
  }
}

TEST_F(IdentityRunnerTest, StartsTheSeedsSetupScriptOnlyIfItNeverRan) {
  SeedContents seed = CloneSeed();
  seed.setup_script = "#!/bin/sh\necho hi\n";
  UseSeed(seed);
  Ran r = RunToEnd(Request());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" setup=started "), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(Etc("/warren/setup-script")), seed.setup_script);
  EXPECT_EQ(Mode(Etc("/warren/setup-script")), S_IFREG | 0755);
  // Detached: stdin /dev/null, a session other than ours.
  for (int i = 0; i < 500 && !fs::exists(dir_ + "/run-setup.ran"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string ran = ReadFile(dir_ + "/run-setup.ran");
  EXPECT_EQ(ran.substr(0, ran.find('\n')), "/dev/null") << ran;
  EXPECT_NE(ran.substr(ran.find('\n') + 1), std::to_string(::getsid(0)) + "\n");

  // Once it ran (the marker is there), never again, and the seed's copy is left alone.
  fs::remove(dir_ + "/run-setup.ran");
  WriteFile(dir_ + "/var-lib.up/warren/setup-done", "2026-01-01T00:00:00Z\n");
  seed.setup_script = "#!/bin/sh\necho another\n";
  UseSeed(seed);
  r = RunToEnd(Request());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" setup=none "), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(Etc("/warren/setup-script")), "#!/bin/sh\necho hi\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(dir_ + "/run-setup.ran"));
}

TEST_F(IdentityRunnerTest, BadRequestsAreRefusedBeforeAnyStep) {
  std::string good = Request();
  std::string random_line = "random " + RandomHex() + "\n";
  std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown record", "seed-device /dev/vdb\nnickname x\n" + random_line + "end\n"},
      {"seed-device and hostname",
       "seed-device /dev/vdb\nhostname x\nhost-key 61\nhost-key-pub 61\n" + random_line + "end\n"},
      {"hostname without the public key", "hostname x\nhost-key 61\n" + random_line + "end\n"},
      {"hostname with only the public key",
       "hostname x\nhost-key-pub 61\n" + random_line + "end\n"},
      {"a host key without hostname",
       "seed-device /dev/vdb\nhost-key 61\nhost-key-pub 61\n" + random_line + "end\n"},
      {"a bad hostname", "hostname -x\nhost-key 61\nhost-key-pub 61\n" + random_line + "end\n"},
      {"a host key not hex", "hostname x\nhost-key 6\nhost-key-pub 61\n" + random_line + "end\n"},
      {"an uppercase host key",
       "hostname x\nhost-key 6A\nhost-key-pub 61\n" + random_line + "end\n"},
      {"machine-id new without hostname",
       "seed-device /dev/vdb\nmachine-id new\n" + random_line + "end\n"},
      {"a machine-id record of another kind",
       "hostname x\nhost-key 61\nhost-key-pub 61\nmachine-id 0123\n" + random_line + "end\n"},
      {"a host key too long", "hostname x\nhost-key " + std::string(1002, 'a') +
                                  "\nhost-key-pub 61\n" + random_line + "end\n"},
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
    IdentityRun run(sandbox_, Binary(), {"warren-run", "identity"});
    run.Write(request);
    int code = run.Finish();
    EXPECT_EQ(code, 2) << what << ": " << run.err();
    EXPECT_EQ(run.out(), "") << what;
    EXPECT_NE(run.err().find("bad request"), std::string::npos) << what << ": " << run.err();
    EXPECT_EQ(std::count(run.err().begin(), run.err().end(), '\n'), 1) << what;
    EXPECT_EQ(run.err().find(RandomHex().substr(0, 16)), std::string::npos) << what;
  }
  // Not a step ran: the seed was not applied.
  EXPECT_FALSE(fs::exists(Etc("/hostname")));
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "ssh-ed25519 AAAATemplate\n");
}

TEST_F(IdentityRunnerTest, NotRootIsRefused) {
  Sandbox nobody;
  nobody.as_nobody = true;
  IdentityRun run(nobody, Binary(), {"warren-run", "identity"});
  run.Write(Request());
  EXPECT_EQ(run.Finish(), 5) << run.err();
  EXPECT_NE(run.err().find("must run as root"), std::string::npos) << run.err();
  EXPECT_EQ(run.out(), "");
}

TEST_F(IdentityRunnerTest, AFailedStepExitsWithOneLine) {
  // The seed disk holds no file system: applying it fails, with the reason.
  WriteFile(dir_ + "/blank.img", std::string(1024 * 1024, '\0'));
  UseDisk(dir_ + "/blank.img");
  Ran r = RunToEnd(Request());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(
      r.err.rfind("warren-run identity: apply-seed failed: cannot mount seed disk /dev/vdb: ", 0),
      0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "ssh-ed25519 AAAATemplate\n");
  UseSeed(CloneSeed());

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
    IdentityRun run(sandbox_, Binary(), {"warren-run", "identity"});
    run.Write(Request());
    ASSERT_TRUE(run.ReadUntil("clock?\n")) << run.err();
    run.Write(answer);
    int code = run.Finish();
    EXPECT_NE(code, 0) << answer;
    EXPECT_EQ(run.out(), "clock?\n") << answer;
  }
  // The host goes away instead of answering.
  IdentityRun run(sandbox_, Binary(), {"warren-run", "identity"});
  run.Write(Request());
  ASSERT_TRUE(run.ReadUntil("clock?\n"));
  EXPECT_EQ(run.Finish(), 1);
  EXPECT_NE(run.err().find("went away"), std::string::npos) << run.err();
}

}  // namespace
}  // namespace warren
