// Decides whether this host's VMs run under KVM or under TCG (QEMU's software emulation).
// Opening /dev/kvm proves nothing: on this project's machines it is served by kvm_pvm,
// where a bare test guest runs yet an ordinary kernel hangs right after the BIOS. So the
// probe recognises kvm_pvm, and otherwise boots a real guest kernel under KVM for a few
// seconds. Thread-safe (no shared state besides the cache file, written atomically).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

enum class Accel { kKvm, kTcg };

std::string_view AccelName(Accel accel);  // "kvm", "tcg"
// "kvm" or "tcg" (also "qemu", libvirt's name for TCG domains).
Result<Accel> ParseAccel(std::string_view text);

struct KvmProbeOptions {
  // Where the verdict is cached (DATA/accel-probe); empty: no cache. The cache is keyed by
  // the host's kernel release, so a kernel upgrade probes again.
  std::string data_dir;
  // A guest kernel to boot (an image's vmlinuz). Without one the probe cannot tell and
  // picks TCG, uncached.
  std::string kernel;
  // "kvm" or "tcg" forces the answer (a command-line flag). Empty: the WARREN_ACCEL
  // environment variable, then the probe.
  std::string force;
  std::chrono::milliseconds timeout{5000};
  std::string qemu = "qemu-system-x86_64";
  // Seams for tests.
  std::string dev_kvm = "/dev/kvm";
  std::string sys_module = "/sys/module";
};

struct AccelChoice {
  Accel accel = Accel::kTcg;
  std::string reason;  // for the log: "kvm_pvm loaded", "guest kernel booted under KVM"...
  bool cached = false;
  double seconds = 0;  // how long deciding took
};

// Never fails: every doubt ends in TCG, which always works, with the reason said.
AccelChoice ProbeAccel(const KvmProbeOptions& options);

}  // namespace warren
