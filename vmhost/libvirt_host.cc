#include "vmhost/libvirt_host.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "lobby/base/clock.h"
#include "lobby/base/log.h"
#include "lobby/base/unix_socket.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest_image.h"
#include "vmhost/image_layout.h"
#include "vmhost/libvirt_accel_probe.h"
#include "vmhost/libvirt_channel.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_uri.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/libvirtd_launcher.h"
#include "vmhost/random_names.h"
#include "vmhost/seed_image.h"
#include "vmhost/storage_pool.h"
#include "vmhost/subprocess.h"
#include "vmhost/volume_io.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

using libvirt_ops::AllocationOf;
using libvirt_ops::CapEmulatorThreads;
using libvirt_ops::InactiveDefinition;
using libvirt_ops::IsActive;
using libvirt_ops::Metadata;
using libvirt_ops::NewLayer;
using libvirt_ops::NewLayerUndoneOnRollback;
using libvirt_ops::RecordStart;
using libvirt_ops::Redefine;
using libvirt_ops::RequireState;
using libvirt_ops::SnapshotOnto;
using libvirt_ops::StateOf;
using libvirt_ops::Undefine;
using libvirt_ops::VdaCapacity;
using libvirt_ops::VmMetadataOf;
using libvirt_ops::WrongState;

constexpr int64_t kGiB = int64_t{1} << 30;
// Console reads look at most this far back: virtlogd rotates the log at 2 MiB anyway, and
// a caller asking for N lines wants the end of it.
constexpr int64_t kConsoleWindow = 256 * 1024;

// The last `max_lines` lines of `log`; a partial first line (cut by the read window) never
// counts as a line.
std::string LastLines(std::string_view log, int max_lines, bool cut_at_start) {
  if (cut_at_start) {
    size_t nl = log.find('\n');
    log = nl == std::string_view::npos ? std::string_view() : log.substr(nl + 1);
  }
  if (max_lines <= 0) return "";
  size_t pos = log.size();
  for (int i = 0; i < max_lines && pos > 0; ++i) {
    size_t nl = pos >= 2 ? log.rfind('\n', pos - 2) : std::string_view::npos;
    pos = nl == std::string_view::npos ? 0 : nl + 1;
  }
  return std::string(log.substr(pos));
}

// The user the daemon runs QEMU as for our domain type; unknown when it names none (then
// libvirt relabels per domain, as by default).
QemuUser QemuUserOf(virConnectPtr conn, Accel accel) {
  LibvirtString caps(virConnectGetCapabilities(conn));
  if (!caps) {
    LogWarn(LibvirtError("reading the daemon's capabilities").ToString());
    return {};
  }
  Result<QemuUser> user = ParseQemuUser(caps.get(), accel == Accel::kKvm ? "kvm" : "qemu");
  if (!user.ok()) {
    LogWarn("vmhost: " + user.status().ToString());
    return {};
  }
  return *user;
}

// What a disk of this host may still grow by: its top's virtual size less what the file
// holds (the layers below are frozen). 0 for a domain without our disk.
int64_t DiskGrowthOf(virConnectPtr conn, virDomainPtr dom) {
  Result<std::string> top = DiskChains::TopOf(dom);
  if (!top.ok()) return 0;
  StorageVolHandle vol(virStorageVolLookupByPath(conn, top->c_str()));
  virStorageVolInfo vi{};
  if (!vol || virStorageVolGetInfo(vol.get(), &vi) < 0) {
    virResetLastError();
    return 0;
  }
  return vi.capacity > vi.allocation ? static_cast<int64_t>(vi.capacity - vi.allocation) : 0;
}

// Sets the CPU share of the persistent definition to follow a change of vCPUs. A daemon
// without CPU tuning (the test driver) has nothing to follow.
void SetCpuShares(virDomainPtr dom, int cpus, std::string_view id) {
  virTypedParameter param{};
  std::snprintf(param.field, sizeof param.field, "%s", VIR_DOMAIN_SCHEDULER_CPU_SHARES);
  param.type = VIR_TYPED_PARAM_ULLONG;
  param.value.ul = static_cast<unsigned long long>(CpuSharesFor(cpus));
  if (virDomainSetSchedulerParametersFlags(dom, &param, 1, VIR_DOMAIN_AFFECT_CONFIG) < 0) {
    virErrorPtr err = virGetLastError();
    if (err == nullptr || err->code != VIR_ERR_NO_SUPPORT) {
      LogWarn("vmhost: " +
              LibvirtError("setting the cpu share of vm " + std::string(id)).ToString());
    }
    virResetLastError();
  }
}

}  // namespace

LibvirtHost::LibvirtHost(LibvirtHostOptions options)
    : options_(std::move(options)),
      remote_(IsRemoteLibvirtUri(options_.uri)),
      images_(remote_ ? std::make_unique<HostImageStore>(HostImageStoreOptions{
                            options_.images_dir, HostImagesDir(),
                            PoolNameFor(options_.domain_prefix, "images", HostImagesDir())})
                      : nullptr),
      chains_({DisksDir(), HostImagesDir(), options_.domain_prefix,
               [this](virConnectPtr conn) { return TemplateBases(conn); }, remote_}) {
  SilenceLibvirtErrors();
  ReconnectorOptions ro;
  ro.what = "libvirt at " + options_.uri;
  ReconnectorSteps steps;
  steps.connect = [this] { return Reopen(); };
  steps.restored = [this] { Restored(); };
  steps.reopened = [this] { Reopened(); };
  reconnector_ = std::make_unique<Reconnector>(std::move(ro), std::move(steps));
}

LibvirtHost::LibvirtHost(LibvirtHostOptions options, ConnectHandle conn)
    : LibvirtHost(std::move(options)) {
  conn_ = Conn(std::move(conn));
}

LibvirtHost::~LibvirtHost() {
  // The watch goes first, in this order: the sink passes nothing on any more (nor tells the
  // reconnector of a loss), the reconnector's thread (which calls into the watch) ends, the
  // delivery thread ends, then the callbacks go.
  {
    std::lock_guard lock(watch_mu_);
    if (sink_) sink_->Detach();
  }
  reconnector_.reset();
  std::unique_ptr<VmStateDelivery> delivery;
  {
    std::lock_guard lock(watch_mu_);
    delivery = std::move(delivery_);
  }
  delivery.reset();
  std::lock_guard lock(watch_mu_);
  registration_.reset();
}

std::string LibvirtHost::DomainName(std::string_view id) const {
  return options_.domain_prefix + std::string(id);
}

std::string LibvirtHost::VmDir(std::string_view id) const {
  return (fs::path(options_.data_dir) / "vms" / std::string(id)).string();
}

Result<UniqueFd> LibvirtHost::DialControl(std::string_view id, std::string_view port) {
  if (port != kControlChannelName && port != kIdentityChannelName) {
    return InvalidArgument("no port " + std::string(port) + " in warren's VMs");
  }
  if (!remote_) return DialUnixSocket(VmDir(id) + "/" + PortSocketFile(port));
  // A stalled guest holds its channel's connection (libvirt_channel.h). The stream keeps
  // its connection referenced: it closes with the channel, after `own` has gone.
  WARREN_ASSIGN_OR_RETURN(Conn own, OwnConnection());
  return OpenDomainChannel(own.get(), DomainName(id), std::string(port));
}

Result<LibvirtHost::Conn> LibvirtHost::OwnConnection() {
  WARREN_RETURN_IF_ERROR(reconnector_->Check());
  WARREN_ASSIGN_OR_RETURN(ConnectHandle own, OpenLibvirt(options_.uri));
  return Conn(std::move(own));
}

std::string_view LibvirtHost::VmIdOf(virDomainPtr dom) const {
  std::string_view name = virDomainGetName(dom);
  if (name.starts_with(options_.domain_prefix)) name.remove_prefix(options_.domain_prefix.size());
  return name;
}

std::string LibvirtHost::DisksDir() const {
  return (fs::path(options_.data_dir) / "disks").string();
}

Result<LibvirtHost::Conn> LibvirtHost::Connect() {
  WARREN_RETURN_IF_ERROR(reconnector_->Check());
  Status first_failed;
  {
    std::lock_guard lock(conn_mu_);
    if (!conn_) {  // the first connection, made lazily
      Result<ConnectHandle> h = OpenLibvirt(options_.uri);
      if (h.ok()) {
        conn_ = Conn(std::move(h).value());
        qemu_user_read_ = false;
        caps_swept_ = false;
      } else {
        first_failed = h.status();
      }
    }
  }
  if (!first_failed.ok()) {
    // A host that did not answer at the first call (a remote one down when warren started)
    // is then connected by the reconnector, with backoff, like one that went away: so the
    // state watch is registered and the OnReconnected hook (reconcile) runs once it answers.
    reconnector_->Lost("could not connect: " + first_failed.message());
    return first_failed;
  }
  bool sweep = false;
  Conn alive;
  {
    std::lock_guard lock(conn_mu_);
    if (virConnectIsAlive(conn_.get()) == 1) {
      if (!qemu_user_read_) {
        qemu_user_ = QemuUserOf(conn_.get(), options_.accel);
        qemu_user_read_ = true;
      }
      sweep = !caps_swept_;
      caps_swept_ = true;
      alive = conn_;
    }
  }
  if (alive) {
    if (sweep) CapRunningDomains(alive);
    return alive;
  }
  // Not under conn_mu_: the reconnector's own steps take it.
  reconnector_->Lost("the connection is no longer alive");
  WARREN_RETURN_IF_ERROR(reconnector_->Check());
  return Unavailable("VM host unavailable: lost the connection to libvirt at " + options_.uri);
}

Status LibvirtHost::Reopen() {
  WARREN_ASSIGN_OR_RETURN(ConnectHandle h, OpenLibvirt(options_.uri));
  std::lock_guard lock(conn_mu_);
  conn_ = Conn(std::move(h));
  qemu_user_read_ = false;
  caps_swept_ = false;
  return Status::Ok();
}

void LibvirtHost::CapRunningDomains(const Conn& conn) {
  // Domains libvirtd started on its own (autostart, when it or the machine started) run
  // uncapped until now: their definitions carry no emulator cap (domain_xml.h).
  Result<std::vector<DomainHandle>> doms = ListDomains(conn.get(), options_.domain_prefix);
  if (!doms.ok()) {
    LogWarn("vmhost: capping the running VMs' QEMU threads: " + doms.status().ToString());
    return;
  }
  for (const DomainHandle& dom : *doms) {
    if (!IsActive(dom.get())) continue;
    Result<bool> ours = HoldsDomain(dom.get());
    if (!ours.ok() || !*ours) continue;
    if (Status st = CapEmulatorThreads(dom.get(), VmIdOf(dom.get()), /*capped=*/true); !st.ok()) {
      LogWarn("vmhost: " + st.ToString());
      virResetLastError();
    }
  }
}

void LibvirtHost::RestartDaemonWith(const LibvirtdOptions& daemon) {
  {
    std::lock_guard lock(daemon_mu_);
    daemon_ = daemon;
  }
  reconnector_->SetRestart([this] { return RestartDaemon(); });
}

Status LibvirtHost::RestartDaemon() {
  std::optional<LibvirtdOptions> daemon;
  {
    std::lock_guard lock(daemon_mu_);
    daemon = daemon_;
  }
  // Not ours to start: wait for whoever runs it (Reopen's failure stands).
  if (!daemon) return Unavailable("no libvirt daemon answers at " + options_.uri);
  WARREN_ASSIGN_OR_RETURN(LibvirtdStatus up, EnsureLibvirtd(*daemon));
  LogInfo("vmhost: " + std::string(up.started ? "restarted" : "found") +
          " libvirtd uri=" + options_.uri + " kvm_masked=" + (up.masked ? "yes" : "no") +
          " ms=" + std::to_string(int(up.seconds * 1000)));
  return Status::Ok();
}

void LibvirtHost::OnReconnected(std::function<void()> hook) {
  std::lock_guard lock(hook_mu_);
  reconnected_hook_ = std::move(hook);
}

void LibvirtHost::Restored() {
  bool watching = false;
  {
    std::lock_guard lock(watch_mu_);
    watching = sink_ != nullptr;
  }
  if (watching) {
    Result<Conn> conn = Connect();
    Status st = conn.ok() ? WatchConnection(*conn) : conn.status();
    if (!st.ok()) {
      // Without the callbacks no change would be seen: try the whole reconnection again.
      LogWarn("vmhost: watching vm states on the new connection: " + st.ToString());
      reconnector_->Lost("could not watch vm states on the new connection");
      return;
    }
  }
  std::lock_guard lock(hook_mu_);
  if (reconnected_hook_) reconnected_hook_();
}

void LibvirtHost::Reopened() {
  // What changed while the connection was down (and what the hook changed) is reported once.
  std::lock_guard lock(watch_mu_);
  if (delivery_) delivery_->Resync();
}

QemuUser LibvirtHost::qemu_user() {
  {
    std::lock_guard lock(conn_mu_);
    if (qemu_user_read_) return qemu_user_;
  }
  (void)Connect();  // reads it; a failure leaves it unknown
  std::lock_guard lock(conn_mu_);
  return qemu_user_;
}

LibvirtHost::VmGuard LibvirtHost::LockVm(std::string_view id) {
  std::shared_ptr<std::mutex> m;
  {
    std::lock_guard lock(locks_mu_);
    // Drop locks nobody holds any more, so the map does not grow with every id ever seen.
    for (auto it = locks_.begin(); it != locks_.end();) {
      it = it->second.expired() ? locks_.erase(it) : std::next(it);
    }
    auto it = locks_.find(id);
    if (it != locks_.end()) m = it->second.lock();
    if (!m) {
      m = std::make_shared<std::mutex>();
      locks_[std::string(id)] = m;
    }
  }
  return VmGuard(std::move(m));  // locks_mu_ is a leaf: released before the VM's lock
}

Result<LibvirtHost::OpenVm> LibvirtHost::Open(std::string_view id) {
  OpenVm vm;
  WARREN_ASSIGN_OR_RETURN(vm.conn, Connect());
  WARREN_ASSIGN_OR_RETURN(vm.dom, LookupDomain(vm.conn, id));
  return vm;
}

Result<LibvirtHost::OpenVm> LibvirtHost::LockAndOpen(std::string_view id) {
  VmGuard guard = LockVm(id);
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, Open(id));
  vm.guard.emplace(std::move(guard));
  return vm;
}

Result<DomainHandle> LibvirtHost::LookupDomain(const Conn& conn, std::string_view id) {
  DomainHandle dom(virDomainLookupByName(conn.get(), DomainName(id).c_str()));
  if (!dom) {
    Status st = LibvirtError("looking up vm " + std::string(id));
    if (st.code() == Code::kNotFound) return NotFound("no vm " + std::string(id));
    return st;
  }
  return dom;
}

Status LibvirtHost::CheckAbsent(const Conn& conn, std::string_view id) {
  Result<DomainHandle> existing = LookupDomain(conn, id);
  if (existing.ok()) return Conflict("vm " + std::string(id) + " already exists");
  if (existing.status().code() != Code::kNotFound) return existing.status();
  return Status::Ok();
}

Result<StoragePoolHandle> LibvirtHost::OpenPool(const Conn& conn, std::string_view id, bool build) {
  return OpenDirPool(conn.get(), DomainName(id), VmDir(id), build);
}

Status LibvirtHost::RemoveFiles(const Conn& conn, std::string_view id) {
  if (remote_) return RemoveRemoteFiles(conn, id);
  std::string dir = VmDir(id);
  std::error_code ec;
  StoragePoolHandle pool(virStoragePoolLookupByName(conn.get(), DomainName(id).c_str()));
  if (!pool) virResetLastError();
  if (!pool && fs::exists(dir, ec)) {
    Result<StoragePoolHandle> p = OpenPool(conn, id, /*build=*/false);
    if (p.ok()) pool = std::move(p).value();
  }
  Status result;
  // A VM made before disks moved to DATA/disks has its disk here, and a copy may stand on
  // it: such a file stays while any chain uses it (a collection removes it later).
  std::vector<std::string> kept;
  std::optional<std::vector<std::string>> used;
  auto in_use = [&](const std::string& path) {
    if (!used) {
      Result<std::vector<std::string>> u = chains_.InUse(conn.get());
      used = u.ok() ? std::move(u).value() : std::vector<std::string>{path};
    }
    return std::find(used->begin(), used->end(), path) != used->end();
  };
  if (pool) {
    // Through the pool, so a remote host's files go too; the local sweep below catches
    // what is no volume (the control socket).
    if (virStoragePoolIsActive(pool.get()) == 1) {
      virStoragePoolRefresh(pool.get(), 0);
      virStorageVolPtr* vols = nullptr;
      int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
      for (int i = 0; i < n; ++i) {
        StorageVolHandle vol(vols[i]);
        LibvirtString path(virStorageVolGetPath(vol.get()));
        std::string p = path ? path.get() : "";
        if (p.size() > 6 && p.compare(p.size() - 6, 6, ".qcow2") == 0 && in_use(p)) {
          kept.push_back(p);
          continue;
        }
        if (virStorageVolDelete(vol.get(), 0) < 0 && result.ok()) {
          result = LibvirtError("deleting a file of vm " + std::string(id));
        }
      }
      free(vols);  // NOLINT: allocated by libvirt
      if (virStoragePoolDestroy(pool.get()) < 0) virResetLastError();
    }
    // A persistent pool (someone defined one) is forgotten too.
    if (virStoragePoolUndefine(pool.get()) < 0) virResetLastError();
  }
  if (!kept.empty()) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (std::find(kept.begin(), kept.end(), entry.path().string()) == kept.end()) {
        fs::remove_all(entry.path(), ec);
      }
    }
    return result;
  }
  fs::remove_all(dir, ec);
  if (ec && result.ok()) result = Internal("removing " + dir + ": " + ec.message());
  return result;
}

Status LibvirtHost::StartDomain(virDomainPtr dom) {
  if (virDomainCreate(dom) < 0) return LibvirtError("starting vm");
  const std::string_view name = VmIdOf(dom);
  // Started uncapped (domain_xml.h): the cap goes on now. A VM left uncapped runs; it is
  // only less fair to its neighbours, so a failure here is logged, not the start's.
  if (Status st = CapEmulatorThreads(dom, name, /*capped=*/true); !st.ok()) {
    LogWarn("vmhost: " + st.ToString());
  }
  // Autostart marks "the user wants this VM running": libvirtd brings such VMs back when
  // it starts again (host reboot, or warren starting the daemon). Stop clears it.
  if (virDomainSetAutostart(dom, 1) < 0) {
    LogWarn(LibvirtError("marking the vm to come back after a restart").ToString());
  }
  RecordStart(dom, SystemClock::Get().NowUnix());
  chains_.MaybeFlatten(dom, name);
  return Status::Ok();
}

Status LibvirtHost::ShutDown(virDomainPtr dom) {
  using Clock = std::chrono::steady_clock;
  if (virDomainShutdown(dom) < 0) {
    // The guest may have stopped on its own meanwhile; anything else ends in the hard way.
    Status st = LibvirtError("asking the guest to power off");
    if (!IsActive(dom)) return Status::Ok();
    LogDebug(st.ToString());
  } else {
    // The power button is an edge: a guest that was still booting (no acpid yet) misses
    // it, so press again now and then until the deadline.
    auto deadline = Clock::now() + options_.stop_timeout;
    auto next_press = Clock::now() + std::chrono::seconds(2);
    while (IsActive(dom) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (Clock::now() >= next_press) {
        if (virDomainShutdown(dom) < 0) virResetLastError();
        next_press = Clock::now() + std::chrono::seconds(2);
      }
    }
  }
  if (!IsActive(dom)) return Status::Ok();
  if (virDomainDestroy(dom) < 0) {
    Status st = LibvirtError("powering off vm");
    if (IsActive(dom)) return st;
  }
  return Status::Ok();
}

Result<VmInfo> LibvirtHost::InfoOf(virDomainPtr dom, std::string_view id) {
  VmInfo info;
  info.id = std::string(id);
  WARREN_ASSIGN_OR_RETURN(info.state, StateOf(dom));
  virDomainInfo di{};
  if (virDomainGetInfo(dom, &di) < 0) return LibvirtError("reading vm " + info.id);
  info.cpus = di.nrVirtCpu;
  info.memory_mib = static_cast<int64_t>(di.maxMem / 1024);
  VmMetadata meta = VmMetadataOf(dom);
  info.name = std::move(meta.name);
  info.image = std::move(meta.image);
  if (info.name.empty()) info.name = info.id;
  if (info.state == VmState::kRunning || info.state == VmState::kPaused) {
    Result<int64_t> started =
        ParseRunStartedAt(Metadata(dom, kWarrenRunNamespace, VIR_DOMAIN_AFFECT_LIVE));
    info.started_at = started.ok() ? *started : 0;
    if (info.started_at == 0) {
      // Started without us (libvirtd's autostart after a host reboot): count from now,
      // the first time anyone looks, and remember it.
      info.started_at = SystemClock::Get().NowUnix();
      RecordStart(dom, info.started_at);
    }
  }
  // A domain without our disk (not made by Create): size unknown.
  Result<uint64_t> capacity = VdaCapacity(dom, id);
  if (capacity.ok()) info.disk_gib = static_cast<int64_t>((*capacity + kGiB - 1) / kGiB);
  Result<std::string> top = DiskChains::TopOf(dom);
  if (top.ok()) {
    Result<std::vector<std::string>> chain = chains_.ChainOf(virDomainGetConnect(dom), *top);
    if (chain.ok()) info.disk_layers = chains_.LayersOf(*chain);
  }
  return info;
}

Result<HostCapacity> LibvirtHost::Capacity() {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  return CapacityOf(conn);
}

Result<HostCapacity> LibvirtHost::CapacityOf(const Conn& conn) {
  // Kept for the host itself (the lobby, libvirtd, QEMU's own overhead) beyond the VMs.
  constexpr int64_t kReserveMib = 256;
  constexpr int64_t kUnknown = INT64_MAX;
  HostCapacity cap;
  cap.memory_mib = kUnknown;
  cap.memory_free_mib = kUnknown;
  cap.disk_free_bytes = kUnknown;
  // Through the connection, so it describes a remote host too.
  virNodeInfo node{};
  if (virNodeGetInfo(conn.get(), &node) == 0) {
    cap.cpu_cores = static_cast<int>(node.cpus);
    cap.memory_mib = static_cast<int64_t>(node.memory / 1024) - kReserveMib;
  } else {
    virResetLastError();
  }
  // Free now: free plus reclaimable page cache, as the node reports it.
  int nparams = 0;
  if (virNodeGetMemoryStats(conn.get(), VIR_NODE_MEMORY_STATS_ALL_CELLS, nullptr, &nparams, 0) ==
          0 &&
      nparams > 0) {
    std::vector<virNodeMemoryStats> stats(static_cast<size_t>(nparams));
    if (virNodeGetMemoryStats(conn.get(), VIR_NODE_MEMORY_STATS_ALL_CELLS, stats.data(), &nparams,
                              0) == 0) {
      int64_t available_kib = 0;
      for (const virNodeMemoryStats& stat : stats) {
        std::string_view field = stat.field;
        if (field == VIR_NODE_MEMORY_STATS_FREE || field == VIR_NODE_MEMORY_STATS_BUFFERS ||
            field == VIR_NODE_MEMORY_STATS_CACHED) {
          available_kib += static_cast<int64_t>(stat.value);
        }
      }
      cap.memory_free_mib = available_kib / 1024 - kReserveMib;
      // Memory held for the next VM start is that VM's: the start frees it first.
      if (options_.warm_memory != nullptr) {
        cap.memory_free_mib += options_.warm_memory->held_bytes() >> 20;
      }
    }
  }
  virResetLastError();
  // Every running domain of the daemon holds its memory, ours or not, touched or not.
  virDomainPtr* active = nullptr;
  const int n = virConnectListAllDomains(conn.get(), &active, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  for (int i = 0; i < n; ++i) {
    DomainHandle dom(active[i]);
    virDomainInfo di{};
    if (virDomainGetInfo(dom.get(), &di) == 0) {
      cap.memory_committed_mib += static_cast<int64_t>(di.maxMem / 1024);
    }
  }
  if (n < 0) virResetLastError();
  free(active);  // NOLINT: allocated by libvirt
  // Disk: free in the data directory, less what this host's disks may still grow by.
  struct statvfs fs_info {};
  if (remote_) {
    // As the host's daemon sees it: its image store's file system (DATA/images there).
    Result<int64_t> free_bytes = images_->FreeBytes(conn.get());
    if (free_bytes.ok()) cap.disk_free_bytes = *free_bytes;
  } else if (statvfs(options_.data_dir.c_str(), &fs_info) == 0) {
    cap.disk_free_bytes =
        static_cast<int64_t>(fs_info.f_bavail) * static_cast<int64_t>(fs_info.f_frsize);
  }
  WARREN_ASSIGN_OR_RETURN(std::vector<DomainHandle> ours,
                          ListDomains(conn.get(), options_.domain_prefix));
  for (const DomainHandle& dom : ours)
    cap.disk_committed_bytes += DiskGrowthOf(conn.get(), dom.get());
  return cap;
}

Status LibvirtHost::CheckRoom(const Conn& conn, const HostDemand& demand) {
  WARREN_ASSIGN_OR_RETURN(HostCapacity cap, CapacityOf(conn));
  return CheckHostRoom(cap, demand);
}

Status LibvirtHost::EnsureDataDirs() {
  // A remote host's pools build their directories there (libvirt makes the parents 0755).
  if (remote_) return Status::Ok();
  // QEMU runs as another user: DATA/vms and DATA/disks must be traversable (never
  // listable) by it.
  std::error_code ec;
  fs::path vms = fs::path(options_.data_dir) / "vms";
  fs::create_directories(vms, ec);
  if (ec) return Internal("creating " + vms.string() + ": " + ec.message());
  for (const fs::path& p : {fs::path(options_.data_dir), vms}) {
    fs::permissions(p, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add, ec);
  }
  return Status::Ok();
}

Result<int> LibvirtHost::ActiveDomainCount() {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  const int n = virConnectNumOfDomains(conn.get());
  if (n < 0) return LibvirtError("counting running domains");
  return n;
}

namespace {

// The VM's user-mode network devices in its live (or, with `inactive`, persistent)
// definition.
Result<std::vector<std::string>> UserInterfacesOf(virDomainPtr dom, bool inactive,
                                                  std::string_view id) {
  LibvirtString xml(virDomainGetXMLDesc(dom, inactive ? VIR_DOMAIN_XML_INACTIVE : 0));
  if (!xml) return LibvirtError("reading the definition of vm " + std::string(id));
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, DomainDefinition::Parse(xml.get()));
  return def.InterfaceXmls("user");
}

}  // namespace

Result<bool> LibvirtHost::SetNetwork(std::string_view id, Egress egress) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  virDomainPtr dom = vm.dom.get();
  const bool want = egress == Egress::kAll;
  const std::string what = std::string(want ? "giving vm " : "taking from vm ") + std::string(id) +
                           " its network device";
  bool live_changed = false;
  if (IsActive(dom)) {
    WARREN_ASSIGN_OR_RETURN(std::vector<std::string> nics, UserInterfacesOf(dom, false, id));
    if (want && nics.empty()) {
      // q35 hot-plugs onto a free pcie-root-port; libvirt leaves the domain some (a domain
      // made without a NIC takes one live: vm_host_contract_test SetNetwork).
      const std::string nic = NetworkInterfaceXml();
      if (virDomainAttachDeviceFlags(dom, nic.c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
        return LibvirtError(what + " (live)");
      }
      live_changed = true;
    }
    for (const std::string& nic : want ? std::vector<std::string>{} : nics) {
      // The link goes down first: QEMU then passes no packet either way, whatever the guest
      // does, while the unplug itself waits on the guest to release the device.
      std::string down = nic;
      if (const size_t end = down.rfind("</interface>");
          end != std::string::npos && down.find("<link ") == std::string::npos) {
        down.insert(end, "<link state='down'/>");
        if (virDomainUpdateDeviceFlags(dom, down.c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
          LogWarn(LibvirtError("setting vm " + std::string(id) + "'s link down").ToString());
        }
      }
      if (virDomainDetachDeviceFlags(dom, nic.c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
        return LibvirtError(what + " (live)");
      }
      live_changed = true;
    }
  }
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> saved, UserInterfacesOf(dom, true, id));
  if (want && saved.empty()) {
    const std::string nic = NetworkInterfaceXml();
    if (virDomainAttachDeviceFlags(dom, nic.c_str(), VIR_DOMAIN_AFFECT_CONFIG) < 0) {
      return LibvirtError(what);
    }
  }
  for (const std::string& nic : want ? std::vector<std::string>{} : saved) {
    if (virDomainDetachDeviceFlags(dom, nic.c_str(), VIR_DOMAIN_AFFECT_CONFIG) < 0) {
      return LibvirtError(what);
    }
  }
  return live_changed;
}

Result<int> LibvirtHost::RemoveUnusedDisks() {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  DiskChains::Lock disks = chains_.Acquire();
  return RemoveUnusedDisksLocked(conn, disks);
}

void LibvirtHost::UndoNewVmFiles(const Conn& conn, std::string_view id, std::string_view what,
                                 const DiskChains::Lock& disks) {
  const std::string context = "cleaning up after a failed " + std::string(what) + ": ";
  Status st = RemoveFiles(conn, id);
  if (!st.ok()) LogWarn(context + st.ToString());
  // Last: also forgets the disks pool if this was its only disk.
  Result<int> collected = RemoveUnusedDisksLocked(conn, disks);
  if (!collected.ok()) LogWarn(context + collected.status().ToString());
}

Result<int> LibvirtHost::RemoveUnusedDisksLocked(const Conn& conn, const DiskChains::Lock& disks) {
  if (remote_) {
    // Templates cut short or replaced first: their bases then go with the rest.
    RemoveRemoteTemplateLeftovers(conn.get());
    WARREN_ASSIGN_OR_RETURN(int removed, chains_.RemoveUnused(disks, conn.get()));
    RemoveRemoteLeftovers(conn);
    return removed;
  }
  std::error_code ec;
  if (!fs::exists(chains_.dir(), ec)) return 0;  // no VM ever had a disk here
  // Templates cut short (a crash mid-save) first: their bases then go with the rest.
  RemoveTemplateLeftovers();
  WARREN_ASSIGN_OR_RETURN(int removed, chains_.RemoveUnused(disks, conn.get()));
  // Directories of VMs that are gone: what a crash left, or a pre-DATA/disks disk a copy
  // needed until now.
  for (const auto& entry : fs::directory_iterator(fs::path(options_.data_dir) / "vms", ec)) {
    const std::string vm_id = entry.path().filename().string();
    Result<DomainHandle> dom = LookupDomain(conn, vm_id);
    if (dom.ok() || dom.status().code() != Code::kNotFound) continue;
    Status st = RemoveFiles(conn, vm_id);
    if (!st.ok()) LogWarn("vmhost: removing what is left of vm " + vm_id + ": " + st.ToString());
  }
  // Pools of ours whose directory is gone (a data directory deleted with its VMs, as tests
  // do) can never serve again: forget them so they do not pile up in the daemon.
  virStoragePoolPtr* pools = nullptr;
  int np = virConnectListAllStoragePools(conn.get(), &pools, 0);
  for (int i = 0; i < np; ++i) {
    StoragePoolHandle p(pools[i]);
    const char* pname = virStoragePoolGetName(p.get());
    if (pname == nullptr || std::string_view(pname).rfind(options_.domain_prefix, 0) != 0) continue;
    LibvirtString pxml(virStoragePoolGetXMLDesc(p.get(), 0));
    if (!pxml) continue;
    Result<std::string> target = PoolTargetPath(pxml.get());
    if (!target.ok() || target->empty() || fs::exists(*target, ec)) continue;
    if (virStoragePoolIsActive(p.get()) == 1 && virStoragePoolDestroy(p.get()) < 0) {
      virResetLastError();
    }
    if (virStoragePoolUndefine(p.get()) < 0) virResetLastError();
  }
  if (np < 0) virResetLastError();
  free(pools);  // NOLINT: allocated by libvirt
  return removed;
}

Result<std::string> LibvirtHost::MakeSeed(const Conn& conn, const VmSpec& spec,
                                          const QemuUser& qemu, bool rewrite) {
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn, spec.id, /*build=*/!rewrite));
  SeedContents seed;
  seed.hostname = spec.name.empty() ? spec.id : spec.name;
  seed.authorized_keys = spec.authorized_keys;
  seed.env = spec.env;
  seed.setup_script = spec.setup_script;
  seed.ssh_host_key = spec.ssh_host_key;
  seed.ssh_host_key_pub = spec.ssh_host_key_pub;
  WARREN_ASSIGN_OR_RETURN(std::string seed_bytes,
                          BuildSeedImage(seed, ScratchDir(), options_.mkfs));
  StorageVolHandle seed_vol;
  if (rewrite) {
    // Every seed is one size (seed_image.h): the new one fits the volume exactly.
    seed_vol.reset(virStorageVolLookupByName(pool.get(), "seed.img"));
    if (!seed_vol) return LibvirtError("finding the seed of vm " + spec.id);
  } else {
    const std::string seed_xml = RawVolumeXml("seed.img", seed_bytes.size(), qemu);
    seed_vol.reset(virStorageVolCreateXML(pool.get(), seed_xml.c_str(), 0));
    if (!seed_vol) return LibvirtError("creating the seed of vm " + spec.id);
  }
  WARREN_RETURN_IF_ERROR(
      WriteVolumeBytes(conn.get(), seed_vol.get(), 0, seed_bytes, "the seed of vm " + spec.id));
  LibvirtString seed_path(virStorageVolGetPath(seed_vol.get()));
  if (!seed_path) return LibvirtError("reading volume paths");
  return std::string(seed_path.get());
}

DomainConfig LibvirtHost::ConfigFor(const VmSpec& spec, const GuestImage& image,
                                    const std::string& disk, const std::string& seed,
                                    const QemuUser& qemu) const {
  DomainConfig config;
  config.id = spec.id;
  config.prefix = options_.domain_prefix;
  config.name = spec.name.empty() ? spec.id : spec.name;
  config.uuid = NewUuid();
  config.image = image.ref;
  config.kvm = options_.accel == Accel::kKvm;
  config.tb_cache_mib = options_.tb_cache_mib;
  config.cpus = spec.cpus;
  config.memory_mib = spec.memory_mib;
  config.kernel = image.kernel;
  config.initrd = image.initrd;
  config.cmdline = image.cmdline;
  config.disk = disk;
  config.seed = seed;
  config.console_log = (fs::path(VmDir(spec.id)) / "console.log").string();
  config.control_socket = (fs::path(VmDir(spec.id)) / PortSocketFile(kControlChannelName)).string();
  config.identity_socket =
      (fs::path(VmDir(spec.id)) / PortSocketFile(kIdentityChannelName)).string();
  config.egress = spec.egress;
  config.qemu_user = qemu;
  return config;
}

Status LibvirtHost::DefineAndStart(const Conn& conn, const VmSpec& spec,
                                   const std::string& image_ref, const std::string& disk,
                                   const QemuUser& qemu, Rollback& rollback) {
  WARREN_ASSIGN_OR_RETURN(GuestImage image, HostImage(conn, image_ref, qemu));
  WARREN_ASSIGN_OR_RETURN(std::string seed, MakeSeed(conn, spec, qemu));
  std::string xml = DomainXml(ConfigFor(spec, image, disk, seed, qemu));

  NoteOwnDomain(spec.id);  // its events may arrive after a quick removal
  // Shared with the undo step, which may run after this scope's handles are gone.
  DomainHandle defined(virDomainDefineXML(conn.get(), xml.c_str()));
  if (!defined) return LibvirtError("defining vm " + spec.id);
  std::shared_ptr<virDomain> dom(std::move(defined));
  rollback.Add([dom] {
    if (IsActive(dom.get())) virDomainDestroy(dom.get());
    Status st = Undefine(dom.get(), virDomainGetName(dom.get()));
    if (!st.ok()) LogWarn("cleaning up after a failed create: " + st.ToString());
  });
  return StartDomain(dom.get()).Annotate("vm " + spec.id);
}

Status LibvirtHost::Create(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  GuestImage image;
  if (remote_) {
    // Before any lock: an upload takes a while, and other VMs' operations go on meanwhile.
    WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
    WARREN_ASSIGN_OR_RETURN(image, HostImage(conn, spec.image, {}));
  } else {
    WARREN_ASSIGN_OR_RETURN(image, OpenGuestImage(options_.images_dir, spec.image));
  }
  if (spec.disk_gib * kGiB < image.rootfs_bytes) {
    return InvalidArgument("disk must be at least " +
                           std::to_string((image.rootfs_bytes + kGiB - 1) / kGiB) +
                           " GiB for image " + image.ref);
  }
  WARREN_ASSIGN_OR_RETURN(std::unique_ptr<NewVm> made, BeginNewVm(spec, "create"));
  WARREN_ASSIGN_OR_RETURN(
      NewLayer disk,
      NewLayerUndoneOnRollback(chains_, *made->disks, made->conn.get(), spec.id, image.rootfs,
                               static_cast<uint64_t>(spec.disk_gib * kGiB), made->qemu, "create",
                               made->rollback));
  WARREN_RETURN_IF_ERROR(
      DefineAndStart(made->conn, spec, spec.image, disk.path, made->qemu, made->rollback));
  made->rollback.Commit();
  return Status::Ok();
}

Result<std::unique_ptr<LibvirtHost::NewVm>> LibvirtHost::BeginNewVm(const VmSpec& spec,
                                                                    const char* what,
                                                                    std::string_view source_id) {
  // In id order, as Copy takes them.
  std::optional<VmGuard> source_first;
  if (!source_id.empty() && source_id < spec.id) source_first.emplace(LockVm(source_id));
  auto made = std::make_unique<NewVm>(LockVm(spec.id));
  if (source_first) {
    made->source_guard = std::move(source_first);
  } else if (!source_id.empty()) {
    made->source_guard.emplace(LockVm(source_id));
  }
  WARREN_ASSIGN_OR_RETURN(made->conn, Connect());
  WARREN_RETURN_IF_ERROR(CheckAbsent(made->conn, spec.id));
  // Under the disks' lock: two new VMs at once each count the other's new disk.
  made->disks.emplace(chains_.Acquire());
  WARREN_RETURN_IF_ERROR(CheckRoom(made->conn, {spec.cpus, spec.memory_mib, spec.disk_gib}));
  // The new VM's QEMU is about to take fresh memory: it gets what was held for it.
  if (options_.warm_memory != nullptr) options_.warm_memory->Release();
  // Files without a domain are what a Create cut short (warren died mid-way) leaves: no
  // VM uses them, and they would stand in the way.
  WARREN_RETURN_IF_ERROR(RemoveFiles(made->conn, spec.id));
  made->rollback.Add([this, conn = made->conn, id = spec.id, what, disks = &*made->disks] {
    UndoNewVmFiles(conn, id, what, *disks);
  });
  WARREN_RETURN_IF_ERROR(EnsureDataDirs());
  made->qemu = qemu_user();
  return made;
}

Status LibvirtHost::Start(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  WARREN_RETURN_IF_ERROR(
      RequireState(vm.dom.get(), {VmState::kStopped, VmState::kCrashed}, "start"));
  // A stopped VM holds no memory: it must fit again, next to what runs now.
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, InactiveDefinition(vm.dom.get(), id));
  WARREN_RETURN_IF_ERROR(CheckRoom(vm.conn, {def.Vcpus(), def.MemoryMib(), 0})
                             .Annotate("starting vm " + std::string(id)));
  if (options_.warm_memory != nullptr) options_.warm_memory->Release();
  return StartDomain(vm.dom.get());
}

Status LibvirtHost::Stop(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  virDomainPtr dom = vm.dom.get();
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom));
  if (state == VmState::kStopped) return WrongState("stop", state);
  if (!IsActive(dom)) {  // crashed: its QEMU is already gone; it stays down now
    if (virDomainSetAutostart(dom, 0) < 0) return LibvirtError("stopping a crashed vm");
    ReportState(id, VmState::kStopped);  // a change to us, none to libvirt: no event
    return Status::Ok();
  }
  if (state == VmState::kPaused && virDomainResume(dom) < 0) {
    // A paused guest cannot hear the power button; without a resume it is powered off.
    LogDebug(LibvirtError("resuming before a stop").ToString());
  }
  WARREN_RETURN_IF_ERROR(ShutDown(dom));
  if (virDomainSetAutostart(dom, 0) < 0) {
    return LibvirtError("keeping vm " + std::string(id) + " stopped across restarts");
  }
  return Status::Ok();
}

Status LibvirtHost::Pause(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  WARREN_RETURN_IF_ERROR(RequireState(vm.dom.get(), {VmState::kRunning}, "pause"));
  if (virDomainSuspend(vm.dom.get()) < 0) return LibvirtError("pausing vm " + std::string(id));
  return Status::Ok();
}

Status LibvirtHost::Resume(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  WARREN_RETURN_IF_ERROR(RequireState(vm.dom.get(), {VmState::kPaused}, "resume"));
  if (virDomainResume(vm.dom.get()) < 0) return LibvirtError("resuming vm " + std::string(id));
  return Status::Ok();
}

Status LibvirtHost::Restart(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  WARREN_RETURN_IF_ERROR(RequireState(vm.dom.get(), {VmState::kRunning}, "restart"));
  // A power cycle rather than a guest reboot: a fresh QEMU process, which also picks up a
  // changed definition (new name, resized memory).
  WARREN_RETURN_IF_ERROR(ShutDown(vm.dom.get()));
  return StartDomain(vm.dom.get());
}

Status LibvirtHost::Destroy(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  virDomainPtr dom = vm.dom.get();
  if (IsActive(dom) && virDomainDestroy(dom) < 0 && IsActive(dom)) {
    return LibvirtError("powering off vm " + std::string(id));
  }
  WARREN_RETURN_IF_ERROR(Undefine(dom, id));
  DiskChains::Lock disks = chains_.Acquire();
  WARREN_RETURN_IF_ERROR(RemoveFiles(vm.conn, id));
  // Its disk layers go unless a copy still stands on them.
  Result<int> collected = RemoveUnusedDisksLocked(vm.conn, disks);
  if (!collected.ok()) {
    LogWarn("vmhost: collecting unused disks after removing vm " + std::string(id) + ": " +
            collected.status().ToString());
  }
  return Status::Ok();
}

Status LibvirtHost::Rename(std::string_view id, std::string_view name) {
  WARREN_RETURN_IF_ERROR(ValidateVmName(name));
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  return RenameDomain(vm, id, name);
}

Status LibvirtHost::RenameDomain(const OpenVm& vm, std::string_view id, std::string_view name) {
  virDomainPtr dom = vm.dom.get();
  unsigned int flags = VIR_DOMAIN_AFFECT_CONFIG;
  if (IsActive(dom)) flags |= VIR_DOMAIN_AFFECT_LIVE;
  const std::string meta = VmMetadataElement(id, name, VmMetadataOf(dom).image);
  const std::string name_str(name);
  if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, meta.c_str(),
                           std::string(kWarrenVmPrefix).c_str(),
                           std::string(kWarrenVmNamespace).c_str(), flags) < 0 ||
      virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_TITLE, name_str.c_str(), nullptr, nullptr,
                           flags) < 0) {
    return LibvirtError("renaming vm " + std::string(id));
  }
  // The guest learns its hostname from the kernel command line: rewrite it in the
  // persistent definition so the next boot carries the new name.
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, InactiveDefinition(dom, id));
  if (!def.SetCmdlineHostname(name)) return Status::Ok();  // not made by Create: no name there
  return Redefine(vm.conn.get(), def, id);
}

Result<std::vector<std::string>> LibvirtHost::DiskChain(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, Open(id));
  WARREN_ASSIGN_OR_RETURN(std::string top, DiskChains::TopOf(vm.dom.get()));
  return chains_.ChainOf(vm.conn.get(), top);
}

Status LibvirtHost::Copy(std::string_view source_id, const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  if (spec.id == source_id) return InvalidArgument("a vm cannot be copied onto itself");
  // Both VMs' locks, always in the same order, then the disks: no rm, resize or second
  // copy of either runs meanwhile, and no collection sees the new files half-way.
  VmGuard first_guard = LockVm(std::min<std::string_view>(source_id, spec.id));
  VmGuard second_guard = LockVm(std::max<std::string_view>(source_id, spec.id));
  WARREN_ASSIGN_OR_RETURN(OpenVm source, Open(source_id));
  const Conn& conn = source.conn;
  virDomainPtr src = source.dom.get();
  WARREN_RETURN_IF_ERROR(CheckAbsent(conn, spec.id));
  std::string image = VmMetadataOf(src).image;
  if (image.empty()) image = spec.image;
  const bool live = IsActive(src);
  DiskChains::Lock disks = chains_.Acquire();
  WARREN_RETURN_IF_ERROR(RemoveFiles(conn, spec.id));
  Rollback rollback;
  rollback.Add([this, conn, id = spec.id, &disks] { UndoNewVmFiles(conn, id, "copy", disks); });
  WARREN_RETURN_IF_ERROR(EnsureDataDirs());
  WARREN_ASSIGN_OR_RETURN(DiskFork fork,
                          PrepareFork(conn, src, source_id, spec, 0, disks, rollback));
  if (live) {
    // QEMU switches the running source onto its fresh overlay.
    WARREN_RETURN_IF_ERROR(SnapshotOnto(src, source_id, fork.source_top.path));
  } else {
    // Stopped: nothing writes the top now, so pointing the definition at the new overlay is
    // the whole fork.
    WARREN_ASSIGN_OR_RETURN(DomainDefinition src_def, InactiveDefinition(src, source_id));
    Status moved = src_def.SetDiskSource("vda", fork.source_top.path);
    if (!moved.ok()) return Internal("vm " + std::string(source_id) + " has no disk");
    WARREN_RETURN_IF_ERROR(Redefine(conn.get(), src_def, source_id));
  }
  *fork.source_top_kept = true;  // the source runs on it now, whatever happens to the copy

  VmSpec copy = spec;
  copy.image = image;
  // The disk carries the source's host key: the copy gets its own, through its seed.
  WARREN_RETURN_IF_ERROR(EnsureSshHostKey(copy.ssh_host_key, copy.ssh_host_key_pub, ScratchDir()));
  WARREN_RETURN_IF_ERROR(
      DefineAndStart(conn, copy, image, fork.copy_top.path, fork.qemu, rollback));
  rollback.Commit();
  chains_.MaybeFlatten(src, source_id);
  return Status::Ok();
}

Result<LibvirtHost::DiskFork> LibvirtHost::PrepareFork(const Conn& conn, virDomainPtr src,
                                                       std::string_view source_id,
                                                       const VmSpec& spec, int64_t more_bytes,
                                                       const DiskChains::Lock& disks,
                                                       Rollback& rollback) {
  if (IsActive(src)) {
    virDomainBlockJobInfo job{};
    int busy = virDomainGetBlockJobInfo(src, "vda", &job, 0);
    if (busy < 0) virResetLastError();
    if (busy > 0) {
      return Conflict("the disk of vm " + std::string(source_id) +
                      " is being flattened; copy it again in a minute");
    }
  }
  DiskFork fork;
  WARREN_ASSIGN_OR_RETURN(fork.capacity, VdaCapacity(src, source_id));
  WARREN_ASSIGN_OR_RETURN(fork.frozen, DiskChains::TopOf(src));
  {
    // The copy's disk may grow to its full size, and so may the source's fresh top again:
    // what the frozen layer holds is written once more at most.
    const int64_t bytes =
        static_cast<int64_t>(fork.capacity) + AllocationOf(conn.get(), fork.frozen) + more_bytes;
    WARREN_RETURN_IF_ERROR(
        CheckRoom(conn, {spec.cpus, spec.memory_mib, (bytes + kGiB - 1) / kGiB}));
  }
  // The source's current top becomes read-only from the switch on: both VMs write to their
  // own fresh overlay over it. The source's stays once the source runs on it, whatever
  // happens to the copy. A source defined before warren owned its files itself (libvirt
  // relabels them) may have a top only root can read while it is stopped: the new layers and
  // the copy follow the source's way, so libvirt hands the whole chain to QEMU as it always
  // did for it.
  WARREN_ASSIGN_OR_RETURN(DomainDefinition src_def, InactiveDefinition(src, source_id));
  fork.qemu = src_def.DacRelabels() ? QemuUser{} : qemu_user();
  WARREN_ASSIGN_OR_RETURN(
      fork.source_top,
      NewLayerUndoneOnRollback(chains_, disks, conn.get(), source_id, fork.frozen, fork.capacity,
                               fork.qemu, "copy", rollback, fork.source_top_kept));
  WARREN_ASSIGN_OR_RETURN(fork.copy_top,
                          NewLayerUndoneOnRollback(chains_, disks, conn.get(), spec.id, fork.frozen,
                                                   fork.capacity, fork.qemu, "copy", rollback));
  return fork;
}

Result<ResizeOutcome> LibvirtHost::Resize(std::string_view id, const ResizeSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateResizeSpec(spec));
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  virDomainPtr dom = vm.dom.get();
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, InactiveDefinition(dom, id));
  WARREN_ASSIGN_OR_RETURN(const uint64_t capacity, VdaCapacity(dom, id));
  virDomainInfo di{};
  if (virDomainGetInfo(dom, &di) < 0) return LibvirtError("reading vm " + std::string(id));
  const bool live = IsActive(dom);
  // The definition's values: what the next boot gets.
  const int64_t config_memory_mib = def.MemoryMib();
  const uint64_t new_bytes = static_cast<uint64_t>(spec.disk_gib) * kGiB;

  // Every check before any change.
  if (spec.disk_gib != 0 && new_bytes < capacity) {
    return InvalidArgument("the disk only grows: it is " +
                           std::to_string((capacity + kGiB - 1) / kGiB) + " GiB now");
  }
  const bool grow = spec.disk_gib != 0 && new_bytes > capacity;
  const int64_t more_memory =
      spec.memory_mib > config_memory_mib ? spec.memory_mib - config_memory_mib : 0;
  const int64_t more_disk =
      grow ? static_cast<int64_t>((new_bytes - capacity + kGiB - 1) / kGiB) : 0;
  WARREN_RETURN_IF_ERROR(CheckRoom(vm.conn, {spec.cpus, more_memory, more_disk}));

  ResizeOutcome out;
  if (grow) {
    if (live) {
      // The guest sees the bigger device at once (virtio-blk reports the new capacity);
      // its file system is grown by whoever can run commands in it.
      if (virDomainBlockResize(dom, "vda", new_bytes, VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0) {
        return LibvirtError("growing the disk of vm " + std::string(id));
      }
    } else {
      WARREN_ASSIGN_OR_RETURN(std::string top, DiskChains::TopOf(dom));
      StorageVolHandle vol(virStorageVolLookupByPath(vm.conn.get(), top.c_str()));
      if (!vol) return LibvirtError("finding the disk of vm " + std::string(id));
      if (virStorageVolResize(vol.get(), new_bytes, 0) < 0) {
        return LibvirtError("growing the disk of vm " + std::string(id));
      }
    }
    out.disk_grown = true;
  }
  bool redefine = false;
  if (spec.cpus != 0) {
    if (def.Vcpus() != spec.cpus) {
      WARREN_RETURN_IF_ERROR(def.SetVcpus(spec.cpus));
      redefine = true;
    }
    if (live && static_cast<int>(di.nrVirtCpu) != spec.cpus) out.restart_needed = true;
  }
  if (spec.memory_mib != 0) {
    if (spec.memory_mib != config_memory_mib) {
      WARREN_RETURN_IF_ERROR(def.SetMemoryMib(spec.memory_mib));
      redefine = true;
    }
    if (live && static_cast<int64_t>(di.maxMem / 1024) != spec.memory_mib) {
      out.restart_needed = true;
    }
  }
  // The persistent definition only: a running VM keeps its CPUs and memory until its next
  // start (its definition has no room for hotplug).
  if (redefine) WARREN_RETURN_IF_ERROR(Redefine(vm.conn.get(), def, id));
  if (spec.cpus != 0) SetCpuShares(dom, spec.cpus, id);  // its share follows its vCPUs
  return out;
}

Result<VmInfo> LibvirtHost::Inspect(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, Open(id));
  return InfoOf(vm.dom.get(), id);
}

Result<VmState> LibvirtHost::State(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, Open(id));
  return StateOf(vm.dom.get());
}

Result<std::vector<VmInfo>> LibvirtHost::List() {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(std::vector<DomainHandle> doms,
                          ListDomains(conn.get(), options_.domain_prefix));
  std::vector<VmInfo> out;
  for (const DomainHandle& dom : doms) {
    // Another warren on the same libvirtd (its own data directory) names its domains the
    // same way: only domains whose files live in this data directory are this host's, so
    // reconcile never takes a neighbour's VMs for orphans.
    WARREN_ASSIGN_OR_RETURN(const bool ours, HoldsDomain(dom.get()));
    if (!ours) continue;
    Result<VmInfo> info = InfoOf(dom.get(), VmIdOf(dom.get()));
    // A VM destroyed while we listed is simply not there any more.
    if (!info.ok() && info.status().code() == Code::kNotFound) continue;
    if (!info.ok()) return info.status();
    out.push_back(std::move(info).value());
  }
  std::sort(out.begin(), out.end(), [](const VmInfo& a, const VmInfo& b) { return a.id < b.id; });
  return out;
}

Result<bool> LibvirtHost::HoldsDomain(virDomainPtr dom) {
  LibvirtString xml(virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE));
  if (!xml) {
    virResetLastError();
    return false;  // undefined meanwhile
  }
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, DomainDefinition::Parse(xml.get()));
  return def.MentionsPathUnder(options_.data_dir);
}

Result<std::string> LibvirtHost::Console(std::string_view id, int max_lines) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, Open(id));
  const Conn& conn = vm.conn;
  Result<StoragePoolHandle> pool = OpenPool(conn, id, /*build=*/false);
  if (!pool.ok()) return std::string();  // no files: never booted
  StorageVolHandle vol(virStorageVolLookupByName(pool->get(), "console.log"));
  if (!vol) {
    // The log appears with the first boot, after the pool last looked. Refresh only then:
    // a refresh rescans the directory (and libvirtd logs the socket it skips each time).
    virResetLastError();
    if (virStoragePoolRefresh(pool->get(), 0) < 0) return LibvirtError("reading vm files");
    vol.reset(virStorageVolLookupByName(pool->get(), "console.log"));
  }
  if (!vol) {
    Status st = LibvirtError("opening the console log");
    if (st.code() == Code::kNotFound) return std::string();
    return st;
  }
  virStorageVolInfo vi{};
  if (virStorageVolGetInfo(vol.get(), &vi) < 0) return LibvirtError("sizing the console log");
  int64_t size = static_cast<int64_t>(vi.capacity);
  int64_t length = std::min(size, kConsoleWindow);
  if (length <= 0) return std::string();
  WARREN_ASSIGN_OR_RETURN(
      std::string data, ReadVolumeBytes(conn.get(), vol.get(), static_cast<uint64_t>(size - length),
                                        static_cast<uint64_t>(length), "the console log"));
  return LastLines(data, max_lines, /*cut_at_start=*/size > length);
}

namespace {

// Any image's kernel will do for the probe; the newest is the likeliest to be used.
std::string AnyImageKernel(const std::string& images_dir) {
  std::error_code ec;
  std::string best;
  fs::file_time_type best_time;
  for (const std::string& ref : ListInstalledImages(images_dir)) {
    const fs::file_time_type t = fs::last_write_time(fs::path(images_dir) / ref, ec);
    if (best.empty() || t > best_time) {
      best = ref;
      best_time = t;
    }
  }
  return best.empty() ? "" : ImageFilesOf(images_dir, best).kernel;
}

}  // namespace

Result<std::unique_ptr<LibvirtHost>> StartLibvirtHost(LibvirtHostOptions options,
                                                      std::string_view force_accel) {
  if (IsRemoteLibvirtUri(options.uri)) {
    // Another machine's daemon: not ours to start, and its /dev/kvm is not this one's.
    AccelChoice accel = ProbeRemoteAccel(options.uri, force_accel);
    LogInfo("vmhost: uri=" + options.uri + " accel=" + std::string(AccelName(accel.accel)) +
            " reason=" + LogQuote(accel.reason) +
            " probe_ms=" + std::to_string(int(accel.seconds * 1000)));
    options.accel = accel.accel;
    WARREN_ASSIGN_OR_RETURN(ConnectHandle conn, OpenLibvirt(options.uri));
    return std::make_unique<LibvirtHost>(std::move(options), std::move(conn));
  }
  KvmProbeOptions probe;
  probe.data_dir = options.data_dir;
  probe.kernel = AnyImageKernel(options.images_dir);
  probe.force = std::string(force_accel);
  AccelChoice accel = ProbeAccel(probe);
  LogInfo("vmhost: accel=" + std::string(AccelName(accel.accel)) + " reason=" +
          LogQuote(accel.reason) + " probe_ms=" + std::to_string(int(accel.seconds * 1000)));
  options.accel = accel.accel;

  LibvirtdOptions daemon;
  daemon.uri = options.uri;
  daemon.mask_dev_kvm = accel.accel == Accel::kTcg;
  WARREN_ASSIGN_OR_RETURN(LibvirtdStatus up, EnsureLibvirtd(daemon));
  if (up.started) {
    LogInfo("vmhost: started libvirtd uri=" + options.uri + " kvm_masked=" +
            (up.masked ? "yes" : "no") + " ms=" + std::to_string(int(up.seconds * 1000)));
  }
  if (!up.warning.empty()) LogWarn("vmhost: " + up.warning);
  WARREN_ASSIGN_OR_RETURN(ConnectHandle conn, OpenLibvirt(options.uri));
  auto host = std::make_unique<LibvirtHost>(std::move(options), std::move(conn));
  // A daemon warren started is warren's to start again when it dies (one it found running
  // is its operator's: warren waits for it to come back).
  if (up.started) host->RestartDaemonWith(daemon);
  return host;
}

}  // namespace warren
