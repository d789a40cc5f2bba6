// `warren-run apply-seed [--restored]` (vmhost/guest/runner/seed.c), the built binary run as
// root on this machine in the sandbox of tests/unit/guest_runner_sandbox.h (nothing on this
// machine changes): /etc and /var/lib are overlays whose upper layers show what it wrote,
// /proc/cmdline is the test's, and /dev holds the seed disks asked for, ext4 images on
// read-only loop devices named /dev/vdX as in a guest. It is run the way a guest runs it:
// through a link named apply-seed (the images' /usr/lib/warren/apply-seed), or as the verb;
// a shell around it records the kernel's hostname and the mounts it left. Skips (saying why;
// fails under CI) when not root or the namespaces or a loop device cannot be had.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/guest_runner_sandbox.h"
#include "tests/unit/skip_or_fail.h"
#include "vmhost/seed_image.h"

namespace warren {
namespace {

namespace fs = std::filesystem;
using runner_sandbox::ExpectRootFile;
using runner_sandbox::LoopDevice;
using runner_sandbox::Mode;
using runner_sandbox::ReadFile;
using runner_sandbox::Sandbox;
using runner_sandbox::SandboxRun;
using runner_sandbox::WriteFile;
using Files = std::map<std::string, std::string>;

constexpr char kHeader[] = "# Generated at boot from /etc/warren/env by apply-seed.\n";

SeedContents FullSeed() {
  SeedContents seed;
  seed.hostname = "seed-host";
  seed.authorized_keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAISeed warren-control\n";
  seed.env = {{"GREETING", "hello world"}, {"PATHS", "a\\b \"c\""}};
  seed.setup_script = "#!/bin/sh\necho set up\n";
  seed.ssh_host_key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nseed\n-----END OPENSSH PRIVATE KEY-----\n";
  seed.ssh_host_key_pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey root@seed-host\n";
  return seed;
}

class SeedRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    if (::geteuid() != 0) WARREN_SKIP_OR_FAIL() << "needs root (namespaces, mounts, loop devices)";
    char tmpl[] = "/tmp/warren-seed-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    host_hosts_ = ReadFile("/etc/hosts");
    host_hostname_ = Uname();
    runner_sandbox::AddOverlays(dir_, &sandbox_);
    sandbox_.cmdline = dir_ + "/cmdline";
    SetCmdline("console=ttyS0 root=/dev/vda rw quiet");
    fs::create_directories(dir_ + "/bin");
    fs::create_symlink(WARREN_RUN_BINARY, dir_ + "/bin/apply-seed");
    // Proves the sandbox and a loop device can be had here at all.
    Disk("/dev/vdb", Blank());
    if (HasFatalFailure() || IsSkipped()) return;
    SandboxRun probe(sandbox_, "/bin/true", {"true"});
    int code = probe.Finish();
    if (code != 0) {
      WARREN_SKIP_OR_FAIL() << "cannot make the sandbox here (exit " << code
                            << "): " << probe.err();
    }
    NoDisks();
  }
  void TearDown() override {
    if (dir_.empty()) return;
    // Nothing reached the host.
    EXPECT_EQ(ReadFile("/etc/hosts"), host_hosts_);
    EXPECT_EQ(Uname(), host_hostname_);
    loops_.clear();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string Uname() {
    char name[256] = "";
    ::gethostname(name, sizeof name - 1);
    return name;
  }
  void SetCmdline(const std::string& line) { WriteFile(sandbox_.cmdline, line + "\n"); }

  // Images: the product's seed, a tree of files (kib: the image's size), or zeros.
  std::string ProductSeed(const SeedContents& seed) {
    std::string image = dir_ + "/image" + std::to_string(images_++);
    std::string error = runner_sandbox::BuildSeedFile(seed, dir_ + "/scratch", image);
    EXPECT_EQ(error, "");
    return image;
  }
  std::string Tree(const Files& files, const std::string& label = kSeedLabel, size_t kib = 1024) {
    std::string image = dir_ + "/image" + std::to_string(images_++);
    std::string error = runner_sandbox::MakeSeedImage(files, dir_ + "/tree", image, label, kib);
    EXPECT_EQ(error, "");
    return image;
  }
  std::string Blank() {
    std::string image = dir_ + "/image" + std::to_string(images_++);
    WriteFile(image, std::string(1024 * 1024, '\0'));
    return image;
  }
  // Zeros but for an ext4 superblock's magic and the seed's label: found, never mounted.
  std::string FakeSuperblock() {
    std::string bytes(1024 * 1024, '\0');
    bytes[1024 + 56] = '\x53';
    bytes[1024 + 57] = '\xef';
    bytes.replace(1024 + 120, 11, kSeedLabel);
    std::string image = dir_ + "/image" + std::to_string(images_++);
    WriteFile(image, bytes);
    return image;
  }
  // `node` (/dev/vdX) in the sandbox: `image` on a loop device.
  void Disk(const std::string& node, const std::string& image) {
    auto loop = std::make_unique<LoopDevice>(image);
    if (!loop->ok()) WARREN_SKIP_OR_FAIL() << "no loop device: " << loop->error();
    sandbox_.block_nodes.emplace_back(node, loop->dev());
    loops_.push_back(std::move(loop));
  }
  void NoDisks() {
    sandbox_.block_nodes.clear();
    loops_.clear();
  }

  struct Ran {
    int code = -1;
    std::string out, err;
    std::string uts;        // the kernel's hostname after the run
    std::string mountinfo;  // the mounts after the run
    // Whether the mount table the run started in changed while it ran (a mount, even one
    // undone before the end): what systemd would have followed in a guest. Empty without
    // watch_mounts_.
    std::string mounts_changed;
  };
  // apply-seed ARGS through the link named apply-seed (or as `warren-run apply-seed ARGS`),
  // with `env` added to PATH.
  Ran Run(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
          bool as_verb = false) {
    std::vector<std::string> argv = {
        "sh", "-c",
        std::string(watch_mounts_ ? "python3 \"$OUT/watch-mounts.py\" " : "") +
            "\"$0\" \"$@\"; rc=$?; cat /proc/sys/kernel/hostname >\"$OUT/uts\"; "
            "cat /proc/self/mountinfo >\"$OUT/mountinfo\"; exit $rc"};
    if (watch_mounts_) {
      // POLLPRI on /proc/self/mountinfo: the kernel raises it on any change of that mount
      // table after the file was read, and it stays raised.
      WriteFile(dir_ + "/watch-mounts.py",
                "import os, select, subprocess, sys\n"
                "f = open('/proc/self/mountinfo')\n"
                "f.read()\n"
                "p = select.poll()\n"
                "p.register(f, select.POLLPRI)\n"
                "rc = subprocess.call(sys.argv[1:])\n"
                "with open(os.environ['OUT'] + '/mounts-changed', 'w') as out:\n"
                "    out.write('yes' if p.poll(0) else 'no')\n"
                "sys.exit(rc)\n");
    }
    if (as_verb) {
      argv.push_back(WARREN_RUN_BINARY);
      argv.push_back("apply-seed");
    } else {
      argv.push_back(dir_ + "/bin/apply-seed");
    }
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> environment = env;
    environment.push_back("OUT=" + dir_);
    fs::remove(dir_ + "/uts");
    SandboxRun run(sandbox_, "/bin/sh", argv, environment);
    Ran r;
    r.code = run.Finish();
    r.out = run.out();
    r.err = run.err();
    r.uts = ReadFile(dir_ + "/uts");
    r.mountinfo = ReadFile(dir_ + "/mountinfo");
    if (watch_mounts_) r.mounts_changed = ReadFile(dir_ + "/mounts-changed");
    return r;
  }
  Ran Restored(const std::vector<std::string>& env = {"WARREN_SEED_DEVICE=/dev/vdb"}) {
    return Run({"--restored"}, env);
  }

  // A path under /etc or /var/lib as the runs left it (the overlays' upper layers).
  std::string Etc(const std::string& path) const { return dir_ + "/etc.up" + path; }
  std::string VarLib(const std::string& path) const { return dir_ + "/var-lib.up" + path; }
  // What a template or an earlier boot left in /etc/warren and /etc/ssh.
  void OldIdentity() {
    WriteFile(Etc("/hostname"), "prior-name\n");
    WriteFile(Etc("/warren/authorized_keys"), "old keys\n");
    WriteFile(Etc("/warren/env"), "OLD=1\n");
    WriteFile(Etc("/warren/setup-script"), "echo old\n", 0755);
    WriteFile(Etc("/ssh/ssh_host_ed25519_key"), "old key\n", 0600);
    WriteFile(Etc("/ssh/ssh_host_ed25519_key.pub"), "old pub\n");
  }
  // No temp file left beside what was replaced.
  void ExpectNoTempFiles() {
    for (const char* sub : {"", "/warren", "/ssh"}) {
      if (!fs::exists(Etc(sub))) continue;
      for (const auto& e : fs::directory_iterator(Etc(sub))) {
        EXPECT_EQ(e.path().string().find(".apply-seed"), std::string::npos) << e.path();
      }
    }
  }

  std::string dir_;
  bool watch_mounts_ = false;
  Sandbox sandbox_;
  std::vector<std::unique_ptr<LoopDevice>> loops_;
  int images_ = 0;
  std::string host_hosts_, host_hostname_;
};

TEST_F(SeedRunnerTest, AFullSeedAtBoot) {
  WriteFile(Etc("/hostname"), "prior-name\n");
  // 127.0.1.1 lines (and only those) give way to the VM's name; a last line without its
  // newline gets one.
  WriteFile(Etc("/hosts"),
            "127.0.0.1 localhost\n127.0.1.1 prior-name\n127.0.1.10 keep\n127.0.1.1\told\n"
            "# 127.0.1.1 x\n10.0.0.1 other");
  Disk("/dev/vdb", ProductSeed(FullSeed()));
  Ran r = Run({});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "warren: applied seed from /dev/vdb\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.uts, "seed-host\n");
  EXPECT_EQ(ReadFile(Etc("/hostname")), "seed-host\n");
  EXPECT_EQ(ReadFile(Etc("/hosts")),
            "127.0.0.1 localhost\n127.0.1.10 keep\n# 127.0.1.1 x\n10.0.0.1 other\n"
            "127.0.1.1\tseed-host\n");
  EXPECT_EQ(Mode(Etc("/hosts")), S_IFREG | 0644);
  SeedContents seed = FullSeed();
  struct {
    std::string path, text;
    mode_t mode;
  } files[] = {
      {"/warren/authorized_keys", seed.authorized_keys, 0644},
      {"/warren/env", "GREETING=hello world\nPATHS=a\\b \"c\"\n", 0644},
      {"/warren/setup-script", seed.setup_script, 0755},
      {"/warren/sshd_env.conf",
       std::string(kHeader) + "SetEnv \"GREETING=hello world\" \"PATHS=a\\\\b \\\"c\\\"\"\n", 0644},
      {"/ssh/ssh_host_ed25519_key", seed.ssh_host_key, 0600},
      {"/ssh/ssh_host_ed25519_key.pub", seed.ssh_host_key_pub, 0644},
  };
  for (const auto& f : files) ExpectRootFile(Etc(f.path), f.text, f.mode);
  EXPECT_TRUE(fs::is_directory(VarLib("/warren")) || fs::is_directory("/var/lib/warren"));
  EXPECT_EQ(r.mountinfo.find("/run/warren-seed"), std::string::npos) << "the seed stayed mounted";
  ExpectNoTempFiles();

  // The seed is mounted in a mount namespace of apply-seed's own: the system's mount table
  // (which systemd follows, making and stopping a unit for every mount) never changes.
  watch_mounts_ = true;
  r = Restored();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "warren: applied seed from /dev/vdb\n");
  EXPECT_EQ(r.mounts_changed, "no");
  watch_mounts_ = false;

  // The verb does the same; again, with the files in place, nothing changes.
  r = Run({}, {}, /*as_verb=*/true);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "warren: applied seed from /dev/vdb\n");
  for (const auto& f : files) EXPECT_EQ(ReadFile(Etc(f.path)), f.text) << f.path;
  EXPECT_EQ(ReadFile(Etc("/hosts")),
            "127.0.0.1 localhost\n127.0.1.10 keep\n# 127.0.1.1 x\n10.0.0.1 other\n"
            "127.0.1.1\tseed-host\n");
}

TEST_F(SeedRunnerTest, WhatTheSeedLacksIsRemoved) {
  OldIdentity();
  Disk("/dev/vdb", Tree({{"authorized_keys", "new keys\n"}}));
  Ran r = Restored();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "new keys\n");
  EXPECT_FALSE(fs::exists(Etc("/warren/env")));
  EXPECT_FALSE(fs::exists(Etc("/warren/setup-script")));
  EXPECT_EQ(ReadFile(Etc("/warren/sshd_env.conf")), kHeader);
  // No key pair in the seed: the VM's own stays (hostkeys makes one at first boot).
  EXPECT_EQ(ReadFile(Etc("/ssh/ssh_host_ed25519_key")), "old key\n");
  EXPECT_EQ(ReadFile(Etc("/ssh/ssh_host_ed25519_key.pub")), "old pub\n");
  // No hostname in the seed: the one /etc/hostname had.
  EXPECT_EQ(r.uts, "prior-name\n");
  EXPECT_EQ(ReadFile(Etc("/hostname")), "prior-name\n");

  // Once the setup script ran, the seed's is neither taken nor missed; half a key pair is
  // no key; an empty seed takes authorized_keys away too.
  OldIdentity();
  WriteFile(VarLib("/warren/setup-done"), "");
  NoDisks();
  Disk("/dev/vdb", Tree({{"setup-script", "echo new\n"}, {"ssh_host_ed25519_key", "new key\n"}}));
  r = Restored();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(Etc("/warren/authorized_keys")));
  EXPECT_FALSE(fs::exists(Etc("/warren/env")));
  EXPECT_EQ(ReadFile(Etc("/warren/setup-script")), "echo old\n");
  EXPECT_EQ(ReadFile(Etc("/ssh/ssh_host_ed25519_key")), "old key\n");
  ExpectNoTempFiles();
}

TEST_F(SeedRunnerTest, EnvBecomesOneSetEnvLineQuotedForSshd) {
  // Values are taken literally; sshd's argument splitter needs \ and " escaped. Blank lines,
  // comments and lines without '=' are skipped quietly, bad names with a message.
  std::string env =
      "PLAIN=hello world\n"
      "# a comment\n"
      "\n"
      "QUOTE=say \"hi\"\n"
      "BACK=a\\b\\\\c\n"
      "BOTH=\\\"\n"
      "bad-name=x\n"
      "1ST=x\n"
      "=novalue\n"
      "NOEQUALS\n"
      "  INDENTED=x\n"
      "_UNDER=ok=still\n"
      "EMPTY=\n"
      "CR=x\r\n"
      "SHELLISH=$HOME `id` 'q'\n"
      "LAST=no newline";
  Disk("/dev/vdb", Tree({{"authorized_keys", "k\n"}, {"env", env}}));
  Ran r = Run({});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(Etc("/warren/env")), env);
  EXPECT_EQ(ReadFile(Etc("/warren/sshd_env.conf")),
            std::string(kHeader) +
                "SetEnv \"PLAIN=hello world\" \"QUOTE=say \\\"hi\\\"\" \"BACK=a\\\\b\\\\\\\\c\" "
                "\"BOTH=\\\\\\\"\" \"_UNDER=ok=still\" \"EMPTY=\" \"CR=x\r\" "
                "\"SHELLISH=$HOME `id` 'q'\" \"LAST=no newline\"\n");
  std::string bad = "warren: env: ignoring a line with a bad name\n";
  EXPECT_EQ(r.out, "warren: applied seed from /dev/vdb\n" + bad + bad + bad + bad);
}

TEST_F(SeedRunnerTest, TheHostnameRules) {
  struct Case {
    std::string what, cmdline;
    std::optional<std::string> seed_hostname;  // the seed's hostname file, if any
    std::string etc_hostname;
    bool restored;
    std::string want;
  } cases[] = {
      {"the command line wins at boot", "quiet warren.hostname=from-cmdline", "seed-host\n",
       "prior\n", false, "from-cmdline"},
      {"never restored", "quiet warren.hostname=from-cmdline", "seed-host\n", "prior\n", true,
       "seed-host"},
      {"the last word wins", "warren.hostname=a x warren.hostname=b", "seed-host\n", "prior\n",
       false, "b"},
      {"an empty one is none", "warren.hostname=", "seed-host\n", "prior\n", false, "seed-host"},
      {"the seed's first line", "quiet", "seed-host\nsecond\n", "prior\n", false, "seed-host"},
      {"then /etc/hostname", "quiet", std::nullopt, "prior-name\n\n", false, "prior-name"},
      {"restored, no seed name", "warren.hostname=cmd", std::nullopt, "prior-name\n", true,
       "prior-name"},
      {"an empty seed name", "quiet", "\n", "prior\n", false, "prior"},
      {"a bad character", "quiet", "bad_name\n", "prior\n", false, "warren"},
      {"a leading dash", "quiet", "-dash\n", "prior\n", false, "warren"},
      {"a bad command line name", "warren.hostname=a/b", "seed-host\n", "prior\n", false, "warren"},
      {"two lines in /etc/hostname", "quiet", std::nullopt, "two\nlines\n", false, "warren"},
      {"nothing anywhere", "quiet", std::nullopt, "", false, "warren"},
      {"cut to 63 bytes", "quiet", std::string(70, 'a') + "\n", "prior\n", false,
       std::string(63, 'a')},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    SetCmdline(c.cmdline);
    WriteFile(Etc("/hostname"), c.etc_hostname);
    Files files = {{"authorized_keys", "k\n"}};
    if (c.seed_hostname) files["hostname"] = *c.seed_hostname;
    NoDisks();
    Disk("/dev/vdb", Tree(files));
    Ran r = c.restored ? Restored() : Run({});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.uts, c.want + "\n");
    EXPECT_EQ(ReadFile(Etc("/hostname")), c.want + "\n");
    std::string hosts = ReadFile(Etc("/hosts"));
    EXPECT_EQ(hosts.substr(hosts.find("127.0.1.1")), "127.0.1.1\t" + c.want + "\n") << hosts;
  }
}

TEST_F(SeedRunnerTest, NoSeedKeepsTheIdentityAtBootAndFailsRestored) {
  OldIdentity();
  Ran r = Run({});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "warren: no seed disk (label warren-seed): keeping the previous identity\n");
  EXPECT_EQ(r.uts, "prior-name\n");
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "old keys\n");
  EXPECT_EQ(ReadFile(Etc("/warren/setup-script")), "echo old\n");
  EXPECT_EQ(ReadFile(Etc("/warren/sshd_env.conf")), std::string(kHeader) + "SetEnv \"OLD=1\"\n");

  // Restored, a clone without its seed would keep the template's keys: an error, and
  // nothing written, not even the hostname.
  fs::remove(Etc("/hostname"));
  fs::remove(Etc("/warren/sshd_env.conf"));
  r = Restored({});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "warren: no seed disk (label warren-seed)\n");
  r = Restored({"WARREN_SEED_DEVICE=/dev/null"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "warren: seed device /dev/null is not a block device\n");
  r = Restored({"WARREN_SEED_DEVICE=/dev/vdz"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "warren: seed device /dev/vdz is not a block device\n");
  Disk("/dev/vdb", Blank());
  r = Restored();
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("warren: cannot mount seed disk /dev/vdb: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(Etc("/hostname")));
  EXPECT_FALSE(fs::exists(Etc("/warren/sshd_env.conf")));
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "old keys\n");

  // At boot, a disk labelled warren-seed that does not mount: reported, identity kept.
  NoDisks();
  Disk("/dev/vdb", FakeSuperblock());
  r = Run({});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("warren: cannot mount seed disk /dev/vdb: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(": keeping the previous identity\n"), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "old keys\n");
  EXPECT_EQ(r.mountinfo.find("/run/warren-seed"), std::string::npos);
}

TEST_F(SeedRunnerTest, FindsTheSeedByItsLabel) {
  // Without WARREN_SEED_DEVICE (at boot it is ignored): the ext4 labelled warren-seed, not
  // the blank disk or the other file system.
  Disk("/dev/vda", Blank());
  Disk("/dev/vdb", Tree({{"authorized_keys", "wrong\n"}}, "warren-root"));
  Disk("/dev/vdc", Tree({{"authorized_keys", "right\n"}}));
  for (const auto& [restored, env] : std::vector<std::pair<bool, std::vector<std::string>>>{
           {false, {}}, {false, {"WARREN_SEED_DEVICE=/dev/vdb"}}, {true, {}}}) {
    fs::remove(Etc("/warren/authorized_keys"));
    Ran r = restored ? Restored(env) : Run({}, env);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "warren: applied seed from /dev/vdc\n");
    EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "right\n");
  }
}

TEST_F(SeedRunnerTest, AHostileSeedIsRefusedWhole) {
  struct {
    Files files;
    size_t kib;
    std::string why;
  } cases[] = {
      {{{"authorized_keys", "k\n"}, {"env", std::string(1024 * 1024 + 1, 'x')}},
       4096,
       "the seed's env is larger than 1024 KiB"},
      {{{"authorized_keys", "k\n"}, {"setup-script", std::string(1024 * 1024 + 1, '#')}},
       4096,
       "the seed's setup-script is larger than 1024 KiB"},
      {{{"authorized_keys", "k\n"},
        {"ssh_host_ed25519_key", std::string(65 * 1024, 'k')},
        {"ssh_host_ed25519_key.pub", "pub\n"}},
       1024,
       "the seed's ssh_host_ed25519_key is larger than 64 KiB"},
      {{{"authorized_keys", "->/etc/shadow"}},
       1024,
       "the seed's authorized_keys is not a regular file"},
      {{{"authorized_keys", "k\n"}, {"env", "/"}}, 1024, "the seed's env is not a regular file"},
      {{{"authorized_keys", "k\n"}, {"hostname", "->/etc/hostname"}},
       1024,
       "the seed's hostname is not a regular file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    OldIdentity();
    fs::remove(Etc("/hostname"));
    NoDisks();
    Disk("/dev/vdb", Tree(c.files, kSeedLabel, c.kib));
    Ran r = Restored();
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "warren: " + c.why + "\n");
    EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "old keys\n");
    EXPECT_EQ(ReadFile(Etc("/warren/env")), "OLD=1\n");
    EXPECT_FALSE(fs::exists(Etc("/hostname")));
    EXPECT_EQ(r.mountinfo.find("/run/warren-seed"), std::string::npos);
    // At boot: reported, and the previous identity kept.
    r = Run({});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "warren: " + c.why + ": keeping the previous identity\n");
    EXPECT_EQ(ReadFile(Etc("/warren/authorized_keys")), "old keys\n");
    EXPECT_EQ(ReadFile(Etc("/ssh/ssh_host_ed25519_key")), "old key\n");
    ExpectNoTempFiles();
  }
}

TEST_F(SeedRunnerTest, UsageErrorsChangeNothing) {
  Disk("/dev/vdb", ProductSeed(FullSeed()));
  for (const auto& [args, as_verb] : std::vector<std::pair<std::vector<std::string>, bool>>{
           {{"--bogus"}, false}, {{"--restored", "x"}, false}, {{""}, true}, {{"a", "b"}, true}}) {
    Ran r = Run(args, {}, as_verb);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "usage: apply-seed [--restored]\n");
  }
  EXPECT_FALSE(fs::exists(Etc("/warren")));
  EXPECT_FALSE(fs::exists(Etc("/hostname")));
}

}  // namespace
}  // namespace warren
