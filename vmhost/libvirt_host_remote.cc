// LibvirtHost on a remote host (libvirt_host.h, libvirt_uri.h): the parts that reach that
// host's files through libvirt's storage API instead of this machine's file system — its
// image store, its DATA/vms directory as a pool, the local scratch. The local host's paths
// stay in libvirt_host.cc, unchanged.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/image_layout.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/storage_pool.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

// The names of a pool's volumes, and which of them are directories.
Result<std::vector<std::pair<std::string, bool>>> VolumesOf(virStoragePoolPtr pool) {
  if (virStoragePoolRefresh(pool, 0) < 0) return LibvirtError("rescanning the vms' directories");
  virStorageVolPtr* vols = nullptr;
  const int n = virStoragePoolListAllVolumes(pool, &vols, 0);
  if (n < 0) return LibvirtError("listing the vms' directories");
  std::vector<std::pair<std::string, bool>> out;
  for (int i = 0; i < n; ++i) {
    StorageVolHandle vol(vols[i]);
    virStorageVolInfo vi{};
    const bool dir = virStorageVolGetInfo(vol.get(), &vi) == 0 && vi.type == VIR_STORAGE_VOL_DIR;
    virResetLastError();
    out.emplace_back(virStorageVolGetName(vol.get()), dir);
  }
  free(vols);  // NOLINT: allocated by libvirt
  return out;
}

}  // namespace

std::string LibvirtHost::HostImagesDir() const {
  return remote_ ? (fs::path(options_.data_dir) / "images").string() : options_.images_dir;
}

std::string LibvirtHost::ScratchDir() const {
  if (!options_.scratch_dir.empty()) return options_.scratch_dir;
  if (!remote_) return (fs::path(options_.data_dir) / "tmp").string();
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return (tmp / "warren-scratch").string();
}

Result<GuestImage> LibvirtHost::HostImage(const Conn& conn, std::string_view ref,
                                          const QemuUser& qemu) {
  if (remote_) return images_->Ensure(conn.get(), ref);
  WARREN_ASSIGN_OR_RETURN(GuestImage image, OpenGuestImage(options_.images_dir, ref));
  if (qemu.known()) WARREN_RETURN_IF_ERROR(LetQemuReadImage(image));
  return image;
}

Result<std::vector<std::string>> LibvirtHost::Images() {
  if (!remote_) return ListInstalledImages(options_.images_dir);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  return images_->List(conn.get());
}

Result<StoragePoolHandle> LibvirtHost::OpenVmsPool(const Conn& conn, bool build) {
  const std::string vms = (fs::path(options_.data_dir) / "vms").string();
  return OpenDirPool(conn.get(), PoolNameFor(options_.domain_prefix, "vms", vms), vms, build);
}

Status LibvirtHost::RemoveRemoteFiles(const Conn& conn, std::string_view id) {
  StoragePoolHandle pool(virStoragePoolLookupByName(conn.get(), DomainName(id).c_str()));
  if (!pool) virResetLastError();
  // The VM's directory, seen as a volume of the DATA/vms pool. No DATA/vms there (the pool
  // cannot start): no VM ever had files on this host.
  Result<StoragePoolHandle> vms = OpenVmsPool(conn, /*build=*/false);
  if (!vms.ok() && !pool) return Status::Ok();
  StorageVolHandle dir;
  if (vms.ok()) {
    if (virStoragePoolRefresh(vms->get(), 0) < 0) return LibvirtError("rescanning the vms");
    dir.reset(virStorageVolLookupByName(vms->get(), std::string(id).c_str()));
    if (!dir) virResetLastError();
  }
  if (!pool && dir) {
    Result<StoragePoolHandle> p = OpenPool(conn, id, /*build=*/false);
    if (p.ok()) pool = std::move(p).value();
  }
  Status result;
  if (pool) {
    if (virStoragePoolIsActive(pool.get()) == 1) {
      virStoragePoolRefresh(pool.get(), 0);
      virStorageVolPtr* vols = nullptr;
      const int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
      for (int i = 0; i < n; ++i) {
        StorageVolHandle vol(vols[i]);
        if (virStorageVolDelete(vol.get(), 0) < 0 && result.ok()) {
          result = LibvirtError("deleting a file of vm " + std::string(id));
        }
      }
      free(vols);  // NOLINT: allocated by libvirt
      if (virStoragePoolDestroy(pool.get()) < 0) virResetLastError();
    }
    if (virStoragePoolUndefine(pool.get()) < 0) virResetLastError();
  }
  // The directory itself (an rmdir: whatever is no volume, libvirt's own leftovers, stays).
  if (dir && virStorageVolDelete(dir.get(), 0) < 0 && result.ok()) {
    result = LibvirtError("removing the directory of vm " + std::string(id));
  }
  // No VM left with a directory: no pool left behind either.
  if (vms.ok()) {
    Result<std::vector<std::pair<std::string, bool>>> left = VolumesOf(vms->get());
    if (left.ok() && left->empty() && virStoragePoolDestroy(vms->get()) < 0) virResetLastError();
  }
  return result;
}

void LibvirtHost::RemoveRemoteLeftovers(const Conn& conn) {
  Result<StoragePoolHandle> vms = OpenVmsPool(conn, /*build=*/false);
  if (!vms.ok()) return;  // no DATA/vms: nothing was ever left
  Result<std::vector<std::pair<std::string, bool>>> entries = VolumesOf(vms->get());
  if (!entries.ok()) {
    LogWarn("vmhost: " + entries.status().ToString());
    return;
  }
  if (entries->empty() && virStoragePoolDestroy(vms->get()) < 0) virResetLastError();
  for (const auto& [vm_id, is_dir] : *entries) {
    if (!is_dir) continue;
    Result<DomainHandle> dom = LookupDomain(conn, vm_id);
    if (dom.ok() || dom.status().code() != Code::kNotFound) continue;
    Status st = RemoveRemoteFiles(conn, vm_id);
    if (!st.ok()) LogWarn("vmhost: removing what is left of vm " + vm_id + ": " + st.ToString());
  }
  RemoveDroppedImages(conn);
}

void LibvirtHost::RemoveDroppedImages(const Conn& conn) {
  // A version the host stores that warren's catalog no longer has (the operator removed it)
  // and no VM of the host uses — every VM's definition names its image's kernel in the store
  // (a stopped VM's too), and after the disk collection every layer left is a VM's — cannot
  // serve again: deleted. A version still in the catalog stays, for the next `new`.
  // By volume names alone (every disk collection runs this): a version whose upload was cut
  // short goes too.
  Result<std::vector<std::string>> stored = images_->Stored(conn.get());
  if (!stored.ok()) {
    LogWarn("vmhost: listing the host's images: " + stored.status().ToString());
    return;
  }
  std::vector<std::string> dropped;
  for (const std::string& ref : *stored) {
    if (!IsInstalledImage(options_.images_dir, ref)) dropped.push_back(ref);
  }
  if (dropped.empty()) return;
  Result<std::vector<DomainHandle>> doms = ListDomains(conn.get(), options_.domain_prefix);
  if (!doms.ok()) {
    LogWarn("vmhost: listing the host's vms: " + doms.status().ToString());
    return;
  }
  for (const DomainHandle& dom : *doms) {
    LibvirtString xml(virDomainGetXMLDesc(dom.get(), VIR_DOMAIN_XML_INACTIVE));
    if (!xml) {
      // Undefined meanwhile, or the daemon failed: keep every version rather than guess.
      if (LibvirtError("reading a vm's definition").code() == Code::kNotFound) continue;
      return;
    }
    const std::string_view def = xml.get();
    std::erase_if(dropped, [&](const std::string& ref) {
      return def.find(images_->dir() + "/" + ref + ".") != std::string_view::npos;
    });
  }
  for (const std::string& ref : dropped) {
    Status st = images_->RemoveVersion(conn.get(), ref);
    if (st.ok()) {
      LogInfo("vmhost: removed image " + ref + " from " + options_.uri +
              ": gone from the catalog, no vm of the host uses it");
    } else if (st.code() != Code::kNotFound) {
      LogWarn("vmhost: removing image " + ref + " from " + options_.uri + ": " + st.ToString());
    }
  }
}

}  // namespace warren
