#!/usr/bin/python3
"""cp --live end to end on real libvirt + QEMU (TCG), through the SSH lobby with OpenSSH, on
the tiny image: a running VM copied with its memory.

A web server started by hand in the source (busybox httpd in a session of its own, serving a
file from /tmp, a tmpfs: in memory only) answers in the copy without anyone starting it there:
the copy never booted (its uptime runs on from the source's). The source's QEMU wrote its memory
into a file itself (not libvirt's snapshot). The copy has its own hostname, SSH host key and MAC; writes after
the copy do not cross either way; `stat --json` says made=live-copy; QEMU's own threads of both
are capped again after the copy; no memory file is left in DATA/tmp. --live of a stopped VM
copies its disk as a plain cp does and says so. Prints the time of a whole `cp --live` against
a plain `cp` of the same source ("[timing] …").

Serial (guests share 2 cores); skips when the tiny image or libvirt is missing (fails under
CI).
"""
import glob
import os
import re
import secrets
import shlex
import time
import unittest

import warren_harness as h
from test_vm_cpu_share import EMULATOR_CAP_PERCENT, schedinfo
from test_vm_e2e import IMAGES, VmTestCase, domains, have_image

# Started by hand, left running in a session of its own (tiny has setsid, not nohup).
SERVE = ("mkdir -p /tmp/www && echo %s > /tmp/www/token.txt && "
         "setsid busybox httpd -f -p 127.0.0.1:8000 -h /tmp/www </dev/null >/dev/null 2>&1 &")
FETCH = "wget -qO- http://127.0.0.1:8000/token.txt"
HOST_KEY = "read -r t k c </etc/ssh/ssh_host_ed25519_key.pub; echo \"$k\""
MAC = "for i in /sys/class/net/*; do [ \"${i##*/}\" = lo ] || cat \"$i/address\"; done"


class LiveCopyChecks:
    """What a live copy must show in its guests, for VmTestCase classes (this machine's host
    here, the second host's in test_remote_live_copy.py)."""

    def sh(self, vm, command, **kwargs):
        # One word for the lobby's tokenizer, which hands it to the VM's shell as it was.
        return self.vm_ok("ssh", vm, shlex.quote(command), **kwargs).stdout

    def uptime(self, vm):
        return float(self.sh(vm, "cat /proc/uptime").split()[0])

    def start_httpd(self, vm):
        """Starts busybox httpd by hand in `vm`, serving a fresh token from its memory only;
        the token, once it answers."""
        token = secrets.token_hex(8)
        self.sh(vm, SERVE % token)
        deadline = time.monotonic() + 30
        while self.vm("ssh", vm, shlex.quote(FETCH)).stdout.strip() != token:
            self.assertLess(time.monotonic(), deadline, "httpd never answered in the source")
            time.sleep(0.5)
        # tmpfs: the page it serves is in the source's memory only.
        self.assertIn(" /tmp tmpfs ", self.sh(vm, "cat /proc/mounts"))
        return token

    def assert_runs_the_sources_process_as_itself(self, copy, src, token, src_uptime):
        # The source's process answers in the copy, which never booted.
        self.assertEqual(self.sh(copy, FETCH).strip(), token)
        self.assertGreaterEqual(self.uptime(copy), src_uptime)
        self.assertIn("busybox httpd -f -p 127.0.0.1:8000", self.sh(copy, "ps -o args"))
        # Its own identity: name, host key, MAC.
        self.assertEqual(self.sh(copy, "hostname").strip(), copy)
        self.assertEqual(self.sh(src, "hostname").strip(), src)
        self.assertNotEqual(self.sh(copy, HOST_KEY), self.sh(src, HOST_KEY))
        copy_mac, src_mac = self.sh(copy, MAC).strip(), self.sh(src, MAC).strip()
        self.assertEqual(len(copy_mac), 17, copy_mac)
        self.assertNotEqual(copy_mac, src_mac)

    def assert_writes_do_not_cross(self, src, copy, token):
        # Writes after the copy do not cross, either way; both disks go on from the fork.
        self.sh(src, "echo src > ~/g; echo only-src > ~/h; echo changed > /tmp/www/token.txt")
        self.sh(copy, "echo dst > ~/g")
        self.assertEqual(self.sh(src, "cat ~/g"), "src\n")
        self.assertEqual(self.sh(copy, "cat ~/g"), "dst\n")
        self.assert_status(self.vm("ssh", copy, "cat ~/h"), "command_failed")
        self.assertEqual(self.sh(copy, FETCH).strip(), token)
        self.assertEqual(self.sh(src, FETCH).strip(), "changed")

    def assert_restart_boots_it_as_itself(self, copy):
        # A restart boots the copy from its own disk and seed, as itself.
        self.vm_ok("restart", copy, timeout=300)
        self.assertEqual(self.sh(copy, "hostname").strip(), copy)
        self.assertEqual(self.sh(copy, "cat ~/g"), "dst\n")
        self.assertNotIn("presented a different host key", self.server.log())


@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class LiveCopyTest(LiveCopyChecks, VmTestCase):
    EGRESS = "all"  # a network device: the copy gets a MAC of its own

    def new_tiny(self, name):
        self.remove_on_exit(name)
        return self.ssh_json(self.admin, "new", "--image", "tiny", "--name", name, "--cpu", "1",
                             "--memory", "256M", "--disk", "1G", timeout=300)

    def timed_cp(self, *args):
        t = time.monotonic()
        r = self.ssh_json(self.admin, "cp", *args, timeout=300)
        return r, time.monotonic() - t

    def assert_capped(self, name):
        self.assertEqual(schedinfo(self.vm_id(name))["emulator_quota"],
                         str(EMULATOR_CAP_PERCENT * 1000), name)

    def test_live_copy_runs_the_sources_processes_under_its_own_identity(self):
        self.new_tiny("lc-src")
        token = self.start_httpd("lc-src")

        # A plain cp boots its copy from the disk: nobody started httpd there.
        self.remove_on_exit("lc-plain")
        plain, plain_s = self.timed_cp("lc-src", "lc-plain")
        self.assertEqual((plain["made"], plain["live"], plain["synced"]), ("copy", False, True))
        self.assert_status(self.vm("ssh", "lc-plain", shlex.quote(FETCH)), "command_failed")

        src_uptime = self.uptime("lc-src")
        self.remove_on_exit("lc-copy")
        live, live_s = self.timed_cp("lc-src", "lc-copy", "--live")
        self.assertEqual((live["made"], live["live"], live["synced"], live["source"]),
                         ("live-copy", True, False, "lc-src"), live)
        print("\n[timing] cp --live until the copy answered %.1f s (memory and disk copied and "
              "restored in %.2f s); a plain cp of the same source %.1f s (disk forked in %.2f s)"
              % (live_s, live["copy_seconds"], plain_s, plain["copy_seconds"]))
        for line in self.server.log().splitlines():
            if "copied live from" in line:  # the host's breakdown: snapshot, memory, restore
                print("[timing] " + line.split("vmhost: ", 1)[-1])

        # On this machine the source's own QEMU wrote its memory into a file warren opened (no
        # libvirt snapshot with memory), its disk snapshotted first, the source paused only
        # for those two (qemu_memory_migration.h).
        self.assertRegex(
            self.server.log(),
            r"(?m)vm %s copied live from vm %s in \d+ ms \(the copy's files \d+ ms, the source "
            r"paused \d+ ms: its disk \d+ ms, then its memory, [1-9]\d* bytes; the restore \d+ "
            r"ms\)$" % (re.escape(self.vm_id("lc-copy")), re.escape(self.vm_id("lc-src"))))
        # Its source was booted (a shape of its own): no root process waited in it, so the
        # copy's identity port went unanswered until its control connection was up, then the
        # identity went through sudo once the waiter's socket answered nothing. Its seed holds
        # nothing but its name and key: a hand-out, no seed read.
        self.assertRegex(self.server.log(), r"guest identity: vm %s: .*no process took the "
                         r"identity at its identity port \(no answer yet\); over its control "
                         r"connection then" % re.escape(self.vm_id("lc-copy")))
        self.assertRegex(self.server.log(), r"(?m)guest identity applied vm=%s .* kind=handout "
                         r"via=sudo$" % re.escape(self.vm_id("lc-copy")))
        self.assert_runs_the_sources_process_as_itself("lc-copy", "lc-src", token, src_uptime)
        stat = self.ssh_json(self.admin, "stat", "lc-copy")
        self.assertEqual((stat["made"], stat["state"]), ("live-copy", "running"))
        self.assertGreater(stat["made_ms"], 0)
        # The source ran on (paused for the snapshot only), its server too.
        self.assertEqual(self.ssh_json(self.admin, "stat", "lc-src")["state"], "running")
        self.assertEqual(self.sh("lc-src", FETCH).strip(), token)
        # QEMU's own threads of both are capped again (uncapped while the memory moved).
        self.assert_capped("lc-src")
        self.assert_capped("lc-copy")
        self.assertEqual(glob.glob(os.path.join(self.data, "tmp", "live-*")), [])

        self.assert_writes_do_not_cross("lc-src", "lc-copy", token)
        self.assert_restart_boots_it_as_itself("lc-copy")

        # --live of a stopped VM copies its disk, and says so.
        self.vm_ok("stop", "lc-plain")
        self.remove_on_exit("lc-of-stopped")
        r = self.vm_ok("cp", "lc-plain", "lc-of-stopped", "--live", timeout=300)
        self.assertIn("lc-plain was stopped, not running: copied its disk", r.stdout)
        self.assertEqual(self.ssh_json(self.admin, "stat", "lc-of-stopped")["made"], "copy")

        ids = [self.vm_id(n) for n in ("lc-src", "lc-plain", "lc-copy", "lc-of-stopped")]
        for name in ("lc-copy", "lc-src", "lc-plain", "lc-of-stopped"):
            self.vm_ok("rm", name)
        for vm_id in ids:
            self.assertFalse([d for d in domains() if d.endswith(vm_id)], domains())
        self.assertEqual(glob.glob(os.path.join(self.data, "disks", "*.qcow2")), [])


if __name__ == "__main__":
    h.main()
