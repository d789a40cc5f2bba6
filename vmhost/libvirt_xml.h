// Reading the XML libvirt hands back — domain definitions, storage volumes and pools,
// warren's metadata elements — with one parser (libxml2), never by string search. The XML
// warren writes is domain_xml.h's; this is the other direction, tested on stored libvirt
// output (tests/golden/libvirt/). DomainDefinition also edits a definition for a redefine and
// writes it back, so no caller patches XML text either. No libvirt calls, no I/O.
// Thread-safe: every object owns its own document; libxml2 is initialised once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "vmhost/domain_xml.h"

struct _xmlDoc;  // libxml2's document; only libvirt_xml.cc sees its definition

namespace warren {

// A domain definition as virDomainGetXMLDesc returns it (live or inactive).
class DomainDefinition {
 public:
  // Internal when `xml` is not well-formed or its root is no <domain>: libvirt wrote it, so
  // that is never the caller's fault.
  static Result<DomainDefinition> Parse(std::string_view xml);
  DomainDefinition(DomainDefinition&&) noexcept;
  DomainDefinition& operator=(DomainDefinition&&) noexcept;
  ~DomainDefinition();

  // The file of disk `target_dev` ("vda"): its <source file=…/>, the top of its chain.
  // Empty when there is no such disk or it is no file.
  std::string DiskSource(std::string_view target_dev) const;
  // The files below that source as libvirt recorded them, top first: the nested
  // <backingStore><source file=…/> elements of the disk (a running domain lists its whole
  // chain; an inactive definition only what a snapshot wrote into it, often nothing).
  std::vector<std::string> DiskBackingChain(std::string_view target_dev) const;
  // <vcpu>; 0 when absent or unreadable.
  int Vcpus() const;
  // <memory> in MiB, in whatever unit libvirt wrote it (it writes KiB); 0 when absent.
  int64_t MemoryMib() const;
  // Whether libvirt changes the owner of this domain's files at each start: false once a
  // domain-level <seclabel model='dac' relabel='no'> says otherwise (domain_xml.h QemuUser).
  bool DacRelabels() const;
  // Whether some attribute value or element text is a path inside `dir` (an absolute
  // directory, trailing slashes ignored): how a host tells the domains of its data dir.
  bool MentionsPathUnder(std::string_view dir) const;
  // Each <devices><interface type=`type`> element as XML, in order: what a detach names.
  std::vector<std::string> InterfaceXmls(std::string_view type) const;
  // <name>, <uuid>, <title>; empty when absent.
  std::string Name() const;
  std::string Uuid() const;
  std::string Title() const;
  // The <log file=…> of the first <serial>; empty when it has none.
  std::string ConsoleLog() const;
  // The <source path=…> of the unix channel to the virtio-serial port `name`
  // (kControlChannelName, kIdentityChannelName); empty when there is none.
  std::string ChannelSocket(std::string_view name) const;
  // The first child of <metadata> in namespace `ns` as XML, as virDomainGetMetadata would
  // hand it back (ParseVmMetadata reads warren's); empty when there is none.
  std::string MetadataXml(std::string_view ns) const;

  // Points disk `target_dev` at `path` and drops the <backingStore> libvirt recorded for the
  // old file: libvirt honours a recorded chain over the image's own header, so a stale one
  // would boot the new top over the wrong layers. NotFound when the disk is absent.
  Status SetDiskSource(std::string_view target_dev, std::string_view path);
  // <vcpu>. Internal when the definition has none.
  Status SetVcpus(int cpus);
  // <memory> and <currentMemory>, written in KiB as libvirt writes them back. Internal when
  // the definition has no <memory>.
  Status SetMemoryMib(int64_t mib);
  // The value of warren.hostname= in <os><cmdline> (where the guest learns its name). False,
  // and nothing changed, when the command line carries none.
  bool SetCmdlineHostname(std::string_view hostname);

  // The edits that make a saved template's live definition (save_image.h: the XML in the
  // save file's header) into another domain's, for a restore: libvirt restores whatever
  // identity and paths that XML names, so a clone's must all be its own. The disks are
  // SetDiskSource's ("vda": the clone's overlay; "vdb": its seed).
  //
  // <name>. Internal when the definition has none (libvirt always writes one).
  Status SetName(std::string_view name);
  // <uuid>. Internal when the definition has none (libvirt always writes one).
  Status SetUuid(std::string_view uuid);
  // <title>, replaced, or added after <uuid> (and <genid>) when there is none.
  void SetTitle(std::string_view title);
  // The text of <genid> when there is one: false, and nothing changed, when there is none.
  // Never removed or added: <genid> is QEMU's vmgenid device, so either would change the
  // machine the memory stream belongs to. (A restore draws a new one anyway.)
  bool SetGenid(std::string_view uuid);
  // Removes <cputune>'s <emulator_period> and <emulator_quota>: true when one went. A
  // restore loads the memory stream on QEMU's own threads, which that cap slows tenfold
  // (3 s rather than 0.4 s for a tiny guest); the restored domain is capped live after.
  bool RemoveEmulatorQuota();
  // Removes every child of <metadata> in namespace `ns` (a namespace URI): true when one
  // went. The live definition of a template carries its run (kWarrenRunNamespace), which is
  // not the clone's.
  bool RemoveMetadata(std::string_view ns);
  // warren's <metadata> child (kWarrenVmNamespace) becomes VmMetadataXml(id, name, image),
  // replacing the one there (adding <metadata> after <title> or <uuid> when absent).
  Status SetVmMetadata(std::string_view id, std::string_view name, std::string_view image);
  // The <log file=…> of the serial console (each <serial> and <console> with a <log>).
  // NotFound when none has one.
  Status SetConsoleLog(std::string_view path);
  // The <source path=…> of the <channel type='unix'> whose target is the port `name`.
  // NotFound when there is no such channel.
  Status SetChannelSocket(std::string_view name, std::string_view path);
  // The <mac address=…> of each <devices><interface>, in order ("" for one without).
  std::vector<std::string> InterfaceMacs() const;
  // Gives the i-th <interface> `macs[i]`, replacing its <mac> or adding one. InvalidArgument,
  // and nothing changed, when the counts differ or an address is no "xx:xx:xx:xx:xx:xx".
  Status SetInterfaceMacs(const std::vector<std::string>& macs);

  // The definition as XML again, for virDomainDefineXML.
  std::string ToXml() const;

 private:
  struct FreeDoc {
    void operator()(_xmlDoc* doc) const;
  };
  explicit DomainDefinition(std::unique_ptr<_xmlDoc, FreeDoc> doc);
  std::unique_ptr<_xmlDoc, FreeDoc> doc_;
};

// The file a storage volume stands on (virStorageVolGetXMLDesc): <backingStore><path>.
// Empty when the volume has no backing file; Internal when the XML does not parse.
Result<std::string> VolumeBackingPath(std::string_view volume_xml);

// The directory of a storage pool (virStoragePoolGetXMLDesc): <target><path>. Empty when it
// has none; Internal when the XML does not parse.
Result<std::string> PoolTargetPath(std::string_view pool_xml);

// warren's <vm> metadata element as virDomainGetMetadata returns it (without prefixes:
// <vm><id>…</id><name>…</name><image>…</image></vm>). Absent children are empty.
struct VmMetadata {
  std::string id;
  std::string name;
  std::string image;
};
Result<VmMetadata> ParseVmMetadata(std::string_view metadata_xml);

// The start time in warren's live <run started='UNIX'/> element; 0 when it carries none.
Result<int64_t> ParseRunStartedAt(std::string_view metadata_xml);

// The user QEMU runs as for domains of `domain_type` ("qemu", "kvm"), from the daemon's
// capabilities (virConnectGetCapabilities): the DAC security model's
// <baselabel type='…'>+UID:+GID</baselabel>. Unknown (QemuUser::known() false) when the
// daemon has no DAC model (a session daemon, the test driver) or names no such type;
// Internal when the XML does not parse.
Result<QemuUser> ParseQemuUser(std::string_view capabilities_xml, std::string_view domain_type);

}  // namespace warren
