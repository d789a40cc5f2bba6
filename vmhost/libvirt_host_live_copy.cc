// LibvirtHost::CopyLive, `cp --live`: a running VM copied with its memory. The source's disk
// is forked as Copy forks it (PrepareFork: a fresh overlay for each over the source's top),
// and the copy's key, seed and definition are made while the source runs. Then its memory:
//   here (StreamLiveCopy): the source paused, its disk snapshotted, its own QEMU writing its
//     memory into DATA/tmp/live-<copy id>.save (qemu_memory_migration.h), the source resumed
//     (~0.2 s paused for a debian guest), the copy restored from that file behind a header
//     warren writes (save_image.h WriteStreamAsSave), fed through a FIFO;
//   on a remote host: libvirt's atomic snapshot with memory (SnapshotOnto with a memory file;
//     a file descriptor cannot cross that connection) into the copy's own directory there, a
//     libvirt save image rewritten and restored in place (live_copy_memory.h).
// Either way the copy is restored the way a template's clone is (RestoreAsNewDomain: its own
// name, UUID, files, seed and MAC in the header's XML), and the file is deleted once the
// restore is done or failed. The copy runs the source's processes; the caller has the guest
// take the copy's identity (vmhost/guest/identity.h).
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>

#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest/identity.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/live_copy_memory.h"
#include "vmhost/qemu_memory_migration.h"
#include "vmhost/save_image.h"
#include "vmhost/seed_image.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

using libvirt_ops::CapEmulatorThreads;
using libvirt_ops::SnapshotOnto;
using libvirt_ops::StateOf;
using libvirt_ops::VmMetadataOf;

constexpr int64_t kMiB = int64_t{1} << 20;

int64_t MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

// The running source's QEMU threads uncapped while this lives: they write its memory, ten
// times slower under the cap (domain_xml.h kEmulatorQuotaPercent). Capped again by Recap or
// when this goes, whatever happened meanwhile; a failure either way is only logged (the
// snapshot goes on, slower; the source runs on, uncapped until its next start).
class UncappedWhileThis {
 public:
  UncappedWhileThis(virDomainPtr dom, std::string_view id) : dom_(dom), id_(id) {
    if (Status st = CapEmulatorThreads(dom_, id_, /*capped=*/false); !st.ok()) {
      LogWarn("vmhost: " + st.ToString());
    }
  }
  UncappedWhileThis(const UncappedWhileThis&) = delete;
  UncappedWhileThis& operator=(const UncappedWhileThis&) = delete;
  ~UncappedWhileThis() { Recap(); }
  void Recap() {
    if (dom_ == nullptr) return;
    if (Status st = CapEmulatorThreads(dom_, id_, /*capped=*/true); !st.ok()) {
      LogWarn("vmhost: " + st.ToString());
    }
    dom_ = nullptr;
  }

 private:
  virDomainPtr dom_;
  std::string id_;
};

// The source resumed once, by whichever comes first: Now() once its memory is written, or
// this going away (any way out before that, whose failure to resume is only logged).
class ResumedOnce {
 public:
  ResumedOnce(virDomainPtr dom, std::string_view id) : dom_(dom), id_(id) {}
  ResumedOnce(const ResumedOnce&) = delete;
  ResumedOnce& operator=(const ResumedOnce&) = delete;
  ~ResumedOnce() {
    Now();
    if (!status_.ok()) LogWarn("vmhost: " + status_.ToString());
  }
  void Now() {
    if (dom_ == nullptr) return;
    if (virDomainResume(dom_) < 0) {
      status_ = LibvirtError("resuming vm " + id_ + " after its live copy's snapshot");
    }
    dom_ = nullptr;
  }
  const Status& status() const { return status_; }

 private:
  virDomainPtr dom_;
  std::string id_;
  Status status_;
};

// How long QEMU may take to write a paused VM's memory into a file (seconds for the largest
// shapes; a stuck one is cancelled and the copy fails, the source resumed).
constexpr std::chrono::milliseconds kLiveCopyMigrationTimeout{120'000};

}  // namespace

Result<RestoredVm> LibvirtHost::CopyLive(std::string_view source_id, const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  if (spec.id == source_id) return InvalidArgument("a vm cannot be copied onto itself");
  const auto t0 = std::chrono::steady_clock::now();
  // Both VMs' locks (in id order, as Copy), the connection, the chains' lock, the room for
  // `spec`; the copy's files are undone by the rollback from here on.
  WARREN_ASSIGN_OR_RETURN(std::unique_ptr<NewVm> made, BeginNewVm(spec, "live copy", source_id));
  const Conn& conn = made->conn;
  Rollback& rollback = made->rollback;
  WARREN_ASSIGN_OR_RETURN(DomainHandle source, LookupDomain(conn, source_id));
  virDomainPtr src = source.get();
  WARREN_ASSIGN_OR_RETURN(const VmState state, StateOf(src));
  if (state != VmState::kRunning) {
    return Conflict("a live copy needs a running vm; " + std::string(source_id) + " is " +
                    std::string(VmStateName(state)));
  }
  // The copy runs the source's machine: the devices its memory stream was saved with.
  // Its migratable form: what libvirt writes into a save image, which a live copy here restores
  // from (StreamLiveCopy).
  LibvirtString live_xml(
      virDomainGetXMLDesc(src, VIR_DOMAIN_XML_SECURE | VIR_DOMAIN_XML_MIGRATABLE));
  if (!live_xml) return LibvirtError("reading the definition of vm " + std::string(source_id));
  WARREN_ASSIGN_OR_RETURN(DomainDefinition live, DomainDefinition::Parse(live_xml.get()));
  // The copy has the source's devices: the identity port too when the source has one.
  const bool identity_port = !live.ChannelSocket(kIdentityChannelName).empty();
  const bool source_has_nic = !live.InterfaceXmls("user").empty();
  if (source_has_nic != (spec.egress == Egress::kAll)) {
    return InvalidArgument("vm " + std::string(source_id) +
                           (source_has_nic ? " has a network device, which a live copy keeps"
                                           : " has no network device, and a live copy gets none") +
                           ": copy it with the source's egress and change the copy's after");
  }
  std::string image_ref = VmMetadataOf(src).image;
  if (image_ref.empty()) image_ref = spec.image;

  // Room as for Copy, with the memory it runs with now (a resize waiting for a restart may
  // have changed the spec's), and its file until the restore is done.
  const int64_t memory_mib = std::max(spec.memory_mib, live.MemoryMib());
  VmSpec room = spec;
  room.memory_mib = memory_mib;
  WARREN_ASSIGN_OR_RETURN(DiskFork fork, PrepareFork(conn, src, source_id, room, memory_mib * kMiB,
                                                     *made->disks, rollback));
  // The image as this host boots it (the source's: a remote host has it in its store).
  WARREN_ASSIGN_OR_RETURN(GuestImage image, HostImage(conn, image_ref, fork.qemu));

  // The copy's own key, seed and definition first: none of it needs the source paused.
  // The disk carries the source's host key: the copy gets its own, through its seed.
  VmSpec own = spec;
  own.image = image.ref;
  WARREN_RETURN_IF_ERROR(EnsureSshHostKey(own.ssh_host_key, own.ssh_host_key_pub, ScratchDir()));
  WARREN_ASSIGN_OR_RETURN(std::string seed, MakeSeed(conn, own, fork.qemu));
  DomainConfig config = ConfigFor(own, image, fork.copy_top.path, seed, fork.qemu);
  if (spec.egress == Egress::kAll) {
    WARREN_ASSIGN_OR_RETURN(config.mac, NewGuestMac());
  }
  const std::string restoring = "as a live copy of vm " + std::string(source_id);

  // Where the memory goes: deleted when `memory` goes (before the rollback, if one runs).
  std::unique_ptr<LiveCopyMemory> memory;
  if (remote_) {
    // The copy's own directory there, made now (the rollback removes it with its files).
    WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn, spec.id, /*build=*/true));
    memory = LiveCopyMemory::InCopyDirectory(conn.get(), std::move(pool), VmDir(spec.id));
  } else {
    memory = LiveCopyMemory::LocalFile(
        (fs::path(options_.data_dir) / "tmp" / ("live-" + spec.id + ".save")).string());
  }
  const auto snapshot_t0 = std::chrono::steady_clock::now();
  // Locks, the source's definition, the disk fork, the key, seed and definition of the copy.
  const int64_t files_ms = MillisSince(t0);
  std::string how;
  int64_t restore_ms = 0;
  if (remote_) {
    // libvirt's snapshot with memory, then the restore from its file, there.
    {
      UncappedWhileThis uncapped(src, source_id);
      Status snapped = SnapshotOnto(src, source_id, fork.source_top.path, memory->path());
      uncapped.Recap();
      WARREN_RETURN_IF_ERROR(snapped);
    }
    *fork.source_top_kept = true;  // the source runs on it now, whatever happens to the copy
    const int64_t snapshot_ms = MillisSince(snapshot_t0);
    // libvirt wrote it; still read as possibly damaged (save_image.h checks every field).
    Result<SaveImageHeader> header = memory->ReadHeader();
    if (!header.ok()) {
      return header.status().Annotate("the memory of vm " + std::string(source_id));
    }
    WARREN_ASSIGN_OR_RETURN(DomainDefinition saved, DomainDefinition::Parse(header->domain_xml));
    WARREN_ASSIGN_OR_RETURN(
        restore_ms,
        RestoreAsNewDomain(conn, config, std::move(saved), *header,
                           RestoreSource{-1, memory->volume(), true}, restoring, rollback));
    how = "the snapshot " + std::to_string(snapshot_ms) +
          " ms with the source paused for most of it, memory " + std::to_string(memory->bytes()) +
          " bytes, the restore " + std::to_string(restore_ms) + " ms";
  } else {
    WARREN_ASSIGN_OR_RETURN(restore_ms,
                            StreamLiveCopy(conn, src, source_id, fork, memory->path(), config,
                                           std::move(live), restoring, rollback, &how));
  }
  rollback.Commit();
  chains_.MaybeFlatten(src, source_id);
  if (Result<DomainHandle> copy = LookupDomain(conn, spec.id); copy.ok()) {
    chains_.MaybeFlatten(copy->get(), spec.id);
  }
  RestoredVm r;
  r.mac = config.mac;
  r.host_key_pub = own.ssh_host_key_pub;
  r.host_key = own.ssh_host_key;
  r.seed_has_more = SeedHasMoreThanIdentity(own);
  r.identity_port = identity_port;
  r.restore_ms = MillisSince(t0);
  LogInfo("vmhost: vm " + spec.id + " copied live from vm " + std::string(source_id) + " in " +
          std::to_string(r.restore_ms) + " ms (the copy's files " + std::to_string(files_ms) +
          " ms, " + how + ")" + (remote_ ? " on " + options_.uri : ""));
  return r;
}

Result<int64_t> LibvirtHost::StreamLiveCopy(const Conn& conn, virDomainPtr src,
                                            std::string_view source_id, DiskFork& fork,
                                            const std::string& memory_path,
                                            const DomainConfig& config, DomainDefinition live,
                                            const std::string& restoring, Rollback& rollback,
                                            std::string* how) {
  UniqueFd file(::open(memory_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!file.valid()) {
    return Internal("making " + memory_path + ": " + std::strerror(errno));
  }
  const auto t0 = std::chrono::steady_clock::now();
  UncappedWhileThis uncapped(src, source_id);
  if (virDomainSuspend(src) < 0) {
    return LibvirtError("pausing vm " + std::string(source_id) + " for its live copy");
  }
  // Runs again whatever happens from here: once its memory is written, or on the way out.
  ResumedOnce resumed(src, source_id);
  // Its disk first, the guest paused: the copy's chain stands on the top it leaves, which
  // only then is no longer open for writing (QEMU's image locks).
  WARREN_RETURN_IF_ERROR(SnapshotOnto(src, source_id, fork.source_top.path));
  *fork.source_top_kept = true;  // the source runs on it now, whatever happens to the copy
  const int64_t disk_ms = MillisSince(t0);

  // Then its memory, into the file: QEMU's migration stream alone, written by the source's
  // own QEMU (uncapped), with no libvirt_iohelper in between. The source runs on once it is.
  Result<int64_t> written =
      MigrateMemoryToFile(src, source_id, file.get(), kLiveCopyMigrationTimeout);
  uncapped.Recap();
  resumed.Now();
  const int64_t paused_ms = MillisSince(t0);
  if (!written.ok()) {
    return written.status().Annotate("the memory of vm " + std::string(source_id));
  }
  WARREN_RETURN_IF_ERROR(resumed.status());

  // The copy restored from it, behind the header libvirt would have written: the source's live
  // definition in its migratable form, which RestoreAsNewDomain makes the copy's and writes
  // into the header (a fresh one: raw, running, no cookie).
  WARREN_ASSIGN_OR_RETURN(
      const int64_t restore_ms,
      RestoreAsNewDomain(conn, config, std::move(live), SaveImageHeader{},
                         RestoreSource{file.get(), "", false, /*bare_stream=*/true}, restoring,
                         rollback));
  *how = "the source paused " + std::to_string(paused_ms) + " ms: its disk " +
         std::to_string(disk_ms) + " ms, then its memory, " + std::to_string(*written) +
         " bytes; the restore " + std::to_string(restore_ms) + " ms";
  return restore_ms;
}

}  // namespace warren
