// Templates on a remote host (libvirt_host.h): what libvirt_host_templates.cc keeps in
// DATA/templates on this machine, kept there through libvirt's storage API alone. A pool over
// that host's DATA/templates holds, per template, two volumes named by a stem
// "<VmShapeKey>.<8 hex digits>":
//   <stem>.save  libvirt's save image of the VM, written there by virDomainSaveFlags;
//   <stem>.json  its TemplateFile (template_file.h) naming that volume, written last: a save
//                without its .json is unfinished, and goes at the next collection, as do
//                the volumes of a template a newer one of its shape replaced.
// A clone is restored from a copy of the save made on that host (virStorageVolCreateXMLFrom:
// the memory never crosses the network) whose header is overwritten in place
// (virStorageVolUpload of a part; libvirt leaves 64 KiB of room for the XML), then that copy
// is deleted. The template's base stays in that host's DATA/disks, pinned like a VM's top.
// A live copy's memory, written by its snapshot into the copy's directory there
// (live_copy_memory.h), is restored the same way, in place, without the copy
// (RestoreOnRemoteHost).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "lobby/base/clock.h"
#include "lobby/base/log.h"
#include "vmhost/domain_xml.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/random_names.h"
#include "vmhost/save_image.h"
#include "vmhost/storage_pool.h"
#include "vmhost/volume_io.h"

namespace warren {
namespace {

using libvirt_ops::CapEmulatorThreads;

constexpr std::string_view kSaveExt = ".save";
constexpr std::string_view kJsonExt = ".json";
// A template's description is a few hundred bytes; anything much bigger is not one.
constexpr uint64_t kMaxJsonBytes = 64 * 1024;
// The copy of a template's save a clone is restored from, in the clone's own directory.
constexpr char kRestoreCopy[] = "restore.save";

std::vector<std::string> VolumeNames(virStoragePoolPtr pool) {
  std::vector<std::string> names;
  virStorageVolPtr* vols = nullptr;
  const int n = virStoragePoolListAllVolumes(pool, &vols, 0);
  if (n < 0) {
    virResetLastError();
    return names;
  }
  for (int i = 0; i < n; ++i) {
    StorageVolHandle vol(vols[i]);
    names.emplace_back(virStorageVolGetName(vol.get()));
  }
  free(vols);  // NOLINT: allocated by libvirt
  return names;
}

void DeleteVolume(virStoragePoolPtr pool, const std::string& name) {
  StorageVolHandle vol(virStorageVolLookupByName(pool, name.c_str()));
  if (!vol || virStorageVolDelete(vol.get(), 0) < 0) {
    if (vol) LogWarn("vmhost: " + LibvirtError("deleting template volume " + name).ToString());
    virResetLastError();
  }
}

}  // namespace

Result<StoragePoolHandle> LibvirtHost::OpenTemplatesPool(virConnectPtr conn) {
  return OpenDirPool(conn, PoolNameFor(options_.domain_prefix, "templates", TemplatesDir()),
                     TemplatesDir(), /*build=*/true);
}

Result<LibvirtHost::RemoteTemplates> LibvirtHost::ListRemoteTemplates(virConnectPtr conn) {
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenTemplatesPool(conn));
  if (virStoragePoolRefresh(pool.get(), 0) < 0) return LibvirtError("listing the templates");
  const std::vector<std::string> names = VolumeNames(pool.get());
  std::map<std::string, RemoteTemplate> newest;  // by shape key
  std::vector<std::string> claimed;              // the saves a readable .json names
  RemoteTemplates out;
  for (const std::string& name : names) {
    if (!name.ends_with(kJsonExt)) continue;
    StorageVolHandle vol(virStorageVolLookupByName(pool.get(), name.c_str()));
    if (!vol) {
      virResetLastError();
      continue;
    }
    Result<std::string> text = ReadVolumeBytes(conn, vol.get(), 0, kMaxJsonBytes, name);
    if (!text.ok()) return text.status();  // the host does not answer: nothing is stale
    Result<TemplateFile> t = DecodeTemplateFile(*text, name);
    const std::string stem = name.substr(0, name.size() - kJsonExt.size());
    if (!t.ok() || t->memory != stem + std::string(kSaveExt) ||
        std::find(names.begin(), names.end(), t->memory) == names.end()) {
      if (!t.ok()) LogWarn("vmhost: " + t.status().ToString());
      out.stale.push_back(name);  // broken, or its save is gone
      continue;
    }
    claimed.push_back(t->memory);
    RemoteTemplate entry{std::move(t).value(), name};
    const std::string key = VmShapeKey(entry.file.info.shape);
    auto it = newest.find(key);
    if (it == newest.end()) {
      newest.emplace(key, std::move(entry));
      continue;
    }
    // The newer stays (saved_at, then the name: any order, the same each time).
    const bool newer = std::tie(entry.file.info.saved_at, entry.json_volume) >
                       std::tie(it->second.file.info.saved_at, it->second.json_volume);
    RemoteTemplate& older = newer ? it->second : entry;
    out.stale.push_back(older.json_volume);
    out.stale.push_back(older.file.memory);
    if (newer) it->second = std::move(entry);
  }
  for (const std::string& name : names) {
    if (name.ends_with(kSaveExt) &&
        std::find(claimed.begin(), claimed.end(), name) == claimed.end()) {
      out.stale.push_back(name);  // a save never described: cut short
    }
  }
  for (auto& [key, t] : newest) out.current.push_back(std::move(t));
  return out;
}

void LibvirtHost::RemoveRemoteTemplateLeftovers(virConnectPtr conn) {
  Result<RemoteTemplates> all = ListRemoteTemplates(conn);
  if (!all.ok()) {
    LogWarn("vmhost: collecting templates on " + options_.uri + ": " + all.status().ToString());
    return;
  }
  if (all->stale.empty()) return;
  Result<StoragePoolHandle> pool = OpenTemplatesPool(conn);
  if (!pool.ok()) return;
  for (const std::string& name : all->stale) {
    DeleteVolume(pool->get(), name);
    LogInfo("vmhost: removed template volume " + name + " on " + options_.uri +
            " (unfinished or replaced)");
  }
}

Status LibvirtHost::SaveRemoteTemplate(const OpenVm& vm, std::string_view id, TemplateFile t) {
  virDomainPtr dom = vm.dom.get();
  const std::string key = VmShapeKey(t.info.shape);
  const Conn& conn = vm.conn;
  DiskChains::Lock disks = chains_.Acquire();
  Result<StoragePoolHandle> pool = OpenTemplatesPool(conn.get());
  if (!pool.ok()) {
    RemoveTemplateVm(vm, id);
    return pool.status();
  }
  const std::string stem = key + "." + RandomHex(8);
  t.memory = stem + std::string(kSaveExt);
  const std::string json_name = stem + std::string(kJsonExt);
  // Whatever fails, the VM goes and so does what was written of the template.
  auto fail = [&](Status st) {
    RemoveTemplateVm(vm, id);
    if (virStoragePoolRefresh(pool->get(), 0) < 0) virResetLastError();
    DeleteVolume(pool->get(), json_name);
    DeleteVolume(pool->get(), t.memory);
    Result<int> collected = RemoveUnusedDisksLocked(conn, disks);
    if (!collected.ok()) LogWarn("vmhost: " + collected.status().ToString());
    return st;
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = CapEmulatorThreads(dom, id, /*capped=*/false); !st.ok()) {
    LogWarn("vmhost: " + st.ToString());
  }
  const std::string path = TemplatesDir() + "/" + t.memory;
  if (virDomainSaveFlags(dom, path.c_str(), nullptr, VIR_DOMAIN_SAVE_RUNNING) < 0) {
    return fail(LibvirtError("saving vm " + std::string(id) + " as a template on " + uri()));
  }
  const int64_t save_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  if (virStoragePoolRefresh(pool->get(), 0) < 0) virResetLastError();
  StorageVolHandle save(virStorageVolLookupByName(pool->get(), t.memory.c_str()));
  if (!save) return fail(LibvirtError("finding the saved template " + t.memory));
  // The header must be one a restore there can rewrite: checked now, not at the first `new`.
  Result<SaveImageHeader> header = ReadSaveImageHeaderOfVolume(conn.get(), save.get(), t.memory);
  if (!header.ok()) return fail(header.status().Annotate("the saved template"));
  virStorageVolInfo vi{};
  if (virStorageVolGetInfo(save.get(), &vi) < 0) return fail(LibvirtError("sizing " + t.memory));
  t.info.saved_at = SystemClock::Get().NowUnix();
  t.info.bytes = static_cast<int64_t>(vi.allocation);
  const std::string text = EncodeTemplateFile(t);
  const std::string xml = RawVolumeXml(json_name, text.size());
  StorageVolHandle json(virStorageVolCreateXML(pool->get(), xml.c_str(), 0));
  if (!json) return fail(LibvirtError("creating " + json_name + " on " + uri()));
  if (Status st = WriteVolumeBytes(conn.get(), json.get(), 0, text, json_name); !st.ok()) {
    return fail(st);
  }
  // In place: the domain goes (its disk top stays as the base, pinned from now on), and an
  // older template of the shape with its base unless clones stand on it.
  RemoveTemplateVm(vm, id);
  Result<int> collected = RemoveUnusedDisksLocked(conn, disks);
  if (!collected.ok()) LogWarn("vmhost: " + collected.status().ToString());
  LogInfo("vmhost: template " + key + " saved from vm " + std::string(id) + " on " + uri() +
          " tag=" + t.info.tag + " bytes=" + std::to_string(t.info.bytes) +
          " save_ms=" + std::to_string(save_ms));
  return Status::Ok();
}

Status LibvirtHost::RemoveRemoteTemplate(const VmShape& shape) {
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  DiskChains::Lock disks = chains_.Acquire();
  WARREN_ASSIGN_OR_RETURN(RemoteTemplates all, ListRemoteTemplates(conn.get()));
  const std::string key = VmShapeKey(shape);
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenTemplatesPool(conn.get()));
  bool found = false;
  for (const RemoteTemplate& t : all.current) {
    if (VmShapeKey(t.file.info.shape) != key) continue;
    found = true;
    DeleteVolume(pool.get(), t.json_volume);  // first: without it the save is unfinished
    DeleteVolume(pool.get(), t.file.memory);
  }
  if (!found) return NotFound("no template of shape " + key);
  Result<int> collected = RemoveUnusedDisksLocked(conn, disks);
  if (!collected.ok()) return collected.status();
  return Status::Ok();
}

Result<RestoredVm> LibvirtHost::CreateFromRemoteTemplate(const VmSpec& spec,
                                                         std::chrono::steady_clock::time_point t0) {
  const VmShape shape = ShapeOf(spec);
  const std::string key = VmShapeKey(shape);
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  Result<RemoteTemplates> all = ListRemoteTemplates(conn.get());
  if (!all.ok()) return Unavailable("templates on " + uri() + ": " + all.status().message());
  const RemoteTemplate* found = nullptr;
  for (const RemoteTemplate& t : all->current) {
    if (t.file.info.shape == shape) found = &t;
  }
  if (found == nullptr) return NotFound("no template of shape " + key);
  // The save image must be one a restore there can rewrite; anything else is a boot instead.
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle pool, OpenTemplatesPool(conn.get()));
  StorageVolHandle save(virStorageVolLookupByName(pool.get(), found->file.memory.c_str()));
  if (!save) return Unavailable(LibvirtError("finding " + found->file.memory).message());
  Result<SaveImageHeader> header =
      ReadSaveImageHeaderOfVolume(conn.get(), save.get(), found->file.memory);
  if (!header.ok()) return Unavailable("template " + key + ": " + header.status().message());
  // Before any lock: an image upload takes a while (as Create).
  WARREN_ASSIGN_OR_RETURN(GuestImage image, HostImage(conn, spec.image, {}));
  return RestoreClone(spec, found->file, *header, image, RestoreSource{-1, found->file.memory}, t0);
}

Status LibvirtHost::RestoreOnRemoteHost(const Conn& conn, const std::string& id,
                                        const SaveImageHeader& rewritten,
                                        const RestoreSource& source, const std::string& restoring) {
  Result<std::string> head = EncodeSaveImageHeaderInPlace(rewritten);
  if (!head.ok()) return Unavailable(restoring + ": " + head.status().message());
  WARREN_ASSIGN_OR_RETURN(StoragePoolHandle vpool, OpenPool(conn, id, /*build=*/false));
  // What is restored, in the VM's directory: the caller's save image there (a live copy's
  // memory, the caller's to delete), or a copy of the template's made there now (deleted here,
  // whatever happens).
  StorageVolHandle image;
  const bool copy = !source.in_vm_dir;
  if (!copy) {
    image.reset(virStorageVolLookupByName(vpool.get(), source.remote_save.c_str()));
    if (!image) {
      return Unavailable(LibvirtError(restoring + ": finding " + source.remote_save).message());
    }
  } else {
    WARREN_ASSIGN_OR_RETURN(StoragePoolHandle tpool, OpenTemplatesPool(conn.get()));
    StorageVolHandle src(virStorageVolLookupByName(tpool.get(), source.remote_save.c_str()));
    if (!src) {
      return Unavailable(LibvirtError(restoring + ": finding " + source.remote_save).message());
    }
    virStorageVolInfo vi{};
    if (virStorageVolGetInfo(src.get(), &vi) < 0) {
      return LibvirtError("sizing " + source.remote_save);
    }
    const std::string xml = RawVolumeXml(kRestoreCopy, vi.capacity);
    image.reset(virStorageVolCreateXMLFrom(vpool.get(), xml.c_str(), src.get(), 0));
    if (!image) {
      return Unavailable(LibvirtError(restoring + ": copying " + source.remote_save).message());
    }
  }
  Status st = WriteVolumeBytes(conn.get(), image.get(), 0, *head, "a restore image's header");
  if (st.ok()) {
    LibvirtString path(virStorageVolGetPath(image.get()));
    if (!path) {
      st = LibvirtError(restoring);
    } else if (virDomainRestoreFlags(conn.get(), path.get(), nullptr, VIR_DOMAIN_SAVE_RUNNING) <
               0) {
      st = LibvirtError(restoring);
    }
  }
  if (copy && virStorageVolDelete(image.get(), 0) < 0) {
    LogWarn("vmhost: " + LibvirtError("deleting the restore copy of vm " + id).ToString());
  }
  if (!st.ok()) return Unavailable(st.message());
  return Status::Ok();
}

}  // namespace warren
