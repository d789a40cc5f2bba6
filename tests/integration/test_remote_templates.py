#!/usr/bin/python3
"""Templates per host (issue 18): `new` on a remote host restores from that host's own saved
template, through the real surfaces.

The second host is second_host.py's (a libvirtd in namespaces of its own, over qemu+ssh).
warren serves with --host local=qemu:///system --host second=... --host-isolated second
--vm-templates default --pool none --vm-image tiny, so its template keeper makes the default
shape's template on each host (docs/multi_host.md; on the remote one its files are volumes
there: vmhost/README.md, Remote hosts):
  1. both hosts get their own template: this machine's in DATA/templates/<key>/, the second
     host's as <key>.<hex>.save and .json in its own DATA/templates (seen here only through the
     fixture's private directory);
  2. `new --host second` twice: both say made=template, run there, and differ in hostname,
     MAC, random numbers and SSH host key, with clocks within 0.1 s of this host's; each took
     its identity from the root process waiting in the template (no sudo); a restart boots
     one with the same identity; no restore copy is left in the VMs' directories there;
  3. a damaged save image there is not restored: `new --host second` boots instead and says
     so in the log, and the keeper makes the template there again.

Needs root, libvirt, QEMU, sshd and the tiny image; fails under CI when one is missing.
"""
import glob
import os
import time
import unittest

from test_vm_templates import IdentityChecks
from two_host_case import TwoHostVmTestCase


class RemoteTemplateTest(IdentityChecks, TwoHostVmTestCase):
    EGRESS = "all"  # a network device: clones get MACs of their own
    FAR_SERVE_ARGS = ["--vm-image", "tiny", "--vm-templates", "default", "--pool", "none"]

    def far_templates(self):
        return sorted(glob.glob(os.path.join(self.far.warren_files(), "templates", "*")))

    def wait_for_templates(self, timeout=400):
        """Until each host has a complete template (the remote one: its .json, written last)."""
        deadline = time.monotonic() + timeout
        while True:
            local = glob.glob(os.path.join(self.data, "templates", "*", "template.json"))
            far = [f for f in self.far_templates() if f.endswith(".json")]
            if local and far:
                return
            self.assertLess(time.monotonic(), deadline, "templates after %d s: here %s, "
                            "there %s\n%s" % (timeout, local, self.far_templates(),
                                              self.server.log()[-3000:]))
            time.sleep(1)

    def test_1_each_host_keeps_its_own_template(self):
        t0 = time.monotonic()
        self.wait_for_templates()
        print("[timing] both templates made %.0f s into the test" % (time.monotonic() - t0),
              flush=True)
        far = self.far_templates()
        self.assertEqual(len(far), 2, far)
        self.assertTrue(far[0].endswith(".json") and far[1].endswith(".save"), far)
        self.assertEqual(os.path.basename(far[0])[:-5], os.path.basename(far[1])[:-5])
        self.assert_log("made the template of tiny@")
        self.assert_log("on host second")

    def test_2_new_on_the_remote_host_restores_clones_of_their_own(self):
        self.wait_for_templates()
        made = {}
        for name in ("far-tpl-one", "far-tpl-two"):
            self.remove_on_exit(name)
            t0 = time.monotonic()
            made[name] = self.ssh_json(self.admin, "new", "--name=" + name, "--host", "second",
                                       timeout=300)
            print("[timing] new --host second from its template: %.2f s" %
                  (time.monotonic() - t0), flush=True)
            self.assertEqual(made[name]["made"], "template", made[name])
            stat = self.ssh_json(self.admin, "stat", name)
            self.assertEqual((stat["host"], stat["made"]), ("second", "template"))
        for name in ("far-tpl-one", "far-tpl-two"):
            self.assert_identity_handed_over(name, made[name]["id"])
            vm_dir = os.path.join(self.far.warren_files(), "vms", made[name]["id"])
            self.assertFalse(os.path.exists(os.path.join(vm_dir, "restore.save")))
        one, two = self.facts("far-tpl-one"), self.facts("far-tpl-two")
        self.assertEqual((one["hostname"], two["hostname"]), ("far-tpl-one", "far-tpl-two"))
        for item in ("mac", "random", "host_key"):
            self.assertNotEqual(one[item], two[item], item)
            self.assertTrue(one[item] and two[item], (one, two))
        for name in ("far-tpl-one", "far-tpl-two"):
            offset = self.clock_offset(name)
            self.assertLess(abs(offset), 0.1, "%s's clock is %.3f s off" % (name, offset))
        self.vm_ok("restart", "far-tpl-one", timeout=300)
        again = self.facts("far-tpl-one")
        for item in ("hostname", "mac", "host_key"):
            self.assertEqual(again[item], one[item], item)

    def test_3_a_damaged_remote_template_is_not_restored_and_new_boots(self):
        self.wait_for_templates()
        [save] = [f for f in self.far_templates() if f.endswith(".save")]
        with open(save, "r+b") as f:
            f.write(b"NotLibvirtAtAll!")  # a foreign magic
        self.remove_on_exit("far-tpl-boot")
        r = self.ssh_json(self.admin, "new", "--name=far-tpl-boot", "--host", "second",
                          timeout=300)
        self.assertEqual(r["made"], "boot", r)
        self.assert_log("booting instead of restoring the template")
        self.assertEqual(self.vm_ok("ssh", "far-tpl-boot", "hostname").stdout.strip(),
                         "far-tpl-boot")
        self.assertFalse(os.path.exists(save))  # removed, for the keeper to make again


if __name__ == "__main__":
    unittest.main(verbosity=2)
