// HostImageStore: the guest images a remote libvirt host keeps for itself (issue 18). Each
// such host has its own store, one directory on that host (DATA/images there, DATA being the
// host's data directory) managed as a libvirt dir storage pool "<prefix>images-<hash of the
// path>"; an image version NAME@VERSION is four volumes in it:
//   NAME@VERSION.vmlinuz, NAME@VERSION.initrd.img, NAME@VERSION.rootfs.qcow2   its files
//   NAME@VERSION.ready   written last: {"ref","cmdline","rootfs_bytes","files":{NAME:bytes}}
// A version is present only while its .ready volume parses and each file it names holds
// exactly that many bytes: an upload cut short (warren died, the link dropped) never counts,
// and the next Ensure deletes what it left and uploads again. (libvirt has no volume rename,
// hence the marker written last rather than a temporary name renamed into place.)
// Files come from warren's local catalog (image_layout.h) through virStorageVolUpload on the
// host's own connection, never scp; they are root's, mode 0644, in a 0711 directory: QEMU's
// user reads them by path (libvirt_host.h's ownership rules), as many VMs share them. A
// version is never written again once present. RemoveVersion deletes one (its mark first, so
// a removal cut short leaves an incomplete version, which never counts): LibvirtHost does, for
// a version no VM of the host uses that warren's catalog no longer has.
// Thread-safe: Ensure of one version by several threads uploads once (the others wait for
// it); different versions upload in parallel. Two warren processes sharing one host's data
// directory are not coordinated (each host has one lobby).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "vmhost/guest_image.h"
#include "vmhost/libvirt_handles.h"

namespace warren {

struct HostImageStoreOptions {
  std::string local_images_dir;  // warren's catalog here: IMAGES/NAME@VERSION/...
  std::string host_images_dir;   // the store's directory on the host
  std::string pool_name;
};

// What one upload moved, for the log and the benchmarks.
struct ImageUpload {
  int64_t bytes = 0;
  double seconds = 0;
};

class HostImageStore {
 public:
  explicit HostImageStore(HostImageStoreOptions options);

  // The image `ref` as the host sees it (paths of its volumes there; the command line and
  // the rootfs's virtual size as recorded at upload), uploading it from the local catalog
  // first when the host lacks it. InvalidArgument for a malformed ref; NotFound when neither
  // the host nor the local catalog has it.
  Result<GuestImage> Ensure(virConnectPtr conn, std::string_view ref);
  // Every version present on the host, sorted.
  Result<std::vector<std::string>> List(virConnectPtr conn);
  // Every version the host holds a volume of, present or not (an upload cut short), sorted:
  // by name alone, nothing is read.
  Result<std::vector<std::string>> Stored(virConnectPtr conn);
  // Deletes version `ref` from the host: its mark, then its files. NotFound when the host
  // has no volume of it. The caller knows no VM of the host uses it.
  Status RemoveVersion(virConnectPtr conn, std::string_view ref);
  // Free bytes of the file system the store is on (the host's data directory, as a rule).
  Result<int64_t> FreeBytes(virConnectPtr conn);

  // How many versions this object uploaded, and the last upload.
  int uploads() const { return uploads_.load(); }
  ImageUpload last_upload() const;
  const std::string& dir() const { return options_.host_images_dir; }

 private:
  Result<StoragePoolHandle> OpenPool(virConnectPtr conn);
  // The version on the host, or NotFound when it is not (completely) there.
  Result<GuestImage> Present(virStoragePoolPtr pool, std::string_view ref);
  Result<GuestImage> Upload(virConnectPtr conn, virStoragePoolPtr pool, std::string_view ref);
  std::shared_ptr<std::mutex> LockFor(std::string_view ref);

  const HostImageStoreOptions options_;
  mutable std::mutex mu_;  // a leaf: guards the two below
  std::map<std::string, std::weak_ptr<std::mutex>, std::less<>> locks_;
  ImageUpload last_;
  std::atomic<int> uploads_{0};
};

}  // namespace warren
