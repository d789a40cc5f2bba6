#include "vmhost/host_image_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <nlohmann/json.hpp>

#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/image_layout.h"
#include "vmhost/storage_pool.h"
#include "vmhost/volume_io.h"

namespace warren {
namespace {

constexpr std::array<std::string_view, 3> kFiles = {kImageKernelFile, kImageInitrdFile,
                                                    kImageRootfsFile};
constexpr std::string_view kReadySuffix = ".ready";
// A stream message carries at most 256 KiB (libvirt's RPC limit): bigger sends go in parts.
constexpr size_t kChunk = 256 * 1024;
constexpr int64_t kMaxMarkerBytes = 64 * 1024;

std::string VolumeName(std::string_view ref, std::string_view file) {
  return std::string(ref) + "." + std::string(file);
}

// Sends `size` bytes that `read` produces into a fresh upload of `vol`, and finishes it:
// only a finished stream means the host has them all.
template <typename Read>
Status UploadInto(virConnectPtr conn, virStorageVolPtr vol, uint64_t size, Read read,
                  const std::string& what) {
  StreamHandle st(virStreamNew(conn, 0));
  if (!st) return LibvirtError("opening a stream for " + what);
  if (virStorageVolUpload(vol, st.get(), 0, size, 0) < 0) return LibvirtError("uploading " + what);
  std::vector<char> buf(kChunk);
  uint64_t sent = 0;
  while (sent < size) {
    WARREN_ASSIGN_OR_RETURN(size_t n, read(buf.data(), std::min<uint64_t>(kChunk, size - sent)));
    if (n == 0) return Internal(what + " ended " + std::to_string(size - sent) + " bytes early");
    size_t off = 0;
    while (off < n) {
      const int m = virStreamSend(st.get(), buf.data() + off, n - off);
      if (m < 0) return LibvirtError("uploading " + what);
      off += static_cast<size_t>(m);
    }
    sent += n;
  }
  if (virStreamFinish(st.get()) < 0) return LibvirtError("finishing the upload of " + what);
  return Status::Ok();
}

// A fresh volume `name` of `size` bytes in `pool`, readable by every user (shared by VMs).
Result<StorageVolHandle> NewSharedVolume(virStoragePoolPtr pool, const std::string& name,
                                         uint64_t size) {
  const std::string xml = SharedFileVolumeXml(name, size);
  StorageVolHandle vol(virStorageVolCreateXML(pool, xml.c_str(), 0));
  if (!vol) return LibvirtError("creating image volume " + name);
  return vol;
}

Result<std::string> Download(virConnectPtr conn, virStorageVolPtr vol, int64_t limit,
                             const std::string& what) {
  virStorageVolInfo vi{};
  if (virStorageVolGetInfo(vol, &vi) < 0) return LibvirtError("sizing " + what);
  if (static_cast<int64_t>(vi.capacity) > limit) return InvalidArgument(what + " is too big");
  return ReadVolumeBytes(conn, vol, 0, vi.capacity, what);
}

std::string PathOf(virStorageVolPtr vol) {
  LibvirtString path(virStorageVolGetPath(vol));
  return path ? std::string(path.get()) : std::string();
}

}  // namespace

HostImageStore::HostImageStore(HostImageStoreOptions options) : options_(std::move(options)) {}

Result<StoragePoolHandle> HostImageStore::OpenPool(virConnectPtr conn) {
  return OpenDirPool(conn, options_.pool_name, options_.host_images_dir, /*build=*/true);
}

std::shared_ptr<std::mutex> HostImageStore::LockFor(std::string_view ref) {
  std::lock_guard lock(mu_);
  for (auto it = locks_.begin(); it != locks_.end();) {
    it = it->second.expired() ? locks_.erase(it) : std::next(it);
  }
  auto it = locks_.find(ref);
  std::shared_ptr<std::mutex> m = it == locks_.end() ? nullptr : it->second.lock();
  if (!m) {
    m = std::make_shared<std::mutex>();
    locks_[std::string(ref)] = m;
  }
  return m;
}

ImageUpload HostImageStore::last_upload() const {
  std::lock_guard lock(mu_);
  return last_;
}

Result<GuestImage> HostImageStore::Ensure(virConnectPtr conn, std::string_view ref) {
  if (!IsImageRef(ref)) {
    return InvalidArgument("image must be NAME@VERSION of letters, digits, '.', '_' and '-'");
  }
  std::shared_ptr<std::mutex> ref_mu = LockFor(ref);
  std::lock_guard ref_lock(*ref_mu);  // one upload of a version at a time; the rest wait
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  Result<GuestImage> present = Present(pool.get(), ref);
  if (present.ok() || present.status().code() != Code::kNotFound) return present;
  return Upload(conn, pool.get(), ref);
}

Result<GuestImage> HostImageStore::Present(virStoragePoolPtr pool, std::string_view ref) {
  const std::string marker_name = std::string(ref) + std::string(kReadySuffix);
  StorageVolHandle marker(virStorageVolLookupByName(pool, marker_name.c_str()));
  if (!marker) {
    Status st = LibvirtError("looking up image " + std::string(ref) + " on the host");
    if (st.code() == Code::kNotFound) return NotFound("the host has no image " + std::string(ref));
    return st;
  }
  WARREN_ASSIGN_OR_RETURN(std::string text,
                          Download(virStoragePoolGetConnect(pool), marker.get(), kMaxMarkerBytes,
                                   "the mark of " + marker_name));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto incomplete = [&](const std::string& why) {
    return NotFound("image " + std::string(ref) + " is incomplete on the host: " + why);
  };
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object() ||
      j.value("ref", "") != ref) {
    return incomplete("its mark does not parse");
  }
  GuestImage img;
  img.ref = std::string(ref);
  img.dir = options_.host_images_dir;
  img.cmdline = j.value("cmdline", std::string(kDefaultCmdline));
  img.rootfs_bytes = j.value("rootfs_bytes", int64_t{0});
  for (std::string_view file : kFiles) {
    const std::string name = VolumeName(ref, file);
    const int64_t want = j["files"].value(std::string(file), int64_t{-1});
    StorageVolHandle vol(virStorageVolLookupByName(pool, name.c_str()));
    if (!vol) {
      Status st = LibvirtError("looking up " + name);
      if (st.code() == Code::kNotFound) return incomplete("no " + name);
      return st;
    }
    virStorageVolInfo vi{};
    // The file's own size (for a qcow2, capacity is the virtual disk's).
    if (virStorageVolGetInfoFlags(vol.get(), &vi, VIR_STORAGE_VOL_GET_PHYSICAL) < 0) {
      return LibvirtError("sizing " + name);
    }
    if (static_cast<int64_t>(vi.allocation) != want) {
      return incomplete(name + " holds " + std::to_string(vi.allocation) + " bytes, not " +
                        std::to_string(want));
    }
    std::string path = PathOf(vol.get());
    if (path.empty()) return LibvirtError("reading the path of " + name);
    if (file == kImageKernelFile) img.kernel = std::move(path);
    if (file == kImageInitrdFile) img.initrd = std::move(path);
    if (file == kImageRootfsFile) img.rootfs = std::move(path);
  }
  return img;
}

Result<GuestImage> HostImageStore::Upload(virConnectPtr conn, virStoragePoolPtr pool,
                                          std::string_view ref) {
  Result<GuestImage> local = OpenGuestImage(options_.local_images_dir, ref);
  if (!local.ok() && local.status().code() == Code::kNotFound) {
    return NotFound("no image " + std::string(ref) + " on the host, nor here to copy there (" +
                    local.status().message() + ")");
  }
  if (!local.ok()) return local.status();
  const auto t0 = std::chrono::steady_clock::now();
  // What an upload cut short left: the mark (if any) first, so nothing counts meanwhile.
  if (virStoragePoolRefresh(pool, 0) < 0) return LibvirtError("rescanning the host's images");
  const std::string prefix = std::string(ref) + ".";
  for (std::string_view suffix : {kReadySuffix, std::string_view()}) {
    virStorageVolPtr* vols = nullptr;
    const int n = virStoragePoolListAllVolumes(pool, &vols, 0);
    if (n < 0) return LibvirtError("listing the host's images");
    std::vector<StorageVolHandle> all;
    for (int i = 0; i < n; ++i) all.emplace_back(vols[i]);
    free(vols);  // NOLINT: allocated by libvirt
    for (const StorageVolHandle& vol : all) {
      const std::string_view name = virStorageVolGetName(vol.get());
      if (!name.starts_with(prefix) || !name.ends_with(suffix)) continue;
      if (virStorageVolDelete(vol.get(), 0) < 0) {
        return LibvirtError("deleting " + std::string(name) + ", left by an earlier upload");
      }
    }
  }
  nlohmann::json files = nlohmann::json::object();
  int64_t total = 0;
  for (std::string_view file : kFiles) {
    const std::string local_path = (file == kImageKernelFile)   ? local->kernel
                                   : (file == kImageInitrdFile) ? local->initrd
                                                                : local->rootfs;
    const int fd = open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFound("cannot read " + local_path);
    const off_t size = lseek(fd, 0, SEEK_END);
    lseek(fd, 0, SEEK_SET);
    const std::string name = VolumeName(ref, file);
    Status st = [&]() -> Status {
      if (size < 0) return Internal("sizing " + local_path);
      WARREN_ASSIGN_OR_RETURN(StorageVolHandle vol,
                              NewSharedVolume(pool, name, static_cast<uint64_t>(size)));
      auto read = [&](char* buf, size_t want) -> Result<size_t> {
        ssize_t n = ::read(fd, buf, want);
        while (n < 0 && errno == EINTR) n = ::read(fd, buf, want);
        if (n < 0) return Internal("reading " + local_path);
        return static_cast<size_t>(n);
      };
      return UploadInto(conn, vol.get(), static_cast<uint64_t>(size), read, name);
    }();
    close(fd);
    WARREN_RETURN_IF_ERROR(st);
    files[std::string(file)] = static_cast<int64_t>(size);
    total += size;
  }
  // The mark, last: from now on the version counts as present.
  const std::string mark = nlohmann::json{
      {"ref", std::string(ref)},
      {"cmdline", local->cmdline},
      {"rootfs_bytes", local->rootfs_bytes},
      {"files", files}}.dump();
  const std::string marker_name = std::string(ref) + std::string(kReadySuffix);
  {
    WARREN_ASSIGN_OR_RETURN(StorageVolHandle vol, NewSharedVolume(pool, marker_name, mark.size()));
    size_t off = 0;
    auto read = [&](char* buf, size_t want) -> Result<size_t> {
      const size_t n = std::min(want, mark.size() - off);
      std::copy_n(mark.data() + off, n, buf);
      off += n;
      return n;
    };
    WARREN_RETURN_IF_ERROR(UploadInto(conn, vol.get(), mark.size(), read, marker_name));
  }
  // The rootfs is known as the qcow2 it is from now on (overlays name it as their backing).
  if (virStoragePoolRefresh(pool, 0) < 0) return LibvirtError("rescanning the host's images");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard lock(mu_);
    last_ = {total, seconds};
  }
  uploads_.fetch_add(1);
  LogInfo("vmhost: uploaded image " + std::string(ref) + " to " + options_.host_images_dir +
          " bytes=" + std::to_string(total) + " ms=" + std::to_string(int64_t(seconds * 1000)) +
          " MiB/s=" + std::to_string(seconds > 0 ? double(total) / (1 << 20) / seconds : 0.0));
  return Present(pool, ref);
}

Status HostImageStore::RemoveVersion(virConnectPtr conn, std::string_view ref) {
  if (!IsImageRef(ref)) return InvalidArgument("not an image version: " + std::string(ref));
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  std::shared_ptr<std::mutex> ref_mu = LockFor(ref);
  std::lock_guard ref_lock(*ref_mu);  // not beside an upload of the same version
  bool any = false;
  std::vector<std::string> names = {std::string(ref) + std::string(kReadySuffix)};
  for (std::string_view file : kFiles) names.push_back(VolumeName(ref, file));
  for (const std::string& name : names) {
    StorageVolHandle vol(virStorageVolLookupByName(pool.get(), name.c_str()));
    if (!vol) {
      Status st = LibvirtError("looking up " + name);
      if (st.code() == Code::kNotFound) continue;
      return st;
    }
    if (virStorageVolDelete(vol.get(), 0) < 0) return LibvirtError("deleting " + name);
    any = true;
  }
  if (!any) return NotFound("the host has no image " + std::string(ref));
  return Status::Ok();
}

Result<std::vector<std::string>> HostImageStore::Stored(virConnectPtr conn) {
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("rescanning the host's images");
  virStorageVolPtr* vols = nullptr;
  const int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
  if (n < 0) return LibvirtError("listing the host's images");
  std::vector<std::string> suffixes = {std::string(kReadySuffix)};
  for (std::string_view file : kFiles) suffixes.push_back(VolumeName("", file));
  std::vector<std::string> refs;
  for (int i = 0; i < n; ++i) {
    StorageVolHandle vol(vols[i]);
    const std::string_view name = virStorageVolGetName(vol.get());
    for (const std::string& suffix : suffixes) {
      if (!name.ends_with(suffix)) continue;
      const std::string ref(name.substr(0, name.size() - suffix.size()));
      if (IsImageRef(ref)) refs.push_back(ref);
      break;
    }
  }
  free(vols);  // NOLINT: allocated by libvirt
  std::sort(refs.begin(), refs.end());
  refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
  return refs;
}

Result<std::vector<std::string>> HostImageStore::List(virConnectPtr conn) {
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> stored, Stored(conn));
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  std::vector<std::string> out;
  for (const std::string& ref : stored) {
    std::shared_ptr<std::mutex> ref_mu = LockFor(ref);
    std::lock_guard ref_lock(*ref_mu);  // an upload in progress counts once it is done
    Result<GuestImage> img = Present(pool.get(), ref);
    if (img.ok()) out.push_back(ref);
    if (!img.ok() && img.status().code() != Code::kNotFound) return img.status();
  }
  return out;
}

Result<int64_t> HostImageStore::FreeBytes(virConnectPtr conn) {
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  virStoragePoolInfo info{};
  if (virStoragePoolGetInfo(pool.get(), &info) < 0) return LibvirtError("reading the host's disk");
  return static_cast<int64_t>(info.available);
}

}  // namespace warren
