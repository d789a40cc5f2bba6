#include "vmhost/storage_pool.h"

#include <cstdint>
#include <cstdio>

#include "vmhost/domain_xml.h"
#include "vmhost/libvirt_xml.h"

namespace warren {
namespace {

// The pool libvirt knows over directory `path`, whatever its name; null when there is none.
StoragePoolHandle PoolOver(virConnectPtr conn, const std::string& path) {
  virStoragePoolPtr* pools = nullptr;
  const int n = virConnectListAllStoragePools(conn, &pools, 0);
  StoragePoolHandle found;
  for (int i = 0; i < n; ++i) {
    StoragePoolHandle p(pools[i]);
    if (found) continue;
    LibvirtString xml(virStoragePoolGetXMLDesc(p.get(), 0));
    Result<std::string> target = xml ? PoolTargetPath(xml.get()) : Result<std::string>("");
    if (target.ok() && *target == path) found = std::move(p);
  }
  if (n < 0) virResetLastError();
  free(pools);  // NOLINT: allocated by libvirt
  return found;
}

}  // namespace

std::string PoolNameFor(std::string_view prefix, std::string_view kind, std::string_view path) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : path) h = (h ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return std::string(prefix) + std::string(kind) + "-" + hex;
}

Result<StoragePoolHandle> OpenDirPool(virConnectPtr conn, const std::string& name,
                                      const std::string& path, bool build) {
  StoragePoolHandle pool(virStoragePoolLookupByName(conn, name.c_str()));
  if (pool) {
    if (virStoragePoolIsActive(pool.get()) != 1 && virStoragePoolCreate(pool.get(), 0) < 0) {
      return LibvirtError("starting storage pool " + name);
    }
    return pool;
  }
  Status st = LibvirtError("looking up storage pool " + name);
  if (st.code() != Code::kNotFound) return st;
  const std::string xml = DirPoolXml(name, path);
  pool.reset(
      virStoragePoolCreateXML(conn, xml.c_str(), build ? VIR_STORAGE_POOL_CREATE_WITH_BUILD : 0));
  if (!pool) {
    Status made = LibvirtError("creating storage pool " + name);
    // libvirt allows one pool per directory: another host object on the same data directory
    // (a test process's own prefix, on a remote host's shared DATA) may have made the view
    // already, under its name. The directory is the truth, so that view serves as well.
    StoragePoolHandle other = PoolOver(conn, path);
    if (!other) return made;
    if (virStoragePoolIsActive(other.get()) != 1 && virStoragePoolCreate(other.get(), 0) < 0) {
      return made;
    }
    return other;
  }
  return pool;
}

}  // namespace warren
