#include "vmhost/libvirt_domain_ops.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "lobby/base/log.h"

namespace warren::libvirt_ops {

Result<VmState> StateOf(virDomainPtr dom) {
  int state = 0;
  int reason = 0;
  if (virDomainGetState(dom, &state, &reason, 0) < 0) return LibvirtError("reading vm state");
  switch (state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_SHUTDOWN:  // shutting down, still running
      return VmState::kRunning;
    case VIR_DOMAIN_PAUSED:
    case VIR_DOMAIN_PMSUSPENDED:
      return VmState::kPaused;
    case VIR_DOMAIN_CRASHED:
      return VmState::kCrashed;
    case VIR_DOMAIN_SHUTOFF: {
      if (reason != VIR_DOMAIN_SHUTOFF_CRASHED) return VmState::kStopped;
      // libvirt remembers the crash until the next start; a Stop since (autostart cleared)
      // means the user has seen it, and the VM is simply stopped.
      int autostart = 1;
      if (virDomainGetAutostart(dom, &autostart) < 0) virResetLastError();
      return autostart == 0 ? VmState::kStopped : VmState::kCrashed;
    }
    default:
      return VmState::kStopped;
  }
}

Status WrongState(std::string_view verb, VmState state) {
  return Conflict("cannot " + std::string(verb) + " a " + std::string(VmStateName(state)) + " vm");
}

// Metadata libvirt holds for a domain; empty when the element is absent.
std::string Metadata(virDomainPtr dom, std::string_view ns, unsigned int flags) {
  LibvirtString m(
      virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, std::string(ns).c_str(), flags));
  if (!m) {
    virResetLastError();
    return "";
  }
  return m.get();
}

// warren's <vm> metadata of a domain; empty fields when it has none (not made by warren)
// or libvirt's copy does not parse.
VmMetadata VmMetadataOf(virDomainPtr dom) {
  Result<VmMetadata> m = ParseVmMetadata(Metadata(dom, kWarrenVmNamespace, 0));
  return m.ok() ? std::move(m).value() : VmMetadata{};
}

// The domain's definition as libvirt keeps it for the next boot, parsed.
Result<DomainDefinition> InactiveDefinition(virDomainPtr dom, std::string_view id) {
  LibvirtString xml(virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE));
  if (!xml) return LibvirtError("reading the definition of vm " + std::string(id));
  return DomainDefinition::Parse(xml.get());
}

// Makes `def` the domain's persistent definition (what the next boot gets).
Status Redefine(virConnectPtr conn, const DomainDefinition& def, std::string_view id) {
  const std::string xml = def.ToXml();
  DomainHandle redefined(virDomainDefineXML(conn, xml.c_str()));
  if (!redefined) return LibvirtError("redefining vm " + std::string(id));
  return Status::Ok();
}

bool IsActive(virDomainPtr dom) { return virDomainIsActive(dom) == 1; }

// Forgets a domain with everything libvirt keeps beside it. Drivers that do not know a
// flag (the test driver, older daemons) reject it, so fall back to fewer.
Status Undefine(virDomainPtr dom, std::string_view id) {
  const unsigned int all = VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                           VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                           VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA | VIR_DOMAIN_UNDEFINE_NVRAM;
  for (unsigned int flags : {all, 0u}) {
    if (virDomainUndefineFlags(dom, flags) == 0) return Status::Ok();
    virErrorPtr err = virGetLastError();
    bool unsupported =
        err != nullptr && (err->code == VIR_ERR_INVALID_ARG || err->code == VIR_ERR_NO_SUPPORT);
    if (!unsupported || flags == 0) break;
  }
  return LibvirtError("undefining vm " + std::string(id));
}

// Recorded in the live definition only: it vanishes with the QEMU process, so a stopped
// VM cannot show a stale start time, and survives a warren restart while it runs.
void RecordStart(virDomainPtr dom, int64_t started_at) {
  const std::string run = RunMetadataElement(started_at);
  if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, run.c_str(),
                           std::string(kWarrenRunPrefix).c_str(),
                           std::string(kWarrenRunNamespace).c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
    LogWarn(LibvirtError("recording the start time").ToString());
  }
}

Status CapEmulatorThreads(virDomainPtr dom, std::string_view id, bool capped) {
  virTypedParameter params[2]{};
  std::snprintf(params[0].field, sizeof params[0].field, "%s",
                VIR_DOMAIN_SCHEDULER_EMULATOR_PERIOD);
  params[0].type = VIR_TYPED_PARAM_ULLONG;
  params[0].value.ul = kCpuPeriodMicros;
  std::snprintf(params[1].field, sizeof params[1].field, "%s", VIR_DOMAIN_SCHEDULER_EMULATOR_QUOTA);
  params[1].type = VIR_TYPED_PARAM_LLONG;
  params[1].value.l = capped ? kCpuPeriodMicros / 100 * kEmulatorQuotaPercent : -1;
  if (virDomainSetSchedulerParametersFlags(dom, params, 2, VIR_DOMAIN_AFFECT_LIVE) < 0) {
    return LibvirtError(std::string(capped ? "capping" : "uncapping") + " the QEMU threads of vm " +
                        std::string(id));
  }
  return Status::Ok();
}

// The size of the VM's disk as its guest sees it.
Result<uint64_t> VdaCapacity(virDomainPtr dom, std::string_view id) {
  virDomainBlockInfo bi{};
  if (virDomainGetBlockInfo(dom, "vda", &bi, 0) < 0) {
    return LibvirtError("sizing the disk of vm " + std::string(id));
  }
  return bi.capacity;
}

int64_t AllocationOf(virConnectPtr conn, const std::string& path) {
  StorageVolHandle vol(virStorageVolLookupByPath(conn, path.c_str()));
  virStorageVolInfo vi{};
  if (!vol || virStorageVolGetInfo(vol.get(), &vi) < 0) {
    virResetLastError();
    return 0;
  }
  return static_cast<int64_t>(vi.allocation);
}

Status SnapshotOnto(virDomainPtr dom, std::string_view id, const std::string& new_top,
                    const std::string& memory_file) {
  const std::string xml = DiskSnapshotXml(new_top, memory_file);
  // Without VIR_DOMAIN_SNAPSHOT_CREATE_LIVE: memory and disk are taken while the guest is
  // paused, then libvirt resumes it.
  unsigned int flags = VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA | VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC |
                       VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT;
  if (memory_file.empty()) flags |= VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY;
  virDomainSnapshotPtr snap = virDomainSnapshotCreateXML(dom, xml.c_str(), flags);
  if (snap == nullptr) {
    return LibvirtError(std::string(memory_file.empty()
                                        ? "snapshotting the disk of vm "
                                        : "snapshotting the memory and disk of vm ") +
                        std::string(id));
  }
  virDomainSnapshotFree(snap);
  return Status::Ok();
}

// Conflict unless the VM is in one of `allowed` (the states `verb` applies to).
Status RequireState(virDomainPtr dom, std::initializer_list<VmState> allowed,
                    std::string_view verb) {
  WARREN_ASSIGN_OR_RETURN(VmState state, StateOf(dom));
  if (std::find(allowed.begin(), allowed.end(), state) == allowed.end()) {
    return WrongState(verb, state);
  }
  return Status::Ok();
}

// A new overlay over `backing` whose deletion is the rollback's undo step (`what` names the
// operation in the log), unless `*kept` is true by then.
Result<NewLayer> NewLayerUndoneOnRollback(DiskChains& chains, const DiskChains::Lock& lock,
                                          virConnectPtr conn, std::string_view owner,
                                          const std::string& backing, uint64_t capacity_bytes,
                                          const QemuUser& qemu_user, std::string_view what,
                                          Rollback& rollback, std::shared_ptr<const bool> kept) {
  WARREN_ASSIGN_OR_RETURN(StorageVolHandle made,
                          chains.NewOverlay(lock, conn, owner, backing, capacity_bytes, qemu_user));
  NewLayer layer;
  layer.vol = std::shared_ptr<virStorageVol>(std::move(made));
  rollback.Add(
      [vol = layer.vol, kept, context = "cleaning up after a failed " + std::string(what)] {
        if ((kept == nullptr || !*kept) && virStorageVolDelete(vol.get(), 0) < 0) {
          LogWarn(context + ": " + LibvirtError("deleting a disk").ToString());
        }
      });
  LibvirtString path(virStorageVolGetPath(layer.vol.get()));
  if (!path) return LibvirtError("reading volume paths");
  layer.path = path.get();
  return layer;
}

}  // namespace warren::libvirt_ops
