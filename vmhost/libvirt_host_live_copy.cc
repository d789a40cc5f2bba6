// LibvirtHost::CopyLive, `cp --live`: a running VM copied with its memory. The source's disk
// is forked as Copy forks it (PrepareFork: a fresh overlay for each over the source's top), in
// one atomic snapshot that also writes the guest's memory to DATA/tmp/live-<copy id>.save
// (SnapshotOnto: the guest pauses while QEMU writes it, about half a second for a small guest,
// then runs on, on its fresh overlay). That file is a libvirt save image, so the copy is
// restored from it the way a template's clone is (RestoreAsNewDomain: its own name, UUID,
// files, seed and MAC in the header's XML, fed through a FIFO), and it is removed once the
// restore is done or failed. The copy runs the source's processes; the caller has the guest
// take the copy's identity (vmhost/guest/identity.h).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest/identity.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/libvirt_xml.h"
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

// A file removed when this goes, whatever happened meanwhile (it may never have been made).
class RemovedAtExit {
 public:
  explicit RemovedAtExit(std::string path) : path_(std::move(path)) {}
  RemovedAtExit(const RemovedAtExit&) = delete;
  RemovedAtExit& operator=(const RemovedAtExit&) = delete;
  ~RemovedAtExit() {
    std::error_code ec;
    fs::remove(path_, ec);
    if (ec) LogWarn("vmhost: removing " + LogQuote(path_) + ": " + ec.message());
  }

 private:
  std::string path_;
};

// An open file descriptor, closed when this goes.
class OpenFd {
 public:
  explicit OpenFd(int fd) : fd_(fd) {}
  OpenFd(const OpenFd&) = delete;
  OpenFd& operator=(const OpenFd&) = delete;
  ~OpenFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

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

}  // namespace

Result<RestoredVm> LibvirtHost::CopyLive(std::string_view source_id, const VmSpec& spec) {
  if (remote_) return LocalOnly("live copies");
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
  LibvirtString live_xml(virDomainGetXMLDesc(src, 0));
  if (!live_xml) return LibvirtError("reading the definition of vm " + std::string(source_id));
  WARREN_ASSIGN_OR_RETURN(DomainDefinition live, DomainDefinition::Parse(live_xml.get()));
  const bool source_has_nic = !live.InterfaceXmls("user").empty();
  if (source_has_nic != (spec.egress == Egress::kAll)) {
    return InvalidArgument("vm " + std::string(source_id) +
                           (source_has_nic ? " has a network device, which a live copy keeps"
                                           : " has no network device, and a live copy gets none") +
                           ": copy it with the source's egress and change the copy's after");
  }
  std::string image_ref = VmMetadataOf(src).image;
  if (image_ref.empty()) image_ref = spec.image;
  WARREN_ASSIGN_OR_RETURN(GuestImage image, OpenGuestImage(options_.images_dir, image_ref));

  // Room as for Copy, with the memory it runs with now (a resize waiting for a restart may
  // have changed the spec's), and its file until the restore is done.
  const int64_t memory_mib = std::max(spec.memory_mib, live.MemoryMib());
  VmSpec room = spec;
  room.memory_mib = memory_mib;
  WARREN_ASSIGN_OR_RETURN(DiskFork fork, PrepareFork(conn, src, source_id, room, memory_mib * kMiB,
                                                     *made->disks, rollback));
  if (fork.qemu.known()) WARREN_RETURN_IF_ERROR(LetQemuReadImage(image));

  const fs::path tmp = fs::path(options_.data_dir) / "tmp";
  std::error_code ec;
  fs::create_directories(tmp, ec);
  const std::string memory = (tmp / ("live-" + spec.id + ".save")).string();
  fs::remove(memory, ec);
  RemovedAtExit memory_removed(memory);
  const auto snapshot_t0 = std::chrono::steady_clock::now();
  {
    UncappedWhileThis uncapped(src, source_id);
    Status snapped = SnapshotOnto(src, source_id, fork.source_top.path, memory);
    uncapped.Recap();
    WARREN_RETURN_IF_ERROR(snapped);
  }
  *fork.source_top_kept = true;  // the source runs on it now, whatever happens to the copy
  const int64_t snapshot_ms = MillisSince(snapshot_t0);
  const int64_t memory_bytes = static_cast<int64_t>(fs::file_size(memory, ec));

  // libvirt wrote it; still read as possibly damaged (save_image.h checks every field).
  OpenFd memory_fd(::open(memory.c_str(), O_RDONLY | O_CLOEXEC));
  if (memory_fd.get() < 0) return Internal("opening " + memory + ": " + std::strerror(errno));
  Result<SaveImageHeader> header = ReadSaveImageHeader(memory_fd.get());
  if (!header.ok()) return header.status().Annotate("the memory of vm " + std::string(source_id));
  WARREN_ASSIGN_OR_RETURN(DomainDefinition saved, DomainDefinition::Parse(header->domain_xml));

  // The disk carries the source's host key: the copy gets its own, through its seed.
  VmSpec own = spec;
  own.image = image.ref;
  WARREN_RETURN_IF_ERROR(EnsureSshHostKey(own.ssh_host_key, own.ssh_host_key_pub, tmp.string()));
  WARREN_ASSIGN_OR_RETURN(std::string seed, MakeSeed(conn, own, fork.qemu));
  DomainConfig config = ConfigFor(own, image, fork.copy_top.path, seed, fork.qemu);
  if (spec.egress == Egress::kAll) {
    WARREN_ASSIGN_OR_RETURN(config.mac, NewGuestMac());
  }
  WARREN_ASSIGN_OR_RETURN(
      const int64_t restore_ms,
      RestoreAsNewDomain(conn, config, std::move(saved), *header,
                         RestoreSource{memory_fd.get(), ""},
                         "as a live copy of vm " + std::string(source_id), rollback));
  rollback.Commit();
  chains_.MaybeFlatten(src, source_id);
  if (Result<DomainHandle> copy = LookupDomain(conn, spec.id); copy.ok()) {
    chains_.MaybeFlatten(copy->get(), spec.id);
  }
  RestoredVm r;
  r.mac = config.mac;
  r.host_key_pub = own.ssh_host_key_pub;
  r.restore_ms = MillisSince(t0);
  LogInfo("vmhost: vm " + spec.id + " copied live from vm " + std::string(source_id) + " in " +
          std::to_string(r.restore_ms) + " ms (the snapshot " + std::to_string(snapshot_ms) +
          " ms with the source paused for most of it, memory " + std::to_string(memory_bytes) +
          " bytes, the restore " + std::to_string(restore_ms) + " ms)");
  return r;
}

}  // namespace warren
