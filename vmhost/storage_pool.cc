#include "vmhost/storage_pool.h"

#include "vmhost/domain_xml.h"

namespace warren {

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
  if (!pool) return LibvirtError("creating storage pool " + name);
  return pool;
}

}  // namespace warren
