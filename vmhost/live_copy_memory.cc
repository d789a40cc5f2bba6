#include "vmhost/live_copy_memory.h"

#include <filesystem>

#include "lobby/base/log.h"
#include "vmhost/save_image.h"
#include "vmhost/volume_io.h"

namespace warren {

namespace fs = std::filesystem;

std::unique_ptr<LiveCopyMemory> LiveCopyMemory::LocalFile(const std::string& path) {
  std::unique_ptr<LiveCopyMemory> m(new LiveCopyMemory());
  m->path_ = path;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  fs::remove(path, ec);
  return m;
}

std::unique_ptr<LiveCopyMemory> LiveCopyMemory::InCopyDirectory(virConnectPtr conn,
                                                                StoragePoolHandle pool,
                                                                const std::string& dir) {
  std::unique_ptr<LiveCopyMemory> m(new LiveCopyMemory());
  m->path_ = (fs::path(dir) / kVolumeName).string();
  m->conn_ = conn;
  m->pool_ = std::move(pool);
  return m;
}

LiveCopyMemory::~LiveCopyMemory() {
  if (!pool_) {
    std::error_code ec;
    fs::remove(path_, ec);
    if (ec) LogWarn("vmhost: removing " + LogQuote(path_) + ": " + ec.message());
    return;
  }
  // Found afresh: the snapshot may have written it (or, failing, removed it) since the pool
  // was last read.
  if (virStoragePoolRefresh(pool_.get(), 0) < 0) virResetLastError();
  StorageVolHandle vol(virStorageVolLookupByName(pool_.get(), kVolumeName));
  if (!vol) {
    virResetLastError();  // never written
    return;
  }
  if (virStorageVolDelete(vol.get(), 0) < 0) {
    LogWarn("vmhost: " + LibvirtError("deleting a live copy's memory, " + path_).ToString());
  }
}

Result<SaveImageHeader> LiveCopyMemory::ReadHeader() {
  if (!pool_) return Internal(path_ + " holds QEMU's migration stream alone, no header");
  if (virStoragePoolRefresh(pool_.get(), 0) < 0) return LibvirtError("finding " + path_);
  StorageVolHandle vol(virStorageVolLookupByName(pool_.get(), kVolumeName));
  if (!vol) return LibvirtError("finding " + path_);
  virStorageVolInfo vi{};
  if (virStorageVolGetInfo(vol.get(), &vi) == 0) {
    bytes_ = static_cast<int64_t>(vi.capacity);
  } else {
    virResetLastError();
  }
  return ReadSaveImageHeaderOfVolume(conn_, vol.get(), path_);
}

}  // namespace warren
