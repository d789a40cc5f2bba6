// Fuzzes the one reader of libvirt's XML (vmhost/libvirt_xml.h). libvirt writes that XML, but
// a domain's definition carries what its users named and a daemon is another program: its
// output is read defensively. Input: one byte choosing the reader, then the XML.
//   0: a domain definition: every accessor; the edits a clone's restore and a resize make,
//      each read back after ToXml and Parse again (what warren writes must parse).
//   1: a storage volume (VolumeBackingPath); 2: a pool (PoolTargetPath); 3: warren's <vm>
//   metadata; 4: its <run> metadata; 5: the daemon's capabilities (ParseQemuUser).
// Invariants: every failure is a Status, never a crash or a libxml2 error on stderr.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/check.h"
#include "vmhost/libvirt_xml.h"

namespace {

using warren::DomainDefinition;
using warren::Result;
using warren::fuzz::Fail;

void ReadAll(const DomainDefinition& d) {
  for (const char* dev : {"vda", "vdb"}) {
    d.DiskSource(dev);
    d.DiskBackingChain(dev);
  }
  d.Vcpus();
  d.MemoryMib();
  d.DacRelabels();
  d.MentionsPathUnder("/var/lib/warren/");
  d.InterfaceXmls("user");
  d.Name();
  d.Uuid();
  d.Title();
  d.ConsoleLog();
  d.ChannelSocket(warren::kControlChannelName);
  d.ChannelSocket(warren::kIdentityChannelName);
  d.MetadataXml(warren::kWarrenVmNamespace);
  d.InterfaceMacs();
}

DomainDefinition Reparse(const DomainDefinition& d) {
  Result<DomainDefinition> again = DomainDefinition::Parse(d.ToXml());
  if (!again.ok()) Fail("our own XML does not parse: " + again.status().ToString());
  return std::move(again).value();
}

void Domain(std::string_view xml) {
  Result<DomainDefinition> parsed = DomainDefinition::Parse(xml);
  if (!parsed.ok()) return;
  DomainDefinition& d = *parsed;
  ReadAll(d);

  const bool named = d.SetName("clone-1").ok();
  const bool uuid = d.SetUuid("6f1c1a44-63c3-4ff2-9c2e-3a1c5d1e4b7a").ok();
  d.SetTitle("a <title> & \"quotes\"");
  (void)d.SetGenid("0d9b0a8e-3d8e-4a4f-8f55-5d1f6a8b3c21");
  (void)d.RemoveEmulatorQuota();
  (void)d.RemoveMetadata(warren::kWarrenRunNamespace);
  const bool meta = d.SetVmMetadata("0123abcd", "clone-1", "debian@20260101").ok();
  const bool disk = d.SetDiskSource("vda", "/var/lib/warren/vms/0123abcd/disk.qcow2").ok();
  const bool cpus = d.SetVcpus(3).ok();
  const bool memory = d.SetMemoryMib(1536).ok();
  (void)d.SetCmdlineHostname("clone-1");
  (void)d.SetConsoleLog("/var/lib/warren/vms/0123abcd/console.log");
  (void)d.SetChannelSocket(warren::kControlChannelName,
                           "/var/lib/warren/vms/0123abcd/control.sock");
  std::vector<std::string> macs(d.InterfaceMacs().size(), "52:54:00:0a:1b:2c");
  (void)d.SetInterfaceMacs(macs);

  DomainDefinition back = Reparse(d);
  ReadAll(back);
  if (named && back.Name() != "clone-1") Fail("SetName did not stick");
  if (uuid && back.Uuid() != "6f1c1a44-63c3-4ff2-9c2e-3a1c5d1e4b7a") Fail("SetUuid");
  if (back.Title() != "a <title> & \"quotes\"") Fail("SetTitle did not stick");
  if (cpus && back.Vcpus() != 3) Fail("SetVcpus did not stick");
  if (memory && back.MemoryMib() != 1536) Fail("SetMemoryMib did not stick");
  if (disk && (back.DiskSource("vda") != "/var/lib/warren/vms/0123abcd/disk.qcow2" ||
               !back.DiskBackingChain("vda").empty())) {
    Fail("SetDiskSource did not stick");
  }
  if (meta) {
    Result<warren::VmMetadata> vm =
        warren::ParseVmMetadata(back.MetadataXml(warren::kWarrenVmNamespace));
    if (!vm.ok() || vm->id != "0123abcd" || vm->name != "clone-1") Fail("SetVmMetadata");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view xml(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      Domain(xml);
      break;
    case 1:
      (void)warren::VolumeBackingPath(xml);
      break;
    case 2:
      (void)warren::PoolTargetPath(xml);
      break;
    case 3:
      (void)warren::ParseVmMetadata(xml);
      break;
    case 4:
      (void)warren::ParseRunStartedAt(xml);
      break;
    case 5:
      (void)warren::ParseQemuUser(xml, "kvm");
      (void)warren::ParseQemuUser(xml, "qemu");
      break;
  }
  return 0;
}
