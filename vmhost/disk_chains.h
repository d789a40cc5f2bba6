// DiskChains: the qcow2 layers of every VM's disk, in one directory (DATA/disks) managed as a
// libvirt dir storage pool "<prefix>disks-<hash of that path>". Each VM's disk (its domain's
// vda) is a chain of files "<owner id>-<random>.qcow2" ending at an image's read-only
// rootfs.qcow2: the top one is the VM's own; the ones below are frozen and may be shared
// with copies. What it promises:
//   - Which files are in use is read from the disks themselves (each domain's top, then each
//     file's backing store, through the storage API), never kept elsewhere where it could
//     drift; a layer no chain reaches is deleted by RemoveUnused, and only then.
//   - A chain deeper than kMaxDiskLayers is flattened onto the image by a live block pull.
//   - Layers go through the storage API (volume create/delete, pool refresh), so the same
//     code drives a remote host by URI (DiskChainsOptions::remote).
// Thread-safe. Whatever creates or deletes layers takes a Lock (held by its caller across
// the whole multi-step operation, so a collection never sees a file half-way to its VM).
// Lock order: a LibvirtHost takes its per-VM locks first, then this Lock; never the other
// way round. Reading (TopOf, ChainOf, InUse) needs no Lock.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vmhost/domain_xml.h"
#include "vmhost/libvirt_handles.h"

namespace warren {

struct DiskChainsOptions {
  std::string disks_dir;   // DATA/disks; its parent must be DATA
  std::string images_dir;  // where chains end (the images' rootfs.qcow2)
  // The host's domain prefix: only domains with it count as users of a layer, and the
  // pool's name starts with it.
  std::string domain_prefix;
  // Tops of chains that are in use without a domain: the bases of saved templates
  // (libvirt_host.h), each kept, with what lies below it, like a VM's disk. Called by InUse
  // with its connection, the caller's Lock held; an error stops the collection. May be empty.
  std::function<Result<std::vector<std::string>>(virConnectPtr)> pinned_tops;
  // The disks are on a remote host (libvirt_uri.h): only the storage API reaches them (the
  // pool's build makes DATA/disks and its parents there), never this machine's file system.
  bool remote = false;
};

class DiskChains {
 public:
  explicit DiskChains(DiskChainsOptions options);

  // Proof that the caller holds the chains' lock; taken by Acquire, released when it goes.
  class Lock {
   public:
    explicit Lock(std::mutex& mu) : lock_(mu) {}

   private:
    std::unique_lock<std::mutex> lock_;
  };
  [[nodiscard]] Lock Acquire() { return Lock(mu_); }

  const std::string& dir() const { return options_.disks_dir; }

  // The top of a domain's disk chain: the file of its vda, from the live definition if it
  // runs (a snapshot or a pull changes that first). Internal when it has no vda.
  static Result<std::string> TopOf(virDomainPtr dom);
  // The chain under `top`, top first: each file's backing store as libvirt reads it from
  // the file's header, down to (and including) the first file outside the disks pool.
  Result<std::vector<std::string>> ChainOf(virConnectPtr conn, const std::string& top);
  // How many of `chain`'s files are the VM's layers rather than its image.
  int LayersOf(const std::vector<std::string>& chain) const;
  // Every file some domain of this host's prefix, or a pinned top, reaches through its chain.
  Result<std::vector<std::string>> InUse(virConnectPtr conn);

  // A fresh qcow2 "<owner>-<random>.qcow2" of `capacity_bytes` over `backing`, creating the
  // pool (and DATA/disks) on first use; its file belongs to `qemu_user` when that is known.
  Result<StorageVolHandle> NewOverlay(const Lock& lock, virConnectPtr conn, std::string_view owner,
                                      const std::string& backing, uint64_t capacity_bytes,
                                      const QemuUser& qemu_user);
  // Deletes every layer no chain reaches; forgets the pool once it is empty (it comes back
  // with the next layer). Returns how many went. Everything in use is known before anything
  // is deleted: a partial picture deletes nothing.
  Result<int> RemoveUnused(const Lock& lock, virConnectPtr conn);
  // Starts a live block pull onto the image when the running domain's chain is deeper than
  // kMaxDiskLayers; the freed layers go at the next RemoveUnused. Logs what it does.
  void MaybeFlatten(virDomainPtr dom, std::string_view id);

 private:
  Result<StoragePoolHandle> OpenPool(virConnectPtr conn);

  const DiskChainsOptions options_;
  std::mutex mu_;
};

}  // namespace warren
