#!/usr/bin/python3
"""A busy VM leaves the lobby and the other VMs responsive, on real libvirt + QEMU (TCG).

Two tiny VMs: "burner" with 2 vCPUs (what `new` gives by default) and "quiet" with 1. The
lobby's `ssh whoami` and `ssh quiet true` are timed while the host is otherwise idle of
ours, then again while the burner runs busy loops on every vCPU. Each VM's domain carries a
<cputune> (shares in proportion to its vCPUs, a quota per vCPU) and, once running, a live
quota for QEMU's own threads (also on a VM libvirt started without warren: test_b), so the
loaded figures must stay within a generous multiple of the unloaded ones measured in the
same run, and the burner's QEMU may not take more than its quota allows.
Figures are printed ([timing], [cpu]) for the report; the bounds are deliberately loose (the
machine is shared), the point is "responsive", not a benchmark.

Needs root, libvirt, QEMU and the tiny image (WARREN_TEST_IMAGES); skips saying why.
"""
import glob
import os
import statistics
import subprocess
import time
import unittest

import warren_harness as h
from test_vm_e2e import VmTestCase

# The loaded median may be this many times the unloaded one (plus a floor for noise).
SLOWDOWN_BOUND = 5.0
NOISE_FLOOR_S = 0.5
SAMPLES = 5
# vCPU quota and emulator quota from vmhost/domain_xml.h, as percent of one core, plus
# slack for the sampling.
VCPU_CAP_PERCENT = 80
EMULATOR_CAP_PERCENT = 20
SLACK_PERCENT = 15


def qemu_pid(vm_id):
    with open("/run/libvirt/qemu/warren-%s.pid" % vm_id, encoding="ascii") as f:
        return int(f.read().strip())


def cpu_seconds(pid):
    """User + system CPU of every thread of `pid` so far, in seconds."""
    with open("/proc/%d/stat" % pid, encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After "pid (comm)": state is fields[0]; utime and stime are fields 14 and 15 of stat.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def schedinfo(vm_id):
    """The running domain's CPU tuning as libvirt applied it (virsh in a test is fine)."""
    out = subprocess.run(["virsh", "-c", "qemu:///system", "schedinfo", "warren-" + vm_id],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines()
                                              if ":" in line)}


def throttled_periods(vm_id):
    """How often the kernel held the VM's vCPUs back at their quota (cgroup v1 or v2), or
    None when the cgroup is not found."""
    total, found = 0, False
    for stat in glob.glob("/sys/fs/cgroup/**/*%s*/vcpu*/cpu.stat" % vm_id, recursive=True):
        found = True
        with open(stat, encoding="ascii") as f:
            for line in f:
                if line.startswith("nr_throttled"):
                    total += int(line.split()[1])
    return total if found else None


def cpu_percent(pid, seconds):
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - t0)


class VmCpuShareTest(VmTestCase):

    def new_tiny(self, name, cpus):
        self.remove_on_exit(name)
        return self.ssh_json(self.admin, "new", "--image", "tiny", "--name", name, "--cpu",
                             str(cpus), "--memory", "256M", "--disk", "1G", timeout=300)

    def timed(self, *command):
        t = time.monotonic()
        self.vm_ok(*command, timeout=120)
        return time.monotonic() - t

    def medians(self):
        lobby = statistics.median(self.timed("whoami") for _ in range(SAMPLES))
        vm = statistics.median(self.timed("ssh", "quiet", "true") for _ in range(SAMPLES))
        return lobby, vm

    def test_a_busy_vm_leaves_the_lobby_and_another_vm_responsive(self):
        self.new_tiny("burner", 2)
        self.new_tiny("quiet", 1)
        burner_id = self.vm_id("burner")
        burner = qemu_pid(burner_id)
        # Its share follows its vCPUs; each vCPU and QEMU's own threads are capped.
        tune = schedinfo(burner_id)
        self.assertEqual((tune["cpu_shares"], tune["vcpu_period"], tune["vcpu_quota"],
                          tune["emulator_quota"]),
                         ("200", "100000", str(VCPU_CAP_PERCENT * 1000),
                          str(EMULATOR_CAP_PERCENT * 1000)), tune)
        self.assertEqual(schedinfo(self.vm_id("quiet"))["cpu_shares"], "100")
        self.vm_ok("ssh", "quiet", "true")  # its control connection is up
        idle_cpu = cpu_percent(burner, 3)
        lobby_idle, vm_idle = self.medians()

        # Busy loops on both vCPUs and then some, left running as a job.
        r = self.vm_ok("ssh", "--wait-seconds", "1", "burner",
                       "for i in 1 2 3 4; do (while :; do :; done) & done; wait")
        self.assertIn("burner/", r.stdout + r.stderr)
        time.sleep(3)  # let the loops get going
        busy_cpu = cpu_percent(burner, 5)
        lobby_busy, vm_busy = self.medians()
        busy_cpu_after = cpu_percent(burner, 3)
        throttled = throttled_periods(burner_id)
        for job in self.ssh_json(self.admin, "jobs")["jobs"]:
            if not job["finished"]:
                self.vm_ok("kill", job["job"])

        with open("/proc/loadavg", encoding="ascii") as f:
            load = f.read().split()[0]
        print("\n[cpu] burner qemu (2 vCPUs): idle %.0f%%, busy %.0f%% / %.0f%% of one core; "
              "vCPU periods throttled at the quota: %s; host load %s"
              % (idle_cpu, busy_cpu, busy_cpu_after, throttled, load))
        print("[timing] lobby `ssh whoami` median %.3f s idle, %.3f s busy (x%.1f)"
              % (lobby_idle, lobby_busy, lobby_busy / lobby_idle))
        print("[timing] `ssh quiet true` median %.3f s idle, %.3f s busy (x%.1f)"
              % (vm_idle, vm_busy, vm_busy / vm_idle))
        self.assertLess(lobby_busy, SLOWDOWN_BOUND * lobby_idle + NOISE_FLOOR_S)
        self.assertLess(vm_busy, SLOWDOWN_BOUND * vm_idle + NOISE_FLOOR_S)
        cap = 2 * VCPU_CAP_PERCENT + EMULATOR_CAP_PERCENT + SLACK_PERCENT
        self.assertLess(max(busy_cpu, busy_cpu_after), cap,
                        "the burner's QEMU took more CPU than its <cputune> quota allows")

    def test_b_a_vm_libvirt_started_on_its_own_is_capped_once_warren_connects(self):
        # Definitions carry no emulator cap (it would slow every start): warren puts it on
        # once a domain runs, and on each new libvirt connection for the domains libvirtd
        # started itself (autostart at boot, or anyone with virsh) while warren was away.
        self.new_tiny("autostarted", 1)
        vm_id = self.vm_id("autostarted")
        self.assertEqual(schedinfo(vm_id)["emulator_quota"], str(EMULATOR_CAP_PERCENT * 1000))
        type(self).server.stop()
        for verb in ("destroy", "start"):
            subprocess.run(["virsh", "-c", "qemu:///system", verb, "warren-" + vm_id],
                           capture_output=True, text=True, timeout=120, check=True)
        self.assertNotEqual(schedinfo(vm_id)["emulator_quota"],
                            str(EMULATOR_CAP_PERCENT * 1000), "started capped by libvirt itself")
        type(self).server = self.start_vm_server()
        deadline = time.monotonic() + 60
        while schedinfo(vm_id)["emulator_quota"] != str(EMULATOR_CAP_PERCENT * 1000):
            self.assertLess(time.monotonic(), deadline, "warren never capped the VM it found")
            time.sleep(0.5)


if __name__ == "__main__":
    h.main()
