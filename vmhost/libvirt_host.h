// LibvirtHost: the real VmHost, QEMU domains through the libvirt C API (never virsh).
// Each VM is a persistent domain "warren-<id>" (so it survives a warren restart) plus a
// directory DATA/vms/<id> managed as a libvirt dir storage pool of the same name:
//   seed.img      read-only first-boot seed (seed_image.h)
//   console.log   the serial console, appended by virtlogd
//   control.sock  host end of the warren.control virtio-serial port
// Disks live apart, in DATA/disks (the pool "warren-disks-<hash of that path>"), because
// `cp` shares them between VMs: each VM's disk is a chain of qcow2 files
// "<id>-<random>.qcow2" ending at the image's read-only rootfs.qcow2. The top one is the
// VM's own; the ones below are frozen and may be shared with copies. Copy freezes the source's top
// and puts a fresh overlay over it for both VMs. Which files are in use is read from the disks
// themselves (each domain's top, then each file's backing store, through the storage API), never
// kept elsewhere where it could drift; a file no chain reaches is deleted (RemoveUnusedDisks, after
// every Destroy). A chain deeper than kMaxDiskLayers is flattened onto the image with a live block
// pull. Disks and seed go through the storage API (volume create, stream upload), so the same code
// can later drive a remote host by URI.
//
// Thread-safe: libvirt connections are thread-safe and shared; operations on one VM are
// serialised by a per-VM lock, operations on different VMs run in parallel. Whatever
// creates or deletes disk files (Create, Copy, the collection) also holds one host-wide
// lock, taken after the VM locks, so a collection never sees a file half-way to its VM.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vmhost/kvm_probe.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/vm_host.h"

namespace warren {

class Rollback;  // undo steps of a multi-step operation (libvirt_host.cc)

struct LibvirtHostOptions {
  std::string uri = "qemu:///system";
  // Under qemu:///system QEMU runs as libvirt-qemu: the data directory must be reachable by
  // that user (not inside a 0700 home).
  std::string data_dir = "/var/lib/warren";
  std::string images_dir = "/var/lib/warren/images";
  Accel accel = Accel::kTcg;
  // How long Stop and Restart wait for a guest to power off by itself before pulling the plug.
  std::chrono::milliseconds stop_timeout{30000};
  std::string mkfs = "mkfs.ext4";
  // Domains (and their pools) are "<prefix><id>"; List sees only this prefix. Tests use
  // their own so they never touch, or count, anyone else's VMs.
  std::string domain_prefix = "warren-";
};

class LibvirtHost final : public VmHost {
 public:
  // Connects lazily, on the first call (and again after the daemon went away).
  explicit LibvirtHost(LibvirtHostOptions options);
  // Adopts an open connection. Lets tests share one test:///default instance (each
  // connection to it is a private world) with the code under test.
  LibvirtHost(LibvirtHostOptions options, ConnectHandle conn);
  ~LibvirtHost() override;

  std::string uri() const override { return options_.uri; }
  Status Create(const VmSpec& spec) override;
  Status Start(std::string_view id) override;
  Status Stop(std::string_view id) override;
  Status Pause(std::string_view id) override;
  Status Resume(std::string_view id) override;
  Status Restart(std::string_view id) override;
  Status Destroy(std::string_view id) override;
  Status Rename(std::string_view id, std::string_view name) override;
  Result<VmInfo> Inspect(std::string_view id) override;
  // The domains with this host's prefix whose files are in this host's data directory.
  Result<std::vector<VmInfo>> List() override;
  Result<std::string> Console(std::string_view id, int max_lines) override;
  Status Copy(std::string_view source_id, const VmSpec& spec) override;
  Result<ResizeOutcome> Resize(std::string_view id, const ResizeSpec& spec) override;
  Result<int> RemoveUnusedDisks() override;

  // The directory of a VM's files.
  std::string VmDir(std::string_view id) const;
  // The directory of every VM's disk layers.
  std::string DisksDir() const;
  // The VM's disk chain, top first, down to (and including) the image's rootfs.
  Result<std::vector<std::string>> DiskChain(std::string_view id);

 private:
  using Conn = std::shared_ptr<virConnect>;
  Result<Conn> Connect();
  std::shared_ptr<std::mutex> VmLock(std::string_view id);
  std::string DomainName(std::string_view id) const;
  Result<DomainHandle> LookupDomain(const Conn& conn, std::string_view id);
  Result<VmInfo> InfoOf(virDomainPtr dom, std::string_view id);
  // The VM's pool, started over its directory if libvirt does not know it (a restarted
  // daemon forgets transient pools). `build` creates the directory first.
  Result<StoragePoolHandle> OpenPool(const Conn& conn, std::string_view id, bool build);
  // Removes every file of the VM (volumes, then the directory) and its pool.
  Status RemoveFiles(const Conn& conn, std::string_view id);
  Status StartDomain(virDomainPtr dom);
  // LimitExceeded when the host lacks `memory_mib` of memory or `disk_gib` of disk.
  Status CheckCapacity(const Conn& conn, int64_t memory_mib, int64_t disk_gib);
  // DATA and DATA/vms, traversable by QEMU's user.
  Status EnsureDataDirs();
  Result<StoragePoolHandle> OpenDisksPool(virConnectPtr conn);
  // A fresh qcow2 "<owner>-<random>.qcow2" in the disks pool over `backing`.
  Result<StorageVolHandle> NewOverlay(virStoragePoolPtr pool, std::string_view owner,
                                      const std::string& backing, uint64_t capacity_bytes);
  // The chain under `top`, top first: each file's backing store as libvirt reads it.
  Result<std::vector<std::string>> ChainOf(virConnectPtr conn, const std::string& top);
  // Every file some domain's chain reaches. Holds no lock itself.
  Result<std::vector<std::string>> DisksInUse(virConnectPtr conn);
  // RemoveUnusedDisks with disks_mu_ held.
  Result<int> RemoveUnusedDisksLocked(const Conn& conn);
  // The rollback of a Create or Copy cut short (`what`): the new VM's files, then the disks
  // no VM uses any more. Logs what it cannot undo. Call with disks_mu_ held.
  void UndoNewVmFiles(const Conn& conn, std::string_view id, std::string_view what);
  // Starts a live block pull onto the image when the running domain's chain is too deep.
  void MaybeFlatten(virDomainPtr dom, std::string_view id);
  // Builds the seed, defines the domain over `disk` and starts it; undo steps go to
  // `rollback`.
  Status DefineAndStart(const Conn& conn, const VmSpec& spec, const std::string& image_ref,
                        const std::string& disk, Rollback& rollback);
  // Graceful shutdown bounded by stop_timeout, then a hard power-off.
  Status ShutDown(virDomainPtr dom);

  const LibvirtHostOptions options_;
  std::mutex conn_mu_;
  Conn conn_;
  std::mutex locks_mu_;
  std::map<std::string, std::weak_ptr<std::mutex>, std::less<>> locks_;
  std::mutex disks_mu_;
};

// warren's startup in one call: decides kvm or TCG (ProbeAccel with a kernel from the
// newest image under images_dir; `force_accel` or WARREN_ACCEL override), makes sure the
// daemon answers (EnsureLibvirtd, /dev/kvm masked for TCG), and returns a connected host
// with options.accel set. Logs each decision. Unavailable when no daemon can be had.
Result<std::unique_ptr<LibvirtHost>> StartLibvirtHost(LibvirtHostOptions options,
                                                      std::string_view force_accel = "");

}  // namespace warren
