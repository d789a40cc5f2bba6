#include "vmhost/domain_xml.h"

#include <algorithm>
#include <sstream>

namespace warren {
namespace {

// Attribute values are written in single quotes, which MarkupEscape covers.
std::string Attr(std::string_view v) { return MarkupEscape(v); }

}  // namespace

std::string VmMetadataXml(std::string_view id, std::string_view name, std::string_view image) {
  std::ostringstream x;
  x << "<" << kWarrenVmPrefix << ":vm xmlns:" << kWarrenVmPrefix << "='" << kWarrenVmNamespace
    << "'>\n";
  x << "  <" << kWarrenVmPrefix << ":id>" << MarkupEscape(id) << "</" << kWarrenVmPrefix
    << ":id>\n";
  x << "  <" << kWarrenVmPrefix << ":name>" << MarkupEscape(name) << "</" << kWarrenVmPrefix
    << ":name>\n";
  x << "  <" << kWarrenVmPrefix << ":image>" << MarkupEscape(image) << "</" << kWarrenVmPrefix
    << ":image>\n";
  x << "</" << kWarrenVmPrefix << ":vm>";
  return x.str();
}

std::string VmMetadataElement(std::string_view id, std::string_view name, std::string_view image) {
  return "<vm><id>" + MarkupEscape(id) + "</id><name>" + MarkupEscape(name) + "</name><image>" +
         MarkupEscape(image) + "</image></vm>";
}

std::string RunMetadataElement(int64_t started_at) {
  return "<run started='" + std::to_string(started_at) + "'/>";
}

std::string DiskSnapshotXml(std::string_view new_top, std::string_view memory_file) {
  std::ostringstream x;
  x << "<domainsnapshot>\n";
  if (!memory_file.empty()) {
    x << "  <memory snapshot='external' file='" << Attr(memory_file) << "'/>\n";
  }
  x << "  <disks>\n";
  x << "    <disk name='vda' snapshot='external' type='file'>\n";
  x << "      <driver type='qcow2'/>\n";
  x << "      <source file='" << Attr(new_top) << "'/>\n";
  x << "    </disk>\n";
  x << "    <disk name='vdb' snapshot='no'/>\n";
  x << "  </disks>\n";
  x << "</domainsnapshot>\n";
  return x.str();
}

int CpuSharesFor(int cpus) { return kCpuSharesPerVcpu * std::max(cpus, 1); }

std::string DirPoolXml(std::string_view name, std::string_view path) {
  std::ostringstream x;
  x << "<pool type='dir'>\n";
  x << "  <name>" << MarkupEscape(name) << "</name>\n";
  x << "  <target>\n";
  x << "    <path>" << MarkupEscape(path) << "</path>\n";
  // 0711: QEMU (libvirt-qemu under qemu:///system) must reach the files by path, nobody
  // needs to list them.
  x << "    <permissions>\n      <mode>0711</mode>\n    </permissions>\n";
  x << "  </target>\n";
  x << "</pool>\n";
  return x.str();
}

namespace {

// A volume of `format`; `backing` (a qcow2 file) only when not empty.
std::string VolumeXml(std::string_view name, uint64_t capacity_bytes, std::string_view format,
                      std::string_view backing, const QemuUser& owner) {
  std::ostringstream x;
  x << "<volume>\n";
  x << "  <name>" << MarkupEscape(name) << "</name>\n";
  x << "  <capacity unit='bytes'>" << capacity_bytes << "</capacity>\n";
  x << "  <target>\n";
  x << "    <format type='" << Attr(format) << "'/>\n";
  x << "    <permissions>\n      <mode>0600</mode>\n";
  if (owner.known()) {
    x << "      <owner>" << owner.uid << "</owner>\n      <group>" << owner.gid << "</group>\n";
  }
  x << "    </permissions>\n";
  x << "  </target>\n";
  if (!backing.empty()) {
    x << "  <backingStore>\n";
    x << "    <path>" << MarkupEscape(backing) << "</path>\n";
    x << "    <format type='qcow2'/>\n";
    x << "  </backingStore>\n";
  }
  x << "</volume>\n";
  return x.str();
}

}  // namespace

std::string OverlayVolumeXml(std::string_view name, uint64_t capacity_bytes,
                             std::string_view backing, const QemuUser& owner) {
  return VolumeXml(name, capacity_bytes, "qcow2", backing, owner);
}

std::string RawVolumeXml(std::string_view name, uint64_t capacity_bytes, const QemuUser& owner) {
  return VolumeXml(name, capacity_bytes, "raw", "", owner);
}

std::string SharedFileVolumeXml(std::string_view name, uint64_t capacity_bytes) {
  std::ostringstream x;
  x << "<volume>\n";
  x << "  <name>" << MarkupEscape(name) << "</name>\n";
  x << "  <capacity unit='bytes'>" << capacity_bytes << "</capacity>\n";
  // Sparse: the upload writes every byte anyway.
  x << "  <allocation unit='bytes'>0</allocation>\n";
  x << "  <target>\n";
  x << "    <format type='raw'/>\n";
  x << "    <permissions>\n      <mode>0644</mode>\n    </permissions>\n";
  x << "  </target>\n";
  x << "</volume>\n";
  return x.str();
}

std::string NetworkInterfaceXml(std::string_view mac) {
  // User-mode networking: outbound NAT from inside QEMU (slirp), no bridge, no root on the
  // host; QEMU's sockets carry the guest's connections, which is what lets the host's
  // isolation rules (egress_firewall.h) match them by QEMU's user.
  std::string x = "    <interface type='user'>\n";
  if (!mac.empty()) x += "      <mac address='" + Attr(mac) + "'/>\n";
  x += "      <model type='virtio'/>\n";
  x += "    </interface>\n";
  return x;
}

std::string DomainXml(const DomainConfig& c) {
  // Indent the metadata element to sit inside <metadata>.
  std::string metadata;
  {
    std::istringstream lines(VmMetadataXml(c.id, c.name, c.image));
    for (std::string line; std::getline(lines, line);) metadata += "    " + line + "\n";
  }
  std::string cmdline = c.cmdline;
  if (!cmdline.empty()) cmdline += ' ';
  cmdline += "warren.hostname=" + c.name;

  std::ostringstream x;
  x << "<domain type='" << (c.kvm ? "kvm" : "qemu") << "' xmlns:qemu='" << kQemuDomainNamespace
    << "'>\n";
  x << "  <name>" << MarkupEscape(c.prefix) << MarkupEscape(c.id) << "</name>\n";
  x << "  <uuid>" << MarkupEscape(c.uuid) << "</uuid>\n";
  // The title is what `virsh list --title` shows an operator; the metadata is what warren reads.
  x << "  <title>" << MarkupEscape(c.name) << "</title>\n";
  x << "  <metadata>\n" << metadata << "  </metadata>\n";
  x << "  <memory unit='MiB'>" << c.memory_mib << "</memory>\n";
  x << "  <currentMemory unit='MiB'>" << c.memory_mib << "</currentMemory>\n";
  x << "  <vcpu placement='static'>" << c.cpus << "</vcpu>\n";
  x << "  <cputune>\n";
  x << "    <shares>" << CpuSharesFor(c.cpus) << "</shares>\n";
  x << "    <period>" << kCpuPeriodMicros << "</period>\n";
  x << "    <quota>" << kCpuPeriodMicros / 100 * kVcpuQuotaPercent << "</quota>\n";
  // No emulator cap here: a restore loads the memory stream on QEMU's main thread. LibvirtHost
  // caps a domain's emulator threads once it runs (libvirt_domain_ops.h CapEmulatorThreads).
  x << "  </cputune>\n";
  x << "  <os>\n";
  x << "    <type arch='x86_64' machine='q35'>hvm</type>\n";
  x << "    <kernel>" << MarkupEscape(c.kernel) << "</kernel>\n";
  x << "    <initrd>" << MarkupEscape(c.initrd) << "</initrd>\n";
  x << "    <cmdline>" << MarkupEscape(cmdline) << "</cmdline>\n";
  x << "  </os>\n";
  // ACPI is what makes a graceful Stop (the power button) reach the guest.
  x << "  <features>\n    <acpi/>\n";
  if (!c.kvm && c.tb_cache_mib > 0) {
    x << "    <tcg>\n      <tb-cache unit='MiB'>" << c.tb_cache_mib << "</tb-cache>\n    </tcg>\n";
  }
  x << "  </features>\n";
  // Under TCG libvirt's default CPU model is the portable one; with KVM give the guest the
  // host's CPU so it runs at full speed.
  if (c.kvm) x << "  <cpu mode='host-passthrough' check='none'/>\n";
  x << "  <clock offset='utc'/>\n";
  x << "  <on_poweroff>destroy</on_poweroff>\n";
  x << "  <on_reboot>restart</on_reboot>\n";
  // A crashed guest frees its memory at once; its disk and console log stay for a look.
  x << "  <on_crash>destroy</on_crash>\n";
  x << "  <devices>\n";
  x << "    <disk type='file' device='disk'>\n";
  x << "      <driver name='qemu' type='qcow2' discard='unmap'/>\n";
  x << "      <source file='" << Attr(c.disk) << "'/>\n";
  x << "      <target dev='vda' bus='virtio'/>\n";
  x << "    </disk>\n";
  x << "    <disk type='file' device='disk'>\n";
  x << "      <driver name='qemu' type='raw'/>\n";
  x << "      <source file='" << Attr(c.seed) << "'/>\n";
  x << "      <target dev='vdb' bus='virtio'/>\n";
  x << "      <readonly/>\n";
  x << "    </disk>\n";
  if (c.egress == Egress::kAll) x << NetworkInterfaceXml(c.mac);
  // A pty serial keeps a live console available (virDomainOpenConsole) while virtlogd
  // appends everything to the log file, rotating it so it stays bounded.
  x << "    <serial type='pty'>\n";
  x << "      <log file='" << Attr(c.console_log) << "' append='on'/>\n";
  x << "      <target port='0'/>\n";
  x << "    </serial>\n";
  x << "    <console type='pty'>\n";
  x << "      <target type='serial' port='0'/>\n";
  x << "    </console>\n";
  x << "    <channel type='unix'>\n";
  x << "      <source mode='bind' path='" << Attr(c.control_socket) << "'/>\n";
  x << "      <target type='virtio' name='" << kControlChannelName << "'/>\n";
  x << "    </channel>\n";
  if (!c.identity_socket.empty()) {
    x << "    <channel type='unix'>\n";
    x << "      <source mode='bind' path='" << Attr(c.identity_socket) << "'/>\n";
    x << "      <target type='virtio' name='" << kIdentityChannelName << "'/>\n";
    x << "    </channel>\n";
  }
  // Entropy at boot, so sshd's host keys do not wait for the pool.
  x << "    <rng model='virtio'>\n";
  x << "      <backend model='random'>/dev/urandom</backend>\n";
  x << "    </rng>\n";
  x << "    <video>\n      <model type='none'/>\n    </video>\n";
  // A guest kernel panic is reported (pvpanic) and ends the VM as crashed, rather than a
  // reboot loop nobody sees.
  x << "    <panic model='isa'/>\n";
  x << "    <memballoon model='none'/>\n";
  x << "  </devices>\n";
  if (c.qemu_user.known()) {
    // QEMU still runs as its usual user; libvirt just changes no file's owner for it.
    x << "  <seclabel type='static' model='dac' relabel='no'>\n";
    x << "    <label>+" << c.qemu_user.uid << ":+" << c.qemu_user.gid << "</label>\n";
    x << "  </seclabel>\n";
  }
  // libvirt 9.0 reads the started guest's CPU back feature by feature when QEMU has this
  // capability: ~400 qom-get round trips on QEMU's main thread, 260-300 ms of every start,
  // restore and live copy here (vmhost/README.md). Without it libvirt reads the same answer
  // from two x86 feature-word properties; QEMU's command line and the guest's CPU are the
  // same either way. libvirt notes the domain as tainted (custom-hypervisor-feature).
  x << "  <qemu:capabilities>\n";
  x << "    <qemu:del capability='" << kSlowCpuReadBackCapability << "'/>\n";
  x << "  </qemu:capabilities>\n";
  x << "</domain>\n";
  return x.str();
}

}  // namespace warren
