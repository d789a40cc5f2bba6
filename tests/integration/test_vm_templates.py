#!/usr/bin/python3
"""`new` restored from a saved template (serve --vm-templates default) on real libvirt + QEMU,
with the tiny image.

The server saves a template of its default shape in the background; `new` then restores VMs
from it instead of booting them. Two VMs from one template differ in everything that makes
a machine itself — hostname, SSH host key, MAC, the kernel's random numbers (and machine-id
where the image has one) — and their clocks agree with the host's within 0.1 s; a restart
of a clone boots it with the same identity, and the control connection follows its new host
key. A template whose save file is damaged is not restored: `new` boots instead and says so
in the log.

Serial (guests share 2 cores); skips when the tiny image or libvirt is missing (fails under
CI).
"""
import glob
import os
import re
import shlex
import subprocess
import time
import unittest

import warren_harness as h
from test_vm_cpu_share import EMULATOR_CAP_PERCENT, schedinfo
from test_vm_e2e import IMAGES, VmTestCase, have_image

# What makes a machine itself, read in one guest command (tiny's busybox has all of it).
FACTS = ("hostname; cat /etc/machine-id 2>/dev/null || echo none; "
         "for i in /sys/class/net/*; do [ \"${i##*/}\" = lo ] || cat \"$i/address\"; done; "
         "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; "
         "read -r t k c </etc/ssh/ssh_host_ed25519_key.pub; echo \"$k\"")

# How many children the waiting root process (runner/identity_wait.c) has: its spare, forked
# ahead for the port's next hello.
SPARES = ("w=$(cat /run/warren/identity.pid); n=0; for s in /proc/[0-9]*/stat; do "
          "read -r pid comm state ppid rest <\"$s\" 2>/dev/null || continue; "
          "[ \"$ppid\" = \"$w\" ] && n=$((n+1)); done; echo spares=$n")

# The guest's clock to the microsecond: tiny's busybox `date` has no %N, its adjtimex does.
NOW = ("case $(date +%N) in *N*) adjtimex | awk '/tv_sec/ {s = $2} /tv_usec/ {u = $2} "
       "END {printf \"%d.%06d\\n\", s, u}' ;; *) date +%s.%N ;; esac")


# The scheduling policy (/proc/PID/stat field 41: 0 SCHED_OTHER, 5 SCHED_IDLE) and title of
# every sshd process, one "POLICY TITLE" line each.
SSHD_POLICIES = ("for p in /proc/[0-9]*; do t=$(tr '\\0' ' ' <$p/cmdline 2>/dev/null); "
                 "case $t in *ss[h]d:*) echo \"$(awk '{print $41}' $p/stat) $t\" ;; esac; done")


def live_xml(vm_id):
    """The running domain's definition as libvirt holds it (virsh in a test is fine)."""
    return subprocess.run(["virsh", "-c", "qemu:///system", "dumpxml", "warren-" + vm_id],
                          capture_output=True, text=True, timeout=30, check=True).stdout


# libvirt reads a started guest's CPU back one qom-get per feature (~0.3 s) while QEMU has
# this capability; every warren domain turns it off, a restored one through its saved XML.
SLOW_CPU_READ_BACK_OFF = "<qemu:del capability='cpu-unavailable-features'/>"


class IdentityChecks:
    """What tells two VMs apart, read in their guests (for VmTestCase classes)."""

    def facts(self, name):
        # One word for the lobby's tokenizer, which hands it to the VM's shell as it was.
        r = self.vm_ok("ssh", name, shlex.quote(FACTS), timeout=120)
        lines = r.stdout.split("\n")
        return {"hostname": lines[0], "machine_id": lines[1], "mac": lines[2],
                "random": lines[3], "host_key": lines[4]}

    def clock_offset(self, name):
        """How far the guest's clock is from the host's: its `date` must fall between the
        host's time before the command was sent and after its answer came."""
        before = time.time()
        r = self.vm_ok("ssh", name, shlex.quote(NOW), timeout=60)
        after = time.time()
        guest = float(r.stdout.strip())
        if guest < before:
            return guest - before
        if guest > after:
            return guest - after
        return 0.0

    def assert_identity_handed_over(self, name, vm_id):
        """The VM took its identity from the root process waiting in it, reached at its identity
        port beside the SSH handshake (no command, no sudo, no channel), which stays for the
        next caller (a live copy of this VM takes its identity there): the user's own
        `identity` reaches it at its socket, as root, and its empty request is refused as such,
        not as one run without root."""
        log = self.server.log()
        self.assertRegex(log, r"(?m)guest identity applied vm=%s .* via=port$" % re.escape(vm_id))
        self.assertNotRegex(log, r"guest identity: vm \S*%s\S*: .*no process took the identity"
                            % re.escape(vm_id))
        self.assertNotRegex(log, r"guest identity: vm \S*%s\S*: .*handing it over by command"
                            % re.escape(vm_id))
        r = self.vm_ok("ssh", name, shlex.quote(
            "ls -A /run/warren; ~/.warren/bin/warren-run identity </dev/null; echo exit=$?"))
        self.assertIn("identity.sock", r.stdout)
        self.assertIn("exit=2", r.stdout)
        self.assertIn("bad request", r.stdout + r.stderr)
        # Having served the port, the waiter forked the child that serves its next hello
        # ahead (no fork on the path of a live copy's identity): one child, waiting.
        r = self.vm_ok("ssh", name, shlex.quote(SPARES))
        self.assertEqual(r.stdout.strip(), "spares=1", r.stdout + r.stderr)


@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class TemplateTest(IdentityChecks, VmTestCase):
    EGRESS = "all"  # a network device: clones get MACs of their own

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", cls.EGRESS,
                                      "--vm-image", "tiny", "--vm-templates", "default",
                                      "--pool", "none",
                                      "--guest-reach-timeout", "15"])
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    def assert_spare_waits_at_idle_priority(self, name, timeout=30):
        """The launcher's spare sshd (started ahead for the next connection) waits under
        SCHED_IDLE, so its start-up never slows the session's commands; the session's own
        sshd, a spare once, was raised to SCHED_OTHER before its client came."""
        deadline = time.time() + timeout
        while True:
            lines = self.vm_ok("ssh", name, shlex.quote(SSHD_POLICIES)).stdout.splitlines()
            policies = [line.split(" ", 1) for line in lines if line.strip()]
            spares = [p for p, title in policies if "[accepted]" in title]
            if spares or time.time() > deadline:
                break
            time.sleep(1)
        self.assertEqual(spares, ["5"], lines)  # SCHED_IDLE
        session = [p for p, title in policies if "[accepted]" not in title]
        self.assertTrue(session, lines)
        self.assertEqual(set(session), {"0"}, lines)  # SCHED_OTHER

    def template_files(self):
        return glob.glob(os.path.join(self.data, "templates", "*", "template.json"))

    def wait_for_template(self, timeout=300):
        deadline = time.time() + timeout
        while not self.template_files():
            self.assertLess(time.time(), deadline, "no template after %d s:\n%s" %
                            (timeout, self.server.log()[-3000:]))
            time.sleep(1)

    def test_1_clones_differ_in_identity_and_keep_it_across_a_restart(self):
        self.wait_for_template()
        # Its memory was compacted before the save (page cache dropped, free memory zeroed).
        self.assertNotIn("compacting the memory", self.server.log())
        made = {}
        for name in ("tpl-one", "tpl-two"):
            self.remove_on_exit(name)
            made[name] = self.ssh_json(self.admin, "new", "--name=" + name, timeout=300)
            self.assertEqual(made[name]["made"], "template", made[name])
            stat = self.ssh_json(self.admin, "stat", name)
            self.assertEqual(stat["made"], "template")
            self.assertGreater(stat["made_ms"], 0)
            # Restored with QEMU's own threads uncapped (they load the memory), capped after.
            self.assertEqual(schedinfo(stat["id"])["emulator_quota"],
                             str(EMULATOR_CAP_PERCENT * 1000))
            self.assertIn(SLOW_CPU_READ_BACK_OFF, live_xml(stat["id"]))
        for name in ("tpl-one", "tpl-two"):
            self.assert_identity_handed_over(name, made[name]["id"])
            # A hand-out: the name, host key and a new machine-id in the request, no seed read.
            self.assertRegex(self.server.log(), r"(?m)guest identity applied vm=%s .* "
                             r"kind=handout via=port$" % re.escape(made[name]["id"]))
            # The clone's first connection was answered by the sshd the template's launcher
            # had started ahead (a spare, saved with it): no sshd start-up after the restore.
            log = self.vm_ok("ssh", name, "cat /var/log/warren-control.log").stdout
            sessions = [line for line in log.splitlines() if ": session " in line]
            self.assertTrue(sessions and sessions[-1].endswith(", spare)"), log)
            self.assert_spare_waits_at_idle_priority(name)
        one, two = self.facts("tpl-one"), self.facts("tpl-two")
        self.assertEqual((one["hostname"], two["hostname"]), ("tpl-one", "tpl-two"))
        for item in ("mac", "random", "host_key"):
            self.assertNotEqual(one[item], two[item], item)
            self.assertTrue(one[item] and two[item], (one, two))
        if one["machine_id"] != "none":
            self.assertNotEqual(one["machine_id"], two["machine_id"])
        self.assertEqual(len(one["mac"]), 17, one)
        for name in ("tpl-one", "tpl-two"):
            offset = self.clock_offset(name)
            self.assertLess(abs(offset), 0.1, "%s's clock is %.3f s off" % (name, offset))
        # A restart boots the clone from its own disk and seed: the same identity, and warren
        # takes the host key the guest now shows (it was re-pinned after the restore).
        self.vm_ok("restart", "tpl-one")
        again = self.facts("tpl-one")
        for item in ("hostname", "machine_id", "mac", "host_key"):
            self.assertEqual(again[item], one[item], item)
        # A VM with env reconnects after its identity step (sshd reads SetEnv at start): the
        # spare inherited from the template holds the template's host key by then, so the
        # launcher must start a fresh sshd (or a spare started after the new key).
        self.remove_on_exit("tpl-env")
        self.vm_ok("new", "--name=tpl-env", "--env", shlex.quote("GREETING=hello there"),
                   timeout=300)
        self.assertEqual(self.ssh_json(self.admin, "stat", "tpl-env")["made"], "template")
        r = self.vm_ok("ssh", "tpl-env", shlex.quote('echo "[$GREETING]"'))
        self.assertEqual(r.stdout.strip(), "[hello there]")
        # Its env is in its seed only: it read the seed (a whole identity).
        env_id = self.ssh_json(self.admin, "stat", "tpl-env")["id"]
        self.assertRegex(self.server.log(), r"(?m)guest identity applied vm=%s .* kind=whole "
                         r"via=port$" % re.escape(env_id))
        self.assertNotIn("presented a different host key", self.server.log())
        # A live copy of a clone has the clone's waiter (it stays, and came with the memory):
        # the copy's identity goes there too, no sudo; a hand-out (its seed holds no more).
        self.remove_on_exit("tpl-live")
        live = self.ssh_json(self.admin, "cp", "tpl-two", "tpl-live", "--live", timeout=300)
        self.assertEqual(live["made"], "live-copy", live)
        self.assertRegex(self.server.log(), r"(?m)guest identity applied vm=%s .* kind=handout "
                         r"via=port$" % re.escape(self.vm_id("tpl-live")))
        self.assertEqual(self.vm_ok("ssh", "tpl-live", "hostname").stdout.strip(), "tpl-live")
        self.assertIn(SLOW_CPU_READ_BACK_OFF, live_xml(self.vm_id("tpl-live")))

    def test_2_a_damaged_template_is_not_restored_and_new_boots(self):
        self.wait_for_template()
        [meta] = self.template_files()
        memory = os.path.join(os.path.dirname(meta), "memory.save")
        with open(memory, "r+b") as f:
            f.write(b"NotLibvirtAtAll!")  # a foreign magic
        self.remove_on_exit("tpl-boot")
        r = self.ssh_json(self.admin, "new", "--name=tpl-boot", timeout=300)
        self.assertEqual(r["made"], "boot", r)
        self.assert_log("booting instead of restoring the template")
        # It is removed, for the server to make again.
        self.assertFalse(os.path.exists(memory))
        self.assertEqual(self.vm_ok("ssh", "tpl-boot", "hostname").stdout.strip(), "tpl-boot")


if __name__ == "__main__":
    unittest.main()
