#include "vmhost/disk_chains.h"

#include <algorithm>
#include <filesystem>

#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/random_names.h"
#include "vmhost/storage_pool.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

bool Under(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() + 1 && path.substr(0, dir.size()) == dir &&
         path[dir.size()] == '/';
}

}  // namespace

DiskChains::DiskChains(DiskChainsOptions options) : options_(std::move(options)) {}

Result<StoragePoolHandle> DiskChains::OpenPool(virConnectPtr conn) {
  // Pools are host-wide but DATA/disks is this data directory's: the name carries a hash
  // of the path, so two warrens (or tests) on one libvirtd never share a disks pool.
  const std::string name = PoolNameFor(options_.domain_prefix, "disks", options_.disks_dir);
  if (!options_.remote) {
    // QEMU runs as another user: DATA must be traversable (never listable) by it before the
    // pool builds DATA/disks in it. (On a remote host the build makes DATA 0755.)
    std::error_code ec;
    const fs::path data = fs::path(options_.disks_dir).parent_path();
    fs::create_directories(data, ec);
    if (ec) return Internal("creating " + data.string() + ": " + ec.message());
    fs::permissions(data, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add,
                    ec);
  }
  return OpenDirPool(conn, name, options_.disks_dir, /*build=*/true);
}

Result<std::string> DiskChains::TopOf(virDomainPtr dom) {
  const bool live = virDomainIsActive(dom) == 1;
  LibvirtString xml(virDomainGetXMLDesc(dom, live ? 0 : VIR_DOMAIN_XML_INACTIVE));
  if (!xml) return LibvirtError("reading a vm's definition");
  WARREN_ASSIGN_OR_RETURN(DomainDefinition def, DomainDefinition::Parse(xml.get()));
  std::string top = def.DiskSource("vda");
  if (top.empty()) return Internal("vm has no disk vda");
  return top;
}

Result<std::vector<std::string>> DiskChains::ChainOf(virConnectPtr conn, const std::string& top) {
  std::vector<std::string> chain;
  std::string path = top;
  bool refreshed = false;
  while (!path.empty()) {
    if (std::find(chain.begin(), chain.end(), path) != chain.end() || chain.size() > 64) {
      return Internal("disk chain of " + top + " loops");
    }
    chain.push_back(path);
    StorageVolHandle vol(virStorageVolLookupByPath(conn, path.c_str()));
    if (!vol) {
      virResetLastError();
      // Our own layers must be known: a chain cut short here would let a collection delete
      // what lies below. Anything else (the image) simply ends the chain.
      if (!Under(path, options_.disks_dir)) break;
      if (refreshed) return Internal("disk " + path + " is not in the disks pool");
      WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
      if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("rescanning the disks");
      refreshed = true;
      chain.pop_back();
      continue;
    }
    LibvirtString xml(virStorageVolGetXMLDesc(vol.get(), 0));
    if (!xml) return LibvirtError("reading disk " + path);
    WARREN_ASSIGN_OR_RETURN(path, VolumeBackingPath(xml.get()));
  }
  return chain;
}

int DiskChains::LayersOf(const std::vector<std::string>& chain) const {
  return static_cast<int>(std::count_if(chain.begin(), chain.end(), [&](const std::string& p) {
    return !Under(p, options_.images_dir);
  }));
}

Result<std::vector<std::string>> DiskChains::InUse(virConnectPtr conn) {
  WARREN_ASSIGN_OR_RETURN(std::vector<DomainHandle> doms,
                          ListDomains(conn, options_.domain_prefix));
  std::vector<std::string> used;
  for (const DomainHandle& dom : doms) {
    Result<std::string> top = TopOf(dom.get());
    if (!top.ok()) {
      if (top.status().code() == Code::kNotFound) continue;  // undefined meanwhile
      return top.status();
    }
    // Another warren's VM on the same libvirt (another data directory): its chain never
    // reaches our layers, and a stale one (its files gone) must not stop our collection.
    if (!Under(*top, options_.disks_dir)) continue;
    WARREN_ASSIGN_OR_RETURN(std::vector<std::string> chain, ChainOf(conn, *top));
    used.insert(used.end(), chain.begin(), chain.end());
  }
  if (options_.pinned_tops) {
    WARREN_ASSIGN_OR_RETURN(std::vector<std::string> pinned, options_.pinned_tops(conn));
    for (const std::string& top : pinned) {
      std::error_code ec;
      // A base deleted by hand protects nothing (and its template cannot restore).
      if (!Under(top, options_.disks_dir) || (!options_.remote && !fs::exists(top, ec))) continue;
      WARREN_ASSIGN_OR_RETURN(std::vector<std::string> chain, ChainOf(conn, top));
      used.insert(used.end(), chain.begin(), chain.end());
    }
  }
  return used;
}

Result<StorageVolHandle> DiskChains::NewOverlay(const Lock& /*lock*/, virConnectPtr conn,
                                                std::string_view owner, const std::string& backing,
                                                uint64_t capacity_bytes,
                                                const QemuUser& qemu_user) {
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  const std::string name = std::string(owner) + "-" + RandomHex(8) + ".qcow2";
  const std::string xml = OverlayVolumeXml(name, capacity_bytes, backing, qemu_user);
  StorageVolHandle vol(virStorageVolCreateXML(pool.get(), xml.c_str(), 0));
  if (!vol) return LibvirtError("creating a disk for vm " + std::string(owner));
  return vol;
}

Result<int> DiskChains::RemoveUnused(const Lock& /*lock*/, virConnectPtr conn) {
  std::error_code ec;
  if (!options_.remote && !fs::exists(options_.disks_dir, ec)) return 0;
  // On a remote host the pool is made to look (a restarted daemon forgot it, while its
  // layers are still there) and forgotten again below when it holds none.
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenPool(conn));
  if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("rescanning the disks");
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> used, InUse(conn));
  std::sort(used.begin(), used.end());
  virStorageVolPtr* vols = nullptr;
  int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
  if (n < 0) return LibvirtError("listing the disks");
  std::vector<StorageVolHandle> owned;
  for (int i = 0; i < n; ++i) owned.emplace_back(vols[i]);
  free(vols);  // NOLINT: allocated by libvirt
  int removed = 0;
  Status first;
  for (const StorageVolHandle& vol : owned) {
    LibvirtString path(virStorageVolGetPath(vol.get()));
    if (!path) continue;
    if (std::binary_search(used.begin(), used.end(), std::string(path.get()))) continue;
    if (virStorageVolDelete(vol.get(), 0) < 0) {
      if (first.ok()) first = LibvirtError(std::string("deleting unused disk ") + path.get());
      continue;
    }
    LogInfo("vmhost: deleted disk layer no vm uses: " + LogQuote(path.get()));
    ++removed;
  }
  if (!first.ok()) return first;
  // An empty pool is forgotten (it comes back with the next layer), so a host without VMs
  // leaves no pool behind.
  if (removed == n && virStoragePoolDestroy(pool.get()) < 0) virResetLastError();
  return removed;
}

void DiskChains::MaybeFlatten(virDomainPtr dom, std::string_view id) {
  if (virDomainIsActive(dom) != 1) return;
  Result<std::string> top = TopOf(dom);
  if (!top.ok()) return;
  Result<std::vector<std::string>> chain = ChainOf(virDomainGetConnect(dom), *top);
  if (!chain.ok()) return;
  int layers = 0;
  std::string base;
  for (const std::string& p : *chain) {
    if (Under(p, options_.images_dir)) {
      base = p;
      break;
    }
    ++layers;
  }
  if (layers <= kMaxDiskLayers || base.empty()) return;
  // block-stream: QEMU copies what the layers between hold into the top while the guest
  // runs, then points the top at the image; the freed layers go at the next collection.
  if (virDomainBlockRebase(dom, "vda", base.c_str(), 0, 0) < 0) {
    LogWarn("vmhost: flattening the disk of vm " + std::string(id) + ": " +
            LibvirtError("block pull").ToString());
    return;
  }
  LogInfo("vmhost: flattening the disk of vm " + std::string(id) + " (" + std::to_string(layers) +
          " layers) onto its image");
}

}  // namespace warren
