// The small steps on one libvirt domain that LibvirtHost's files share (libvirt_host.cc,
// libvirt_host_templates.cc): its state, its warren metadata, its definitions, undefining,
// and the undo list of a multi-step operation. Each call checks libvirt's result and turns
// its error into a Status. Thread-safe as libvirt's calls are; a Rollback is not shared.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "vmhost/disk_chains.h"
#include "vmhost/domain_xml.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/vm_host.h"

namespace warren {

// Undo steps for a multi-step operation, run newest first unless the operation committed.
class Rollback {
 public:
  ~Rollback() {
    if (committed_) return;
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) (*it)();
  }
  void Add(std::function<void()> step) { steps_.push_back(std::move(step)); }
  void Commit() { committed_ = true; }

 private:
  std::vector<std::function<void()>> steps_;
  bool committed_ = false;
};

namespace libvirt_ops {

// The VM state libvirt reports, a crash remembered until the user stops the VM.
Result<VmState> StateOf(virDomainPtr dom);

// Conflict: "cannot VERB a STATE vm".
Status WrongState(std::string_view verb, VmState state);

// Metadata libvirt holds for a domain; empty when the element is absent.
std::string Metadata(virDomainPtr dom, std::string_view ns, unsigned int flags);

// warren's <vm> metadata of a domain; empty fields when it has none (not made by warren)
// or libvirt's copy does not parse.
VmMetadata VmMetadataOf(virDomainPtr dom);

// The domain's definition as libvirt keeps it for the next boot, parsed.
Result<DomainDefinition> InactiveDefinition(virDomainPtr dom, std::string_view id);

// Makes `def` the domain's persistent definition (what the next boot gets).
Status Redefine(virConnectPtr conn, const DomainDefinition& def, std::string_view id);

// Whether its QEMU runs (running or paused).
bool IsActive(virDomainPtr dom);

// Forgets a domain with everything libvirt keeps beside it. Drivers that do not know a
// flag (the test driver, older daemons) reject it, so fall back to fewer.
Status Undefine(virDomainPtr dom, std::string_view id);

// Recorded in the live definition only: it vanishes with the QEMU process, so a stopped
// VM cannot show a stale start time, and survives a warren restart while it runs.
void RecordStart(virDomainPtr dom, int64_t started_at);

// Sets the running domain's cap on QEMU's own threads: kEmulatorQuotaPercent of a core
// (domain_xml.h) when `capped`, none otherwise (a save or restore streams memory on those
// threads, ten times slower under the cap).
Status CapEmulatorThreads(virDomainPtr dom, std::string_view id, bool capped);

// The size of the VM's disk as its guest sees it.
Result<uint64_t> VdaCapacity(virDomainPtr dom, std::string_view id);

// Bytes a file of the disks holds now; 0 when it cannot be read.
int64_t AllocationOf(virConnectPtr conn, const std::string& path);

// Forks a running domain's disk (cp): one atomic external snapshot that keeps no metadata,
// onto the overlay `new_top` warren made (REUSE_EXT: its header already names the current top
// as backing). QEMU switches vda onto it, libvirt updates the live and the persistent
// definition, and the old top is frozen from then on. With `memory_file` (cp --live) the
// guest's memory and device state go there too, as a libvirt save image (save_image.h): the
// guest is paused while they are written and resumed by libvirt after, so memory and disk are
// of one instant. Without it the snapshot is of the disk only and the guest never pauses.
Status SnapshotOnto(virDomainPtr dom, std::string_view id, const std::string& new_top,
                    const std::string& memory_file = "");

// Conflict unless the VM is in one of `allowed` (the states `verb` applies to).
Status RequireState(virDomainPtr dom, std::initializer_list<VmState> allowed,
                    std::string_view verb);

// A disk layer made by a Create or Copy, shared with the undo step that deletes it.
struct NewLayer {
  std::shared_ptr<virStorageVol> vol;
  std::string path;
};

// A new overlay over `backing` whose deletion is the rollback's undo step (`what` names the
// operation in the log), unless `*kept` is true by then.
Result<NewLayer> NewLayerUndoneOnRollback(DiskChains& chains, const DiskChains::Lock& lock,
                                          virConnectPtr conn, std::string_view owner,
                                          const std::string& backing, uint64_t capacity_bytes,
                                          const QemuUser& qemu_user, std::string_view what,
                                          Rollback& rollback,
                                          std::shared_ptr<const bool> kept = nullptr);

}  // namespace libvirt_ops
}  // namespace warren
