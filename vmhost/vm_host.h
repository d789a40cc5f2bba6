// VmHost: one machine that runs warren's VMs. LibvirtHost (libvirt_host.h) is the real one;
// a host is an object with a libvirt URI from the start so one lobby can later drive
// several hosts. The fake used by tests lives in tests/fakes, never here; both pass
// tests/unit/vm_host_contract_test.cc. Implementations are thread-safe: any thread may call
// any method.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

enum class VmState { kRunning, kPaused, kStopped, kCrashed };

std::string_view VmStateName(VmState state);  // "running", "paused", "stopped", "crashed"

// What the guest may reach besides the control connection (which needs no network).
// kFull: user-mode NAT to anywhere. kNone: no network device at all (tests, sealed VMs).
enum class Egress { kFull, kNone };

std::string_view EgressName(Egress egress);  // "full", "none"

// What to build. The domain is named by `id`, never by the user's name: the name is a
// label (the store's, mirrored into the domain's metadata and the guest's hostname), so a
// rename never changes a domain's identity and a copied domain never clashes.
struct VmSpec {
  std::string id;     // warren's stable id, [a-z0-9]{8,32}; the domain is "warren-<id>"
  std::string image;  // "NAME@VERSION": VMs keep booting from the version they were made with
  int cpus = 2;
  int64_t memory_mib = 2048;
  int64_t disk_gib = 10;
  // The user's VM name; empty means "use the id". A hostname label: [a-z0-9-], 1..63.
  std::string name;
  Egress egress = Egress::kFull;
  // The guest's identity, in a read-only seed disk it applies at every boot (the setup
  // script runs once, at the first). Layout: packaging/images/README.md.
  // Keys the guest's control sshd accepts for its user: warren's own control key, since
  // users reach a VM through warren, never directly. OpenSSH format, <= 64 KiB.
  std::string authorized_keys;
  std::vector<std::pair<std::string, std::string>> env;  // KEY=VALUE, no newlines
  std::string setup_script;                              // runs once at first boot, <= 10 KiB
  // The guest's SSH host key chosen by warren, so it is pinned before first contact
  // (OpenSSH private key file and its .pub line). Both or neither; a secret, never logged.
  std::string ssh_host_key;
  std::string ssh_host_key_pub;
};

struct VmInfo {
  std::string id;
  std::string name;   // the user's name as last set (Create or Rename)
  std::string image;  // "NAME@VERSION"
  VmState state = VmState::kStopped;
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  int64_t started_at = 0;  // Unix seconds of the last start; 0 when not running
};

class VmHost {
 public:
  virtual ~VmHost() = default;

  // "qemu:///system", "test:///default", "fake://"...
  virtual std::string uri() const = 0;

  // Makes the disk and the domain and starts it. Conflict if the id exists; on failure
  // nothing is left behind.
  virtual Status Create(const VmSpec& spec) = 0;
  // State changes. NotFound for an unknown id; Conflict when the VM is in the wrong state
  // (starting a running VM, pausing a stopped one...).
  virtual Status Start(std::string_view id) = 0;    // stopped -> running
  virtual Status Stop(std::string_view id) = 0;     // running|paused|crashed -> stopped, disk kept
  virtual Status Pause(std::string_view id) = 0;    // running -> paused, memory kept
  virtual Status Resume(std::string_view id) = 0;   // paused -> running
  virtual Status Restart(std::string_view id) = 0;  // running -> running, a fresh boot
  // Removes the domain and its disk whatever the state. NotFound if absent.
  virtual Status Destroy(std::string_view id) = 0;
  // Relabels a VM in any state (running included) without touching the guest: the new name
  // shows in Inspect/List at once; the guest takes it as its hostname at its next boot.
  virtual Status Rename(std::string_view id, std::string_view name) = 0;

  virtual Result<VmInfo> Inspect(std::string_view id) = 0;
  // Every VM this host holds, for reconciling the store with the hypervisor.
  virtual Result<std::vector<VmInfo>> List() = 0;
  // The last `max_lines` lines of the VM's console log.
  virtual Result<std::string> Console(std::string_view id, int max_lines) = 0;
};

// Checks a VmSpec before any host work: id charset and length, cpus 1..64,
// memory 128 MiB..256 GiB, disk 1..2048 GiB, name, env and seed sizes. InvalidArgument
// with the field named.
Status ValidateVmSpec(const VmSpec& spec);

// A VM name as the hypervisor layer accepts it (a hostname label). The store applies the
// stricter user-facing rules before it gets here.
Status ValidateVmName(std::string_view name);

}  // namespace warren
