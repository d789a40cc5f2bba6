// Makes sure a libvirt daemon answers at qemu:///system, starting virtlogd and libvirtd
// when none does (hosts without systemd, containers, CI). When the probe chose TCG but a
// /dev/kvm is visible (kvm_pvm), libvirtd starts in a private mount namespace where
// /dev/kvm is a mode-0 device node of our own: libvirt then never touches the broken KVM
// (its capability probe was recorded stalling ~48 s per domain start with it visible).
// Not /dev/null, the obvious mask: libvirt keys its capability cache on /dev/kvm's ctime,
// /dev/null's changes with every write, and every define re-probed QEMU (measured: 50 s per
// define). The daemons outlive warren on purpose, so running VMs survive a warren restart:
// where systemd is PID 1 they are started as transient units of their own (systemd-run:
// warren-virtlogd.service, warren-libvirtd.service, the mask a BindPaths= of the unit), so
// `systemctl restart warren` does not kill them with warren's cgroup; elsewhere they run
// --daemon in a session of their own. Thread-safe, but meant to be called once at startup.
#pragma once

#include <chrono>
#include <string>
#include <vector>

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
  // Where systemd is PID 1 (this directory exists: sd_booted's test), daemons are started
  // with systemd_run as transient units.
  std::string systemd_booted_dir = "/run/systemd/system";
  std::string systemd_run = "/usr/bin/systemd-run";
  std::string virtlogd_pid_file = "/run/virtlogd.pid";
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

// The command that starts `program` (options.libvirtd or options.virtlogd) as a daemon:
// `PROGRAM --daemon`, or with as_unit that wrapped in systemd-run as the transient unit
// warren-NAME.service (forking, its pid file, LIBVIRT_LOG_OUTPUTS, and for libvirtd
// KillMode=process, as Debian's own unit, and with mask the kvm_mask_file bound over
// /dev/kvm). Without as_unit the mask is the caller's (a mount namespace of the child's).
std::vector<std::string> DaemonCommand(const std::string& program, const LibvirtdOptions& options,
                                       bool mask, bool as_unit);

}  // namespace warren
