#!/usr/bin/python3
"""Warm pools per host (issue 18): each host that takes new VMs keeps its own paused,
connected VMs restored from its own template, and `new` takes one there, through the real
surfaces.

The second host is second_host.py's (a libvirtd in namespaces of its own, over qemu+ssh).
warren serves with --host local=qemu:///system --host second=... --host-isolated second
--vm-templates default --pool tiny=1 --vm-image tiny:
  1. each host gets its pooled VM: a domain there with no record, paused, connected first
     (the log says ready, naming the host); none is listed to users;
  2. `new --host second` takes the second host's (made=pool, the pooled domain's id, running
     there, its own hostname), and the pool refills there with another;
  3. `hosts drain second` removes the second host's pooled VM (it takes no new VMs) and
     `hosts undrain second` has it refilled; a clean stop of warren removes every pooled VM
     on both hosts.

Needs root, libvirt, QEMU, sshd and the tiny image; fails under CI when one is missing.
"""
import re
import time
import unittest

import second_host
from test_vm_e2e import domains_of
from two_host_case import TwoHostVmTestCase


class RemotePoolTest(TwoHostVmTestCase):
    EGRESS = "all"
    FAR_SERVE_ARGS = ["--vm-image", "tiny", "--vm-templates", "default", "--pool", "tiny=1"]

    def recorded_ids(self):
        return {v["id"] for v in self.ssh_json(self.admin, "ls")["vms"]}

    def far_states(self):
        """The second host's domains: id -> state."""
        out = {}
        for name in self.far_domains():
            state = second_host.virsh(self.far.uri, "domstate", name, check=False).stdout
            out[name[len("warren-"):]] = state.strip()
        return out

    def local_domains(self):
        """This server's domains on this machine (another guest test may run beside): ids."""
        return {d[len("warren-"):] for d in domains_of(self.data)}

    def ready_on(self, host):
        """Ids the log says were pooled ready on `host`."""
        return set(re.findall(r"pool: vm ([a-z0-9]+) of %s/\S+ ready" % host, self.server.log()))

    def wait_for_far_pool(self, but=(), timeout=600):
        """Until the second host has one pooled VM (not in `but`), paused and connected."""
        deadline = time.monotonic() + timeout
        while True:
            domains = self.far_states()
            pooled = set(domains) - self.recorded_ids() - set(but)
            if len(pooled) == 1 and pooled <= self.ready_on("second"):
                [vm_id] = pooled
                if domains[vm_id] == "paused":
                    return vm_id
            self.assertLess(time.monotonic(), deadline, "no pooled VM on second after %d s: "
                            "%s\n%s" % (timeout, domains, self.server.log()[-3000:]))
            time.sleep(1)

    def test_1_each_host_keeps_its_own_pool(self):
        t0 = time.monotonic()
        far = self.wait_for_far_pool()
        deadline = time.monotonic() + 600
        while not self.ready_on("local"):
            self.assertLess(time.monotonic(), deadline, self.server.log()[-3000:])
            time.sleep(1)
        print("[timing] both pools filled %.0f s into the test" % (time.monotonic() - t0),
              flush=True)
        self.assertNotIn(far, self.local_domains())
        self.assertEqual(self.ssh_json(self.admin, "ls")["vms"], [])
        self.assert_log("made the template of tiny@")
        self.assert_log("on host second")

    def test_2_new_on_the_remote_host_takes_its_pooled_vm(self):
        pooled = self.wait_for_far_pool()
        self.remove_on_exit("far-pooled")
        t0 = time.monotonic()
        r = self.ssh_json(self.admin, "new", "--name=far-pooled", "--host", "second",
                          timeout=300)
        took = time.monotonic() - t0
        self.assertEqual((r["made"], r["id"]), ("pool", pooled), r)
        t1 = time.monotonic()
        self.assertEqual(self.vm_ok("ssh", "far-pooled", "hostname").stdout.strip(),
                         "far-pooled")
        print("[timing] new --host second from its pool: %.2f s, then ssh VM hostname %.2f s"
              % (took, time.monotonic() - t1), flush=True)
        stat = self.ssh_json(self.admin, "stat", "far-pooled")
        self.assertEqual((stat["host"], stat["made"], stat["state"]),
                         ("second", "pool", "running"))
        self.assertEqual(self.far_states()[pooled], "running")
        self.wait_for_far_pool(but={pooled})

    def test_3_a_drained_host_keeps_no_pool_and_a_stop_removes_them_all(self):
        pooled = self.wait_for_far_pool()
        self.vm_ok("hosts", "drain", "second")
        deadline = time.monotonic() + 120
        while pooled in self.far_states():
            self.assertLess(time.monotonic(), deadline, self.server.log()[-3000:])
            time.sleep(1)
        self.assert_log("pool: removed vm " + pooled)
        self.vm_ok("hosts", "undrain", "second")
        again = self.wait_for_far_pool(but={pooled})
        local = self.local_domains() - self.recorded_ids()
        self.assertTrue(local, "no pooled VM here")
        left = set(self.far_states()) - self.recorded_ids()
        self.assertEqual(left, {again})
        self.server.stop()
        self.assertFalse(set(self.far_states()) & {again}, self.far_states())
        self.assertFalse(self.local_domains() & local, self.local_domains())
        type(self).server = self.start_vm_server()


if __name__ == "__main__":
    unittest.main(verbosity=2)
