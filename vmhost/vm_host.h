// VmHost: one machine that runs warren's VMs. The libvirt + QEMU implementation arrives
// with the VM issue; a host is an object with a libvirt URI from the start so one lobby can
// later drive several hosts. The fake used by tests lives in tests/fakes, never here.
// Implementations are thread-safe: any thread may call any method.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

enum class VmState { kRunning, kPaused, kStopped, kCrashed };

std::string_view VmStateName(VmState state);  // "running", "paused", "stopped", "crashed"

// What to build. The user's VM name is not here on purpose: it lives in the store, so a
// rename never touches the hypervisor and a copied domain never clashes.
struct VmSpec {
  std::string id;     // warren's stable id, [a-z0-9]{8,32}; the domain is "warren-<id>"
  std::string image;  // "NAME@VERSION": VMs keep booting from the version they were made with
  int cpus = 2;
  int64_t memory_mib = 2048;
  int64_t disk_gib = 10;
};

struct VmInfo {
  std::string id;
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

  virtual Result<VmInfo> Inspect(std::string_view id) = 0;
  // Every VM this host holds, for reconciling the store with the hypervisor.
  virtual Result<std::vector<VmInfo>> List() = 0;
  // The last `max_lines` lines of the VM's console log.
  virtual Result<std::string> Console(std::string_view id, int max_lines) = 0;
};

// Checks a VmSpec before any host work: id charset and length, cpus 1..64,
// memory 128 MiB..256 GiB, disk 1..2048 GiB. InvalidArgument with the field named.
Status ValidateVmSpec(const VmSpec& spec);

}  // namespace warren
