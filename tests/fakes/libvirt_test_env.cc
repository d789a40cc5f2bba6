#include "tests/fakes/libvirt_test_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirtd_launcher.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string DataParent() { return EnvOr("WARREN_TEST_DATA_DIR", "/var/lib/warren-test"); }

// The newest NAME@VERSION directory for `name` that is complete (image.json comes last).
std::string NewestImage(const std::string& dir, const std::string& name) {
  std::string best;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string base = entry.path().filename();
    if (base.rfind(name + "@", 0) != 0) continue;
    if (!fs::exists(entry.path() / "image.json", ec)) continue;
    if (base > best) best = base;
  }
  return best;
}

// Destroys the VMs and files of test processes that died without cleaning up.
void SweepDeadRuns(const std::string& uri, const std::string& parent) {
  Result<ConnectHandle> conn = OpenLibvirt(uri);
  if (!conn.ok()) return;
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn->get(), &doms, 0);
  std::vector<std::string> dead_prefixes;
  for (int i = 0; i < n; ++i) {
    DomainHandle dom(doms[i]);
    std::string name = virDomainGetName(dom.get());
    size_t dash = name.find('-');
    if (name.rfind("wt", 0) != 0 || dash == std::string::npos || dash < 3) continue;
    std::string pid = name.substr(2, dash - 2);
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (fs::exists("/proc/" + pid)) continue;
    dead_prefixes.push_back(name.substr(0, dash + 1));
  }
  free(doms);  // NOLINT: allocated by libvirt
  for (const std::string& prefix : dead_prefixes) {
    LibvirtHostOptions o;
    o.uri = uri;
    o.domain_prefix = prefix;
    o.data_dir = parent + "/run-" + prefix.substr(2, prefix.size() - 3);
    LibvirtHost host(o);
    Result<std::vector<VmInfo>> vms = host.List();
    if (!vms.ok()) continue;
    for (const VmInfo& vm : *vms) (void)host.Destroy(vm.id);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string base = entry.path().filename();
    if (base.rfind("run-", 0) != 0) continue;
    if (!fs::exists("/proc/" + base.substr(4))) fs::remove_all(entry.path(), ec);
  }
}

LibvirtTestEnv Discover() {
  LibvirtTestEnv env;
  env.uri = EnvOr("WARREN_TEST_LIBVIRT_URI", "qemu:///system");
  env.images_dir = EnvOr("WARREN_TEST_IMAGES", DataParent() + "/images");
  env.image = EnvOr("WARREN_TEST_IMAGE", NewestImage(env.images_dir, "tiny"));
  if (env.image.empty() || !fs::exists(fs::path(env.images_dir) / env.image)) {
    env.skip_reason = "no tiny guest image in " + env.images_dir +
                      " (build one: packaging/images/build-tiny.sh " + env.images_dir +
                      ", or point WARREN_TEST_IMAGES at one)";
    return env;
  }
  env.debian_image = EnvOr("WARREN_TEST_DEBIAN_IMAGE", NewestImage(env.images_dir, "debian"));
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
  probe.kernel = (fs::path(env.images_dir) / env.image / "vmlinuz").string();
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

bool g_initialised = false;

const LibvirtTestEnv& Env() {
  static std::once_flag once;
  static LibvirtTestEnv env;
  std::call_once(once, [] {
    env = Discover();
    g_initialised = true;
    std::fprintf(stderr, "[libvirt test env] %s\n",
                 env.available ? env.setup_notes.c_str() : env.skip_reason.c_str());
  });
  return env;
}

// Whatever a failed test left behind goes when the process ends.
class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!g_initialised || !Env().available) return;
    const LibvirtTestEnv& env = Env();
    LibvirtHost host(env.HostOptions());
    Result<std::vector<VmInfo>> vms = host.List();
    if (vms.ok()) {
      for (const VmInfo& vm : *vms) (void)host.Destroy(vm.id);
    }
    std::error_code ec;
    fs::remove_all(env.data_dir, ec);
  }
};

[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new Cleanup);

}  // namespace

LibvirtHostOptions LibvirtTestEnv::HostOptions() const {
  LibvirtHostOptions o;
  o.uri = uri;
  o.data_dir = data_dir;
  o.images_dir = images_dir;
  o.accel = accel.accel;
  o.domain_prefix = prefix;
  o.stop_timeout = std::chrono::milliseconds(3000);
  return o;
}

const LibvirtTestEnv& GetLibvirtTestEnv() { return Env(); }

}  // namespace warren
