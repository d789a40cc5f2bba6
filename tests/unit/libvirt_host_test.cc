// vmhost's parts around LibvirtHost: the subprocess runner, the KVM probe, the seed image,
// guest images, the libvirtd launcher and the error mapping run everywhere; LibvirtHost's
// lifecycle runs on libvirt's in-process test:///default driver everywhere, and on real
// libvirtd + QEMU with the tiny image when the test environment has them
// (tests/unit/real_libvirt_env.h).
#include "vmhost/libvirt_host.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tests/unit/real_libvirt_env.h"
#include "tests/unit/skip_or_fail.h"
#include "tests/unit/state_recorder.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest_image.h"
#include "vmhost/image_layout.h"
#include "vmhost/kvm_probe.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/libvirtd_launcher.h"
#include "vmhost/seed_image.h"
#include "vmhost/subprocess.h"
#include "vmhost/warm_memory.h"

namespace warren {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A temporary directory removed with the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "vmhost_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name, const std::string& content, int mode = 0644) const {
    std::string p = path_ + "/" + name;
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << content;
    chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

// --- subprocess -------------------------------------------------------------------------

TEST(RunProcessTest, ExitCodeAndOutput) {
  Result<ProcessResult> r = RunProcess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_NE(r->output.find("out\n"), std::string::npos);
  EXPECT_NE(r->output.find("err\n"), std::string::npos);
}

TEST(RunProcessTest, TimeoutKillsTheWholeGroup) {
  ProcessOptions o;
  o.timeout = milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  Result<ProcessResult> r = RunProcess({"/bin/sh", "-c", "sleep 30 & sleep 30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(RunProcessTest, StopWhenEndsEarly) {
  ProcessOptions o;
  o.stop_when = [](std::string_view out) { return out.find("ready") != std::string_view::npos; };
  Result<ProcessResult> r = RunProcess({"/bin/sh", "-c", "echo ready; sleep 30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped_early);
  EXPECT_FALSE(r->timed_out);
}

TEST(RunProcessTest, EnvAndBoundedOutput) {
  ProcessOptions o;
  o.env = {"WARREN_X=hello"};
  o.max_output = 10;
  Result<ProcessResult> r =
      RunProcess({"/bin/sh", "-c", "echo $WARREN_X; yes | head -c 100000"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, "hello\ny\ny\n");  // the first 10 bytes, the rest dropped
}

TEST(RunProcessTest, InputReachesStdin) {
  ProcessOptions o;
  o.input = "line one\nline two\n";
  Result<ProcessResult> r = RunProcess({"/bin/sh", "-c", "wc -l; cat >/dev/null"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, "2\n");
  // More than a pipe holds goes in as the child reads; a child that reads nothing still ends.
  o.input = std::string(1 << 20, 'x');
  r = RunProcess({"/bin/sh", "-c", "wc -c"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, std::to_string(1 << 20) + "\n");
  r = RunProcess({"/bin/true"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
}

TEST(RunProcessTest, MissingProgramExits127) {
  Result<ProcessResult> r = RunProcess({"/nonexistent/program"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
}

TEST(RunProcessTest, ChildSetupFailureAbortsTheExec) {
  ProcessOptions o;
  o.child_setup = [] { return 1; };
  Result<ProcessResult> r = RunProcess({"/bin/echo", "never"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_EQ(r->output, "");
}

// --- KVM probe --------------------------------------------------------------------------

class KvmProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("WARREN_ACCEL");
    o_.data_dir = dir_.path() + "/data";
    o_.dev_kvm = dir_.File("kvm", "");  // a file we may open read-write
    o_.sys_module = dir_.path() + "/module";
    fs::create_directories(o_.sys_module);
    o_.kernel = dir_.File("vmlinuz", "not really a kernel");
    o_.timeout = milliseconds(500);
  }
  void TearDown() override { unsetenv("WARREN_ACCEL"); }
  // A stand-in for qemu-system that runs `script`.
  void FakeQemu(const std::string& script) {
    o_.qemu = dir_.File("qemu", "#!/bin/sh\n" + script + "\n", 0755);
  }
  TempDir dir_;
  KvmProbeOptions o_;
};

TEST_F(KvmProbeTest, ForcedByOptionThenEnv) {
  o_.force = "kvm";
  EXPECT_EQ(ProbeAccel(o_).accel, Accel::kKvm);
  o_.force = "";
  setenv("WARREN_ACCEL", "tcg", 1);
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kTcg);
  EXPECT_NE(c.reason.find("WARREN_ACCEL"), std::string::npos);
  setenv("WARREN_ACCEL", "bogus", 1);
  EXPECT_EQ(ProbeAccel(o_).accel, Accel::kTcg);
}

TEST_F(KvmProbeTest, NoDevKvmMeansTcg) {
  o_.dev_kvm = dir_.path() + "/absent";
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kTcg);
  EXPECT_NE(c.reason.find("no "), std::string::npos);
}

TEST_F(KvmProbeTest, KvmPvmMeansTcgAtOnce) {
  fs::create_directories(o_.sys_module + "/kvm_pvm");
  FakeQemu("echo 'Linux version x'; echo 'Run /init'");  // would say KVM works
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kTcg);
  EXPECT_NE(c.reason.find("kvm_pvm"), std::string::npos);
}

TEST_F(KvmProbeTest, AKernelThatBootsMeansKvmAndIsCached) {
  FakeQemu("echo 'Linux version 6.1'; echo 'Run /init as init process'; sleep 30");
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kKvm) << c.reason;
  EXPECT_FALSE(c.cached);
  EXPECT_LT(c.seconds, 5);
  FakeQemu("exit 1");  // the cache answers now
  AccelChoice again = ProbeAccel(o_);
  EXPECT_EQ(again.accel, Accel::kKvm);
  EXPECT_TRUE(again.cached);
}

TEST_F(KvmProbeTest, AKernelThatHangsMeansTcgAndIsCached) {
  // kvm_pvm's behaviour under another name: the BIOS prints, the kernel never does.
  FakeQemu("echo SeaBIOS; echo 'Booting from ROM...'; sleep 30");
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kTcg);
  EXPECT_NE(c.reason.find("did not boot"), std::string::npos);
  EXPECT_TRUE(ProbeAccel(o_).cached);
}

TEST_F(KvmProbeTest, QemuRefusingKvmIsNotCached) {
  FakeQemu("echo 'failed to initialize kvm: No such device' >&2; exit 1");
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kTcg);
  EXPECT_NE(c.reason.find("failed to initialize kvm"), std::string::npos);
  EXPECT_FALSE(ProbeAccel(o_).cached);
}

TEST_F(KvmProbeTest, NoKernelToTestWith) {
  o_.kernel = "";
  AccelChoice c = ProbeAccel(o_);
  EXPECT_EQ(c.accel, Accel::kTcg);
  EXPECT_FALSE(ProbeAccel(o_).cached);
}

TEST(ParseAccelTest, Names) {
  EXPECT_EQ(*ParseAccel("kvm"), Accel::kKvm);
  EXPECT_EQ(*ParseAccel("tcg"), Accel::kTcg);
  EXPECT_EQ(*ParseAccel("qemu"), Accel::kTcg);
  EXPECT_EQ(ParseAccel("xen").status().code(), Code::kInvalidArgument);
}

// --- seed image -------------------------------------------------------------------------

// A file's contents inside an ext4 image, read with debugfs (no mount needed).
std::string Ext4Cat(const std::string& image, const std::string& file) {
  ProcessOptions o;
  o.max_output = 2 * 1024 * 1024;  // a whole seed
  Result<ProcessResult> r = RunProcess({"debugfs", "-R", "cat /" + file, image}, o);
  if (!r.ok() || r->exit_code != 0) return "<debugfs failed>";
  // debugfs prints its version banner on stderr first.
  std::string out = r->output;
  size_t banner = out.find('\n');
  return out.rfind("debugfs ", 0) == 0 ? out.substr(banner + 1) : out;
}

TEST(SeedImageTest, HoldsTheDocumentedFiles) {
  TempDir dir;
  SeedContents seed;
  seed.hostname = "web-1";
  seed.authorized_keys = "ssh-ed25519 AAAAC3Nza test@host\n";
  seed.env = {{"A", "1"}, {"B", "two words"}};
  seed.setup_script = "#!/bin/sh\necho hi\n";
  seed.ssh_host_key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nxx\n-----END OPENSSH PRIVATE KEY-----\n";
  seed.ssh_host_key_pub = "ssh-ed25519 AAAAhostkey root@vm\n";
  Result<std::string> bytes = BuildSeedImage(seed, dir.path());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_EQ(bytes->size() % (1024 * 1024), 0u);
  // ext4 superblock magic 0xEF53 at 1024 + 56, and our label at 1024 + 120.
  EXPECT_EQ(static_cast<unsigned char>((*bytes)[1024 + 56]), 0x53);
  EXPECT_EQ(static_cast<unsigned char>((*bytes)[1024 + 57]), 0xEF);
  EXPECT_EQ(std::string(bytes->data() + 1024 + 120), kSeedLabel);
  std::string image = dir.File("seed.img", *bytes);
  EXPECT_EQ(Ext4Cat(image, "hostname"), "web-1\n");
  EXPECT_EQ(Ext4Cat(image, "authorized_keys"), seed.authorized_keys);
  EXPECT_EQ(Ext4Cat(image, "env"), "A=1\nB=two words\n");
  EXPECT_EQ(Ext4Cat(image, "setup-script"), seed.setup_script);
  EXPECT_EQ(Ext4Cat(image, "ssh_host_ed25519_key"), seed.ssh_host_key);
  EXPECT_EQ(Ext4Cat(image, "ssh_host_ed25519_key.pub"), seed.ssh_host_key_pub);
  // The scratch directory is gone again.
  EXPECT_TRUE(fs::is_empty(dir.path()) || fs::directory_iterator(dir.path())->path() == image);
}

TEST(SeedImageTest, NoSetupScriptNoFile) {
  TempDir dir;
  SeedContents seed;
  seed.hostname = "x";
  Result<std::string> bytes = BuildSeedImage(seed, dir.path());
  ASSERT_TRUE(bytes.ok());
  std::string image = dir.File("seed.img", *bytes);
  EXPECT_NE(Ext4Cat(image, "setup-script").find("not found"), std::string::npos);
  EXPECT_NE(Ext4Cat(image, "ssh_host_ed25519_key").find("not found"), std::string::npos);
}

// Every seed has one size (a restored clone's seed must match its template's); what a spec
// may carry fits, more is refused.
TEST(SeedImageTest, EverySeedHasOneSizeAndTooMuchContentIsRefused) {
  TempDir dir;
  SeedContents seed;
  seed.hostname = "x";
  for (int i = 0; i < 64; ++i) {  // what `new` allows at most: 64 values of 4000 bytes
    seed.env.push_back({"K" + std::to_string(i), std::string(4000, 'v')});
  }
  Result<std::string> bytes = BuildSeedImage(seed, dir.path());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->size(), kSeedImageBytes);
  std::string image = dir.File("seed.img", *bytes);
  std::string env;
  for (const auto& [k, v] : seed.env) env += k + "=" + v + "\n";
  const std::string stored = Ext4Cat(image, "env");
  EXPECT_TRUE(stored == env) << "env: " << stored.size() << " bytes stored of " << env.size();
  seed.env.assign(256, {"K", std::string(4000, 'v')});
  EXPECT_EQ(BuildSeedImage(seed, dir.path()).status().code(), Code::kTooLarge);
}

TEST(SeedImageTest, MissingMkfsIsAnError) {
  TempDir dir;
  Result<std::string> bytes = BuildSeedImage({}, dir.path(), "/nonexistent/mkfs.ext4");
  EXPECT_EQ(bytes.status().code(), Code::kInternal);
}

// --- guest images -----------------------------------------------------------------------

// A qcow2 header is all OpenGuestImage reads.
std::string Qcow2Header(uint64_t size) {
  std::string h = "QFI\xfb";
  h += std::string(20, '\0');
  for (int i = 7; i >= 0; --i) h += static_cast<char>((size >> (8 * i)) & 0xff);
  return h;
}

// An image `ref` in `dir` whose rootfs is a qcow2 header of `rootfs_bytes` (or `rootfs`
// itself when given), with an initrd unless `initrd` is false.
void FakeImage(const TempDir& dir, const std::string& ref, uint64_t rootfs_bytes,
               const std::string& rootfs = "", bool initrd = true) {
  dir.File(ref + "/" + std::string(kImageKernelFile), "k");
  if (initrd) dir.File(ref + "/" + std::string(kImageInitrdFile), "i");
  dir.File(ref + "/" + std::string(kImageRootfsFile),
           rootfs.empty() ? Qcow2Header(rootfs_bytes) : rootfs);
}

TEST(GuestImageTest, OpensAnImageDirectory) {
  TempDir dir;
  FakeImage(dir, "tiny@1", 3ull << 30);
  dir.File("tiny@1/image.json", R"({"name":"tiny","kernel_cmdline":"console=ttyS0 quiet"})");
  Result<GuestImage> img = OpenGuestImage(dir.path(), "tiny@1");
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->cmdline, "console=ttyS0 quiet");
  EXPECT_EQ(img->rootfs_bytes, 3ll << 30);
  EXPECT_EQ(img->kernel, dir.path() + "/tiny@1/vmlinuz");
}

TEST(GuestImageTest, DefaultsAndFailures) {
  TempDir dir;
  FakeImage(dir, "tiny@1", 1 << 20);
  Result<GuestImage> img = OpenGuestImage(dir.path(), "tiny@1");
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->cmdline, kDefaultCmdline);

  EXPECT_EQ(OpenGuestImage(dir.path(), "tiny@2").status().code(), Code::kNotFound);
  EXPECT_EQ(OpenGuestImage(dir.path(), "tiny").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenGuestImage(dir.path(), "../x@1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenGuestImage(dir.path(), "x@..").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenGuestImage(dir.path(), "a/b@1").status().code(), Code::kInvalidArgument);

  FakeImage(dir, "bad@1", 0, "raw bytes, not qcow2 at all......");
  EXPECT_EQ(OpenGuestImage(dir.path(), "bad@1").status().code(), Code::kInvalidArgument);
  FakeImage(dir, "json@1", 1 << 20);
  dir.File("json@1/image.json", "{not json");
  EXPECT_EQ(OpenGuestImage(dir.path(), "json@1").status().code(), Code::kInvalidArgument);
  FakeImage(dir, "noinitrd@1", 1 << 20, "", /*initrd=*/false);
  EXPECT_EQ(OpenGuestImage(dir.path(), "noinitrd@1").status().code(), Code::kNotFound);
}

// --- libvirt errors and the launcher ----------------------------------------------------

TEST(LibvirtErrorTest, Mapping) {
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_NO_DOMAIN), Code::kNotFound);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_NO_STORAGE_VOL), Code::kNotFound);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_OPERATION_INVALID), Code::kConflict);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_DOM_EXIST), Code::kConflict);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_NO_CONNECT), Code::kUnavailable);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_RPC), Code::kUnavailable);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_OPERATION_TIMEOUT), Code::kTimeout);
  EXPECT_EQ(LibvirtErrorCode(VIR_ERR_XML_ERROR), Code::kInternal);
}

TEST(LibvirtErrorTest, FromARealCall) {
  Result<ConnectHandle> conn = OpenLibvirt("test:///default");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ(virDomainLookupByName(conn->get(), "no-such-domain"), nullptr);
  Status st = LibvirtError("looking up");
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_EQ(st.message().rfind("looking up: ", 0), 0u) << st.message();
  // The error was consumed: the next report does not repeat it.
  EXPECT_EQ(LibvirtError("again").code(), Code::kInternal);
}

TEST(LibvirtdLauncherTest, AnAnsweringDaemonIsLeftAlone) {
  LibvirtdOptions o;
  o.uri = "test:///default";
  Result<LibvirtdStatus> st = EnsureLibvirtd(o);
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->started);
}

TEST(LibvirtdLauncherTest, OnlyTheLocalSystemDaemonIsStarted) {
  LibvirtdOptions o;
  o.uri = "qemu+unix:///system?socket=/nonexistent/libvirt-sock";
  o.libvirtd = "/nonexistent/libvirtd";  // must never be run
  Result<LibvirtdStatus> st = EnsureLibvirtd(o);
  EXPECT_EQ(st.status().code(), Code::kUnavailable);
}

TEST(LibvirtdLauncherTest, WithoutSystemdTheDaemonForksItself) {
  LibvirtdOptions o;
  EXPECT_EQ(DaemonCommand(o.libvirtd, o, true, false),
            (std::vector<std::string>{"/usr/sbin/libvirtd", "--daemon"}));
}

// Under systemd (packaging/debian/warren.service) the daemons must not live in warren's
// cgroup, or `systemctl restart warren` would kill them and every VM: units of their own.
TEST(LibvirtdLauncherTest, UnderSystemdTheDaemonsAreUnitsOfTheirOwn) {
  LibvirtdOptions o;
  unsetenv("LIBVIRT_LOG_OUTPUTS");
  std::vector<std::string> libvirtd = DaemonCommand(o.libvirtd, o, true, true);
  EXPECT_EQ(libvirtd, (std::vector<std::string>{
                          "/usr/bin/systemd-run",
                          "--quiet",
                          "--collect",
                          "--unit=warren-libvirtd",
                          "--description=libvirtd started by warren",
                          "--property=Type=forking",
                          "--property=PIDFile=/run/libvirtd.pid",
                          "--property=KillMode=process",
                          "--setenv=LIBVIRT_LOG_OUTPUTS=3:file:/var/log/libvirt/libvirtd.log",
                          "--property=BindPaths=/run/warren/kvm-masked:/dev/kvm",
                          "--",
                          "/usr/sbin/libvirtd",
                          "--daemon",
                      }));
  std::vector<std::string> virtlogd = DaemonCommand(o.virtlogd, o, false, true);
  EXPECT_EQ(virtlogd, (std::vector<std::string>{
                          "/usr/bin/systemd-run",
                          "--quiet",
                          "--collect",
                          "--unit=warren-virtlogd",
                          "--description=virtlogd started by warren",
                          "--property=Type=forking",
                          "--property=PIDFile=/run/virtlogd.pid",
                          "--setenv=LIBVIRT_LOG_OUTPUTS=3:file:/var/log/libvirt/virtlogd.log",
                          "--",
                          "/usr/sbin/virtlogd",
                          "--daemon",
                      }));
  // An operator's own LIBVIRT_LOG_OUTPUTS: a unit does not inherit warren's environment, so
  // it is passed on.
  setenv("LIBVIRT_LOG_OUTPUTS", "1:stderr", 1);
  std::vector<std::string> own = DaemonCommand(o.virtlogd, o, false, true);
  unsetenv("LIBVIRT_LOG_OUTPUTS");
  EXPECT_NE(std::find(own.begin(), own.end(), "--setenv=LIBVIRT_LOG_OUTPUTS=1:stderr"), own.end());
}

// --- LibvirtHost on libvirt's in-process test driver ------------------------------------

// Each test:///default connection is a private hypervisor, so the test defines domains on
// the very connection the host uses.
class TestDriverHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<ConnectHandle> conn = OpenLibvirt("test:///default");
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = conn->get();
    virConnectRef(conn_);  // one reference for us, one for the host
    // The driver's own running domain "test" holds 8 GiB of the 3 GiB node: off it goes, or
    // no VM would ever fit (it stays defined, a domain that is not ours).
    DomainHandle builtin(virDomainLookupByName(conn_, "test"));
    if (builtin) virDomainDestroy(builtin.get());
    LibvirtHostOptions o;
    o.uri = "test:///default";
    o.data_dir = dir_.path();
    o.stop_timeout = milliseconds(2000);
    host_ = std::make_unique<LibvirtHost>(o, std::move(conn).value());
  }
  void TearDown() override {
    host_.reset();
    if (conn_ != nullptr) virConnectClose(conn_);
  }
  // A shut-off domain shaped like one Create makes.
  // `data_dir`: whose files it has (default: the host's).
  void Define(const std::string& id, const std::string& name, std::string data_dir = "") {
    if (data_dir.empty()) data_dir = dir_.path();
    DomainConfig c;
    c.id = id;
    c.name = name;
    c.uuid = "";
    c.image = "tiny@1";
    c.cpus = 2;
    c.memory_mib = 512;
    // The host owns a domain whose files are under its data dir; with the devices gone below,
    // the kernel (DATA/images, as in a default install) is what says so.
    const ImageFiles image = ImageFilesOf(data_dir + "/images", "tiny@1");
    c.kernel = image.kernel;
    c.initrd = image.initrd;
    std::string xml = DomainXml(c);
    // The test driver runs only its own domain type and knows none of our devices.
    xml.replace(xml.find("type='qemu'"), 11, "type='test'");
    xml.erase(xml.find("  <uuid></uuid>\n"), 16);
    xml.erase(xml.find("  <devices>"), xml.find("</devices>") + 11 - xml.find("  <devices>"));
    DomainHandle dom(virDomainDefineXML(conn_, xml.c_str()));
    ASSERT_TRUE(dom) << LibvirtError("define").ToString();
  }
  int Autostart(const std::string& id) {
    DomainHandle dom(virDomainLookupByName(conn_, ("warren-" + id).c_str()));
    int on = -1;
    if (!dom || virDomainGetAutostart(dom.get(), &on) < 0) return -1;
    return on;
  }
  TempDir dir_;
  virConnectPtr conn_ = nullptr;
  std::unique_ptr<LibvirtHost> host_;
};

TEST_F(TestDriverHostTest, LifecycleAndStates) {
  Define("abcd0001", "web-1");
  Result<VmInfo> info = host_->Inspect("abcd0001");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, VmState::kStopped);
  EXPECT_EQ(info->name, "web-1");
  EXPECT_EQ(info->image, "tiny@1");
  EXPECT_EQ(info->cpus, 2);
  EXPECT_EQ(info->memory_mib, 512);
  EXPECT_EQ(info->started_at, 0);

  EXPECT_EQ(host_->Stop("abcd0001").code(), Code::kConflict);
  EXPECT_EQ(host_->Pause("abcd0001").code(), Code::kConflict);
  Status started = host_->Start("abcd0001");
  ASSERT_TRUE(started.ok()) << started.ToString();
  info = host_->Inspect("abcd0001");
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_GT(info->started_at, 0);
  EXPECT_EQ(host_->Start("abcd0001").code(), Code::kConflict);
  ASSERT_TRUE(host_->Pause("abcd0001").ok());
  EXPECT_EQ(host_->Inspect("abcd0001")->state, VmState::kPaused);
  EXPECT_EQ(host_->Restart("abcd0001").code(), Code::kConflict);
  ASSERT_TRUE(host_->Resume("abcd0001").ok());
  ASSERT_TRUE(host_->Restart("abcd0001").ok());
  EXPECT_EQ(host_->Inspect("abcd0001")->state, VmState::kRunning);
  // Running VMs come back after a restart of the daemon or the host; stopped ones do not.
  EXPECT_EQ(Autostart("abcd0001"), 1);
  ASSERT_TRUE(host_->Pause("abcd0001").ok());
  ASSERT_TRUE(host_->Stop("abcd0001").ok());  // paused -> stopped
  EXPECT_EQ(Autostart("abcd0001"), 0);
  info = host_->Inspect("abcd0001");
  EXPECT_EQ(info->state, VmState::kStopped);
  EXPECT_EQ(info->started_at, 0);

  Status destroyed = host_->Destroy("abcd0001");
  ASSERT_TRUE(destroyed.ok()) << destroyed.ToString();
  EXPECT_EQ(host_->Inspect("abcd0001").status().code(), Code::kNotFound);
  EXPECT_EQ(host_->Destroy("abcd0001").code(), Code::kNotFound);
}

// libvirt's own events, through the process's event loop, on the in-process driver: each
// change once, in order; a domain that is not warren's is not reported.
TEST_F(TestDriverHostTest, WatchStatesFollowsLibvirtsEvents) {
  Define("abcd0010", "watched");
  StateRecorder recorder;
  ASSERT_TRUE(host_->WatchStates(recorder.Listener()).ok());
  ASSERT_TRUE(host_->Start("abcd0010").ok());
  ASSERT_TRUE(host_->Pause("abcd0010").ok());
  ASSERT_TRUE(host_->Resume("abcd0010").ok());
  ASSERT_TRUE(host_->Stop("abcd0010").ok());
  ASSERT_TRUE(host_->Start("abcd0010").ok());
  ASSERT_TRUE(host_->Destroy("abcd0010").ok());
  const std::vector<VmState> want = {VmState::kRunning, VmState::kPaused,  VmState::kRunning,
                                     VmState::kStopped, VmState::kRunning, VmState::kStopped};
  EXPECT_EQ(Names(recorder.WaitFor("abcd0010", want)), Names(want));
  // Destroyed while running: stopped, then removed (stopped again).
  EXPECT_EQ(recorder.WaitForCount("abcd0010", 7), 7u);
  // The driver's own domain is not ours: its start and stop are not reported (events come
  // in order, so they would be in before the next VM's).
  DomainHandle builtin(virDomainLookupByName(conn_, "test"));
  ASSERT_TRUE(builtin && virDomainCreate(builtin.get()) == 0) << LibvirtError("start").ToString();
  ASSERT_EQ(virDomainDestroy(builtin.get()), 0);
  Define("abcd0012", "next");
  ASSERT_TRUE(host_->Start("abcd0012").ok());
  EXPECT_EQ(Names(recorder.WaitFor("abcd0012", {VmState::kRunning})), Names({VmState::kRunning}));
  for (const VmStateEvent& e : recorder.All()) {
    EXPECT_TRUE(e.id == "abcd0010" || e.id == "abcd0012") << e.id;
  }
  ASSERT_TRUE(host_->WatchStates(nullptr).ok());
  host_.reset();  // stops the watch cleanly with the daemon-less connection still open
}

// A domain defined after the watch began, by someone else, is reported once it is known to
// be this host's (its files are in the host's data directory).
TEST_F(TestDriverHostTest, WatchStatesAdmitsADomainDefinedLater) {
  StateRecorder recorder;
  ASSERT_TRUE(host_->WatchStates(recorder.Listener()).ok());
  // Named like ours, but another warren's (its files in another data directory).
  TempDir other;
  Define("abcd0013", "neighbour", other.path());
  DomainHandle theirs(virDomainLookupByName(conn_, "warren-abcd0013"));
  ASSERT_TRUE(theirs && virDomainCreate(theirs.get()) == 0) << LibvirtError("start").ToString();
  ASSERT_EQ(virDomainDestroy(theirs.get()), 0);
  Define("abcd0011", "later");
  ASSERT_TRUE(host_->Start("abcd0011").ok());
  EXPECT_EQ(Names(recorder.WaitFor("abcd0011", {VmState::kRunning})), Names({VmState::kRunning}));
  for (const VmStateEvent& e : recorder.All()) EXPECT_EQ(e.id, "abcd0011");
}

TEST_F(TestDriverHostTest, ListSeesOnlyWarrenDomains) {
  // test:///default comes with a domain named "test"; it is not ours.
  Define("abcd0002", "b");
  Define("abcd0001", "a");
  Result<std::vector<VmInfo>> all = host_->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, "abcd0001");
  EXPECT_EQ((*all)[1].name, "b");
}

// Another warren on the same libvirtd (its own data dir) names its domains the same way; it
// must not take ours for its own (its reconcile would destroy them as orphans).
TEST_F(TestDriverHostTest, ListLeavesOutAnotherDataDirsDomains) {
  Define("abcd0004", "mine");
  TempDir other_dir;
  Result<ConnectHandle> conn = OpenLibvirt("test:///default");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  LibvirtHostOptions o;
  o.uri = "test:///default";
  o.data_dir = other_dir.path();
  LibvirtHost neighbour(o, std::move(conn).value());
  ASSERT_TRUE(neighbour.Inspect("abcd0004").ok()) << "both see one libvirt";
  Result<std::vector<VmInfo>> theirs = neighbour.List();
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_TRUE(theirs->empty());
  Result<std::vector<VmInfo>> ours = host_->List();
  ASSERT_TRUE(ours.ok());
  ASSERT_EQ(ours->size(), 1u);
  EXPECT_EQ((*ours)[0].id, "abcd0004");
}

// Warm memory (vmhost/warm_memory.h) held for `bytes`, taken once at once and not again in the
// test; returns when it is held.
std::unique_ptr<WarmMemory> HeldWarmMemory(int64_t bytes) {
  WarmMemoryOptions wo;
  wo.bytes = bytes;
  wo.quiet = std::chrono::hours(1);
  wo.floor_bytes = 0;
  wo.available_bytes = [] { return int64_t{1} << 40; };
  auto warm = std::make_unique<WarmMemory>(wo);
  for (int i = 0; i < 1000 && warm->held_bytes() < wo.bytes; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  return warm;
}

// A start on a host with warm memory frees it first.
TEST_F(TestDriverHostTest, AStartFreesTheWarmMemory) {
  Define("abcd0005", "warm");
  std::unique_ptr<WarmMemory> warm = HeldWarmMemory(int64_t{4} << 20);
  ASSERT_EQ(warm->held_bytes(), int64_t{4} << 20);
  Result<ConnectHandle> conn = OpenLibvirt("test:///default");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  LibvirtHostOptions o;
  o.uri = "test:///default";
  o.data_dir = dir_.path();
  o.warm_memory = warm.get();
  LibvirtHost warm_host(o, std::move(conn).value());
  // The test driver reports no free memory: unknown stays unknown.
  Result<HostCapacity> cap = warm_host.Capacity();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_EQ(cap->memory_free_mib, INT64_MAX);
  Status started = warm_host.Start("abcd0005");
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_EQ(warm->held_bytes(), 0);
}

TEST_F(TestDriverHostTest, RenameRewritesMetadataTitleAndNextBootHostname) {
  Define("abcd0003", "old-name");
  ASSERT_TRUE(host_->Start("abcd0003").ok());
  ASSERT_TRUE(host_->Rename("abcd0003", "new-name").ok());
  EXPECT_EQ(host_->Inspect("abcd0003")->name, "new-name");
  EXPECT_EQ(host_->Inspect("abcd0003")->image, "tiny@1");  // the rest of the metadata stays
  DomainHandle dom(virDomainLookupByName(conn_, "warren-abcd0003"));
  ASSERT_TRUE(dom);
  LibvirtString xml(virDomainGetXMLDesc(dom.get(), VIR_DOMAIN_XML_INACTIVE));
  std::string def = xml.get();
  EXPECT_NE(def.find("warren.hostname=new-name</cmdline>"), std::string::npos) << def;
  EXPECT_NE(def.find("<title>new-name</title>"), std::string::npos);
  EXPECT_EQ(def.find("old-name"), std::string::npos);
}

// What a warren killed while it made a seed or a host key left in DATA/tmp (crash points,
// issue 16): their scratch goes at the next collection (reconcile's), but never one this
// process may be making now (the scratch is named with its maker's pid).
TEST_F(TestDriverHostTest, CollectionRemovesAnotherProcesssScratch) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::path(dir_.path()) / "tmp";
  const std::string me = std::to_string(getpid());
  const std::string other = std::to_string(getpid() + 1);
  fs::create_directories(fs::path(dir_.path()) / "disks");
  fs::create_directories(tmp / ("seed." + other + ".AbC123") / "root");
  std::ofstream(tmp / ("hostkey-" + other + "-0123456789ab")) << "key";
  std::ofstream(tmp / ("hostkey-" + other + "-0123456789ab.pub")) << "pub";
  fs::create_directories(tmp / "seed.XyZ789");               // an older warren's: no pid
  fs::create_directories(tmp / ("seed." + me + ".Now456"));  // this process's
  std::ofstream(tmp / ("hostkey-" + me + "-aaaaaaaaaaaa")) << "key";
  fs::create_directories(tmp / "keep-me");  // not a scratch
  // The test driver makes no storage pool, so the collection of disk layers fails here; the
  // leftovers go first.
  (void)host_->RemoveUnusedDisks();
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"hostkey-" + me + "-aaaaaaaaaaaa", "keep-me",
                                            "seed." + me + ".Now456"}));
  EXPECT_FALSE(IsScratchOfAnotherProcess("seed." + me + ".Q1w2e3"));
  EXPECT_TRUE(IsScratchOfAnotherProcess("seed." + me + "0.Q1w2e3"));
  EXPECT_FALSE(IsScratchOfAnotherProcess("restore-abc.fifo"));
}

TEST_F(TestDriverHostTest, UnknownIdsAreNotFound) {
  EXPECT_EQ(host_->Start("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Stop("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Pause("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Resume("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Restart("nosuchvm").code(), Code::kNotFound);
  EXPECT_EQ(host_->Rename("nosuchvm", "x").code(), Code::kNotFound);
  EXPECT_EQ(host_->Inspect("nosuchvm").status().code(), Code::kNotFound);
  EXPECT_EQ(host_->Console("nosuchvm", 5).status().code(), Code::kNotFound);
}

TEST_F(TestDriverHostTest, CreateChecksBeforeTouchingAnything) {
  VmSpec s;
  s.id = "abcd0004";
  s.image = "missing@1";
  EXPECT_EQ(host_->Create(s).code(), Code::kNotFound);
  s.id = "BAD";
  EXPECT_EQ(host_->Create(s).code(), Code::kInvalidArgument);
  // A disk smaller than the image's root file system could not hold it.
  FakeImage(dir_, "images/big@1", 3ull << 30);
  LibvirtHostOptions o;
  o.uri = "test:///default";
  o.data_dir = dir_.path();
  o.images_dir = dir_.path() + "/images";
  LibvirtHost host(o);
  s.id = "abcd0005";
  s.image = "big@1";
  s.disk_gib = 2;
  Status st = host.Create(s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("at least 3 GiB"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dir_.path() + "/vms"));
}

TEST_F(TestDriverHostTest, ConcurrentCallsOnManyVms) {
  const int kVms = 4;
  for (int i = 0; i < kVms; ++i) Define("abcd100" + std::to_string(i), "vm-" + std::to_string(i));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kVms * 2; ++t) {
    threads.emplace_back([&, t] {
      // Two threads per VM race the same transitions: the per-VM lock makes each one
      // either happen or be refused as a conflict, never anything else.
      std::string id = "abcd100" + std::to_string(t % kVms);
      for (int round = 0; round < 20; ++round) {
        for (Status st : {host_->Start(id), host_->Pause(id), host_->Resume(id), host_->Stop(id)}) {
          if (!st.ok() && st.code() != Code::kConflict) ++failures;
        }
        if (!host_->Inspect(id).ok() || !host_->List().ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(host_->List()->size(), static_cast<size_t>(kVms));
}

TEST(StartLibvirtHostTest, ProbesConnectsAndSetsTheAccel) {
  TempDir dir;
  LibvirtHostOptions o;
  o.uri = "test:///default";
  o.data_dir = dir.path();
  o.images_dir = dir.path() + "/images";
  Result<std::unique_ptr<LibvirtHost>> host = StartLibvirtHost(o, "tcg");
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ((*host)->uri(), "test:///default");
  EXPECT_TRUE((*host)->List().ok());
  o.uri = "qemu+unix:///system?socket=/nonexistent/libvirt-sock";
  EXPECT_EQ(StartLibvirtHost(o, "tcg").status().code(), Code::kUnavailable);
}

TEST(LibvirtHostTest, UnreachableDaemonIsUnavailable) {
  LibvirtHostOptions o;
  o.uri = "qemu+unix:///system?socket=/nonexistent/libvirt-sock";
  LibvirtHost host(o);
  EXPECT_EQ(host.Inspect("abcd0001").status().code(), Code::kUnavailable);
  EXPECT_EQ(host.List().status().code(), Code::kUnavailable);
}

// --- LibvirtHost on real libvirtd + QEMU ------------------------------------------------

class RealHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const RealLibvirtEnv& env = GetRealLibvirtEnv();
    if (!env.available) WARREN_SKIP_OR_FAIL() << env.skip_reason;
    options_ = env.HostOptions();
    host_ = std::make_unique<LibvirtHost>(options_);
    image_ = env.image;
  }
  void TearDown() override {
    if (host_) DestroyEveryVm(*host_);
  }
  VmSpec Spec(const std::string& id) { return TinyVmSpec(id, image_); }
  // Polls the console until it shows `text`; returns the console then.
  std::string WaitForConsole(const std::string& id, const std::string& text, int seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      Result<std::string> c = host_->Console(id, 500);
      if (c.ok()) last = *c;
      if (last.find(text) != std::string::npos) return last;
      std::this_thread::sleep_for(milliseconds(250));
    }
    ADD_FAILURE() << "console of " << id << " never showed '" << text << "':\n" << last;
    return last;
  }
  LibvirtHostOptions options_;
  std::unique_ptr<LibvirtHost> host_;
  std::string image_;
};

// One boot covers what needs a live guest: the kernel boots from the image, the seed
// reaches the guest (hostname, setup script), egress on, the files are where the README says, a
// second host object (a restarted warren) sees the VM, and Destroy leaves nothing.
TEST_F(RealHostTest, BootsWithSeedAndCleansUp) {
  VmSpec s = Spec("real0001");
  s.name = "tiny-one";
  s.egress = Egress::kAll;
  s.authorized_keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests test\n";
  s.env = {{"WARREN_TEST", "1"}};
  s.setup_script = "#!/bin/sh\necho setup ran\n";
  auto t0 = std::chrono::steady_clock::now();
  Status st = host_->Create(s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  double create_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string dir = host_->VmDir("real0001");
  EXPECT_TRUE(fs::exists(dir + "/seed.img"));
  // The disk: its own overlay in DATA/disks over the image's rootfs.
  Result<std::vector<std::string>> chain = host_->DiskChain("real0001");
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  ASSERT_EQ(chain->size(), 2u);
  EXPECT_EQ(fs::path(chain->at(0)).parent_path(), fs::path(host_->DisksDir()));
  EXPECT_TRUE(fs::exists(chain->at(0)));
  EXPECT_EQ(fs::path(chain->at(1)).filename(), kImageRootfsFile);

  // The guest names itself from the kernel command line and applies the seed.
  WaitForConsole("real0001", "warren: tiny-one ready", 120);
  double boot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "[timing] create " << create_s << " s, guest ready after " << boot_s << " s\n";
  std::string console = WaitForConsole("real0001", "setup-script exited with status 0", 60);
  EXPECT_NE(console.find("applied seed"), std::string::npos) << console;
  EXPECT_TRUE(fs::exists(dir + "/control.sock"));
  // Console lines are bounded.
  Result<std::string> two = host_->Console("real0001", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_LE(std::count(two->begin(), two->end(), '\n'), 2);

  // A fresh host object (warren restarted) finds the VM by its domain alone.
  LibvirtHost again(options_);
  Result<std::vector<VmInfo>> all = again.List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].id, "real0001");
  EXPECT_EQ((*all)[0].name, "tiny-one");
  EXPECT_EQ((*all)[0].image, image_);
  EXPECT_EQ((*all)[0].state, VmState::kRunning);

  ASSERT_TRUE(again.Destroy("real0001").ok());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(chain->at(0)));
  EXPECT_EQ(host_->Inspect("real0001").status().code(), Code::kNotFound);
}

// The default image, end to end at the host level: systemd boots it from the overlay,
// applies the seed and starts the control launcher; a graceful Stop powers it off.
TEST_F(RealHostTest, DebianImageBootsAndStopsGracefully) {
  const RealLibvirtEnv& env = GetRealLibvirtEnv();
  if (env.debian_image.empty()) {
    WARREN_SKIP_OR_FAIL() << "no debian@* image in " << env.images_dir
                          << " (packaging/images/build-debian.sh " << env.images_dir << ")";
  }
  Result<GuestImage> img = OpenGuestImage(env.images_dir, env.debian_image);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  VmSpec s = Spec("real0004");
  s.image = env.debian_image;
  s.name = "deb-one";
  s.memory_mib = 1024;
  s.disk_gib = std::max<int64_t>(2, (img->rootfs_bytes >> 30) + 1);
  s.egress = Egress::kAll;
  s.authorized_keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests test\n";
  auto t0 = std::chrono::steady_clock::now();
  Status st = host_->Create(s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  WaitForConsole("real0004", "applied seed", 180);
  double boot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto t1 = std::chrono::steady_clock::now();
  // Systemd must get the power button: give it far more than its usual few seconds.
  LibvirtHostOptions patient = options_;
  patient.stop_timeout = std::chrono::seconds(60);
  LibvirtHost host(patient);
  ASSERT_TRUE(host.Stop("real0004").ok());
  double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::cerr << "[timing] debian: seed applied " << boot_s << " s after create, graceful stop "
            << stop_s << " s\n";
  EXPECT_LT(stop_s, 60) << "the guest ignored the power button";
  EXPECT_EQ(host.Inspect("real0004")->state, VmState::kStopped);
  ASSERT_TRUE(host.Destroy("real0004").ok());
}

// A VM whose QEMU died (OOM killer, a QEMU bug) is crashed; Stop acknowledges it and Start
// boots it again.
TEST_F(RealHostTest, DeadQemuIsACrash) {
  ASSERT_TRUE(host_->Create(Spec("real0005")).ok());
  std::string pid_file = "/run/libvirt/qemu/" + options_.domain_prefix + "real0005.pid";
  std::ifstream in(pid_file);
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0) WARREN_SKIP_OR_FAIL() << "cannot read " << pid_file;
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  VmState state = VmState::kRunning;
  for (int i = 0; i < 100 && state == VmState::kRunning; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    state = host_->Inspect("real0005")->state;
  }
  EXPECT_EQ(state, VmState::kCrashed);
  EXPECT_EQ(host_->Inspect("real0005")->started_at, 0);
  ASSERT_TRUE(host_->Stop("real0005").ok());
  EXPECT_EQ(host_->Inspect("real0005")->state, VmState::kStopped);
  EXPECT_EQ(host_->Stop("real0005").code(), Code::kConflict);
  ASSERT_TRUE(host_->Start("real0005").ok());
  EXPECT_EQ(host_->Inspect("real0005")->state, VmState::kRunning);
  EXPECT_TRUE(host_->Destroy("real0005").ok());
}

// A stopped `cp` after a live one. The live one's snapshot wrote the chain below the
// source's top into its persistent definition, and libvirt boots a recorded chain as it
// stands: the stopped fork must not leave the old record under the new top, or the source
// would come back without the layer that holds its writes since the first copy.
TEST_F(RealHostTest, StoppedCopyAfterALiveCopyBootsTheWholeChain) {
  ASSERT_TRUE(host_->Create(Spec("real0006")).ok());
  ASSERT_TRUE(host_->Copy("real0006", Spec("real0007")).ok());  // live: a snapshot
  ASSERT_TRUE(host_->Stop("real0006").ok());
  ASSERT_TRUE(host_->Copy("real0006", Spec("real0008")).ok());  // stopped: a redefine
  ASSERT_TRUE(host_->Start("real0006").ok());
  // The chain in the files' headers: the new top, the two frozen layers, the image.
  Result<std::vector<std::string>> chain = host_->DiskChain("real0006");
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  ASSERT_EQ(chain->size(), 4u);
  // The chain QEMU runs on, as the live definition shows it.
  Result<ConnectHandle> conn = OpenLibvirt(options_.uri);
  ASSERT_TRUE(conn.ok());
  DomainHandle dom(
      virDomainLookupByName(conn->get(), (options_.domain_prefix + "real0006").c_str()));
  ASSERT_TRUE(dom);
  LibvirtString xml(virDomainGetXMLDesc(dom.get(), 0));
  ASSERT_TRUE(xml);
  Result<DomainDefinition> live = DomainDefinition::Parse(xml.get());
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  std::vector<std::string> running = {live->DiskSource("vda")};
  for (std::string& p : live->DiskBackingChain("vda")) running.push_back(std::move(p));
  EXPECT_EQ(running, *chain);
}

// Another warren on the same libvirtd (its own data directory, the same domain prefix) whose
// VM is stale — defined, its files gone — is none of ours: collecting our unused disks skips
// it rather than failing on its missing chain (which once stopped every collection, so
// copies left their layers behind).
TEST_F(RealHostTest, AnotherWarrensStaleVmDoesNotStopOurCollection) {
  const RealLibvirtEnv& env = GetRealLibvirtEnv();
  LibvirtHostOptions theirs = options_;
  theirs.data_dir = env.data_dir + "/neighbour";
  fs::create_directories(theirs.data_dir);
  LibvirtHost neighbour(theirs);
  ASSERT_TRUE(neighbour.Create(Spec("fore0001")).ok());
  ASSERT_TRUE(neighbour.Stop("fore0001").ok());
  // What a crashed neighbour leaves: the definition stays, its disks are gone.
  std::error_code ec;
  fs::remove_all(theirs.data_dir + "/vms/fore0001", ec);
  fs::remove_all(theirs.data_dir + "/disks", ec);

  ASSERT_TRUE(host_->Create(Spec("mine0001")).ok());
  ASSERT_TRUE(host_->Copy("mine0001", Spec("mine0002")).ok());  // live: a frozen layer
  ASSERT_TRUE(host_->Destroy("mine0002").ok());
  Result<int> removed = host_->RemoveUnusedDisks();
  EXPECT_TRUE(removed.ok()) << removed.status().ToString();
  // Our VM's chain is whole (its frozen layer is still used by it), and theirs is untouched.
  Result<std::vector<std::string>> chain = host_->DiskChain("mine0001");
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  for (const std::string& layer : *chain) EXPECT_TRUE(fs::exists(layer)) << layer;
  EXPECT_TRUE(neighbour.Inspect("fore0001").ok());

  Result<ConnectHandle> conn = OpenLibvirt(options_.uri);
  ASSERT_TRUE(conn.ok());
  DomainHandle dom(
      virDomainLookupByName(conn->get(), (options_.domain_prefix + "fore0001").c_str()));
  ASSERT_TRUE(dom);
  EXPECT_EQ(virDomainUndefineFlags(dom.get(), VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                                                  VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA),
            0);
  (void)neighbour.RemoveUnusedDisks();  // its pools
}

// A Create that fails after the disk and the domain exist (QEMU cannot load the kernel)
// leaves no domain, no pool and no directory.
TEST_F(RealHostTest, FailedCreateLeavesNothing) {
  const RealLibvirtEnv& env = GetRealLibvirtEnv();
  // An image whose kernel is garbage, next to the test's data (reachable by libvirt-qemu).
  std::string images = env.data_dir + "/bad-images";
  std::string bad = images + "/broken@1";
  fs::create_directories(bad);
  const ImageFiles good = ImageFilesOf(env.images_dir, env.image);
  const ImageFiles broken = ImageFilesOf(images, "broken@1");
  fs::copy_file(good.initrd, broken.initrd);
  fs::copy_file(good.rootfs, broken.rootfs);
  std::ofstream(broken.kernel) << "this is not a kernel";
  for (const auto& p : {fs::path(images), fs::path(bad)}) {
    fs::permissions(p, fs::perms::others_exec | fs::perms::others_read, fs::perm_options::add);
  }
  for (const auto& f : fs::directory_iterator(bad)) {
    fs::permissions(f.path(), fs::perms::others_read, fs::perm_options::add);
  }
  LibvirtHostOptions o = options_;
  o.images_dir = images;
  LibvirtHost host(o);
  VmSpec s = Spec("real0002");
  s.image = "broken@1";
  Status st = host.Create(s);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(host.Inspect("real0002").status().code(), Code::kNotFound);
  EXPECT_FALSE(fs::exists(host.VmDir("real0002")));
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(host.DisksDir(), ec)) {
    ADD_FAILURE() << "a failed create left " << f.path();
  }
  Result<ConnectHandle> conn = OpenLibvirt(o.uri);
  ASSERT_TRUE(conn.ok());
  StoragePoolHandle pool(
      virStoragePoolLookupByName(conn->get(), (o.domain_prefix + "real0002").c_str()));
  EXPECT_FALSE(pool) << "the VM's storage pool outlived the failed create";
  virResetLastError();
  fs::remove_all(images);
}

// The host admits a VM against what its VMs hold, not only against what is free this instant:
// a thin overlay and a fresh guest take almost nothing at first, so two VMs that each fit
// but not both used to be both admitted (2 x 60 GiB on 74 GiB free). Also: no VM gets more
// vCPUs than the host has cores.
TEST_F(RealHostTest, AdmitsAgainstWhatVmsHoldNotJustWhatIsFree) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  Result<HostCapacity> cap = host_->Capacity();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  ASSERT_GT(cap->cpu_cores, 0);
  ASSERT_GT(cap->memory_mib, 0);
  std::cerr << "[capacity] cores " << cap->cpu_cores << ", memory " << cap->memory_mib << " MiB ("
            << cap->memory_committed_mib << " held, " << cap->memory_free_mib << " free), disk "
            << cap->disk_free_bytes / kGiB << " GiB free (" << cap->disk_committed_bytes / kGiB
            << " promised)\n";
  VmSpec too_many = Spec("room0001");
  too_many.cpus = cap->cpu_cores + 1;
  Status st = host_->Create(too_many);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("CPU cores"), std::string::npos) << st.message();

  // Two VMs `size` makes each take 60% of what is available: the first is made, the second's
  // Create answers.
  auto second_of_two = [&](const std::string& first, const std::string& second,
                           const std::function<void(VmSpec&)>& size) {
    VmSpec a = Spec(first);
    size(a);
    if (Status made = host_->Create(a); !made.ok()) return made.Annotate("the first");
    VmSpec b = Spec(second);
    size(b);
    return host_->Create(b);
  };
  const int64_t disk_gib = std::min<int64_t>(
      2048,
      std::max<int64_t>(2, (cap->disk_free_bytes - cap->disk_committed_bytes) / kGiB * 6 / 10));
  st = second_of_two("room0002", "room0003", [&](VmSpec& s) { s.disk_gib = disk_gib; });
  EXPECT_EQ(st.code(), Code::kLimitExceeded)
      << "two " << disk_gib << " GiB disks: " << st.ToString();
  EXPECT_NE(st.message().find("promised to the disks of existing VMs"), std::string::npos)
      << st.message();
  ASSERT_TRUE(host_->Destroy("room0002").ok());
  // Freed again with the VM.
  VmSpec b = Spec("room0003");
  b.disk_gib = disk_gib;
  st = host_->Create(b);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (st.ok()) {
    EXPECT_TRUE(host_->Destroy("room0003").ok());
  }

  // Memory (a fresh guest touches little of it).
  cap = host_->Capacity();
  ASSERT_TRUE(cap.ok());
  const int64_t memory_mib = std::max<int64_t>(
      512, std::min(cap->memory_mib - cap->memory_committed_mib, cap->memory_free_mib) * 6 / 10);
  st = second_of_two("room0004", "room0005", [&](VmSpec& s) { s.memory_mib = memory_mib; });
  EXPECT_EQ(st.code(), Code::kLimitExceeded)
      << "two VMs of " << memory_mib << " MiB: " << st.ToString();
  // A stopped VM holds no memory; starting it again must fit.
  ASSERT_TRUE(host_->Stop("room0004").ok());
  VmSpec d = Spec("room0005");
  d.memory_mib = memory_mib;
  st = host_->Create(d);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = host_->Start("room0004");
  EXPECT_EQ(st.code(), Code::kLimitExceeded) << st.ToString();
  ASSERT_TRUE(host_->Destroy("room0005").ok());
  st = host_->Start("room0004");
  EXPECT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(host_->Destroy("room0004").ok());
}

// A VM defined before warren owned its files itself: libvirt relabels them, and while it is
// stopped its disk is root's again, mode 0600. A copy of it (and the VM itself) must still
// boot: the copy follows its source's way and lets libvirt hand the chain to QEMU.
// What warm memory holds counts as free for the host's VMs (a new VM frees it first), and a
// new VM frees it.
TEST_F(RealHostTest, WarmMemoryCountsAsFreeAndANewVmFreesIt) {
  constexpr int64_t kHeldMib = 256;
  std::unique_ptr<WarmMemory> warm = HeldWarmMemory(kHeldMib << 20);
  ASSERT_EQ(warm->held_bytes(), kHeldMib << 20);
  LibvirtHostOptions o = options_;
  o.warm_memory = warm.get();
  LibvirtHost warm_host(o);
  Result<HostCapacity> with = warm_host.Capacity();
  Result<HostCapacity> without = host_->Capacity();
  ASSERT_TRUE(with.ok() && without.ok());
  // Two readings of the host's free memory a moment apart: they may differ a little.
  EXPECT_NEAR(with->memory_free_mib - without->memory_free_mib, kHeldMib, 48);
  ASSERT_TRUE(warm_host.Create(Spec("warm0001")).ok());
  EXPECT_EQ(warm->held_bytes(), 0);
  EXPECT_TRUE(warm_host.Destroy("warm0001").ok());
}

TEST_F(RealHostTest, CopyOfAVmLibvirtRelabelsBoots) {
  ASSERT_TRUE(host_->Create(Spec("relab001")).ok());
  ASSERT_TRUE(host_->Stop("relab001").ok());
  Result<ConnectHandle> conn = OpenLibvirt(options_.uri);
  ASSERT_TRUE(conn.ok());
  DomainHandle dom(
      virDomainLookupByName(conn->get(), (options_.domain_prefix + "relab001").c_str()));
  ASSERT_TRUE(dom);
  LibvirtString xml(virDomainGetXMLDesc(dom.get(), VIR_DOMAIN_XML_INACTIVE));
  ASSERT_TRUE(xml);
  std::string def = xml.get();
  const size_t at = def.find("<seclabel");
  ASSERT_NE(at, std::string::npos) << def;
  def.erase(at, def.find("</seclabel>", at) + 11 - at);
  DomainHandle redefined(virDomainDefineXML(conn->get(), def.c_str()));
  ASSERT_TRUE(redefined) << LibvirtError("redefine").ToString();
  Result<std::vector<std::string>> chain = host_->DiskChain("relab001");
  ASSERT_TRUE(chain.ok());
  ASSERT_EQ(chown(chain->front().c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(chain->front().c_str(), 0600), 0);

  Status st = host_->Copy("relab001", Spec("relab002"));
  ASSERT_TRUE(st.ok()) << st.ToString();
  Result<VmInfo> copy = host_->Inspect("relab002");
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->state, VmState::kRunning);
  st = host_->Start("relab001");
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// Owner, group and mode of a file, to show nobody changed them.
std::string OwnershipOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "missing";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%u:%u %04o", st.st_uid, st.st_gid, st.st_mode & 07777);
  return buf;
}

// One image's kernel, initrd and rootfs are shared by every VM made from it. libvirt used to
// take the kernel and initrd over for each domain (chown to libvirt-qemu, remembered and
// restored per domain), and with VMs of one image starting and stopping in turn the next
// start failed: "Setting different DAC user or group on …vmlinuz which is already in use".
// Three VMs of one image, created, copied, stopped, started and removed in several orders:
// every step works, and the image's files keep the owner and mode they were installed with.
TEST_F(RealHostTest, VmsOfOneImageShareItsFilesInAnyOrder) {
  const RealLibvirtEnv& env = GetRealLibvirtEnv();
  // A fresh install of the image, owned by root and not yet seen by libvirt, so other
  // processes' VMs (which share env.images_dir) cannot touch what this test checks.
  const std::string images = env.data_dir + "/shared-images";
  const ImageFiles src = ImageFilesOf(env.images_dir, env.image);
  const ImageFiles img = ImageFilesOf(images, "tiny@1");
  fs::create_directories(img.dir);
  for (const auto& [from, to] :
       {std::pair{src.kernel, img.kernel}, {src.initrd, img.initrd}, {src.rootfs, img.rootfs}}) {
    fs::copy_file(from, to);
    ASSERT_EQ(chown(to.c_str(), 0, 0), 0);
    fs::permissions(to, static_cast<fs::perms>(0644));
  }
  for (const std::string& d : {images, img.dir}) fs::permissions(d, static_cast<fs::perms>(0755));
  const std::vector<std::string> files = {img.kernel, img.initrd, img.rootfs};
  // What libvirt's per-file bookkeeping looks like after two of its unlocked relabels
  // raced (a start and a stop at once: one decrement lost): the kernel counted as in use by
  // one domain, yet owned by root again. A VM whose start relabels the kernel fails on it.
  std::ifstream stat_file("/proc/stat");
  std::string boot_time;
  for (std::string word; stat_file >> word;) {
    if (word == "btime" && stat_file >> boot_time) break;
  }
  for (const std::string& f : {img.kernel, img.initrd}) {
    for (const auto& [name, value] : {std::pair<std::string, std::string>{"dac", "+0:+0"},
                                      {"ref_dac", "1"},
                                      {"timestamp_dac", boot_time}}) {
      ASSERT_EQ(setxattr(f.c_str(), ("trusted.libvirt.security." + name).c_str(), value.data(),
                         value.size(), 0),
                0)
          << f << ": " << std::strerror(errno);
    }
  }
  std::vector<std::string> before;
  for (const std::string& f : files) before.push_back(OwnershipOf(f));

  LibvirtHostOptions o = options_;
  o.images_dir = images;
  LibvirtHost host(o);
  auto spec = [](const std::string& id) { return TinyVmSpec(id, "tiny@1"); };
  auto ok = [](const Status& st, const char* step) {
    EXPECT_TRUE(st.ok()) << step << ": " << st.ToString();
    return st.ok();
  };
  // Three running, then a copy of a running one while two more run.
  if (!ok(host.Create(spec("share001")), "new a")) return DestroyEveryVm(host);
  if (!ok(host.Create(spec("share002")), "new b")) return DestroyEveryVm(host);
  if (!ok(host.Create(spec("share003")), "new c with a and b running")) return DestroyEveryVm(host);
  if (!ok(host.Copy("share001", spec("share004")), "cp a d with three running")) {
    return DestroyEveryVm(host);
  }
  // Stopped in one order, started in another, removed while others run.
  ok(host.Stop("share002"), "stop b");
  ok(host.Destroy("share001"), "rm a (d stands on its disk)");
  ok(host.Copy("share002", spec("share005")), "cp of stopped b");
  ok(host.Stop("share003"), "stop c");
  ok(host.Start("share002"), "start b");
  ok(host.Destroy("share004"), "rm d");
  ok(host.Start("share003"), "start c");
  ok(host.Restart("share005"), "restart e");
  ok(host.Destroy("share003"), "rm c");
  ok(host.Create(spec("share006")), "new f after removals");
  ok(host.Destroy("share002"), "rm b");
  ok(host.Destroy("share006"), "rm f");
  ok(host.Destroy("share005"), "rm e");
  DestroyEveryVm(host);

  std::vector<std::string> after;
  for (const std::string& f : files) after.push_back(OwnershipOf(f));
  EXPECT_EQ(after, before) << "the image's files (kernel, initrd, rootfs) changed owner or mode";
  fs::remove_all(images);
}

}  // namespace
}  // namespace warren
