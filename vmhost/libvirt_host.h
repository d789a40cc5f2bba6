// LibvirtHost: the real VmHost, QEMU domains through the libvirt C API (never virsh).
// Each VM is a persistent domain "warren-<id>" (so it survives a warren restart) plus a
// directory DATA/vms/<id> managed as a libvirt dir storage pool of the same name:
//   disk.qcow2    overlay on the image's rootfs.qcow2, sized to the VM's disk
//   seed.img      read-only first-boot seed (seed_image.h)
//   console.log   the serial console, appended by virtlogd
//   control.sock  host end of the warren.control virtio-serial port
// Disks and seed go through the storage API (volume create, stream upload), so the same
// code can later drive a remote host by URI.
//
// Thread-safe: libvirt connections are thread-safe and shared; operations on one VM are
// serialised by a per-VM lock, operations on different VMs run in parallel.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "vmhost/kvm_probe.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/vm_host.h"

namespace warren {

struct LibvirtHostOptions {
  std::string uri = "qemu:///system";
  // Under qemu:///system QEMU runs as libvirt-qemu: the data directory must be reachable by
  // that user (not inside a 0700 home).
  std::string data_dir = "/var/lib/warren";
  std::string images_dir = "/var/lib/warren/images";
  Accel accel = Accel::kTcg;
  // How long Stop and Restart wait for a guest to power off by itself before pulling the plug.
  std::chrono::milliseconds stop_timeout{30000};
  std::string mkfs = "mkfs.ext4";
  // Domains (and their pools) are "<prefix><id>"; List sees only this prefix. Tests use
  // their own so they never touch, or count, anyone else's VMs.
  std::string domain_prefix = "warren-";
};

class LibvirtHost final : public VmHost {
 public:
  // Connects lazily, on the first call (and again after the daemon went away).
  explicit LibvirtHost(LibvirtHostOptions options);
  // Adopts an open connection. Lets tests share one test:///default instance (each
  // connection to it is a private world) with the code under test.
  LibvirtHost(LibvirtHostOptions options, ConnectHandle conn);
  ~LibvirtHost() override;

  std::string uri() const override { return options_.uri; }
  Status Create(const VmSpec& spec) override;
  Status Start(std::string_view id) override;
  Status Stop(std::string_view id) override;
  Status Pause(std::string_view id) override;
  Status Resume(std::string_view id) override;
  Status Restart(std::string_view id) override;
  Status Destroy(std::string_view id) override;
  Status Rename(std::string_view id, std::string_view name) override;
  Result<VmInfo> Inspect(std::string_view id) override;
  Result<std::vector<VmInfo>> List() override;
  Result<std::string> Console(std::string_view id, int max_lines) override;

  // The directory of a VM's files.
  std::string VmDir(std::string_view id) const;

 private:
  using Conn = std::shared_ptr<virConnect>;
  Result<Conn> Connect();
  std::shared_ptr<std::mutex> VmLock(std::string_view id);
  std::string DomainName(std::string_view id) const;
  Result<DomainHandle> LookupDomain(const Conn& conn, std::string_view id);
  Result<VmInfo> InfoOf(virDomainPtr dom, std::string_view id);
  // The VM's pool, started over its directory if libvirt does not know it (a restarted
  // daemon forgets transient pools). `build` creates the directory first.
  Result<StoragePoolHandle> OpenPool(const Conn& conn, std::string_view id, bool build);
  // Removes every file of the VM (volumes, then the directory) and its pool.
  Status RemoveFiles(const Conn& conn, std::string_view id);
  Status StartDomain(virDomainPtr dom);
  // LimitExceeded when the host lacks the memory or disk `spec` asks for.
  Status CheckCapacity(const Conn& conn, const VmSpec& spec);
  // Graceful shutdown bounded by stop_timeout, then a hard power-off.
  Status ShutDown(virDomainPtr dom);

  const LibvirtHostOptions options_;
  std::mutex conn_mu_;
  Conn conn_;
  std::mutex locks_mu_;
  std::map<std::string, std::weak_ptr<std::mutex>, std::less<>> locks_;
};

// warren's startup in one call: decides kvm or TCG (ProbeAccel with a kernel from the
// newest image under images_dir; `force_accel` or WARREN_ACCEL override), makes sure the
// daemon answers (EnsureLibvirtd, /dev/kvm masked for TCG), and returns a connected host
// with options.accel set. Logs each decision. Unavailable when no daemon can be had.
Result<std::unique_ptr<LibvirtHost>> StartLibvirtHost(LibvirtHostOptions options,
                                                      std::string_view force_accel = "");

}  // namespace warren
