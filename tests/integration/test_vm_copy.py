#!/usr/bin/python3
"""cp, resize and rename of VMs end to end on real libvirt + QEMU (TCG), through the SSH
lobby with OpenSSH, on the tiny image (it has resize2fs).

The whole flow: a file written in a VM -> cp (no explicit sync: cp syncs) -> the copy has
it, has its own hostname, and both run independently with writes not crossing -> resize
(disk grown live with the file system, CPUs at the next restart) and rename while running
-> rm both -> no domain, no disk layer, no record. Then the faults: cp onto an existing
name, of an unknown VM, of a stopped VM (it works: the stopped disk is forked), rm of the
source while it is being copied, resize beyond the host and a shrinking disk, and warren
killed with SIGKILL in the middle of a cp (the restart's reconcile removes the half-made
copy and its disk, the source keeps its data).

Needs root, libvirt, QEMU and the tiny image (WARREN_TEST_IMAGES); skips saying why (fails under CI).
"""
import glob
import os
import signal
import subprocess
import time
import unittest

import warren_harness as h
from test_vm_e2e import VmTestCase, domains, domains_of


def disk_files(data):
    return sorted(glob.glob(os.path.join(data, "disks", "*.qcow2")))


class VmCopyTest(VmTestCase):

    def new_tiny(self, name, *flags):
        self.remove_on_exit(name)
        return self.ssh_json(self.admin, "new", "--image", "tiny", "--name", name, "--cpu", "1",
                             "--memory", "256M", "--disk", "1G", *flags, timeout=300)

    def cat(self, vm, path):
        return self.vm_ok("ssh", vm, "cat " + path).stdout

    def assert_all_gone(self, ids):
        listed = [vm["id"] for vm in self.ssh_json(self.admin, "ls")["vms"]]
        for vm_id in ids:
            self.assertNotIn(vm_id, listed)
            self.assertFalse([d for d in domains() if d.endswith(vm_id)], domains())
            self.assertFalse(os.path.exists(os.path.join(self.data, "vms", vm_id)))
        self.assertEqual(disk_files(self.data), [])

    def test_copy_resize_rename_whole_life(self):
        self.new_tiny("cp-src")
        self.vm_ok("ssh", "cp-src", "echo before > ~/f")  # cp must sync it, not the test

        t = time.monotonic()
        copied = self.ssh_json(self.admin, "cp", "cp-src", "cp-dst", timeout=300)
        took = time.monotonic() - t
        self.remove_on_exit("cp-dst")
        self.assertEqual((copied["name"], copied["source"], copied["synced"]),
                         ("cp-dst", "cp-src", True))
        print("\n[timing] cp fork %.3f s, cp until the copy answered %.1f s" %
              (copied["copy_seconds"], took))
        src_id, dst_id = self.vm_id("cp-src"), self.vm_id("cp-dst")
        self.assertNotEqual(src_id, dst_id)
        self.assertTrue([d for d in domains() if d == "warren-" + dst_id], domains())

        # The copy has the file and its own identity; the source kept running.
        self.assertEqual(self.cat("cp-dst", "~/f"), "before\n")
        self.assertEqual(self.vm_ok("ssh", "cp-dst", "hostname").stdout, "cp-dst\n")
        self.assertEqual(self.vm_ok("ssh", "cp-src", "hostname").stdout, "cp-src\n")
        self.assertEqual(self.ssh_json(self.admin, "stat", "cp-src")["state"], "running")
        # Its own SSH host key, though its disk came with the source's.
        pub = "cat /etc/ssh/ssh_host_ed25519_key.pub"
        self.assertNotEqual(self.vm_ok("ssh", "cp-src", pub).stdout.split()[1],
                            self.vm_ok("ssh", "cp-dst", pub).stdout.split()[1])

        # Writes do not cross, either way.
        self.vm_ok("ssh", "cp-src", "echo src > ~/g; echo only-src > ~/h")
        self.vm_ok("ssh", "cp-dst", "echo dst > ~/g")
        self.assertEqual(self.cat("cp-src", "~/g"), "src\n")
        self.assertEqual(self.cat("cp-dst", "~/g"), "dst\n")
        self.assert_status(self.vm("ssh", "cp-dst", "cat ~/h"), "command_failed")

        # resize while running: the disk and the guest's file system grow at once.
        before_kib = int(self.vm_ok("ssh", "cp-dst", "df -k / | tail -1").stdout.split()[1])
        r = self.ssh_json(self.admin, "resize", "cp-dst", "--disk", "2G")
        self.assertEqual((r["disk_gib"], r["filesystem"], r["restart_needed"]), (2, "grown", False))
        after_kib = int(self.vm_ok("ssh", "cp-dst", "df -k / | tail -1").stdout.split()[1])
        self.assertGreater(after_kib, before_kib + 700 * 1024, (before_kib, after_kib))
        # CPUs at the next restart, which the output says.
        r = self.vm_ok("resize", "cp-dst", "--cpu", "2")
        self.assertIn("take effect at the next restart", r.stdout)
        self.assertEqual(self.vm_ok("ssh", "cp-dst", "nproc").stdout, "1\n")
        self.vm_ok("restart", "cp-dst")
        self.assertEqual(self.vm_ok("ssh", "cp-dst", "nproc").stdout, "2\n")
        self.assertEqual(self.cat("cp-dst", "~/g"), "dst\n")
        # Refused: a shrinking disk, more memory than the host has. Nothing changed.
        self.assert_status(self.vm("resize", "cp-dst", "--disk", "1G"), "invalid_argument")
        self.assert_status(self.vm("resize", "cp-dst", "--memory", "60G"), "limit_exceeded")
        stat = self.ssh_json(self.admin, "stat", "cp-dst")
        self.assertEqual((stat["disk_gib"], stat["memory_mib"]), (2, 256))

        # rename while running: commands follow the new name at once.
        self.vm_ok("rename", "cp-dst", "cp-renamed")
        self.remove_on_exit("cp-renamed")
        self.assertEqual(self.cat("cp-renamed", "~/f"), "before\n")
        self.assertEqual(self.ssh_json(self.admin, "stat", "cp-renamed")["state"], "running")
        self.assert_status(self.vm("ssh", "cp-dst", "true"), "not_found")

        # Bad input: onto an existing name, from an unknown VM.
        self.assert_status(self.vm("cp", "cp-src", "cp-renamed"), "conflict")
        self.assert_status(self.vm("cp", "no-such-vm", "cp-other"), "not_found")

        # rm the source: the copy keeps running on the shared layer, and reboots on it.
        self.assertEqual(self.ssh_json(self.admin, "rm", "cp-src")["deleted"], ["cp-src"])
        self.vm_ok("restart", "cp-renamed")
        self.assertEqual(self.cat("cp-renamed", "~/f"), "before\n")
        self.assertEqual(self.ssh_json(self.admin, "rm", "cp-renamed")["deleted"], ["cp-renamed"])
        self.assert_all_gone([src_id, dst_id])

    def test_copy_of_a_stopped_vm_and_rm_during_cp(self):
        self.new_tiny("cp-stopped")
        self.vm_ok("ssh", "cp-stopped", "echo kept > ~/f")
        src_id = self.vm_id("cp-stopped")
        self.vm_ok("stop", "cp-stopped")
        copied = self.ssh_json(self.admin, "cp", "cp-stopped", "cp-of-stopped", timeout=300)
        self.remove_on_exit("cp-of-stopped")
        self.assertEqual((copied["synced"], copied["source_state"]), (False, "stopped"))
        self.assertEqual(self.cat("cp-of-stopped", "~/f"), "kept\n")
        self.assertEqual(self.ssh_json(self.admin, "stat", "cp-stopped")["state"], "stopped")
        self.vm_ok("start", "cp-stopped")
        self.assertEqual(self.cat("cp-stopped", "~/f"), "kept\n")
        copy_id = self.vm_id("cp-of-stopped")
        self.vm_ok("rm", "cp-of-stopped")

        # rm of the source while a cp of it runs: the cp either fails cleanly or makes a
        # whole copy; never a broken one, never leftovers.
        proc = subprocess.Popen(self.ssh_args(self.admin, "cp", "cp-stopped", "cp-race"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while "cp-race" not in self.vm_ok("ls").stdout:
            self.assertLess(time.monotonic(), deadline, "the cp never started")
            time.sleep(0.05)
        rm = self.vm("rm", "cp-stopped")
        out, err = proc.communicate(timeout=300)
        self.assertEqual(rm.returncode, 0, rm.stderr)
        if proc.returncode == 0:
            self.remove_on_exit("cp-race")
            self.assertEqual(self.cat("cp-race", "~/f"), "kept\n")
            race_id = self.vm_id("cp-race")
            self.vm_ok("rm", "cp-race")
        else:
            self.assertEqual(proc.returncode, h.EXIT["conflict"], err)
            self.assertIn("was removed while it was being copied", err)
            race_id = None
        self.assert_all_gone([i for i in (src_id, copy_id, race_id) if i])

    def test_sigkill_during_cp_is_reconciled(self):
        self.new_tiny("cp-killed-src")
        self.vm_ok("ssh", "cp-killed-src", "echo survives > ~/f")
        src_id = self.vm_id("cp-killed-src")
        before = domains_of(self.data)  # this server's: another guest test runs beside it
        proc = subprocess.Popen(self.ssh_args(self.admin, "cp", "cp-killed-src", "cp-killed"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        deadline = time.monotonic() + 120
        # Until the copy's domain exists: warren is killed while the copy boots.
        while len(domains_of(self.data) - before) == 0:
            self.assertLess(time.monotonic(), deadline, "the copy's domain never appeared")
            time.sleep(0.05)
        self.restart_server(sig=signal.SIGKILL)
        proc.communicate(timeout=30)
        names = [vm["name"] for vm in self.ssh_json(self.admin, "ls")["vms"]]
        self.assertEqual(names, ["cp-killed-src"])
        self.assertEqual(domains_of(self.data) - before, set())
        self.assertEqual(self.cat("cp-killed-src", "~/f"), "survives\n")
        # Left: the source's own overlay and the layer it froze, nothing of the copy.
        self.assertEqual(len(disk_files(self.data)), 2,
                         "%s\n%s" % (disk_files(self.data), self.server.log_tail(60)))
        self.vm_ok("rm", "cp-killed-src")
        self.assert_all_gone([src_id])


if __name__ == "__main__":
    h.main()
