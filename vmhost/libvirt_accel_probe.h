// The accelerator of a remote libvirt host (issue 18), decided from what its daemon reports:
// this machine's /dev/kvm says nothing about that one's, and no local QEMU can boot there.
// On this project's machines /dev/kvm exists yet guests hang under it (kvm_probe.h: kvm_pvm),
// so a daemon that offers kvm is not proof that it works: a remote host runs TCG unless the
// operator forces kvm (--accel, or WARREN_ACCEL). libvirt's capability probe can stall for
// about 48 s behind a broken /dev/kvm (docs: "libvirt probe stall"), so the question runs on a
// connection and a thread of its own, and is given up after `timeout` (the thread and its
// connection are left to finish on their own). Thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "vmhost/kvm_probe.h"

namespace warren {

// Never fails: every doubt ends in TCG, with the reason said (what libvirt offered, or that
// it did not answer in time).
AccelChoice ProbeRemoteAccel(const std::string& uri, std::string_view force,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace warren
