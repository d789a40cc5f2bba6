#!/usr/bin/python3
"""The warm pool on real guests (tiny image, libvirt + QEMU): `serve --pool tiny=2` keeps two
paused, connected VMs restored from the template, which no user sees; `new` takes one, and the
VM it answers with is its own (hostname, host key, MAC, random numbers differ between two; its
clock agrees with the host's; a restart keeps the identity); the pool refills. Then warren is
killed (SIGKILL) while a pooled VM is handed out and while one is being refilled: after a
restart no domain, VM directory, disk or restore FIFO is left over and the pool is back to size.
A clean stop removes the pooled VMs.

Serial (guests share 2 cores); skips when the tiny image or libvirt is missing (fails under
CI).
"""
import glob
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import unittest

import warren_harness as h
from test_vm_e2e import GUEST_REACH_TIMEOUT, IMAGES, VmTestCase, domains_of, have_image
from test_vm_templates import IdentityChecks

POOL = 2


@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class PoolTest(IdentityChecks, VmTestCase):
    EGRESS = "all"  # a network device: pooled VMs get MACs of their own

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", cls.EGRESS,
                                      "--vm-image", "tiny", "--vm-templates", "default",
                                      "--pool", "tiny=%d" % POOL, "--guest-reach-timeout", GUEST_REACH_TIMEOUT])
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    def recorded_ids(self):
        return {v["id"] for v in self.ssh_json(self.admin, "ls", "--json")["vms"]}

    def ours(self):
        """This server's domains (another guest test runs beside it): their ids."""
        return {d[len("warren-"):] for d in domains_of(self.data)}

    def pooled(self):
        """Ids of this server's domains with no record: the pool's."""
        return self.ours() - self.recorded_ids()

    def domstate(self, vm_id):
        return subprocess.run(["virsh", "-c", "qemu:///system", "domstate", "warren-" + vm_id],
                              capture_output=True, text=True, timeout=30).stdout.strip()

    def wait_for_pool(self, size=POOL, timeout=600):
        """Until `size` pooled VMs are paused (connected first: the log says ready)."""
        deadline = time.time() + timeout
        while True:
            ready = set(re.findall(r"pool: vm ([a-z0-9]+) of \S+ ready", self.server.log()))
            pooled = self.pooled()
            if len(pooled) == size and pooled <= ready and all(
                    self.domstate(i) == "paused" for i in pooled):
                return pooled
            self.assertLess(time.time(), deadline, "pool not back to %d after %d s: %s\n%s" %
                            (size, timeout, pooled, self.server.log()[-3000:]))
            time.sleep(1)

    def test_1_new_takes_a_pooled_vm_that_is_its_own(self):
        pooled = self.wait_for_pool()
        self.assertEqual(self.ssh_json(self.admin, "ls", "--json")["vms"], [])
        made = {}
        for name in ("pool-one", "pool-two"):
            self.remove_on_exit(name)
            t = time.monotonic()
            made[name] = self.ssh_json(self.admin, "new", "--name=" + name, timeout=300)
            first = time.monotonic()
            self.vm_ok("ssh", name, "true")
            print("[timing] new %s from the pool %.2f s, first ssh %.2f s" %
                  (name, first - t, time.monotonic() - first))
            self.assertEqual(made[name]["made"], "pool", made[name])
            self.assertIn(made[name]["id"], pooled)
            self.assertEqual(self.ssh_json(self.admin, "stat", name)["made"], "pool")
        for name in ("pool-one", "pool-two"):
            self.assert_identity_handed_over(name, made[name]["id"])
            # The whole identity when it was pooled; at `new`, a hand-out (name and host key):
            # both from the root process waiting in it, at its identity port.
            kinds = re.findall(r"(?m)guest identity applied vm=%s .* kind=(\w+) via=port$"
                               % re.escape(made[name]["id"]), self.server.log())
            self.assertEqual(kinds, ["whole", "handout"], self.server.log()[-3000:])
            # It kept the host key it took when it was pooled: pinned once, at the fill.
            repins = re.findall(r"guest host key re-pinned vm=%s " % re.escape(made[name]["id"]),
                                self.server.log())
            self.assertEqual(len(repins), 1, self.server.log()[-3000:])
        one, two = self.facts("pool-one"), self.facts("pool-two")
        self.assertEqual((one["hostname"], two["hostname"]), ("pool-one", "pool-two"))
        for item in ("mac", "random", "host_key"):
            self.assertNotEqual(one[item], two[item], item)
            self.assertTrue(one[item] and two[item], (one, two))
        if one["machine_id"] != "none":
            self.assertNotEqual(one["machine_id"], two["machine_id"])
        for name in ("pool-one", "pool-two"):
            offset = self.clock_offset(name)
            self.assertLess(abs(offset), 0.1, "%s's clock is %.3f s off" % (name, offset))
        # The pool refills behind them. A VM's env reaches its commands.
        self.wait_for_pool()
        self.remove_on_exit("pool-env")
        self.vm_ok("new", "--name=pool-env", "--env", shlex.quote("GREETING=hello there"),
                   timeout=300)
        r = self.vm_ok("ssh", "pool-env", shlex.quote('echo "[$GREETING]"'))
        self.assertEqual(r.stdout.strip(), "[hello there]")
        # Its seed holds the env: it read the seed again (a whole identity), no hand-out.
        env_id = self.ssh_json(self.admin, "stat", "pool-env")["id"]
        self.assertRegex(self.server.log(), r"(?m)guest identity applied vm=%s .* kind=whole "
                         r"via=port$" % re.escape(env_id))
        self.assertNotRegex(self.server.log(), r"guest identity applied vm=%s .* kind=handout"
                            % re.escape(env_id))
        self.assertEqual(self.ssh_json(self.admin, "stat", "pool-env")["made"], "pool")
        # The pool refills only with room for a VM and one more: three users' VMs may fill a
        # small host (libvirt may count less memory than the machine has).
        self.vm_ok("rm", "pool-env")
        self.wait_for_pool()
        # A restart boots from the VM's own disk and seed: the same identity, the host key
        # warren re-pinned at the hand-out.
        self.vm_ok("restart", "pool-one")
        again = self.facts("pool-one")
        for item in ("hostname", "machine_id", "mac", "host_key"):
            self.assertEqual(again[item], one[item], item)
        self.assertNotIn("presented a different host key", self.server.log())

    def kill_and_restart(self):
        type(self).server.proc.send_signal(signal.SIGKILL)
        type(self).server.proc.wait(timeout=30)
        type(self).server = self.start_vm_server()

    def assert_nothing_left_over(self):
        """Every domain is a VM's or the pool's, every VM directory a domain's, no FIFO."""
        pooled = self.wait_for_pool()
        ours = self.ours()
        self.assertEqual(ours, self.recorded_ids() | pooled)
        dirs = set(os.listdir(os.path.join(self.data, "vms")))
        self.assertEqual(dirs, ours)
        self.assertEqual(glob.glob(os.path.join(self.data, "tmp", "restore-*")), [])
        # Every disk layer is in some domain's chain or is a template's base.
        disks = set(os.listdir(os.path.join(self.data, "disks")))
        in_use = set()
        for vm_id in ours:
            out = subprocess.run(["virsh", "-c", "qemu:///system", "domblklist",
                                  "warren-" + vm_id, "--details"],
                                 capture_output=True, text=True, timeout=30).stdout
            for path in re.findall(r"(/\S+\.qcow2)", out):
                info = subprocess.run(["qemu-img", "info", "-U", "--backing-chain", path],
                                      capture_output=True, text=True, timeout=30).stdout
                in_use |= {os.path.basename(p) for p in
                           re.findall(r"^image: (\S+)", info, re.MULTILINE)}
        for meta in glob.glob(os.path.join(self.data, "templates", "*", "template.json")):
            with open(meta, encoding="utf-8") as f:
                in_use |= {os.path.basename(p) for p in re.findall(r'"(/[^"]+\.qcow2)"', f.read())}
        self.assertEqual(disks - in_use, set(), "disk layers no VM or template uses")

    def test_2_sigkill_while_handing_out_and_refilling_leaks_nothing(self):
        self.wait_for_pool()
        # Killed while a `new` takes a pooled VM: the `new` is cut off somewhere between the
        # take and its answer.
        self.remove_on_exit("pool-cut")
        cut = threading.Thread(target=lambda: self.vm("new", "--name=pool-cut", timeout=120))
        cut.start()
        time.sleep(0.3)
        self.kill_and_restart()
        cut.join()
        self.assert_nothing_left_over()
        # Killed while the pool refills behind a `new`.
        self.remove_on_exit("pool-three")
        self.ssh_json(self.admin, "new", "--name=pool-three", timeout=300)
        deadline = time.time() + 60
        while "pool: vm" not in self.server.log().split("audit cmd=new vm=pool-three")[-1]:
            # Not ready yet: the refill is under way (its restore, then its connection).
            if re.search(r"restored from template", self.server.log().split(
                    "audit cmd=new vm=pool-three")[-1]):
                break
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.kill_and_restart()
        self.assert_nothing_left_over()
        self.assertEqual(self.vm_ok("ssh", "pool-three", "hostname").stdout.strip(), "pool-three")

    def test_3_a_clean_stop_removes_the_pooled_vms(self):
        self.wait_for_pool()
        self.assertEqual(self.recorded_ids(), set())
        type(self).server.stop(timeout=60)
        self.assertEqual(self.ours(), set())
        self.assertIn("pool: removed vm", self.server.log())
        type(self).server = self.start_vm_server()


if __name__ == "__main__":
    unittest.main()
