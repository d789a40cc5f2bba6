// LibvirtHost's templates (libvirt_host.h has the layout): a running VM saved with its memory
// (virDomainSaveFlags), and clones restored from it under a new identity by rewriting the
// domain XML in the save file's header (save_image.h) and feeding the result to libvirt
// through a FIFO, so the template's memory stream is read once and never copied.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lobby/base/clock.h"
#include "lobby/base/file_write.h"
#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest/identity.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/random_names.h"
#include "vmhost/save_image.h"
#include "vmhost/seed_image.h"
#include "vmhost/template_file.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

using libvirt_ops::CapEmulatorThreads;
using libvirt_ops::InactiveDefinition;
using libvirt_ops::IsActive;
using libvirt_ops::NewLayer;
using libvirt_ops::NewLayerUndoneOnRollback;
using libvirt_ops::RecordStart;
using libvirt_ops::RequireState;
using libvirt_ops::StateOf;
using libvirt_ops::Undefine;
using libvirt_ops::VdaCapacity;
using libvirt_ops::VmMetadataOf;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr char kTemplateFile[] = "template.json";
constexpr char kMemoryFile[] = "memory.save";
// Directories of templates being written or replaced start with a dot: never read as
// templates, removed by the next collection (a crash mid-way leaves only those).
constexpr char kNewPrefix[] = ".new-";
constexpr char kOldPrefix[] = ".old-";
// How long a restore waits for libvirt to open the FIFO before it gives up on feeding it.
constexpr auto kFifoOpenPoll = std::chrono::milliseconds(2);

// An open file descriptor, closed when this goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

// NotFound when the directory holds no template; Internal when its file is unreadable.
Result<TemplateFile> ReadTemplate(const fs::path& dir) {
  std::ifstream in(dir / kTemplateFile);
  if (!in) return NotFound("no template in " + dir.string());
  std::stringstream text;
  text << in.rdbuf();
  return DecodeTemplateFile(text.str(), (dir / kTemplateFile).string());
}

// Feeds the rewritten save image into `fifo` once libvirt opens it for reading. Gives up
// (Cancelled) when `stop` is set before a reader came.
Status FeedFifo(const std::string& fifo, int memory_fd, bool bare_stream,
                const SaveImageHeader& header, const std::atomic<bool>& stop,
                StreamCopyStats* stats) {
  int fd = -1;
  while (true) {
    // Non-blocking: an open for writing fails with ENXIO until a reader has it open, so a
    // libvirt that fails before reading never leaves this thread stuck in open(2).
    fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) break;
    if (errno != ENXIO && errno != EINTR) {
      return Internal("opening " + fifo + ": " + std::strerror(errno));
    }
    if (stop.load()) return Cancelled("libvirt never read the restore image");
    std::this_thread::sleep_for(kFifoOpenPoll);
  }
  Fd out(fd);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    return Internal("setting " + fifo + " blocking: " + std::strerror(errno));
  }
  if (bare_stream) return WriteStreamAsSave(header, memory_fd, out.get(), stats);
  return WriteRewrittenSave(memory_fd, header, out.get(), stats);
}

int64_t MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

}  // namespace

std::string LibvirtHost::TemplatesDir() const {
  return (fs::path(options_.data_dir) / "templates").string();
}

Result<std::vector<std::string>> LibvirtHost::TemplateBases(virConnectPtr conn) {
  std::vector<std::string> bases;
  if (remote_) {
    WARREN_ASSIGN_OR_RETURN(RemoteTemplates all, ListRemoteTemplates(conn));
    for (const RemoteTemplate& t : all.current) bases.push_back(t.file.base);
    return bases;
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(TemplatesDir(), ec)) {
    if (entry.path().filename().string().starts_with(".")) continue;
    Result<TemplateFile> t = ReadTemplate(entry.path());
    if (t.ok()) bases.push_back(t->base);
  }
  return bases;
}

void LibvirtHost::RemoveTemplateLeftovers() {
  if (remote_) return;  // a remote host makes none
  std::error_code ec;
  // A restore's FIFO, or a live copy's memory, outlives it only when warren died mid-way
  // (both hold the chains' lock, as the caller does). So does a seed's or host key's scratch,
  // made without that lock: only another process's goes.
  for (const auto& entry : fs::directory_iterator(fs::path(options_.data_dir) / "tmp", ec)) {
    const std::string name = entry.path().filename().string();
    if ((name.starts_with("restore-") && name.ends_with(".fifo")) ||
        (name.starts_with("live-") && name.ends_with(".save"))) {
      fs::remove(entry.path(), ec);
    }
    if (IsScratchOfAnotherProcess(name)) fs::remove_all(entry.path(), ec);
  }
  for (const auto& entry : fs::directory_iterator(TemplatesDir(), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kNewPrefix) && !name.starts_with(kOldPrefix)) continue;
    fs::remove_all(entry.path(), ec);
    if (ec) {
      LogWarn("vmhost: removing " + LogQuote(entry.path().string()) + ": " + ec.message());
    } else {
      LogInfo("vmhost: removed an unfinished template " + LogQuote(entry.path().string()));
    }
  }
}

Result<TemplateFile> LibvirtHost::TemplateOf(virDomainPtr dom, std::string_view id,
                                             std::string_view tag) {
  WARREN_RETURN_IF_ERROR(RequireState(dom, {VmState::kRunning}, "save as a template"));
  TemplateFile t;
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, InactiveDefinition(dom, id));
  t.info.shape.image = VmMetadataOf(dom).image;
  t.info.shape.cpus = def.Vcpus();
  t.info.shape.memory_mib = def.MemoryMib();
  WARREN_ASSIGN_OR_RETURN(uint64_t capacity, VdaCapacity(dom, id));
  t.info.shape.disk_gib = static_cast<int64_t>(capacity / kGiB);
  t.info.shape.egress = def.InterfaceXmls("user").empty() ? Egress::kNone : Egress::kAll;
  t.info.tag = std::string(tag);
  WARREN_ASSIGN_OR_RETURN(t.base, DiskChains::TopOf(dom));
  return t;
}

void LibvirtHost::RemoveTemplateVm(const OpenVm& vm, std::string_view id) {
  virDomainPtr dom = vm.dom.get();
  if (IsActive(dom) && virDomainDestroy(dom) < 0) virResetLastError();
  Status st = Undefine(dom, id);
  if (!st.ok()) LogWarn("vmhost: removing template vm " + std::string(id) + ": " + st.ToString());
  st = RemoveFiles(vm.conn, id);
  if (!st.ok()) LogWarn("vmhost: removing template vm " + std::string(id) + ": " + st.ToString());
}

Status LibvirtHost::SaveTemplate(std::string_view id, std::string_view tag) {
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(id));
  virDomainPtr dom = vm.dom.get();
  WARREN_ASSIGN_OR_RETURN(TemplateFile t, TemplateOf(dom, id, tag));
  if (remote_) return SaveRemoteTemplate(vm, id, std::move(t));
  const std::string key = VmShapeKey(t.info.shape);

  DiskChains::Lock disks = chains_.Acquire();
  // Whatever happens from here on, the VM goes: saved, it is the template; not saved, it
  // was only ever meant to become one.
  auto remove_vm = [&] { RemoveTemplateVm(vm, id); };
  std::error_code ec;
  fs::create_directories(TemplatesDir(), ec);
  fs::permissions(TemplatesDir(), fs::perms::owner_all, fs::perm_options::replace, ec);
  const fs::path fresh = fs::path(TemplatesDir()) / (kNewPrefix + RandomHex(8));
  if (!fs::create_directory(fresh, ec)) {
    remove_vm();
    return Internal("creating " + fresh.string() + ": " + ec.message());
  }
  auto fail = [&](Status st) {
    remove_vm();
    fs::remove_all(fresh, ec);
    Result<int> collected = RemoveUnusedDisksLocked(vm.conn, disks);
    if (!collected.ok()) LogWarn("vmhost: " + collected.status().ToString());
    return st;
  };
  const auto t0 = std::chrono::steady_clock::now();
  const std::string memory = (fresh / kMemoryFile).string();
  // Saved as it runs; a clone resumes running. libvirt pauses the guest, streams its memory
  // and device state to the file, and stops the domain: on QEMU's own threads, uncapped.
  if (Status st = CapEmulatorThreads(dom, id, /*capped=*/false); !st.ok()) {
    LogWarn("vmhost: " + st.ToString());
  }
  if (virDomainSaveFlags(dom, memory.c_str(), nullptr, VIR_DOMAIN_SAVE_RUNNING) < 0) {
    return fail(LibvirtError("saving vm " + std::string(id) + " as a template"));
  }
  const int64_t save_ms = MillisSince(t0);
  // The header must be one a restore here can rewrite: checked now, not at the first `new`.
  {
    Fd fd(::open(memory.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return fail(Internal("opening " + memory + ": " + std::strerror(errno)));
    Result<SaveImageHeader> header = ReadSaveImageHeader(fd.get());
    if (!header.ok()) return fail(header.status().Annotate("the saved template"));
  }
  t.info.saved_at = SystemClock::Get().NowUnix();
  t.info.bytes = static_cast<int64_t>(fs::file_size(memory, ec));
  // The base is read-only from now on: clones stand on it.
  fs::permissions(t.base, fs::perms::owner_read, fs::perm_options::replace, ec);
  if (Status st = WriteFileAtomic((fresh / kTemplateFile).string(), EncodeTemplateFile(t), 0600);
      !st.ok()) {
    return fail(st);
  }
  // The domain is gone; its disk top stays as the base (pinned once the directory is in
  // place, and no collection runs meanwhile: the chains' lock is held).
  remove_vm();
  const fs::path final_dir = fs::path(TemplatesDir()) / key;
  const fs::path old = fs::path(TemplatesDir()) / (kOldPrefix + RandomHex(8));
  const bool replacing = fs::exists(final_dir, ec);
  if (replacing) fs::rename(final_dir, old, ec);
  if (!ec) fs::rename(fresh, final_dir, ec);
  if (ec) {
    Status st = Internal("putting template " + key + " in place: " + ec.message());
    fs::remove_all(fresh, ec);
    return st;
  }
  if (replacing) fs::remove_all(old, ec);
  // An older template's base goes unless clones stand on it.
  Result<int> collected = RemoveUnusedDisksLocked(vm.conn, disks);
  if (!collected.ok()) LogWarn("vmhost: " + collected.status().ToString());
  LogInfo("vmhost: template " + key + " saved from vm " + std::string(id) + " tag=" + t.info.tag +
          " bytes=" + std::to_string(t.info.bytes) + " save_ms=" + std::to_string(save_ms));
  return Status::Ok();
}

Result<std::vector<TemplateInfo>> LibvirtHost::Templates() {
  std::vector<TemplateInfo> out;
  if (remote_) {
    WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
    WARREN_ASSIGN_OR_RETURN(RemoteTemplates all, ListRemoteTemplates(conn.get()));
    for (const RemoteTemplate& t : all.current) out.push_back(t.file.info);
    return out;
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(TemplatesDir(), ec)) {
    if (entry.path().filename().string().starts_with(".")) continue;
    Result<TemplateFile> t = ReadTemplate(entry.path());
    if (!t.ok()) {
      LogWarn("vmhost: " + t.status().ToString());
      continue;
    }
    out.push_back(t->info);
  }
  return out;
}

Status LibvirtHost::RemoveTemplate(const VmShape& shape) {
  if (remote_) return RemoveRemoteTemplate(shape);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  DiskChains::Lock disks = chains_.Acquire();
  const fs::path dir = fs::path(TemplatesDir()) / VmShapeKey(shape);
  std::error_code ec;
  if (!fs::exists(dir / kTemplateFile, ec)) {
    return NotFound("no template of shape " + VmShapeKey(shape));
  }
  // Out of sight first (a rename), then gone; its base goes with the collection unless clones
  // stand on it.
  const fs::path old = fs::path(TemplatesDir()) / (kOldPrefix + RandomHex(8));
  fs::rename(dir, old, ec);
  if (ec) return Internal("removing template " + VmShapeKey(shape) + ": " + ec.message());
  fs::remove_all(old, ec);
  Result<int> collected = RemoveUnusedDisksLocked(conn, disks);
  if (!collected.ok()) return collected.status();
  return Status::Ok();
}

Result<RestoredVm> LibvirtHost::CreateFromTemplate(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  const auto t0 = std::chrono::steady_clock::now();
  const VmShape shape = ShapeOf(spec);
  if (remote_) return CreateFromRemoteTemplate(spec, t0);
  const fs::path dir = fs::path(TemplatesDir()) / VmShapeKey(shape);
  Result<TemplateFile> t = ReadTemplate(dir);
  if (!t.ok()) {
    if (t.status().code() == Code::kNotFound) {
      return NotFound("no template of shape " + VmShapeKey(shape));
    }
    return Unavailable(t.status().message());
  }
  if (!(t->info.shape == shape)) return NotFound("no template of shape " + VmShapeKey(shape));
  // The save image must be one this host can rewrite; anything else is a boot instead.
  const std::string memory = (dir / kMemoryFile).string();
  Fd memory_fd(::open(memory.c_str(), O_RDONLY | O_CLOEXEC));
  if (!memory_fd) return Unavailable("opening " + memory + ": " + std::strerror(errno));
  Result<SaveImageHeader> header = ReadSaveImageHeader(memory_fd.get());
  if (!header.ok()) {
    return Unavailable("template " + VmShapeKey(shape) + ": " + header.status().message());
  }
  WARREN_ASSIGN_OR_RETURN(GuestImage image, OpenGuestImage(options_.images_dir, spec.image));
  if (qemu_user().known()) WARREN_RETURN_IF_ERROR(LetQemuReadImage(image));
  return RestoreClone(spec, *t, *header, image, RestoreSource{memory_fd.get(), ""}, t0);
}

Result<RestoredVm> LibvirtHost::RestoreClone(const VmSpec& spec, const TemplateFile& t,
                                             const SaveImageHeader& header, const GuestImage& image,
                                             const RestoreSource& source,
                                             std::chrono::steady_clock::time_point t0) {
  const std::string key = VmShapeKey(t.info.shape);
  Result<DomainDefinition> def = DomainDefinition::Parse(header.domain_xml);
  if (!def.ok()) return Unavailable("template " + key + ": " + def.status().message());
  WARREN_ASSIGN_OR_RETURN(std::unique_ptr<NewVm> made, BeginNewVm(spec, "restore"));
  const int64_t begun_ms = MillisSince(t0);
  const Conn& conn = made->conn;
  const QemuUser& qemu = made->qemu;
  Rollback& rollback = made->rollback;
  WARREN_ASSIGN_OR_RETURN(
      NewLayer disk, NewLayerUndoneOnRollback(chains_, *made->disks, conn.get(), spec.id, t.base,
                                              static_cast<uint64_t>(spec.disk_gib * kGiB), qemu,
                                              "restore", rollback));
  // The disk carries the template's host key: the clone gets its own, through its seed.
  VmSpec own = spec;
  WARREN_RETURN_IF_ERROR(EnsureSshHostKey(own.ssh_host_key, own.ssh_host_key_pub, ScratchDir()));
  const int64_t disk_ms = MillisSince(t0);
  WARREN_ASSIGN_OR_RETURN(std::string seed, MakeSeed(conn, own, qemu));
  const int64_t seed_ms = MillisSince(t0);

  // The clone's domain: the template's saved definition (its devices, addresses and state
  // must match the memory stream) under the VM's own name, UUID, files and MAC.
  DomainConfig config = ConfigFor(spec, image, disk.path, seed, qemu);
  if (spec.egress == Egress::kAll) {
    WARREN_ASSIGN_OR_RETURN(config.mac, NewGuestMac());
  }
  const bool identity_port = !def->ChannelSocket(kIdentityChannelName).empty();
  WARREN_ASSIGN_OR_RETURN(const int64_t restore_ms,
                          RestoreAsNewDomain(conn, config, std::move(def).value(), header, source,
                                             "from template " + key, rollback));
  rollback.Commit();
  RestoredVm r;
  r.mac = config.mac;
  r.host_key_pub = own.ssh_host_key_pub;
  r.host_key = own.ssh_host_key;
  r.seed_has_more = SeedHasMoreThanIdentity(own);
  r.identity_port = identity_port;
  r.restore_ms = MillisSince(t0);
  LogInfo("vmhost: vm " + spec.id + " restored from template " + key + " in " +
          std::to_string(r.restore_ms) + " ms (begun " + std::to_string(begun_ms) + ", disk " +
          std::to_string(disk_ms) + ", seed " + std::to_string(seed_ms) + ", the restore " +
          std::to_string(restore_ms) + ")" + (remote_ ? " on " + options_.uri : ""));
  return r;
}

Status LibvirtHost::RestoreThroughFifo(const Conn& conn, const std::string& id,
                                       const SaveImageHeader& rewritten,
                                       const RestoreSource& source, const std::string& restoring) {
  const fs::path tmp = fs::path(options_.data_dir) / "tmp";
  std::error_code ec;
  fs::create_directories(tmp, ec);
  const std::string fifo = (tmp / ("restore-" + id + ".fifo")).string();
  fs::remove(fifo, ec);
  if (::mkfifo(fifo.c_str(), 0600) < 0) {
    return Internal("making " + fifo + ": " + std::strerror(errno));
  }
  std::atomic<bool> stop{false};
  Status fed;
  StreamCopyStats stats;
  std::thread feeder(
      [&] { fed = FeedFifo(fifo, source.memory_fd, source.bare_stream, rewritten, stop, &stats); });
  const int rc = virDomainRestoreFlags(conn.get(), fifo.c_str(), nullptr, VIR_DOMAIN_SAVE_RUNNING);
  Status restored = rc < 0 ? LibvirtError(restoring) : Status::Ok();
  stop = true;
  feeder.join();
  fs::remove(fifo, ec);
  if (!stats.whole_because.empty()) {
    // Slower (QEMU reads every zero page), not wrong: a QEMU other than the one parsed for.
    LogWarn("vmhost: vm " + id +
            ": its memory stream went whole, zero pages and all: " + stats.whole_because);
  }
  if (restored.ok() && fed.ok()) return Status::Ok();
  std::string why = !restored.ok() ? restored.message() : fed.message();
  if (!restored.ok() && !fed.ok() && fed.code() != Code::kCancelled) {
    why += " (feeding it: " + fed.message() + ")";
  }
  return Unavailable(why);
}

Result<int64_t> LibvirtHost::RestoreAsNewDomain(const Conn& conn, const DomainConfig& config,
                                                DomainDefinition def, const SaveImageHeader& header,
                                                const RestoreSource& source, std::string_view what,
                                                Rollback& rollback) {
  const std::string& id = config.id;
  WARREN_RETURN_IF_ERROR(def.SetName(config.prefix + config.id));
  WARREN_RETURN_IF_ERROR(def.SetUuid(config.uuid));
  def.SetTitle(config.name);
  WARREN_RETURN_IF_ERROR(def.SetVmMetadata(config.id, config.name, config.image));
  // The saved domain's run (its start time) is not this one's: RecordStart writes its own.
  def.RemoveMetadata(kWarrenRunNamespace);
  WARREN_RETURN_IF_ERROR(def.SetDiskSource("vda", config.disk));
  WARREN_RETURN_IF_ERROR(def.SetDiskSource("vdb", config.seed));
  WARREN_RETURN_IF_ERROR(def.SetConsoleLog(config.console_log));
  WARREN_RETURN_IF_ERROR(def.SetChannelSocket(kControlChannelName, config.control_socket));
  // A domain defined before the identity port had none: the identity then goes over SSH.
  if (!def.ChannelSocket(kIdentityChannelName).empty()) {
    WARREN_RETURN_IF_ERROR(def.SetChannelSocket(kIdentityChannelName, config.identity_socket));
  }
  if (!config.mac.empty()) WARREN_RETURN_IF_ERROR(def.SetInterfaceMacs({config.mac}));
  // What the running guest's /proc/cmdline says is the saved domain's either way (the
  // identity step ignores it); the definition says this one's.
  def.SetCmdlineHostname(config.name);
  // A <genid> (QEMU's vmgenid device) must stay: removing it fails the restore. warren's
  // domains have none, and libvirt draws a new one at each restore anyway.
  // Restored uncapped (QEMU's threads load the memory stream), capped once running.
  def.RemoveEmulatorQuota();
  SaveImageHeader rewritten = header;
  rewritten.domain_xml = def.ToXml();

  NoteOwnDomain(id);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string restoring = "restoring vm " + id + " " + std::string(what);
  Status restored = source.remote_save.empty()
                        ? RestoreThroughFifo(conn, id, rewritten, source, restoring)
                        : RestoreOnRemoteHost(conn, id, rewritten, source, restoring);
  const int64_t restore_ms = MillisSince(t0);
  // A restore cut short may still have left a domain (transient) behind.
  Result<DomainHandle> found = LookupDomain(conn, id);
  std::shared_ptr<virDomain> dom;
  if (found.ok()) {
    dom = std::shared_ptr<virDomain>(std::move(found).value());
    rollback.Add([dom] {
      if (IsActive(dom.get())) virDomainDestroy(dom.get());
      if (virDomainIsPersistent(dom.get()) == 1) {
        Status st = Undefine(dom.get(), virDomainGetName(dom.get()));
        if (!st.ok()) LogWarn("cleaning up after a failed restore: " + st.ToString());
      }
      virResetLastError();
    });
  }
  if (!restored.ok()) return restored;
  if (dom == nullptr) return Unavailable(restoring + ": the restored domain is missing");
  WARREN_RETURN_IF_ERROR(CapEmulatorThreads(dom.get(), id, /*capped=*/true));
  // What the next boot gets: the definition Create would write, with this UUID and MAC.
  const std::string persistent = DomainXml(config);
  DomainHandle defined(virDomainDefineXML(conn.get(), persistent.c_str()));
  if (!defined) return LibvirtError("defining vm " + id);
  if (virDomainSetAutostart(dom.get(), 1) < 0) {
    LogWarn(LibvirtError("marking the vm to come back after a restart").ToString());
  }
  RecordStart(dom.get(), SystemClock::Get().NowUnix());
  return restore_ms;
}

}  // namespace warren

namespace warren {

Result<RestoredVm> LibvirtHost::Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  const auto t0 = std::chrono::steady_clock::now();
  WARREN_ASSIGN_OR_RETURN(OpenVm vm, LockAndOpen(spec.id));
  virDomainPtr dom = vm.dom.get();
  WARREN_RETURN_IF_ERROR(
      RequireState(dom, {VmState::kPaused, VmState::kRunning}, "give a new identity to"));
  Result<VmState> state = StateOf(dom);
  const bool paused = state.ok() && *state == VmState::kPaused;
  // The VM must be of the spec's shape: its devices and memory are the template's.
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, InactiveDefinition(dom, spec.id));
  WARREN_ASSIGN_OR_RETURN(const uint64_t capacity, VdaCapacity(dom, spec.id));
  const std::string image = VmMetadataOf(dom).image;
  if (image != spec.image || def.Vcpus() != spec.cpus || def.MemoryMib() != spec.memory_mib ||
      capacity != static_cast<uint64_t>(spec.disk_gib * kGiB)) {
    return InvalidArgument("vm " + spec.id + " (" + image + ", " + std::to_string(def.Vcpus()) +
                           " vCPUs, " + std::to_string(def.MemoryMib()) + " MiB) is not of shape " +
                           VmShapeKey(ShapeOf(spec)));
  }
  VmSpec own = spec;
  WARREN_RETURN_IF_ERROR(EnsureSshHostKey(own.ssh_host_key, own.ssh_host_key_pub, ScratchDir()));
  RestoredVm r;
  std::vector<std::string> macs = def.InterfaceMacs();
  if (!macs.empty()) r.mac = macs.front();
  r.host_key_pub = own.ssh_host_key_pub;
  r.host_key = own.ssh_host_key;
  r.seed_has_more = SeedHasMoreThanIdentity(own);
  // (From its next boot's definition: a pooled VM restored from a template saved without
  // the port has none now, and the identity, finding no port, takes the SSH routes.)
  r.identity_port = !def.ChannelSocket(kIdentityChannelName).empty();
  // What the next boot reads: the seed, rewritten in place, and the domain's name.
  auto persist = [&]() -> Status {
    WARREN_RETURN_IF_ERROR(MakeSeed(vm.conn, own, qemu_user(), /*rewrite=*/true).status());
    return RenameDomain(vm, spec.id, spec.name);
  };
  auto resume = [&]() -> Status {
    if (paused && virDomainResume(dom) < 0) return LibvirtError("resuming vm " + spec.id);
    r.restore_ms = MillisSince(t0);
    return Status::Ok();
  };
  if (r.seed_has_more || !meanwhile) {
    // The guest reads the new seed: it is written first.
    WARREN_RETURN_IF_ERROR(persist());
    WARREN_RETURN_IF_ERROR(resume());
    vm.guard.reset();
    if (meanwhile) WARREN_RETURN_IF_ERROR(meanwhile(r));
    return r;
  }
  // The guest gets its name and key in its request: its identity goes on while they are
  // written here for the next boot. The VM's lock is this thread's only while it writes.
  WARREN_RETURN_IF_ERROR(resume());
  Status took = Status::Ok();
  std::thread guest_part([&took, &meanwhile, r] { took = meanwhile(r); });
  Status persisted = persist();
  vm.guard.reset();
  guest_part.join();
  WARREN_RETURN_IF_ERROR(persisted);
  WARREN_RETURN_IF_ERROR(took);
  return r;
}

}  // namespace warren
