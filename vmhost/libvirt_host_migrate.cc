// LibvirtHost::MigrateTo (libvirt_host.h, vm_host.h): a VM moved to another LibvirtHost with
// its disk, everything through libvirt's connections to the two hosts and nothing else:
//   - the disk's layers go through the storage API (virStorageVolDownload from this host,
//     virStorageVolUpload to the target), each into a fresh layer of the target's disks with
//     its qcow2 header's backing file rewritten to the target's layer (or image) below; the
//     image itself is the target's own copy (HostImageStore uploads it once);
//   - a running or paused VM is first moved onto a fresh overlay (a disk-only snapshot, as cp
//     does), so everything below is frozen and copied while the guest runs on; then its
//     memory moves live (iteratively, the guest running) by libvirt's tunnelled peer-to-peer
//     migration (VIR_MIGRATE_PEER2PEER|TUNNELLED: the stream rides this host's daemon's
//     connection to the target's; QEMU opens no socket, so the hosts' isolation rules need no
//     hole) into a domain defined there (PERSIST_DEST) and kept paused at the end (PAUSED).
//     libvirt turns QEMU's late-block-activate on at the destination, so the target's QEMU
//     leaves its disks inactive until it runs and reads them afresh then: once the source
//     stopped at the switchover, its overlay (what the guest wrote since the snapshot) is
//     copied into the target's top and the target resumed. The guest is stopped for QEMU's
//     stop-and-copy plus that overlay's copy. libvirt 9.0 with QEMU 7.2 cannot copy storage
//     inside a tunnelled migration (NON_SHARED_INC fails "argument key 'host' must not have
//     null value", NON_SHARED_DISK with an I/O error: docs/multi_host.md), hence the copy
//     beside it and VIR_MIGRATE_UNSAFE. The source's domain is undefined only once the
//     target runs on the whole disk;
//   - a stopped VM's layers are copied the same way and it is defined there and undefined here.
// The target's definitions are this host's with the target's paths (disk, seed, console log,
// control socket, kernel and initrd) and QEMU user. Then the VM's files and unused layers go
// from here. A failure before the switchover undoes the target's side (its new layers, its VM
// directory) and leaves the source as it was (libvirt keeps it running); one after it (the
// overlay cannot be copied) removes the target's domain too and boots the VM again on its own
// host from its disk, which is whole: its memory is lost then, and the error says so.
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/qcow2_header.h"
#include "vmhost/storage_pool.h"

namespace warren {
namespace {

using libvirt_ops::InactiveDefinition;
using libvirt_ops::IsActive;
using libvirt_ops::NewLayerUndoneOnRollback;
using libvirt_ops::SnapshotOnto;
using libvirt_ops::StateOf;
using libvirt_ops::VdaCapacity;
using libvirt_ops::VmMetadataOf;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr size_t kChunk = 256 * 1024;

int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace

Status LibvirtHost::CopyVolume(const Conn& from, virStorageVolPtr source, const Conn& to,
                               virStorageVolPtr dest, const std::string& backing, int64_t* bytes) {
  StreamHandle down(virStreamNew(from.get(), 0));
  StreamHandle up(virStreamNew(to.get(), 0));
  if (!down || !up) return LibvirtError("opening a stream");
  if (virStorageVolDownload(source, down.get(), 0, 0, 0) < 0) {
    return LibvirtError("reading a disk layer");
  }
  if (virStorageVolUpload(dest, up.get(), 0, 0, 0) < 0) {
    return LibvirtError("writing a disk layer on the target");
  }
  std::string buf;
  bool head_done = backing.empty();
  constexpr size_t kHead = 2 * 1024 * 1024;  // the largest qcow2 cluster
  auto send = [&](const char* data, size_t n) -> Status {
    size_t off = 0;
    while (off < n) {
      const int sent = virStreamSend(up.get(), data + off, n - off);
      if (sent < 0) return LibvirtError("writing a disk layer on the target");
      off += static_cast<size_t>(sent);
    }
    *bytes += static_cast<int64_t>(n);
    return Status::Ok();
  };
  std::vector<char> chunk(kChunk);
  while (true) {
    const int n = virStreamRecv(down.get(), chunk.data(), chunk.size());
    if (n < 0) return LibvirtError("reading a disk layer");
    if (!head_done) {
      buf.append(chunk.data(), static_cast<size_t>(n));
      // The header cluster whole (or the file, when smaller): then its backing is rewritten.
      if (buf.size() >= 72) {
        const uint64_t cluster = Qcow2ClusterSize(buf);
        if (cluster == 0) return InvalidArgument("a disk layer that is no qcow2 file");
        if (n == 0 || buf.size() >= std::min<uint64_t>(cluster, kHead)) {
          WARREN_RETURN_IF_ERROR(RewriteQcow2Backing(buf, backing));
          WARREN_RETURN_IF_ERROR(send(buf.data(), buf.size()));
          head_done = true;
        }
      } else if (n == 0) {
        return InvalidArgument("a disk layer too short for a qcow2 header");
      }
      if (n == 0) break;
      continue;
    }
    if (n == 0) break;
    WARREN_RETURN_IF_ERROR(send(chunk.data(), static_cast<size_t>(n)));
  }
  if (virStreamFinish(down.get()) < 0) return LibvirtError("reading a disk layer");
  if (virStreamFinish(up.get()) < 0) return LibvirtError("writing a disk layer on the target");
  return Status::Ok();
}

Result<std::string> LibvirtHost::CopyLayersTo(
    const Conn& conn, LibvirtHost& target, const Conn& tconn, const DiskChains::Lock& tdisks,
    std::string_view id, const std::vector<std::string>& layers, std::string below,
    uint64_t capacity, const QemuUser& tqemu, Rollback& rollback, int64_t* bytes) {
  // Bottom up: each new layer stands on the one copied before it.
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    StorageVolHandle src(virStorageVolLookupByPath(conn.get(), it->c_str()));
    if (!src) return LibvirtError("finding disk layer " + *it);
    WARREN_ASSIGN_OR_RETURN(libvirt_ops::NewLayer layer,
                            NewLayerUndoneOnRollback(target.chains_, tdisks, tconn.get(), id, below,
                                                     capacity, tqemu, "migrate", rollback));
    WARREN_RETURN_IF_ERROR(CopyVolume(conn, src.get(), tconn, layer.vol.get(), below, bytes)
                               .Annotate("copying " + *it + " to " + target.uri()));
    below = layer.path;
  }
  return below;
}

Status LibvirtHost::CopyVmFileTo(const Conn& conn, LibvirtHost& target, const Conn& tconn,
                                 std::string_view id, const char* name, const QemuUser& tqemu,
                                 int64_t* bytes) {
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn, id, /*build=*/false));
  if (virStoragePoolRefresh(pool.get(), 0) < 0) virResetLastError();
  StorageVolHandle src(virStorageVolLookupByName(pool.get(), name));
  if (!src) {
    virResetLastError();
    if (std::string_view(name) == "console.log") return Status::Ok();  // never booted
    return NotFound("vm " + std::string(id) + " has no " + name);
  }
  virStorageVolInfo vi{};
  if (virStorageVolGetInfo(src.get(), &vi) < 0) return LibvirtError("sizing " + std::string(name));
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle tpool, target.OpenPool(tconn, id, /*build=*/true));
  const std::string xml = RawVolumeXml(name, vi.capacity, tqemu);
  StorageVolHandle dest(virStorageVolCreateXML(tpool.get(), xml.c_str(), 0));
  if (!dest) return LibvirtError("creating " + std::string(name) + " on " + target.uri());
  return CopyVolume(conn, src.get(), tconn, dest.get(), "", bytes);
}

Result<MigrationReport> LibvirtHost::MigrateTo(std::string_view id, VmHost& target_host) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto* target = dynamic_cast<LibvirtHost*>(&target_host);
  if (target == this) return InvalidArgument("vm " + std::string(id) + " is on that host already");
  if (target == nullptr) return InvalidArgument("a libvirt host moves vms only to another");
  MigrationReport report;

  // The move holds its connections for seconds (the migration call, the volume streams): on
  // the hosts' shared ones every other call, each `ssh VM`'s Inspect for one, waited for it
  // (~9 s in tests/bench/migrate.py).
  OpenVm vm;
  vm.guard.emplace(LockVm(id));
  WARREN_ASSIGN_OR_RETURN(vm.conn, OwnConnection());
  WARREN_ASSIGN_OR_RETURN(vm.dom, LookupDomain(vm.conn, id));
  VmGuard target_guard = target->LockVm(id);
  virDomainPtr dom = vm.dom.get();
  WARREN_ASSIGN_OR_RETURN(const Conn tconn, target->OwnConnection());
  WARREN_RETURN_IF_ERROR(target->CheckAbsent(tconn, id));
  WARREN_ASSIGN_OR_RETURN(const VmState state, StateOf(dom));
  if (state == VmState::kCrashed) return Conflict("cannot migrate a crashed vm; stop it first");
  report.live = IsActive(dom);
  // The URI the source's daemon opens to reach the target's: for a daemon on this machine,
  // the one warren uses; for another machine's, the one the operator gave for the target.
  const std::string dconnuri = remote_ ? target->peer_uri() : target->uri();
  if (report.live && dconnuri.empty()) {
    return Conflict("a running vm moves live from a remote host to " + target->uri() +
                    " only when that host has a URI the source's daemon reaches it by "
                    "(serve --host-peer-uri); stop " +
                    std::string(id) + " to move it cold");
  }
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, InactiveDefinition(dom, id));
  WARREN_ASSIGN_OR_RETURN(const uint64_t capacity, VdaCapacity(dom, id));
  const std::string image_ref = VmMetadataOf(dom).image;
  if (image_ref.empty()) return Internal("vm " + std::string(id) + " names no image");
  int autostart = 0;
  if (virDomainGetAutostart(dom, &autostart) < 0) virResetLastError();

  // Both hosts' chains, in one order whichever way a VM moves (no two migrations deadlock).
  std::optional<DiskChains::Lock> first, second;
  if (this < target) {
    first.emplace(chains_.Acquire());
    second.emplace(target->chains_.Acquire());
  } else {
    first.emplace(target->chains_.Acquire());
    second.emplace(chains_.Acquire());
  }
  const DiskChains::Lock& sdisks = this < target ? *first : *second;
  const DiskChains::Lock& tdisks = this < target ? *second : *first;
  WARREN_RETURN_IF_ERROR(
      target->CheckRoom(tconn, {def.Vcpus(), report.live ? def.MemoryMib() : 0,
                                static_cast<int64_t>((capacity + kGiB - 1) / kGiB)}));

  // The target's side, undone on any failure until it holds the VM.
  Rollback rollback;
  WARREN_RETURN_IF_ERROR(target->RemoveFiles(tconn, id));  // what a crash left there
  rollback.Add([target, tconn, id = std::string(id), &tdisks] {
    target->UndoNewVmFiles(tconn, id, "migrate", tdisks);
  });
  WARREN_RETURN_IF_ERROR(target->EnsureDataDirs());
  const QemuUser tqemu = target->qemu_user();
  WARREN_ASSIGN_OR_RETURN(GuestImage timage, target->HostImage(tconn, image_ref, tqemu));
  WARREN_ASSIGN_OR_RETURN(GuestImage simage, HostImage(vm.conn, image_ref, QemuUser{}));
  const Clock::time_point disk_t0 = Clock::now();
  WARREN_RETURN_IF_ERROR(
      CopyVmFileTo(vm.conn, *target, tconn, id, "seed.img", tqemu, &report.disk_bytes));
  WARREN_RETURN_IF_ERROR(
      CopyVmFileTo(vm.conn, *target, tconn, id, "console.log", tqemu, &report.disk_bytes));

  // A running VM first goes onto a fresh overlay: what lies below is frozen, copied while the
  // guest runs; the overlay alone is copied with the guest paused. It stays the VM's here
  // if the move fails (a valid chain one layer deeper).
  Rollback source_rollback;
  if (report.live) {
    virDomainBlockJobInfo job{};
    const int busy = virDomainGetBlockJobInfo(dom, "vda", &job, 0);
    if (busy < 0) virResetLastError();
    if (busy > 0) {
      return Conflict("the disk of vm " + std::string(id) +
                      " is being flattened; migrate it again in a minute");
    }
    WARREN_ASSIGN_OR_RETURN(std::string frozen, DiskChains::TopOf(dom));
    auto kept = std::make_shared<bool>(false);
    WARREN_ASSIGN_OR_RETURN(
        libvirt_ops::NewLayer fresh,
        NewLayerUndoneOnRollback(chains_, sdisks, vm.conn.get(), id, frozen, capacity,
                                 def.DacRelabels() ? QemuUser{} : qemu_user(), "migrate",
                                 source_rollback, kept));
    WARREN_RETURN_IF_ERROR(SnapshotOnto(dom, id, fresh.path));
    *kept = true;
  }
  WARREN_ASSIGN_OR_RETURN(std::string top, DiskChains::TopOf(dom));
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> chain, chains_.ChainOf(vm.conn.get(), top));
  std::vector<std::string> layers;
  for (const std::string& p : chain) {
    if (p.rfind(chains_.dir() + "/", 0) == 0) layers.push_back(p);
  }
  if (layers.empty() || layers.front() != top) {
    return Internal("the disk of vm " + std::string(id) + " is not in this host's disks");
  }
  const std::vector<std::string> frozen_layers(layers.begin() + (report.live ? 1 : 0),
                                               layers.end());
  WARREN_ASSIGN_OR_RETURN(
      std::string target_below,
      CopyLayersTo(vm.conn, *target, tconn, tdisks, id, frozen_layers, timage.rootfs, capacity,
                   tqemu, rollback, &report.disk_bytes));

  target->NoteOwnDomain(id);  // its events there are this lobby's from the definition on
  // The target's definitions: this host's with the target's paths.
  const std::string tdir = target->VmDir(id);
  auto retarget = [&](DomainDefinition& d, const std::string& top_path) -> Result<std::string> {
    WARREN_RETURN_IF_ERROR(d.SetDiskSource("vda", top_path));
    WARREN_RETURN_IF_ERROR(d.SetDiskSource("vdb", tdir + "/seed.img"));
    WARREN_RETURN_IF_ERROR(d.SetConsoleLog(tdir + "/console.log"));
    for (std::string_view port : {kControlChannelName, kIdentityChannelName}) {
      // (A domain defined before the identity port has none.)
      if (port != kControlChannelName && d.ChannelSocket(port).empty()) continue;
      WARREN_RETURN_IF_ERROR(d.SetChannelSocket(port, tdir + "/" + PortSocketFile(port)));
    }
    std::string xml = d.ToXml();
    auto replace = [&xml](const std::string& from, const std::string& to) {
      if (from.empty() || from == to) return;
      for (size_t at = xml.find(from); at != std::string::npos; at = xml.find(from, at)) {
        xml.replace(at, from.size(), to);
        at += to.size();
      }
    };
    replace(">" + simage.kernel + "<", ">" + timage.kernel + "<");
    replace(">" + simage.initrd + "<", ">" + timage.initrd + "<");
    const QemuUser squ = qemu_user();
    if (squ.known() && tqemu.known()) {
      replace("+" + std::to_string(squ.uid) + ":+" + std::to_string(squ.gid) + "<",
              "+" + std::to_string(tqemu.uid) + ":+" + std::to_string(tqemu.gid) + "<");
    }
    return xml;
  };

  if (!report.live) {
    WARREN_ASSIGN_OR_RETURN(std::string xml, retarget(def, target_below));
    report.disk_ms = MsSince(disk_t0);
    DomainHandle tdom(virDomainDefineXML(tconn.get(), xml.c_str()));
    if (!tdom) return LibvirtError("defining vm " + std::string(id) + " on " + target->uri());
    rollback.Add([tdom_name = DomainName(id), tconn] {
      DomainHandle d(virDomainLookupByName(tconn.get(), tdom_name.c_str()));
      if (d && virDomainUndefine(d.get()) < 0) virResetLastError();
      if (!d) virResetLastError();
    });
    if (autostart != 0 && virDomainSetAutostart(tdom.get(), 1) < 0) virResetLastError();
    WARREN_RETURN_IF_ERROR(libvirt_ops::Undefine(dom, id));
  } else {
    const int64_t frozen_ms = MsSince(disk_t0);  // the layers below; the overlay's is added
    // The memory moves live (iteratively, the guest running on) to a target kept paused at
    // the end, whose disks QEMU leaves inactive until it runs (libvirt turns QEMU's
    // late-block-activate on at every destination). The source stops at the switchover; then
    // its overlay — what the guest wrote since the snapshot — is copied into the target's top,
    // which the target reads afresh when it resumes. The source stays defined until then.
    const bool was_running = state == VmState::kRunning;
    WARREN_ASSIGN_OR_RETURN(
        libvirt_ops::NewLayer target_top,
        NewLayerUndoneOnRollback(target->chains_, tdisks, tconn.get(), id, target_below, capacity,
                                 tqemu, "migrate", rollback));
    LibvirtString live_xml(
        virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_SECURE | VIR_DOMAIN_XML_MIGRATABLE));
    if (!live_xml) return LibvirtError("reading vm " + std::string(id));
    WARREN_ASSIGN_OR_RETURN(DomainDefinition live_def, DomainDefinition::Parse(live_xml.get()));
    WARREN_ASSIGN_OR_RETURN(std::string dest_xml, retarget(live_def, target_top.path));
    WARREN_ASSIGN_OR_RETURN(std::string persist_xml, retarget(def, target_top.path));
    virTypedParameterPtr params = nullptr;
    int nparams = 0, maxparams = 0;
    virTypedParamsAddString(&params, &nparams, &maxparams, VIR_MIGRATE_PARAM_DEST_XML,
                            dest_xml.c_str());
    virTypedParamsAddString(&params, &nparams, &maxparams, VIR_MIGRATE_PARAM_PERSIST_XML,
                            persist_xml.c_str());
    const unsigned int flags = VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_TUNNELLED |
                               VIR_MIGRATE_PERSIST_DEST | VIR_MIGRATE_PAUSED | VIR_MIGRATE_UNSAFE;
    const int rc = virDomainMigrateToURI3(dom, dconnuri.c_str(), params, nparams, flags);
    virTypedParamsFree(params, nparams);
    if (rc < 0) {
      // libvirt left the source as it was (running, or paused) and removed the target's.
      return LibvirtError("migrating vm " + std::string(id) + " to " + target->uri());
    }
    const Clock::time_point switched = Clock::now();
    const Clock::time_point overlay_t0 = Clock::now();
    DomainHandle tdom(virDomainLookupByName(tconn.get(), DomainName(id).c_str()));
    Status copied = tdom ? Status::Ok()
                         : LibvirtError("finding vm " + std::string(id) + " after its migration");
    if (copied.ok()) {
      StorageVolHandle src(virStorageVolLookupByPath(vm.conn.get(), top.c_str()));
      copied = src ? CopyVolume(vm.conn, src.get(), tconn, target_top.vol.get(), target_below,
                                &report.disk_bytes)
                   : LibvirtError("finding disk layer " + top);
    }
    if (!copied.ok()) {
      // The target cannot have the disk the guest wrote: the VM goes back to its own, which
      // is whole, and boots there (its memory is lost).
      if (tdom) {
        if (virDomainDestroy(tdom.get()) < 0) virResetLastError();
        if (virDomainUndefine(tdom.get()) < 0) virResetLastError();
      }
      Status back = StartDomain(dom);
      if (back.ok() && state == VmState::kPaused && virDomainSuspend(dom) < 0) virResetLastError();
      return copied.Annotate(
          "copying the last writes of vm " + std::string(id) + " to " + target->uri() + "; " +
          (back.ok() ? "it was booted again on its own host"
                     : "booting it again on its own host failed too: " + back.ToString()));
    }
    report.disk_ms = frozen_ms + MsSince(overlay_t0);
    // Undefined here before it runs there: should warren die in between, reconcile finds it
    // on the target alone (and resumes it), never on both.
    WARREN_RETURN_IF_ERROR(libvirt_ops::Undefine(dom, id));
    if (was_running && virDomainResume(tdom.get()) < 0) {
      LogWarn("vmhost: " +
              LibvirtError("resuming vm " + std::string(id) + " on " + target->uri()).ToString());
    }
    const int64_t after_switch_ms = MsSince(switched);
    if (autostart != 0 && virDomainSetAutostart(tdom.get(), 1) < 0) virResetLastError();
    int type = 0;
    virTypedParameterPtr stats = nullptr;
    int nstats = 0;
    if (virDomainGetJobStats(tdom.get(), &type, &stats, &nstats, VIR_DOMAIN_JOB_STATS_COMPLETED) ==
        0) {
      unsigned long long v = 0;
      if (virTypedParamsGetULLong(stats, nstats, VIR_DOMAIN_JOB_MEMORY_PROCESSED, &v) == 1) {
        report.memory_bytes = static_cast<int64_t>(v);
      }
      // QEMU's own stop-and-copy, then what came after it here (the overlay's copy, the resume).
      if (was_running && virTypedParamsGetULLong(stats, nstats, VIR_DOMAIN_JOB_DOWNTIME, &v) == 1) {
        report.downtime_ms = static_cast<int64_t>(v) + after_switch_ms;
      }
      virTypedParamsFree(stats, nstats);
    } else {
      virResetLastError();
    }
    if (was_running && report.downtime_ms < 0) report.downtime_ms = after_switch_ms;
  }
  rollback.Commit();
  source_rollback.Commit();

  // Nothing of it here any more: its files, and the layers no other VM stands on.
  Status gone = RemoveFiles(vm.conn, id);
  if (!gone.ok())
    LogWarn("vmhost: removing the files of migrated vm " + std::string(id) + ": " +
            gone.ToString());
  Result<int> collected = RemoveUnusedDisksLocked(vm.conn, sdisks);
  if (!collected.ok()) {
    LogWarn("vmhost: collecting disks after migrating vm " + std::string(id) + ": " +
            collected.status().ToString());
  }
  report.total_ms = MsSince(t0);
  LogInfo("vmhost: migrated vm " + std::string(id) + " to " + target->uri() +
          " live=" + (report.live ? "yes" : "no") + " ms=" + std::to_string(report.total_ms) +
          " disk_ms=" + std::to_string(report.disk_ms) + " downtime_ms=" +
          std::to_string(report.downtime_ms) + " disk_bytes=" + std::to_string(report.disk_bytes));
  return report;
}

}  // namespace warren
