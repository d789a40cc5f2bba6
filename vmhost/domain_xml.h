// The XML warren writes for libvirt: a VM's domain definition (a pure function of a
// DomainConfig), its metadata elements, the snapshot of a `cp` (with the memory for `cp
// --live`), and the storage pools and volumes of its files. The exact XML handed to libvirt is
// pinned by golden files (tests/golden/*.xml); what libvirt hands back is read by
// libvirt_xml.h. No I/O, no libvirt calls; every function here is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/markup.h"
#include "vmhost/vm_host.h"

namespace warren {

// The XML namespace of warren's <metadata> element in a domain.
inline constexpr std::string_view kWarrenVmNamespace = "https://warren.dev/xmlns/vm/1";
inline constexpr std::string_view kWarrenVmPrefix = "warren";
// Live-only metadata about the current run (started_at): it vanishes with the QEMU process,
// which is exactly when it stops being true.
inline constexpr std::string_view kWarrenRunNamespace = "https://warren.dev/xmlns/run/1";
inline constexpr std::string_view kWarrenRunPrefix = "warrenrun";

// The virtio-serial port name of the control connection (/dev/virtio-ports/warren.control).
inline constexpr std::string_view kControlChannelName = "warren.control";
// The virtio-serial port on which the guest's root process waiting for a restored VM's
// identity (vmhost/guest/runner/identity_wait.c) reads it, beside the SSH handshake.
inline constexpr std::string_view kIdentityChannelName = "warren.identity";
// The file of a port's host end in the VM's directory: control.sock, identity.sock.
inline std::string PortSocketFile(std::string_view port) {
  return port == kControlChannelName ? "control.sock" : "identity.sock";
}

// Every domain's fair share of the host's CPUs (<cputune>). Shares weigh VMs against each
// other in proportion to their vCPUs (100 per vCPU: cgroup v2's default weight for one, and
// within v2's range up to 100 vCPUs; under cgroup v1, whose default is 1024, VMs yield to
// host processes such as the lobby). Each vCPU may use at most kVcpuQuotaPercent of a core
// and QEMU's own threads (its main loop, I/O and TCG helpers) kEmulatorQuotaPercent of one
// together, so with vCPUs never more than the host's cores (CheckHostRoom) one VM never
// takes a whole host of two or more cores. The emulator cap is a live setting, never in a
// definition: put on once a domain runs (every start, restore and live copy, and on each new
// libvirt connection for the domains libvirtd started on its own), lifted while a template's
// save or a live copy's snapshot streams memory (ten times faster without it).
inline constexpr int kCpuSharesPerVcpu = 100;
inline constexpr int kCpuPeriodMicros = 100'000;
inline constexpr int kVcpuQuotaPercent = 80;
inline constexpr int kEmulatorQuotaPercent = 20;
// <cputune><shares> of a domain with `cpus` vCPUs (also what a resize sets).
int CpuSharesFor(int cpus);

// libvirt's namespace for QEMU-specific domain XML (<qemu:capabilities>).
inline constexpr std::string_view kQemuDomainNamespace =
    "http://libvirt.org/schemas/domain/qemu/1.0";
// The QEMU capability every domain turns off for libvirt: with it, libvirt reads a started
// guest's CPU back one feature at a time (DomainXml says why and what it costs).
inline constexpr std::string_view kSlowCpuReadBackCapability = "cpu-unavailable-features";

// The translation-block cache of every TCG domain, in MiB (<features><tcg><tb-cache>).
// QEMU 7.2 sizes it at 1 GiB by default, and translated code is most of an idle TCG VM's RSS;
// 128 MiB keeps a booted Debian guest near 430 MB with no slower boot (tests/bench/vm_new.py
// measures it: RSS with and without the cap). serve --vm-tb-cache sets another.
inline constexpr int kTcgTbCacheMib = 128;

// The user and group QEMU runs as, as libvirt's DAC driver names them ("+UID:+GID", from the
// daemon's capabilities). When known, warren gives every per-VM file to this user itself and
// tells libvirt not to relabel anything of the domain: libvirt's per-domain relabelling of
// files many domains share (an image's kernel, initrd and rootfs) remembers one owner per
// file and breaks when that record goes stale ("Setting different DAC user or group on …
// which is already in use"). Unknown (uid < 0): libvirt relabels as it does by default.
struct QemuUser {
  int64_t uid = -1;
  int64_t gid = -1;
  bool known() const { return uid >= 0 && gid >= 0; }
};

struct DomainConfig {
  std::string id;  // warren's id; the domain is "<prefix><id>", "warren-<id>" in production
  std::string prefix = "warren-";
  std::string name;  // the user's VM name, kept in metadata and used as the hostname
  std::string uuid;  // fixed by the caller so the XML is reproducible
  std::string image;
  bool kvm = false;  // <domain type='kvm'> when the probe found working KVM, else 'qemu' (TCG)
  int tb_cache_mib = kTcgTbCacheMib;  // TCG's translation cache; 0: QEMU's own default (1 GiB)
  int cpus = 1;
  int64_t memory_mib = 256;
  // Direct kernel boot from the image.
  std::string kernel;
  std::string initrd;
  std::string cmdline;  // the image's command line; warren.hostname= is appended
  // Per-VM files, all in the VM's directory.
  std::string disk;             // qcow2 overlay on the image's rootfs.qcow2 -> /dev/vda
  std::string seed;             // read-only seed image -> /dev/vdb
  std::string console_log;      // the serial console, appended across boots
  std::string control_socket;   // host end of the warren.control virtio-serial port
  std::string identity_socket;  // host end of warren.identity; empty: no such port
  Egress egress = Egress::kAll;
  // The NIC's MAC (52:54:00:xx:xx:xx) when the caller fixes it (a clone restored from a
  // template must keep the one it runs with); empty: libvirt picks one.
  std::string mac;
  // Known: QEMU runs as this user with relabel='no' (see QemuUser), so every file above must
  // be readable (disk: writable) by it already.
  QemuUser qemu_user;
};

// The full domain definition.
std::string DomainXml(const DomainConfig& config);
// The network device of a VM with egress kAll (a <devices> child, as DomainXml writes it and
// as a hot-plug attaches it), with MAC `mac` when one is given.
std::string NetworkInterfaceXml(std::string_view mac = "");

// The <warren:vm> metadata element, with its namespace, as the domain definition holds it.
std::string VmMetadataXml(std::string_view id, std::string_view name, std::string_view image);
// The same element as virDomainSetMetadata takes it: without the prefix, which libvirt adds
// itself (kWarrenVmPrefix, kWarrenVmNamespace).
std::string VmMetadataElement(std::string_view id, std::string_view name, std::string_view image);
// The live-only <run> element (kWarrenRunPrefix, kWarrenRunNamespace) for virDomainSetMetadata:
// when the VM's QEMU started, in Unix seconds.
std::string RunMetadataElement(int64_t started_at);

// The external snapshot that forks a running VM's disk: vda moves onto the existing overlay
// `new_top` (qcow2, its header already naming the old top as backing), the read-only seed vdb
// is left alone. With `memory_file` (a live copy, `cp --live`) the guest's memory is written
// there too, as a libvirt save image (save_image.h), while the guest is paused; without it the
// snapshot is of the disk only.
std::string DiskSnapshotXml(std::string_view new_top, std::string_view memory_file = "");

// A directory storage pool `name` over `path`, traversable but not listable by others (QEMU
// reaches the files by path under another user).
std::string DirPoolXml(std::string_view name, std::string_view path);
// A qcow2 volume `name` of `capacity_bytes` over the qcow2 file `backing`, readable by its
// owner only: `owner` when known (QEMU's user), else root, and libvirt hands it to QEMU's
// user at each start.
std::string OverlayVolumeXml(std::string_view name, uint64_t capacity_bytes,
                             std::string_view backing, const QemuUser& owner = {});
// A raw volume `name` of `capacity_bytes`, readable by its owner only (as above).
std::string RawVolumeXml(std::string_view name, uint64_t capacity_bytes,
                         const QemuUser& owner = {});
// A raw, sparse volume `name` of `capacity_bytes` that every user may read (mode 0644, the
// daemon's user's): a file many VMs share read-only, such as an image's on a remote host
// (host_image_store.h), which QEMU's user reads by path.
std::string SharedFileVolumeXml(std::string_view name, uint64_t capacity_bytes);

}  // namespace warren
