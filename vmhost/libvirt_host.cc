#include "vmhost/libvirt_host.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "lobby/base/clock.h"
#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest_image.h"
#include "vmhost/libvirtd_launcher.h"
#include "vmhost/seed_image.h"
#include "vmhost/subprocess.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGiB = int64_t{1} << 30;
// Console reads look at most this far back: virtlogd rotates the log at 2 MiB anyway, and
// a caller asking for N lines wants the end of it.
constexpr int64_t kConsoleWindow = 256 * 1024;

std::string NewUuid() {
  std::random_device rd;
  unsigned char b[16];
  for (auto& byte : b) byte = static_cast<unsigned char>(rd());
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[b[i] >> 4];
    s += hex[b[i] & 15];
  }
  return s;
}

std::string XmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    static const std::pair<std::string_view, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}, {"&quot;", '"'}};
    bool matched = false;
    for (const auto& [entity, c] : kEntities) {
      if (s.substr(i, entity.size()) == entity) {
        out += c;
        i += entity.size() - 1;
        matched = true;
        break;
      }
    }
    if (!matched) out += '&';
  }
  return out;
}

// The text of the first <tag>...</tag> in a metadata element libvirt gave back (it returns
// the element without namespace prefixes). Empty when absent.
std::string ElementText(std::string_view xml, std::string_view tag) {
  std::string open = "<" + std::string(tag) + ">";
  std::string close = "</" + std::string(tag) + ">";
  size_t a = xml.find(open);
  if (a == std::string_view::npos) return "";
  a += open.size();
  size_t b = xml.find(close, a);
  if (b == std::string_view::npos) return "";
  return XmlUnescape(xml.substr(a, b - a));
}

// The value of attr="..." (libvirt writes double quotes). Empty when absent.
std::string AttributeValue(std::string_view xml, std::string_view attr) {
  std::string key = std::string(attr) + "=\"";
  size_t a = xml.find(key);
  if (a == std::string_view::npos) return "";
  a += key.size();
  size_t b = xml.find('"', a);
  if (b == std::string_view::npos) return "";
  return XmlUnescape(xml.substr(a, b - a));
}

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

Result<VmState> StateOf(virDomainPtr dom) {
  int state = 0;
  int reason = 0;
  if (virDomainGetState(dom, &state, &reason, 0) < 0) return LibvirtError("reading vm state");
  switch (state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_SHUTDOWN:  // shutting down, still running
      return VmState::kRunning;
    case VIR_DOMAIN_PAUSED:
    case VIR_DOMAIN_PMSUSPENDED:
      return VmState::kPaused;
    case VIR_DOMAIN_CRASHED:
      return VmState::kCrashed;
    case VIR_DOMAIN_SHUTOFF: {
      if (reason != VIR_DOMAIN_SHUTOFF_CRASHED) return VmState::kStopped;
      // libvirt remembers the crash until the next start; a Stop since (autostart cleared)
      // means the user has seen it, and the VM is simply stopped.
      int autostart = 1;
      if (virDomainGetAutostart(dom, &autostart) < 0) virResetLastError();
      return autostart == 0 ? VmState::kStopped : VmState::kCrashed;
    }
    default:
      return VmState::kStopped;
  }
}

Status WrongState(std::string_view verb, VmState state) {
  return Conflict("cannot " + std::string(verb) + " a " + std::string(VmStateName(state)) + " vm");
}

// Metadata libvirt holds for a domain; empty when the element is absent.
std::string Metadata(virDomainPtr dom, std::string_view ns, unsigned int flags) {
  LibvirtString m(
      virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, std::string(ns).c_str(), flags));
  if (!m) {
    virResetLastError();
    return "";
  }
  return m.get();
}

bool IsActive(virDomainPtr dom) { return virDomainIsActive(dom) == 1; }

// Forgets a domain with everything libvirt keeps beside it. Drivers that do not know a
// flag (the test driver, older daemons) reject it, so fall back to fewer.
Status Undefine(virDomainPtr dom, std::string_view id) {
  const unsigned int all = VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                           VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                           VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA | VIR_DOMAIN_UNDEFINE_NVRAM;
  for (unsigned int flags : {all, 0u}) {
    if (virDomainUndefineFlags(dom, flags) == 0) return Status::Ok();
    virErrorPtr err = virGetLastError();
    bool unsupported =
        err != nullptr && (err->code == VIR_ERR_INVALID_ARG || err->code == VIR_ERR_NO_SUPPORT);
    if (!unsupported || flags == 0) break;
  }
  return LibvirtError("undefining vm " + std::string(id));
}

// Recorded in the live definition only: it vanishes with the QEMU process, so a stopped
// VM cannot show a stale start time, and survives a warren restart while it runs.
void RecordStart(virDomainPtr dom, int64_t started_at) {
  std::string run = "<run started='" + std::to_string(started_at) + "'/>";
  if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, run.c_str(),
                           std::string(kWarrenRunPrefix).c_str(),
                           std::string(kWarrenRunNamespace).c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
    LogWarn(LibvirtError("recording the start time").ToString());
  }
}

// The <warren:vm> element's children without the prefix, as virDomainSetMetadata wants
// them (it adds the prefix itself).
std::string UnprefixedVmMetadata(std::string_view id, std::string_view name,
                                 std::string_view image) {
  return "<vm><id>" + XmlEscape(id) + "</id><name>" + XmlEscape(name) + "</name><image>" +
         XmlEscape(image) + "</image></vm>";
}

// The <source file='...'/> of the domain's vda: the top of its disk chain. Empty if none.
std::string VdaSource(std::string_view xml) {
  size_t target = xml.find("<target dev='vda'");
  if (target == std::string_view::npos) return "";
  size_t disk = xml.rfind("<disk ", target);
  if (disk == std::string_view::npos) return "";
  size_t src = xml.find("<source file='", disk);
  if (src == std::string_view::npos || src > target) return "";
  src += std::strlen("<source file='");
  size_t end = xml.find('\'', src);
  if (end == std::string_view::npos) return "";
  return XmlUnescape(xml.substr(src, end - src));
}

// The domain's definition, live if it runs (a snapshot or pull changes that first).
Result<std::string> DomainXmlOf(virDomainPtr dom) {
  LibvirtString xml(virDomainGetXMLDesc(dom, IsActive(dom) ? 0 : VIR_DOMAIN_XML_INACTIVE));
  if (!xml) return LibvirtError("reading a vm's definition");
  return std::string(xml.get());
}

Result<std::string> TopDisk(virDomainPtr dom) {
  WARREN_ASSIGN_OR_RETURN(std::string xml, DomainXmlOf(dom));
  std::string top = VdaSource(xml);
  if (top.empty()) return Internal("vm has no disk vda");
  return top;
}

// Where the text of the first <tag>text</tag> or <tag attrs>text</tag> in `xml` lies.
bool FindElementText(std::string_view xml, std::string_view tag, size_t* begin, size_t* end) {
  const std::string open = "<" + std::string(tag);
  for (size_t at = xml.find(open); at != std::string_view::npos; at = xml.find(open, at + 1)) {
    const size_t after = at + open.size();
    if (after >= xml.size() || (xml[after] != '>' && xml[after] != ' ')) continue;
    size_t gt = xml.find('>', after);
    size_t close = xml.find("</" + std::string(tag) + ">", after);
    if (gt == std::string_view::npos || close == std::string_view::npos || gt > close) {
      return false;
    }
    *begin = gt + 1;
    *end = close;
    return true;
  }
  return false;
}

std::string ElementTextOf(std::string_view xml, std::string_view tag) {
  size_t a = 0, b = 0;
  if (!FindElementText(xml, tag, &a, &b)) return "";
  return std::string(xml.substr(a, b - a));
}

// Replaces the text of the first <tag ...>text</tag> in `xml`. False when absent.
bool ReplaceElementText(std::string& xml, std::string_view tag, std::string_view text) {
  size_t a = 0, b = 0;
  if (!FindElementText(xml, tag, &a, &b)) return false;
  xml.replace(a, b - a, text);
  return true;
}

std::string RandomHex(int n) {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s += hex[rd() & 15];
  return s;
}

// A fresh ed25519 host key (private key file, .pub line) made with ssh-keygen in `tmp_dir`.
Result<std::pair<std::string, std::string>> NewHostKey(const std::string& tmp_dir) {
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  const std::string path = (fs::path(tmp_dir) / ("hostkey-" + RandomHex(12))).string();
  auto cleanup = [&] {
    fs::remove(path, ec);
    fs::remove(path + ".pub", ec);
  };
  Result<ProcessResult> r =
      RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "warren-vm", "-f", path});
  if (!r.ok() || r->exit_code != 0) {
    cleanup();
    return Internal("making an ssh host key for a vm failed" +
                    (r.ok() ? ": " + r->output : ": " + r.status().ToString()));
  }
  auto slurp = [](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::pair<std::string, std::string> key{slurp(path), slurp(path + ".pub")};
  cleanup();
  if (key.first.empty() || key.second.empty()) return Internal("reading a new ssh host key");
  return key;
}

bool Under(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() + 1 && path.substr(0, dir.size()) == dir &&
         path[dir.size()] == '/';
}

}  // namespace

// Undo steps for a multi-step operation, run newest first unless the operation committed.
class Rollback {
 public:
  ~Rollback() {
    if (committed_) return;
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) (*it)();
  }
  void Add(std::function<void()> step) { steps_.push_back(std::move(step)); }
  void Commit() { committed_ = true; }

 private:
  std::vector<std::function<void()>> steps_;
  bool committed_ = false;
};

LibvirtHost::LibvirtHost(LibvirtHostOptions options) : options_(std::move(options)) {
  SilenceLibvirtErrors();
}

LibvirtHost::LibvirtHost(LibvirtHostOptions options, ConnectHandle conn)
    : options_(std::move(options)) {
  SilenceLibvirtErrors();
  conn_ = Conn(conn.release(), ConnectDeleter());
}

LibvirtHost::~LibvirtHost() = default;

std::string LibvirtHost::DomainName(std::string_view id) const {
  return options_.domain_prefix + std::string(id);
}

std::string LibvirtHost::VmDir(std::string_view id) const {
  return (fs::path(options_.data_dir) / "vms" / std::string(id)).string();
}

std::string LibvirtHost::DisksDir() const {
  return (fs::path(options_.data_dir) / "disks").string();
}

Result<LibvirtHost::Conn> LibvirtHost::Connect() {
  std::lock_guard lock(conn_mu_);
  if (conn_ && virConnectIsAlive(conn_.get()) == 1) return conn_;
  WARREN_ASSIGN_OR_RETURN(ConnectHandle h, OpenLibvirt(options_.uri));
  conn_ = Conn(h.release(), ConnectDeleter());
  return conn_;
}

std::shared_ptr<std::mutex> LibvirtHost::VmLock(std::string_view id) {
  std::lock_guard lock(locks_mu_);
  // Drop locks nobody holds any more, so the map does not grow with every id ever seen.
  for (auto it = locks_.begin(); it != locks_.end();) {
    it = it->second.expired() ? locks_.erase(it) : std::next(it);
  }
  auto it = locks_.find(id);
  if (it != locks_.end()) {
    if (auto m = it->second.lock()) return m;
  }
  auto m = std::make_shared<std::mutex>();
  locks_[std::string(id)] = m;
  return m;
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

Result<StoragePoolHandle> LibvirtHost::OpenPool(const Conn& conn, std::string_view id, bool build) {
  std::string name = DomainName(id);
  StoragePoolHandle pool(virStoragePoolLookupByName(conn.get(), name.c_str()));
  if (pool) {
    if (virStoragePoolIsActive(pool.get()) != 1 && virStoragePoolCreate(pool.get(), 0) < 0) {
      return LibvirtError("starting storage pool " + name);
    }
    return pool;
  }
  Status st = LibvirtError("looking up storage pool " + name);
  if (st.code() != Code::kNotFound) return st;
  // 0711: QEMU (libvirt-qemu under qemu:///system) must reach the files by path, nobody
  // needs to list them.
  std::string xml = "<pool type='dir'>\n  <name>" + XmlEscape(name) +
                    "</name>\n  <target>\n    <path>" + XmlEscape(VmDir(id)) +
                    "</path>\n    <permissions>\n      <mode>0711</mode>\n    </permissions>\n"
                    "  </target>\n</pool>\n";
  // Transient: the directory is the truth, the pool just a view of it that we recreate
  // whenever libvirt has forgotten it.
  pool.reset(virStoragePoolCreateXML(conn.get(), xml.c_str(),
                                     build ? VIR_STORAGE_POOL_CREATE_WITH_BUILD : 0));
  if (!pool) return LibvirtError("creating storage pool " + name);
  return pool;
}

Status LibvirtHost::RemoveFiles(const Conn& conn, std::string_view id) {
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
      Result<std::vector<std::string>> u = DisksInUse(conn.get());
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
  // Autostart marks "the user wants this VM running": libvirtd brings such VMs back when
  // it starts again (host reboot, or warren starting the daemon). Stop clears it.
  if (virDomainSetAutostart(dom, 1) < 0) {
    LogWarn(LibvirtError("marking the vm to come back after a restart").ToString());
  }
  RecordStart(dom, SystemClock::Get().NowUnix());
  std::string_view name = virDomainGetName(dom);
  if (name.rfind(options_.domain_prefix, 0) == 0) name.remove_prefix(options_.domain_prefix.size());
  MaybeFlatten(dom, name);
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
  std::string meta = Metadata(dom, kWarrenVmNamespace, 0);
  info.name = ElementText(meta, "name");
  info.image = ElementText(meta, "image");
  if (info.name.empty()) info.name = info.id;
  if (info.state == VmState::kRunning || info.state == VmState::kPaused) {
    std::string run = Metadata(dom, kWarrenRunNamespace, VIR_DOMAIN_AFFECT_LIVE);
    info.started_at = std::strtoll(AttributeValue(run, "started").c_str(), nullptr, 10);
    if (info.started_at == 0) {
      // Started without us (libvirtd's autostart after a host reboot): count from now,
      // the first time anyone looks, and remember it.
      info.started_at = SystemClock::Get().NowUnix();
      RecordStart(dom, info.started_at);
    }
  }
  virDomainBlockInfo bi{};
  if (virDomainGetBlockInfo(dom, "vda", &bi, 0) == 0) {
    info.disk_gib = static_cast<int64_t>((bi.capacity + kGiB - 1) / kGiB);
  } else {
    virResetLastError();  // a domain without our disk (not made by Create): size unknown
  }
  Result<std::string> top = TopDisk(dom);
  if (top.ok()) {
    Result<std::vector<std::string>> chain = ChainOf(virDomainGetConnect(dom), *top);
    if (chain.ok()) {
      for (const std::string& p : *chain) info.disk_layers += Under(p, options_.images_dir) ? 0 : 1;
    }
  }
  return info;
}

Status LibvirtHost::CheckCapacity(const Conn& conn, int64_t memory_mib, int64_t disk_gib) {
  // Memory: what the host could give without swapping — free plus reclaimable page cache,
  // as the node reports it (works for a remote host too) — less a reserve for the host.
  constexpr int64_t kReserveMib = 256;
  int nparams = 0;
  if (memory_mib > 0 &&
      virNodeGetMemoryStats(conn.get(), VIR_NODE_MEMORY_STATS_ALL_CELLS, nullptr, &nparams, 0) ==
          0 &&
      nparams > 0) {
    std::vector<virNodeMemoryStats> stats(static_cast<size_t>(nparams));
    if (virNodeGetMemoryStats(conn.get(), VIR_NODE_MEMORY_STATS_ALL_CELLS, stats.data(), &nparams,
                              0) == 0) {
      int64_t available_kib = 0;
      for (int i = 0; i < nparams; ++i) {
        std::string_view field = stats[static_cast<size_t>(i)].field;
        if (field == VIR_NODE_MEMORY_STATS_FREE || field == VIR_NODE_MEMORY_STATS_BUFFERS ||
            field == VIR_NODE_MEMORY_STATS_CACHED) {
          available_kib += static_cast<int64_t>(stats[static_cast<size_t>(i)].value);
        }
      }
      const int64_t available_mib = available_kib / 1024 - kReserveMib;
      if (memory_mib > available_mib) {
        return LimitExceeded("not enough memory on the host for " + std::to_string(memory_mib) +
                             " MiB: " + std::to_string(std::max<int64_t>(available_mib, 0)) +
                             " MiB available");
      }
    }
  }
  // Disk: overlays are thin, but a guest that fills its disk must not fill the host's (every
  // VM would stop on ENOSPC), so the whole size must fit in what is free now.
  struct statvfs fs_info {};
  if (disk_gib > 0 && statvfs(options_.data_dir.c_str(), &fs_info) == 0) {
    const int64_t free_gib =
        static_cast<int64_t>(fs_info.f_bavail) * static_cast<int64_t>(fs_info.f_frsize) / kGiB;
    if (disk_gib > free_gib) {
      return LimitExceeded("not enough disk on the host for " + std::to_string(disk_gib) +
                           " GiB: " + std::to_string(free_gib) + " GiB free in " +
                           options_.data_dir);
    }
  }
  return Status::Ok();
}

Status LibvirtHost::EnsureDataDirs() {
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

Result<StoragePoolHandle> LibvirtHost::OpenDisksPool(virConnectPtr conn) {
  // Pools are host-wide but DATA/disks is this data directory's: the name carries a hash
  // of the path, so two warrens (or tests) on one libvirtd never share a disks pool.
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : DisksDir()) h = (h ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  std::string name = options_.domain_prefix + "disks-" + hex;  // never an id: ids have no '-'
  StoragePoolHandle pool(virStoragePoolLookupByName(conn, name.c_str()));
  if (pool) {
    if (virStoragePoolIsActive(pool.get()) != 1 && virStoragePoolCreate(pool.get(), 0) < 0) {
      return LibvirtError("starting storage pool " + name);
    }
    return pool;
  }
  Status st = LibvirtError("looking up storage pool " + name);
  if (st.code() != Code::kNotFound) return st;
  WARREN_RETURN_IF_ERROR(EnsureDataDirs());
  std::string xml = "<pool type='dir'>\n  <name>" + XmlEscape(name) +
                    "</name>\n  <target>\n    <path>" + XmlEscape(DisksDir()) +
                    "</path>\n    <permissions>\n      <mode>0711</mode>\n    </permissions>\n"
                    "  </target>\n</pool>\n";
  // Transient, like the VMs' pools: the directory is the truth.
  pool.reset(virStoragePoolCreateXML(conn, xml.c_str(), VIR_STORAGE_POOL_CREATE_WITH_BUILD));
  if (!pool) return LibvirtError("creating storage pool " + name);
  return pool;
}

Result<StorageVolHandle> LibvirtHost::NewOverlay(virStoragePoolPtr pool, std::string_view owner,
                                                 const std::string& backing,
                                                 uint64_t capacity_bytes) {
  std::string name = std::string(owner) + "-" + RandomHex(8) + ".qcow2";
  std::string xml = "<volume>\n  <name>" + name + "</name>\n  <capacity unit='bytes'>" +
                    std::to_string(capacity_bytes) +
                    "</capacity>\n  <target>\n    <format type='qcow2'/>\n    <permissions>\n"
                    "      <mode>0600</mode>\n    </permissions>\n  </target>\n"
                    "  <backingStore>\n    <path>" +
                    XmlEscape(backing) +
                    "</path>\n    <format type='qcow2'/>\n  </backingStore>\n</volume>\n";
  StorageVolHandle vol(virStorageVolCreateXML(pool, xml.c_str(), 0));
  if (!vol) return LibvirtError("creating a disk for vm " + std::string(owner));
  return vol;
}

Result<std::vector<std::string>> LibvirtHost::ChainOf(virConnectPtr conn, const std::string& top) {
  std::vector<std::string> chain;
  std::string path = top;
  bool refreshed = false;
  while (!path.empty()) {
    if (std::find(chain.begin(), chain.end(), path) != chain.end() || chain.size() > 64) {
      return Internal("disk chain of " + top + " loops");
    }
    chain.push_back(path);
    StorageVolHandle vol(virStorageVolLookupByPath(conn, path.c_str()));
    if (!vol) {
      virResetLastError();
      // Our own layers must be known: a chain cut short here would let a collection delete
      // what lies below. Anything else (the image) simply ends the chain.
      if (!Under(path, DisksDir())) break;
      if (refreshed) return Internal("disk " + path + " is not in the disks pool");
      WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenDisksPool(conn));
      if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("rescanning the disks");
      refreshed = true;
      chain.pop_back();
      continue;
    }
    LibvirtString xml(virStorageVolGetXMLDesc(vol.get(), 0));
    if (!xml) return LibvirtError("reading disk " + path);
    std::string_view x(xml.get());
    size_t bs = x.find("<backingStore>");
    path.clear();
    if (bs != std::string_view::npos) {
      size_t a = x.find("<path>", bs);
      size_t b = x.find("</path>", a);
      if (a != std::string_view::npos && b != std::string_view::npos) {
        a += std::strlen("<path>");
        path = XmlUnescape(x.substr(a, b - a));
      }
    }
  }
  return chain;
}

Result<std::vector<std::string>> LibvirtHost::DisksInUse(virConnectPtr conn) {
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn, &doms, 0);
  if (n < 0) return LibvirtError("listing vms");
  std::vector<DomainHandle> owned;
  for (int i = 0; i < n; ++i) owned.emplace_back(doms[i]);
  free(doms);  // NOLINT: allocated by libvirt
  std::vector<std::string> used;
  for (const DomainHandle& dom : owned) {
    const char* name = virDomainGetName(dom.get());
    if (name == nullptr || std::string_view(name).rfind(options_.domain_prefix, 0) != 0) continue;
    Result<std::string> top = TopDisk(dom.get());
    if (!top.ok()) {
      if (top.status().code() == Code::kNotFound) continue;  // undefined meanwhile
      return top.status();
    }
    WARREN_ASSIGN_OR_RETURN(std::vector<std::string> chain, ChainOf(conn, *top));
    used.insert(used.end(), chain.begin(), chain.end());
  }
  return used;
}

Result<int> LibvirtHost::RemoveUnusedDisks() {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  std::lock_guard lock(disks_mu_);
  return RemoveUnusedDisksLocked(conn);
}

void LibvirtHost::UndoNewVmFiles(const Conn& conn, std::string_view id, std::string_view what) {
  const std::string context = "cleaning up after a failed " + std::string(what) + ": ";
  Status st = RemoveFiles(conn, id);
  if (!st.ok()) LogWarn(context + st.ToString());
  // Last: also forgets the disks pool if this was its only disk.
  Result<int> collected = RemoveUnusedDisksLocked(conn);
  if (!collected.ok()) LogWarn(context + collected.status().ToString());
}

Result<int> LibvirtHost::RemoveUnusedDisksLocked(const Conn& conn) {
  std::error_code ec;
  if (!fs::exists(DisksDir(), ec)) return 0;
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenDisksPool(conn.get()));
  if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("rescanning the disks");
  // Everything in use is known before anything is deleted: a partial picture deletes nothing.
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> used, DisksInUse(conn.get()));
  std::sort(used.begin(), used.end());
  virStorageVolPtr* vols = nullptr;
  int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
  if (n < 0) return LibvirtError("listing the disks");
  std::vector<StorageVolHandle> owned;
  for (int i = 0; i < n; ++i) owned.emplace_back(vols[i]);
  free(vols);  // NOLINT: allocated by libvirt
  int removed = 0;
  Status first;
  for (const StorageVolHandle& vol : owned) {
    LibvirtString path(virStorageVolGetPath(vol.get()));
    if (!path) continue;
    if (std::binary_search(used.begin(), used.end(), std::string(path.get()))) continue;
    if (virStorageVolDelete(vol.get(), 0) < 0) {
      if (first.ok()) first = LibvirtError(std::string("deleting unused disk ") + path.get());
      continue;
    }
    LogInfo("vmhost: deleted disk layer no vm uses: " + LogQuote(path.get()));
    ++removed;
  }
  if (!first.ok()) return first;
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
    std::string target = ElementTextOf(pxml.get(), "path");
    if (target.empty() || fs::exists(target, ec)) continue;
    if (virStoragePoolIsActive(p.get()) == 1 && virStoragePoolDestroy(p.get()) < 0) {
      virResetLastError();
    }
    if (virStoragePoolUndefine(p.get()) < 0) virResetLastError();
  }
  if (np < 0) virResetLastError();
  free(pools);  // NOLINT: allocated by libvirt
  // An empty pool is forgotten (it comes back with the next disk), so a host without VMs
  // leaves no pool behind.
  if (removed == n && virStoragePoolDestroy(pool.get()) < 0) virResetLastError();
  return removed;
}

void LibvirtHost::MaybeFlatten(virDomainPtr dom, std::string_view id) {
  if (!IsActive(dom)) return;
  Result<std::string> top = TopDisk(dom);
  if (!top.ok()) return;
  Result<std::vector<std::string>> chain = ChainOf(virDomainGetConnect(dom), *top);
  if (!chain.ok()) return;
  int layers = 0;
  std::string base;
  for (const std::string& p : *chain) {
    if (Under(p, options_.images_dir)) {
      base = p;
      break;
    }
    ++layers;
  }
  if (layers <= kMaxDiskLayers || base.empty()) return;
  // block-stream: QEMU copies what the layers between hold into the top while the guest
  // runs, then points the top at the image; the freed layers go at the next collection.
  if (virDomainBlockRebase(dom, "vda", base.c_str(), 0, 0) < 0) {
    LogWarn("vmhost: flattening the disk of vm " + std::string(id) + ": " +
            LibvirtError("block pull").ToString());
    return;
  }
  LogInfo("vmhost: flattening the disk of vm " + std::string(id) + " (" + std::to_string(layers) +
          " layers) onto its image");
}

Status LibvirtHost::DefineAndStart(const Conn& conn, const VmSpec& spec,
                                   const std::string& image_ref, const std::string& disk,
                                   Rollback& rollback) {
  WARREN_ASSIGN_OR_RETURN(GuestImage image, OpenGuestImage(options_.images_dir, image_ref));
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn, spec.id, /*build=*/true));
  SeedContents seed;
  seed.hostname = spec.name.empty() ? spec.id : spec.name;
  seed.authorized_keys = spec.authorized_keys;
  seed.env = spec.env;
  seed.setup_script = spec.setup_script;
  seed.ssh_host_key = spec.ssh_host_key;
  seed.ssh_host_key_pub = spec.ssh_host_key_pub;
  WARREN_ASSIGN_OR_RETURN(
      std::string seed_bytes,
      BuildSeedImage(seed, (fs::path(options_.data_dir) / "tmp").string(), options_.mkfs));
  std::string seed_xml = "<volume>\n  <name>seed.img</name>\n  <capacity unit='bytes'>" +
                         std::to_string(seed_bytes.size()) +
                         "</capacity>\n  <target>\n    <format type='raw'/>\n"
                         "    <permissions>\n      <mode>0600</mode>\n    </permissions>\n"
                         "  </target>\n</volume>\n";
  StorageVolHandle seed_vol(virStorageVolCreateXML(pool.get(), seed_xml.c_str(), 0));
  if (!seed_vol) return LibvirtError("creating the seed of vm " + spec.id);
  {
    StreamHandle st(virStreamNew(conn.get(), 0));
    if (!st) return LibvirtError("opening a stream");
    if (virStorageVolUpload(seed_vol.get(), st.get(), 0, seed_bytes.size(), 0) < 0) {
      return LibvirtError("uploading the seed of vm " + spec.id);
    }
    size_t off = 0;
    while (off < seed_bytes.size()) {
      int n = virStreamSend(st.get(), seed_bytes.data() + off,
                            std::min<size_t>(seed_bytes.size() - off, 256 * 1024));
      if (n < 0) return LibvirtError("uploading the seed of vm " + spec.id);
      off += static_cast<size_t>(n);
    }
    if (virStreamFinish(st.get()) < 0) return LibvirtError("uploading the seed of vm " + spec.id);
  }
  LibvirtString seed_path(virStorageVolGetPath(seed_vol.get()));
  if (!seed_path) return LibvirtError("reading volume paths");

  DomainConfig config;
  config.id = spec.id;
  config.prefix = options_.domain_prefix;
  config.name = seed.hostname;
  config.uuid = NewUuid();
  config.image = image.ref;
  config.kvm = options_.accel == Accel::kKvm;
  config.cpus = spec.cpus;
  config.memory_mib = spec.memory_mib;
  config.kernel = image.kernel;
  config.initrd = image.initrd;
  config.cmdline = image.cmdline;
  config.disk = disk;
  config.seed = seed_path.get();
  config.console_log = (fs::path(VmDir(spec.id)) / "console.log").string();
  config.control_socket = (fs::path(VmDir(spec.id)) / "control.sock").string();
  config.egress = spec.egress;
  std::string xml = DomainXml(config);

  // Shared with the undo step, which may run after this scope's handles are gone.
  std::shared_ptr<virDomain> dom(virDomainDefineXML(conn.get(), xml.c_str()), DomainDeleter());
  if (!dom) return LibvirtError("defining vm " + spec.id);
  rollback.Add([dom] {
    if (IsActive(dom.get())) virDomainDestroy(dom.get());
    Status st = Undefine(dom.get(), virDomainGetName(dom.get()));
    if (!st.ok()) LogWarn("cleaning up after a failed create: " + st.ToString());
  });
  return StartDomain(dom.get()).Annotate("vm " + spec.id);
}

Status LibvirtHost::Create(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  WARREN_ASSIGN_OR_RETURN(GuestImage image, OpenGuestImage(options_.images_dir, spec.image));
  if (spec.disk_gib * kGiB < image.rootfs_bytes) {
    return InvalidArgument("disk must be at least " +
                           std::to_string((image.rootfs_bytes + kGiB - 1) / kGiB) +
                           " GiB for image " + image.ref);
  }
  auto vm_lock = VmLock(spec.id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_RETURN_IF_ERROR(CheckCapacity(conn, spec.memory_mib, spec.disk_gib));
  Result<DomainHandle> existing = LookupDomain(conn, spec.id);
  if (existing.ok()) return Conflict("vm " + spec.id + " already exists");
  if (existing.status().code() != Code::kNotFound) return existing.status();
  std::lock_guard disks_guard(disks_mu_);

  // Files without a domain are what a Create cut short (warren died mid-way) leaves: no
  // VM uses them, and they would stand in the way.
  WARREN_RETURN_IF_ERROR(RemoveFiles(conn, spec.id));
  Rollback rollback;
  rollback.Add([this, conn, id = spec.id] { UndoNewVmFiles(conn, id, "create"); });
  WARREN_RETURN_IF_ERROR(EnsureDataDirs());
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle disks, OpenDisksPool(conn.get()));
  WARREN_ASSIGN_OR_RETURN(
      StorageVolHandle disk,
      NewOverlay(disks.get(), spec.id, image.rootfs, static_cast<uint64_t>(spec.disk_gib * kGiB)));
  std::shared_ptr<virStorageVol> disk_vol(disk.release(), StorageVolDeleter());
  rollback.Add([disk_vol] {
    if (virStorageVolDelete(disk_vol.get(), 0) < 0) {
      LogWarn("cleaning up after a failed create: " + LibvirtError("deleting a disk").ToString());
    }
  });
  LibvirtString disk_path(virStorageVolGetPath(disk_vol.get()));
  if (!disk_path) return LibvirtError("reading volume paths");
  WARREN_RETURN_IF_ERROR(DefineAndStart(conn, spec, spec.image, disk_path.get(), rollback));
  rollback.Commit();
  return Status::Ok();
}

Status LibvirtHost::Start(std::string_view id) {
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom.get()));
  if (state != VmState::kStopped && state != VmState::kCrashed) return WrongState("start", state);
  return StartDomain(dom.get());
}

Status LibvirtHost::Stop(std::string_view id) {
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom.get()));
  if (state == VmState::kStopped) return WrongState("stop", state);
  if (!IsActive(dom.get())) {  // crashed: its QEMU is already gone; it stays down now
    if (virDomainSetAutostart(dom.get(), 0) < 0) return LibvirtError("stopping a crashed vm");
    return Status::Ok();
  }
  if (state == VmState::kPaused && virDomainResume(dom.get()) < 0) {
    // A paused guest cannot hear the power button; without a resume it is powered off.
    LogDebug(LibvirtError("resuming before a stop").ToString());
  }
  WARREN_RETURN_IF_ERROR(ShutDown(dom.get()));
  if (virDomainSetAutostart(dom.get(), 0) < 0) {
    return LibvirtError("keeping vm " + std::string(id) + " stopped across restarts");
  }
  return Status::Ok();
}

Status LibvirtHost::Pause(std::string_view id) {
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom.get()));
  if (state != VmState::kRunning) return WrongState("pause", state);
  if (virDomainSuspend(dom.get()) < 0) return LibvirtError("pausing vm " + std::string(id));
  return Status::Ok();
}

Status LibvirtHost::Resume(std::string_view id) {
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom.get()));
  if (state != VmState::kPaused) return WrongState("resume", state);
  if (virDomainResume(dom.get()) < 0) return LibvirtError("resuming vm " + std::string(id));
  return Status::Ok();
}

Status LibvirtHost::Restart(std::string_view id) {
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom.get()));
  if (state != VmState::kRunning) return WrongState("restart", state);
  // A power cycle rather than a guest reboot: a fresh QEMU process, which also picks up a
  // changed definition (new name, resized memory).
  WARREN_RETURN_IF_ERROR(ShutDown(dom.get()));
  return StartDomain(dom.get());
}

Status LibvirtHost::Destroy(std::string_view id) {
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  if (IsActive(dom.get()) && virDomainDestroy(dom.get()) < 0 && IsActive(dom.get())) {
    return LibvirtError("powering off vm " + std::string(id));
  }
  WARREN_RETURN_IF_ERROR(Undefine(dom.get(), id));
  std::lock_guard disks_guard(disks_mu_);
  WARREN_RETURN_IF_ERROR(RemoveFiles(conn, id));
  // Its disk layers go unless a copy still stands on them.
  Result<int> collected = RemoveUnusedDisksLocked(conn);
  if (!collected.ok()) {
    LogWarn("vmhost: collecting unused disks after removing vm " + std::string(id) + ": " +
            collected.status().ToString());
  }
  return Status::Ok();
}

Status LibvirtHost::Rename(std::string_view id, std::string_view name) {
  WARREN_RETURN_IF_ERROR(ValidateVmName(name));
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  std::string image = ElementText(Metadata(dom.get(), kWarrenVmNamespace, 0), "image");
  unsigned int flags = VIR_DOMAIN_AFFECT_CONFIG;
  if (IsActive(dom.get())) flags |= VIR_DOMAIN_AFFECT_LIVE;
  std::string meta = UnprefixedVmMetadata(id, name, image);
  std::string name_str(name);
  if (virDomainSetMetadata(dom.get(), VIR_DOMAIN_METADATA_ELEMENT, meta.c_str(),
                           std::string(kWarrenVmPrefix).c_str(),
                           std::string(kWarrenVmNamespace).c_str(), flags) < 0 ||
      virDomainSetMetadata(dom.get(), VIR_DOMAIN_METADATA_TITLE, name_str.c_str(), nullptr, nullptr,
                           flags) < 0) {
    return LibvirtError("renaming vm " + std::string(id));
  }
  // The guest learns its hostname from the kernel command line: rewrite it in the
  // persistent definition so the next boot carries the new name.
  LibvirtString xml(virDomainGetXMLDesc(dom.get(), VIR_DOMAIN_XML_INACTIVE));
  if (!xml) return LibvirtError("reading the definition of vm " + std::string(id));
  std::string def = xml.get();
  size_t cmd = def.find("<cmdline>");
  size_t end = def.find("</cmdline>");
  size_t host = def.find("warren.hostname=", cmd);
  if (cmd != std::string::npos && end != std::string::npos && host != std::string::npos &&
      host < end) {
    host += std::strlen("warren.hostname=");
    size_t stop = def.find_first_of(" <", host);
    def.replace(host, stop - host, name_str);  // a validated hostname: nothing to escape
    DomainHandle redefined(virDomainDefineXML(conn.get(), def.c_str()));
    if (!redefined) return LibvirtError("redefining vm " + std::string(id));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> LibvirtHost::DiskChain(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  WARREN_ASSIGN_OR_RETURN(std::string top, TopDisk(dom.get()));
  return ChainOf(conn.get(), top);
}

Status LibvirtHost::Copy(std::string_view source_id, const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  if (spec.id == source_id) return InvalidArgument("a vm cannot be copied onto itself");
  // Both VMs' locks, always in the same order, then the disks: no rm, resize or second
  // copy of either runs meanwhile, and no collection sees the new files half-way.
  auto first_lock = VmLock(std::min<std::string_view>(source_id, spec.id));
  auto second_lock = VmLock(std::max<std::string_view>(source_id, spec.id));
  std::lock_guard first_guard(*first_lock);
  std::lock_guard second_guard(*second_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle src, LookupDomain(conn, source_id));
  Result<DomainHandle> existing = LookupDomain(conn, spec.id);
  if (existing.ok()) return Conflict("vm " + spec.id + " already exists");
  if (existing.status().code() != Code::kNotFound) return existing.status();
  std::string image = ElementText(Metadata(src.get(), kWarrenVmNamespace, 0), "image");
  if (image.empty()) image = spec.image;
  virDomainBlockInfo bi{};
  if (virDomainGetBlockInfo(src.get(), "vda", &bi, 0) < 0) {
    return LibvirtError("sizing the disk of vm " + std::string(source_id));
  }
  const uint64_t capacity = bi.capacity;
  WARREN_RETURN_IF_ERROR(
      CheckCapacity(conn, spec.memory_mib, static_cast<int64_t>((capacity + kGiB - 1) / kGiB)));
  const bool live = IsActive(src.get());
  if (live) {
    virDomainBlockJobInfo job{};
    int busy = virDomainGetBlockJobInfo(src.get(), "vda", &job, 0);
    if (busy < 0) virResetLastError();
    if (busy > 0) {
      return Conflict("the disk of vm " + std::string(source_id) +
                      " is being flattened; copy it again in a minute");
    }
  }
  std::lock_guard disks_guard(disks_mu_);

  WARREN_RETURN_IF_ERROR(RemoveFiles(conn, spec.id));
  Rollback rollback;
  rollback.Add([this, conn, id = spec.id] { UndoNewVmFiles(conn, id, "copy"); });
  WARREN_RETURN_IF_ERROR(EnsureDataDirs());
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle disks, OpenDisksPool(conn.get()));
  WARREN_ASSIGN_OR_RETURN(std::string frozen, TopDisk(src.get()));
  // The source's current top becomes read-only from here on: both VMs write to their own
  // fresh overlay over it.
  auto overlay = [&](std::string_view owner) -> Result<std::shared_ptr<virStorageVol>> {
    WARREN_ASSIGN_OR_RETURN(StorageVolHandle v, NewOverlay(disks.get(), owner, frozen, capacity));
    std::shared_ptr<virStorageVol> vol(v.release(), StorageVolDeleter());
    return vol;
  };
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<virStorageVol> src_top, overlay(source_id));
  auto src_top_kept = std::make_shared<bool>(false);
  rollback.Add([src_top, src_top_kept] {
    if (!*src_top_kept && virStorageVolDelete(src_top.get(), 0) < 0) {
      LogWarn("cleaning up after a failed copy: " + LibvirtError("deleting a disk").ToString());
    }
  });
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<virStorageVol> copy_top, overlay(spec.id));
  rollback.Add([copy_top] {
    if (virStorageVolDelete(copy_top.get(), 0) < 0) {
      LogWarn("cleaning up after a failed copy: " + LibvirtError("deleting a disk").ToString());
    }
  });
  LibvirtString src_top_path(virStorageVolGetPath(src_top.get()));
  LibvirtString copy_top_path(virStorageVolGetPath(copy_top.get()));
  if (!src_top_path || !copy_top_path) return LibvirtError("reading volume paths");

  if (live) {
    // One atomic disk-only snapshot: QEMU switches the running source onto the overlay we
    // made (REUSE_EXT: its header already names `frozen` as backing), libvirt updates both
    // the live and the persistent definition, and keeps no snapshot metadata.
    std::string xml =
        "<domainsnapshot>\n  <disks>\n    <disk name='vda' snapshot='external' "
        "type='file'>\n      <driver type='qcow2'/>\n      <source file='" +
        XmlEscape(src_top_path.get()) +
        "'/>\n    </disk>\n    <disk name='vdb' snapshot='no'/>\n  </disks>\n"
        "</domainsnapshot>\n";
    const unsigned int flags =
        VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY | VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA |
        VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC | VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT;
    virDomainSnapshotPtr snap = virDomainSnapshotCreateXML(src.get(), xml.c_str(), flags);
    if (snap == nullptr)
      return LibvirtError("snapshotting the disk of vm " + std::string(source_id));
    virDomainSnapshotFree(snap);
  } else {
    // Stopped: nothing writes the top now, so pointing the definition at the new overlay is
    // the whole fork.
    LibvirtString def(virDomainGetXMLDesc(src.get(), VIR_DOMAIN_XML_INACTIVE));
    if (!def) return LibvirtError("reading the definition of vm " + std::string(source_id));
    std::string x = def.get();
    std::string from = "<source file='" + XmlEscape(frozen) + "'";
    size_t at = x.find(from);
    if (at == std::string::npos) return Internal("vm " + std::string(source_id) + " has no disk");
    x.replace(at, from.size(), "<source file='" + XmlEscape(src_top_path.get()) + "'");
    DomainHandle redefined(virDomainDefineXML(conn.get(), x.c_str()));
    if (!redefined) return LibvirtError("redefining vm " + std::string(source_id));
  }
  *src_top_kept = true;  // the source runs on it now, whatever happens to the copy

  VmSpec copy = spec;
  copy.image = image;
  if (copy.ssh_host_key.empty()) {
    // The disk carries the source's host key: the copy gets its own, through its seed.
    WARREN_ASSIGN_OR_RETURN(auto key, NewHostKey((fs::path(options_.data_dir) / "tmp").string()));
    copy.ssh_host_key = std::move(key.first);
    copy.ssh_host_key_pub = std::move(key.second);
  }
  WARREN_RETURN_IF_ERROR(DefineAndStart(conn, copy, image, copy_top_path.get(), rollback));
  rollback.Commit();
  MaybeFlatten(src.get(), source_id);
  return Status::Ok();
}

Result<ResizeOutcome> LibvirtHost::Resize(std::string_view id, const ResizeSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateResizeSpec(spec));
  auto vm_lock = VmLock(id);
  std::lock_guard guard(*vm_lock);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  LibvirtString def(virDomainGetXMLDesc(dom.get(), VIR_DOMAIN_XML_INACTIVE));
  if (!def) return LibvirtError("reading the definition of vm " + std::string(id));
  std::string x = def.get();
  virDomainBlockInfo bi{};
  if (virDomainGetBlockInfo(dom.get(), "vda", &bi, 0) < 0) {
    return LibvirtError("sizing the disk of vm " + std::string(id));
  }
  virDomainInfo di{};
  if (virDomainGetInfo(dom.get(), &di) < 0) return LibvirtError("reading vm " + std::string(id));
  const bool live = IsActive(dom.get());
  // The definition's values: what the next boot gets.
  const int64_t config_memory_mib =
      std::strtoll(ElementTextOf(x, "memory").c_str(), nullptr, 10) / 1024;  // libvirt writes KiB
  const uint64_t new_bytes = static_cast<uint64_t>(spec.disk_gib) * kGiB;

  // Every check before any change.
  if (spec.disk_gib != 0 && new_bytes < bi.capacity) {
    return InvalidArgument("the disk only grows: it is " +
                           std::to_string((bi.capacity + kGiB - 1) / kGiB) + " GiB now");
  }
  const bool grow = spec.disk_gib != 0 && new_bytes > bi.capacity;
  const int64_t more_memory =
      spec.memory_mib > config_memory_mib ? spec.memory_mib - config_memory_mib : 0;
  const int64_t more_disk =
      grow ? static_cast<int64_t>((new_bytes - bi.capacity + kGiB - 1) / kGiB) : 0;
  WARREN_RETURN_IF_ERROR(CheckCapacity(conn, more_memory, more_disk));

  ResizeOutcome out;
  if (grow) {
    if (live) {
      // The guest sees the bigger device at once (virtio-blk reports the new capacity);
      // its file system is grown by whoever can run commands in it.
      if (virDomainBlockResize(dom.get(), "vda", new_bytes, VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0) {
        return LibvirtError("growing the disk of vm " + std::string(id));
      }
    } else {
      WARREN_ASSIGN_OR_RETURN(std::string top, TopDisk(dom.get()));
      StorageVolHandle vol(virStorageVolLookupByPath(conn.get(), top.c_str()));
      if (!vol) return LibvirtError("finding the disk of vm " + std::string(id));
      if (virStorageVolResize(vol.get(), new_bytes, 0) < 0) {
        return LibvirtError("growing the disk of vm " + std::string(id));
      }
    }
    out.disk_grown = true;
  }
  bool redefine = false;
  if (spec.cpus != 0) {
    const std::string vcpus = std::to_string(spec.cpus);
    if (ElementTextOf(x, "vcpu") != vcpus) {
      if (!ReplaceElementText(x, "vcpu", vcpus)) return Internal("vm has no <vcpu>");
      redefine = true;
    }
    if (live && static_cast<int>(di.nrVirtCpu) != spec.cpus) out.restart_needed = true;
  }
  if (spec.memory_mib != 0) {
    // In KiB, as libvirt writes it back: unit attributes stay 'KiB'.
    const std::string kib = std::to_string(spec.memory_mib * 1024);
    if (spec.memory_mib != config_memory_mib) {
      if (!ReplaceElementText(x, "memory", kib) || !ReplaceElementText(x, "currentMemory", kib)) {
        return Internal("vm has no <memory>");
      }
      redefine = true;
    }
    if (live && static_cast<int64_t>(di.maxMem / 1024) != spec.memory_mib) {
      out.restart_needed = true;
    }
  }
  if (redefine) {
    // The persistent definition only: a running VM keeps its CPUs and memory until its next
    // start (its definition has no room for hotplug).
    DomainHandle redefined(virDomainDefineXML(conn.get(), x.c_str()));
    if (!redefined) return LibvirtError("redefining vm " + std::string(id));
  }
  return out;
}

Result<VmInfo> LibvirtHost::Inspect(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
  return InfoOf(dom.get(), id);
}

Result<std::vector<VmInfo>> LibvirtHost::List() {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn.get(), &doms, 0);
  if (n < 0) return LibvirtError("listing vms");
  std::vector<DomainHandle> owned;
  for (int i = 0; i < n; ++i) owned.emplace_back(doms[i]);
  free(doms);  // NOLINT: allocated by libvirt
  std::vector<VmInfo> out;
  for (const DomainHandle& dom : owned) {
    const char* name = virDomainGetName(dom.get());
    if (name == nullptr) continue;
    std::string_view sv(name);
    const std::string& prefix = options_.domain_prefix;
    if (sv.size() <= prefix.size() || sv.substr(0, prefix.size()) != prefix) continue;
    // Another warren on the same libvirtd (its own data directory) names its domains the
    // same way: only domains whose files live in this data directory are this host's, so
    // reconcile never takes a neighbour's VMs for orphans.
    LibvirtString def(virDomainGetXMLDesc(dom.get(), VIR_DOMAIN_XML_INACTIVE));
    if (!def) {
      virResetLastError();
      continue;  // undefined while we listed
    }
    // A file path under our data dir, as an attribute value or an element's text.
    std::string root = options_.data_dir;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    const std::string dir = XmlEscape(root) + "/";
    const std::string_view xml(def.get());
    bool ours = false;
    for (size_t at = xml.find(dir); at != std::string_view::npos && !ours;
         at = xml.find(dir, at + 1)) {
      ours = at > 0 && (xml[at - 1] == '\'' || xml[at - 1] == '"' || xml[at - 1] == '>');
    }
    if (!ours) continue;
    Result<VmInfo> info = InfoOf(dom.get(), sv.substr(prefix.size()));
    // A VM destroyed while we listed is simply not there any more.
    if (!info.ok() && info.status().code() == Code::kNotFound) continue;
    if (!info.ok()) return info.status();
    out.push_back(std::move(info).value());
  }
  std::sort(out.begin(), out.end(), [](const VmInfo& a, const VmInfo& b) { return a.id < b.id; });
  return out;
}

Result<std::string> LibvirtHost::Console(std::string_view id, int max_lines) {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_ASSIGN_OR_RETURN(DomainHandle dom, LookupDomain(conn, id));
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
  StreamHandle st(virStreamNew(conn.get(), 0));
  if (!st) return LibvirtError("opening a stream");
  if (virStorageVolDownload(vol.get(), st.get(), size - length, length, 0) < 0) {
    return LibvirtError("reading the console log");
  }
  std::string data;
  char buf[64 * 1024];
  while (static_cast<int64_t>(data.size()) < length) {
    int n = virStreamRecv(st.get(), buf, sizeof(buf));
    if (n < 0) return LibvirtError("reading the console log");
    if (n == 0) break;
    data.append(buf, std::min<size_t>(n, length - data.size()));
  }
  if (virStreamFinish(st.get()) < 0) virResetLastError();
  return LastLines(data, max_lines, /*cut_at_start=*/size > length);
}

namespace {

// Any image's kernel will do for the probe; the newest is the likeliest to be used.
std::string AnyImageKernel(const std::string& images_dir) {
  std::error_code ec;
  std::string best;
  for (const auto& entry : fs::directory_iterator(images_dir, ec)) {
    std::string base = entry.path().filename();
    if (base.find('@') == std::string::npos || base.front() == '.') continue;
    if (!fs::exists(entry.path() / "vmlinuz", ec)) continue;
    if (best.empty() || fs::last_write_time(entry.path(), ec) >
                            fs::last_write_time(fs::path(images_dir) / best, ec)) {
      best = base;
    }
  }
  return best.empty() ? "" : (fs::path(images_dir) / best / "vmlinuz").string();
}

}  // namespace

Result<std::unique_ptr<LibvirtHost>> StartLibvirtHost(LibvirtHostOptions options,
                                                      std::string_view force_accel) {
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
  return std::make_unique<LibvirtHost>(std::move(options), std::move(conn));
}

}  // namespace warren
