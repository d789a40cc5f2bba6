// WarmMemory: memory this machine's kernel has handed out once already, held for the next VM
// that starts here (serve --warm-memory).
//
// On a host that is itself a VM and returns its free memory to the hypervisor below
// (virtio-balloon free page reporting), a page the kernel has reported costs a fault in that
// hypervisor the next time it is handed out. Measured on this project's machines: 4.5 ms per
// 2 MiB huge page, against 0.3 ms for memory freed moments before (512 MiB: 1.1-1.7 s against
// 72-92 ms). A restore or a live copy takes ~150 such pages on its critical path (QEMU's guest
// RAM, the memory file's page cache): 0.4-0.5 s of a debian live copy's 1.6 s was that
// (vmhost/README.md, "Where a restore's time goes").
//
// So a WarmMemory holds `bytes` of anonymous memory, touched (huge pages where the kernel gives
// them), and frees it when a VM is about to start on this machine (Release): the start's faults
// then find memory the hypervisor still backs (the kernel reports free memory ~2 s after it is
// freed). It takes the memory again once no start has come for `quiet`, at idle priority (a
// thread of its own, SCHED_IDLE), and only while the host has `floor_bytes` available beyond it;
// while it holds memory and the host's available memory drops below the floor, it lets go.
// What it holds counts as free for the host's admission of VMs (LibvirtHost::Capacity): a VM
// start frees it first. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "lobby/base/status.h"

namespace warren {

// What serve --warm-memory gives when it is "auto": this much on a host that reports its free
// memory to a hypervisor, nothing elsewhere (there the faults cost no more than the zeroing).
inline constexpr int64_t kAutoWarmMemoryMib = 512;

// serve --warm-memory: "auto" (kAutoWarmMemoryMib when `host_reports_free_memory`, else 0) or
// MiB from 0 to 65536, as bytes. InvalidArgument otherwise.
Result<int64_t> ParseWarmMemory(std::string_view text, bool host_reports_free_memory);

// Whether this machine returns free memory to a hypervisor: a virtio balloon device bound to
// its driver with VIRTIO_BALLOON_F_REPORTING negotiated (sysfs, under `sysfs_root`).
bool HostReportsFreeMemory(const std::string& sysfs_root = "/sys");

// The host's available memory now (/proc/meminfo MemAvailable), bytes; -1 when unreadable.
int64_t AvailableMemoryBytes();

struct WarmMemoryOptions {
  int64_t bytes = 0;  // rounded up to whole 2 MiB
  // How long after the last Release it takes the memory again.
  std::chrono::milliseconds quiet{2000};
  // How often it looks at the host's available memory while it holds (or waits to take) it.
  std::chrono::milliseconds check_every{5000};
  // Held only while the host has this much available beyond it.
  int64_t floor_bytes = int64_t{1} << 30;
  // The available memory; AvailableMemoryBytes by default (tests give their own).
  std::function<int64_t()> available_bytes;
};

class WarmMemory {
 public:
  // Starts the thread, which takes the memory at once when the host has room.
  explicit WarmMemory(WarmMemoryOptions options);
  // Stops the thread and frees what is held.
  ~WarmMemory();
  WarmMemory(const WarmMemory&) = delete;
  WarmMemory& operator=(const WarmMemory&) = delete;

  // Frees what is held now (a fill under way stops within one 2 MiB step); it is taken again
  // `quiet` after the last call.
  void Release();
  // Bytes held (touched) now.
  int64_t held_bytes() const { return held_.load(); }
  // Bytes it holds when full.
  int64_t bytes() const { return options_.bytes; }
  // How many times it has been filled completely.
  int fills() const { return fills_.load(); }

 private:
  void Run();
  // Maps and touches the memory in 2 MiB steps (the lock held between them), stopping early
  // on Release or the destructor.
  void Fill(std::unique_lock<std::mutex>& lock);
  void FreeLocked();

  const WarmMemoryOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool filling_ = false;
  bool release_asked_ = false;
  // None until the first Release: the memory is taken at start, whatever `quiet` is.
  std::optional<std::chrono::steady_clock::time_point> last_release_;
  char* region_ = nullptr;  // mapped: bytes() from region_
  std::atomic<int64_t> held_{0};
  std::atomic<int> fills_{0};
  std::thread thread_;
};

}  // namespace warren
