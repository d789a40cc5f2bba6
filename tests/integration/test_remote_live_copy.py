#!/usr/bin/python3
"""cp --live of a VM on a remote host (issue 18), end to end through the SSH lobby with
OpenSSH: test_vm_live_copy.py's checks on the second host.

The second host is second_host.py's (a libvirtd in namespaces of its own, over qemu+ssh);
warren serves with --host local=qemu:///system --host second=... --host-isolated second, no
templates and no pool. A tiny VM made there with `new --host second` runs a web server
started by hand (busybox httpd in a session of its own, serving a file from /tmp, a tmpfs: in
memory only); `cp --live` copies it on that host: the snapshot writes the source's memory into
the copy's own directory there, which is restored in place and deleted (vmhost/README.md,
Remote hosts), so the memory never crosses to this machine. Then:
  - the copy is on the second host, made=live-copy, and the server answers in it without anyone
    starting it there (the copy never booted: its uptime runs on from the source's);
  - it has its own hostname, SSH host key and MAC; the source runs on, its server too;
  - QEMU's own threads of both are capped again; no memory file is left in any VM's directory
    there (seen through the fixture's private directory) or in DATA/tmp here;
  - writes after the copy do not cross either way; a restart boots the copy as itself;
  - rm of both leaves no domain, VM directory or disk layer there.
Prints the time of the whole `cp --live` and the host's breakdown ("[timing] …").

Needs root, libvirt, QEMU, sshd and the tiny image; fails under CI when one is missing.
"""
import glob
import os
import time
import unittest

import second_host
from test_vm_cpu_share import EMULATOR_CAP_PERCENT
from test_vm_live_copy import FETCH, LiveCopyChecks
from two_host_case import TwoHostVmTestCase


class RemoteLiveCopyTest(LiveCopyChecks, TwoHostVmTestCase):
    EGRESS = "all"  # a network device: the copy gets a MAC of its own
    FAR_SERVE_ARGS = ["--vm-templates", "none", "--pool", "none"]

    def far_path(self, *parts):
        return os.path.join(self.far.warren_files(), *parts)

    def assert_capped_there(self, name):
        out = second_host.virsh(self.far.uri, "schedinfo", "warren-" + self.vm_id(name)).stdout
        info = {k.strip(): v.strip() for k, v in (line.split(":", 1)
                                                  for line in out.splitlines() if ":" in line)}
        self.assertEqual(info["emulator_quota"], str(EMULATOR_CAP_PERCENT * 1000), name)

    def test_live_copy_on_the_remote_host(self):
        self.remove_on_exit("rlc-src")
        self.vm_ok("new", "--image", "tiny", "--name", "rlc-src", "--cpu", "1", "--memory",
                   "256M", "--disk", "1G", "--host", "second", timeout=300)
        self.assertEqual(self.ssh_json(self.admin, "stat", "rlc-src")["host"], "second")
        token = self.start_httpd("rlc-src")

        src_uptime = self.uptime("rlc-src")
        self.remove_on_exit("rlc-copy")
        t0 = time.monotonic()
        live = self.ssh_json(self.admin, "cp", "rlc-src", "rlc-copy", "--live", timeout=300)
        live_s = time.monotonic() - t0
        self.assertEqual((live["made"], live["live"], live["synced"], live["source"]),
                         ("live-copy", True, False, "rlc-src"), live)
        print("\n[timing] remote cp --live until the copy answered %.1f s (memory and disk "
              "copied and restored in %.2f s)" % (live_s, live["copy_seconds"]), flush=True)
        for line in self.server.log().splitlines():
            if "copied live from" in line:  # the host's breakdown: snapshot, memory, restore
                print("[timing] " + line.split("vmhost: ", 1)[-1], flush=True)
        self.assert_log("copied live from vm %s" % self.vm_id("rlc-src"))
        stat = self.ssh_json(self.admin, "stat", "rlc-copy")
        self.assertEqual((stat["host"], stat["made"], stat["state"]),
                         ("second", "live-copy", "running"))
        self.assertIn("warren-" + stat["id"], self.far_domains())

        self.assert_runs_the_sources_process_as_itself("rlc-copy", "rlc-src", token,
                                                       src_uptime)
        # The source ran on (paused for the snapshot only), its server too.
        self.assertEqual(self.ssh_json(self.admin, "stat", "rlc-src")["state"], "running")
        self.assertEqual(self.sh("rlc-src", FETCH).strip(), token)
        # QEMU's own threads of both are capped again (uncapped while the memory moved).
        self.assert_capped_there("rlc-src")
        self.assert_capped_there("rlc-copy")
        # The memory file went: nothing in any VM's directory there, nothing here.
        self.assertEqual(glob.glob(self.far_path("vms", "*", "*.save")), [])
        self.assertTrue(os.path.exists(self.far_path("vms", stat["id"], "seed.img")))
        self.assertEqual(glob.glob(os.path.join(self.data, "tmp", "live-*")), [])

        self.assert_writes_do_not_cross("rlc-src", "rlc-copy", token)
        self.assert_restart_boots_it_as_itself("rlc-copy")

        ids = [self.vm_id(n) for n in ("rlc-src", "rlc-copy")]
        for name in ("rlc-copy", "rlc-src"):
            self.vm_ok("rm", name)
        for vm_id in ids:
            self.assertFalse([d for d in self.far_domains() if d.endswith(vm_id)])
            self.assertFalse(os.path.exists(self.far_path("vms", vm_id)))
        self.assertEqual(glob.glob(self.far_path("disks", "*.qcow2")), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
