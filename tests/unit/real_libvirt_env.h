// RealLibvirtEnv: no fake, the real machinery the real-QEMU tests run on, found once per
// test process: a guest image, a libvirt daemon (started, /dev/kvm masked, when none
// answers and we are root), the KVM probe's verdict and a private data directory under
// /var/lib (QEMU runs as libvirt-qemu and cannot reach /tmp's private dirs or a 0700 home). When
// something is missing the tests skip with the reason instead of failing (under CI they
// fail: tests/unit/skip_or_fail.h).
//
//   WARREN_TEST_IMAGES      directory holding NAME@VERSION image dirs (build-tiny.sh's OUT)
//   WARREN_TEST_IMAGE       NAME@VERSION to boot (default: the newest tiny@* there)
//   WARREN_TEST_DEBIAN_IMAGE  the Debian image for the one end-to-end boot (default: the
//                           newest debian@* there; none: that test skips)
//   WARREN_TEST_LIBVIRT_URI default qemu:///system
//   WARREN_TEST_DATA_DIR    parent of the per-process data dir (default /var/lib/warren-test)
//
// Every domain is named "wt<pid>-<id>" so tests never see or touch anyone else's VMs; the
// global teardown destroys whatever the process left behind, and the first use sweeps
// leftovers of test processes that died. Thread-safe after the first call.
#pragma once

#include <string>

#include "vmhost/kvm_probe.h"
#include "vmhost/libvirt_host.h"

namespace warren {

struct RealLibvirtEnv {
  bool available = false;
  std::string skip_reason;  // why not, when !available
  std::string uri;
  std::string images_dir;
  std::string image;         // NAME@VERSION
  std::string debian_image;  // empty when there is none
  std::string data_dir;
  std::string prefix;
  AccelChoice accel;
  std::string setup_notes;  // libvirtd start and probe, for the test log

  // Options for a host in this environment; stop_timeout kept short for the tests' sake.
  LibvirtHostOptions HostOptions() const;
};

const RealLibvirtEnv& GetRealLibvirtEnv();

// The same for a remote host (issue 18: tests/integration/second_host.py starts one), from
//   WARREN_TEST_REMOTE_LIBVIRT_URI   its URI (qemu+ssh://... or qemu+tls://...); unset: not
//                                    available (only tests that the fixture runs use it)
//   WARREN_TEST_REMOTE_DATA_DIR      the data directory ON that host (default /var/lib/warren)
// and WARREN_TEST_IMAGES for the local catalog the images are uploaded from. Domains are
// "wr<pid>-<id>"; nothing is started or probed here (the host is TCG unless it says
// otherwise, libvirt_accel_probe.h), and the teardown destroys what the process left there.
const RealLibvirtEnv& GetRemoteLibvirtEnv();

// A VM as small as the tiny image allows (1 CPU, 256 MiB, 1 GiB), without network: what the
// tests boot, on any VmHost.
VmSpec TinyVmSpec(std::string id, std::string image);

// Destroys every VM `host` lists and removes every template it holds, ignoring failures: a
// test's teardown, so nothing it made outlives it, also when it failed half-way.
void DestroyEveryVm(VmHost& host);

}  // namespace warren
