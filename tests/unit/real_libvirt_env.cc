#include "tests/unit/real_libvirt_env.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "vmhost/image_layout.h"
#include "vmhost/libvirt_accel_probe.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirtd_launcher.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

// The code under test runs as in `warren serve`, which ignores SIGPIPE (lobby/main.cc): a
// peer that went away is an error return there. libvirt's RPC client writes to its daemon's
// socket with plain write(), so a daemon connection closing under a test binary that kept
// SIGPIPE's default (gtest_main's) killed it at exit (seen once in a full run, after every
// test of libvirt_channel had passed).
[[maybe_unused]] const bool kSigpipeIgnored = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string DataParent() { return EnvOr("WARREN_TEST_DATA_DIR", "/var/lib/warren-test"); }

// Destroys the VMs and files of test processes that died without cleaning up.
void SweepDeadRuns(const std::string& uri, const std::string& parent) {
  Result<ConnectHandle> conn = OpenLibvirt(uri);
  if (!conn.ok()) return;
  Result<std::vector<DomainHandle>> doms = ListDomains(conn->get(), "wt");
  if (!doms.ok()) return;
  std::vector<std::string> dead_prefixes;
  for (const DomainHandle& dom : *doms) {
    std::string name = virDomainGetName(dom.get());
    size_t dash = name.find('-');
    if (dash == std::string::npos || dash < 3) continue;
    std::string pid = name.substr(2, dash - 2);
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (fs::exists("/proc/" + pid)) continue;
    dead_prefixes.push_back(name.substr(0, dash + 1));
  }
  for (const std::string& prefix : dead_prefixes) {
    LibvirtHostOptions o;
    o.uri = uri;
    o.domain_prefix = prefix;
    o.data_dir = parent + "/run-" + prefix.substr(2, prefix.size() - 3);
    LibvirtHost host(o);
    DestroyEveryVm(host);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string base = entry.path().filename();
    if (base.rfind("run-", 0) != 0) continue;
    if (!fs::exists("/proc/" + base.substr(4))) fs::remove_all(entry.path(), ec);
  }
}

RealLibvirtEnv Discover() {
  RealLibvirtEnv env;
  env.uri = EnvOr("WARREN_TEST_LIBVIRT_URI", "qemu:///system");
  env.images_dir = EnvOr("WARREN_TEST_IMAGES", DataParent() + "/images");
  env.image = EnvOr("WARREN_TEST_IMAGE", NewestInstalledImage(env.images_dir, "tiny"));
  if (env.image.empty() || !fs::exists(fs::path(env.images_dir) / env.image)) {
    env.skip_reason = "no tiny guest image in " + env.images_dir +
                      " (build one: packaging/images/build-tiny.sh " + env.images_dir +
                      ", or point WARREN_TEST_IMAGES at one)";
    return env;
  }
  env.debian_image =
      EnvOr("WARREN_TEST_DEBIAN_IMAGE", NewestInstalledImage(env.images_dir, "debian"));
  std::string parent = DataParent();
  std::string pid = std::to_string(getpid());
  env.prefix = "wt" + pid + "-";
  env.data_dir = parent + "/run-" + pid;
  std::error_code ec;
  fs::create_directories(env.data_dir, ec);
  if (ec) {
    env.skip_reason = "cannot create " + env.data_dir + ": " + ec.message();
    return env;
  }
  // QEMU runs as libvirt-qemu: every directory on the way must be traversable.
  for (const fs::path& p : {fs::path(parent), fs::path(env.data_dir)}) {
    fs::permissions(p, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add, ec);
  }

  KvmProbeOptions probe;
  probe.data_dir = parent;
  probe.kernel = ImageFilesOf(env.images_dir, env.image).kernel;
  env.accel = ProbeAccel(probe);
  env.setup_notes = "accel " + std::string(AccelName(env.accel.accel)) + ": " + env.accel.reason;

  LibvirtdOptions daemon;
  daemon.uri = env.uri;
  daemon.mask_dev_kvm = env.accel.accel == Accel::kTcg;
  Result<LibvirtdStatus> up = EnsureLibvirtd(daemon);
  if (!up.ok()) {
    env.skip_reason = "no libvirt daemon: " + up.status().ToString();
    return env;
  }
  if (up->started) {
    env.setup_notes += "; started libvirtd" + std::string(up->masked ? " (/dev/kvm masked)" : "") +
                       " in " + std::to_string(up->seconds) + " s";
  }
  if (!up->warning.empty()) env.setup_notes += "; " + up->warning;
  SweepDeadRuns(env.uri, parent);
  env.available = true;
  return env;
}

RealLibvirtEnv DiscoverRemote() {
  RealLibvirtEnv env;
  env.uri = EnvOr("WARREN_TEST_REMOTE_LIBVIRT_URI", "");
  if (env.uri.empty()) {
    env.skip_reason =
        "no remote libvirt host (WARREN_TEST_REMOTE_LIBVIRT_URI: "
        "tests/integration/test_remote_libvirt_host.py sets it)";
    return env;
  }
  env.images_dir = EnvOr("WARREN_TEST_IMAGES", DataParent() + "/images");
  env.image = EnvOr("WARREN_TEST_IMAGE", NewestInstalledImage(env.images_dir, "tiny"));
  if (env.image.empty()) {
    env.skip_reason = "no tiny guest image in " + env.images_dir;
    return env;
  }
  env.data_dir = EnvOr("WARREN_TEST_REMOTE_DATA_DIR", "/var/lib/warren");
  env.prefix = "wr" + std::to_string(getpid()) + "-";
  env.accel = ProbeRemoteAccel(env.uri, "");
  env.setup_notes = "remote " + env.uri + ", accel " + std::string(AccelName(env.accel.accel)) +
                    ": " + env.accel.reason;
  env.available = true;
  return env;
}

bool g_initialised = false;
bool g_remote_initialised = false;

const RealLibvirtEnv& RemoteEnv() {
  static std::once_flag once;
  static RealLibvirtEnv env;
  std::call_once(once, [] {
    env = DiscoverRemote();
    g_remote_initialised = true;
    std::fprintf(stderr, "[remote libvirt env] %s\n",
                 env.available ? env.setup_notes.c_str() : env.skip_reason.c_str());
  });
  return env;
}

const RealLibvirtEnv& Env() {
  static std::once_flag once;
  static RealLibvirtEnv env;
  std::call_once(once, [] {
    env = Discover();
    g_initialised = true;
    std::fprintf(stderr, "[real libvirt env] %s\n",
                 env.available ? env.setup_notes.c_str() : env.skip_reason.c_str());
  });
  return env;
}

// Whatever a failed test left behind goes when the process ends.
class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_remote_initialised && RemoteEnv().available) {
      LibvirtHost remote(RemoteEnv().HostOptions());
      DestroyEveryVm(remote);
    }
    if (!g_initialised || !Env().available) return;
    const RealLibvirtEnv& env = Env();
    LibvirtHost host(env.HostOptions());
    DestroyEveryVm(host);
    std::error_code ec;
    fs::remove_all(env.data_dir, ec);
  }
};

[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new Cleanup);

}  // namespace

LibvirtHostOptions RealLibvirtEnv::HostOptions() const {
  LibvirtHostOptions o;
  o.uri = uri;
  o.data_dir = data_dir;
  o.images_dir = images_dir;
  o.accel = accel.accel;
  o.domain_prefix = prefix;
  o.stop_timeout = std::chrono::milliseconds(3000);
  return o;
}

const RealLibvirtEnv& GetRealLibvirtEnv() { return Env(); }

const RealLibvirtEnv& GetRemoteLibvirtEnv() { return RemoteEnv(); }

VmSpec TinyVmSpec(std::string id, std::string image) {
  VmSpec s;
  s.id = std::move(id);
  s.image = std::move(image);
  s.cpus = 1;
  s.memory_mib = 256;
  s.disk_gib = 1;
  s.egress = Egress::kNone;
  return s;
}

void DestroyEveryVm(VmHost& host) {
  Result<std::vector<VmInfo>> vms = host.List();
  if (vms.ok()) {
    for (const VmInfo& vm : *vms) (void)host.Destroy(vm.id);
  }
  Result<std::vector<TemplateInfo>> templates = host.Templates();
  if (templates.ok()) {
    for (const TemplateInfo& t : *templates) (void)host.RemoveTemplate(t.shape);
  }
}

}  // namespace warren
