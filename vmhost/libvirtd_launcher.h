// Makes sure a libvirt daemon answers at qemu:///system, starting virtlogd and libvirtd
// when none does (hosts without systemd, containers, CI). When the probe chose TCG but a
// /dev/kvm is visible (kvm_pvm), libvirtd starts in a private mount namespace where
// /dev/kvm is a mode-0 device node of our own: libvirt then never touches the broken KVM
// (its capability probe was recorded stalling ~48 s per domain start with it visible).
// Not /dev/null, the obvious mask: libvirt keys its capability cache on /dev/kvm's ctime,
// /dev/null's changes with every write, and every define re-probed QEMU (measured: 50 s per
// define). The daemons outlive warren on purpose, so running VMs survive a warren restart.
// Thread-safe, but meant to be called once at startup.
#pragma once

#include <chrono>
#include <string>

#include "lobby/base/status.h"

namespace warren {

struct LibvirtdOptions {
  std::string uri = "qemu:///system";
  // Hide /dev/kvm from the daemons we start (see above). Ignored when no /dev/kvm exists.
  bool mask_dev_kvm = false;
  std::string libvirtd = "/usr/sbin/libvirtd";
  std::string virtlogd = "/usr/sbin/virtlogd";
  std::string virtlogd_socket = "/run/libvirt/virtlogd-sock";
  std::string libvirtd_pid_file = "/run/libvirtd.pid";
  // The mode-0 device node bound over /dev/kvm (see above); created when missing.
  std::string kvm_mask_file = "/run/warren/kvm-masked";
  // Where the daemons we start log (their default, syslog, may not exist here).
  std::string log_dir = "/var/log/libvirt";
  // How long the daemon may take to answer once started.
  std::chrono::milliseconds timeout{30000};
};

struct LibvirtdStatus {
  bool started = false;  // we started libvirtd (false: one was already answering)
  bool masked = false;   // the daemon we started cannot see /dev/kvm
  double seconds = 0;    // until the daemon answered
  // A warning for the log, e.g. that an already running libvirtd sees a /dev/kvm that will
  // stall every domain start. Empty when all is well.
  std::string warning;
};

// Connects to options.uri; when that fails and the URI is the local system daemon, starts
// virtlogd (unless its socket answers) and libvirtd, then waits until the daemon answers.
// Unavailable when it still does not within the timeout; other URIs are never started.
Result<LibvirtdStatus> EnsureLibvirtd(const LibvirtdOptions& options);

}  // namespace warren
