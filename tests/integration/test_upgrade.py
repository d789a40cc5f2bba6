#!/usr/bin/python3
"""Upgrade in place (issue 17): a data dir written by the previous release, with a running
VM and a running job, opened by this build.

The previous warren (WARREN_PREV_BIN: the `warren` of commit b0ccd69, the commit before
issue 17's work, with its `warren-run` beside it; build it with
  git worktree add /tmp/warren-prev b0ccd69 && cd /tmp/warren-prev &&
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  nice -n 10 cmake --build build --target warren warren_run
) serves DATA on real libvirt + QEMU (the tiny image): a user, keys, an API token, a running
VM with a file on its disk and a job that prints a line a second. It is stopped (SIGTERM:
the VM and the job go on), and this build (WARREN_BIN) starts on the same DATA. Checked:
  - the store opens (upgraded in place when the schema moved: its log says so) with the
    same users, keys and token (/exec), the VM record and the job;
  - the VM is still running (the same domain, not rebooted: its uptime went on) and its disk
    holds the file;
  - the job's output: `wait` gets the lines written while no warren ran and after, to the
    end, with its exit status;
  - the guest runner in the VM is this build's after the first connection when the versions
    differ (the log's "guest runner installed"), the old one kept when they are the same.

Serial (real QEMU under TCG). Fails under CI when WARREN_PREV_BIN, root, libvirt or the tiny
image are missing; skips otherwise.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time
import unittest

import warren_harness as h
from test_vm_e2e import IMAGES, VmTestCase, have_image

PREV_BIN = os.environ.get("WARREN_PREV_BIN", "")


def runner_version(binary_dir):
    """The version of the warren-run beside a warren binary."""
    r = subprocess.run([os.path.join(binary_dir, "warren-run"), "--version"],
                       capture_output=True, text=True, timeout=10)
    return r.stdout.strip()


@unittest.skipUnless(PREV_BIN and os.path.exists(PREV_BIN),
                     "WARREN_PREV_BIN does not name the previous warren")
@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class UpgradeTest(VmTestCase):

    @classmethod
    def start_vm_server(cls, binary=None):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", "none",
                                      "--vm-image", "tiny", "--vm-templates", "none",
                                      "--pool", "none", "--guest-reach-timeout", "15"])
        cls.addClassCleanup(server.stop)
        saved = h.WARREN_BIN
        h.WARREN_BIN = binary or PREV_BIN  # the class starts on the previous release
        try:
            server.start(timeout=120)
        finally:
            h.WARREN_BIN = saved
        cls.pin_host_key(server)
        return server

    def guest_runner(self):
        return self.vm_ok("ssh", "up1", '"$HOME/.warren/bin/warren-run" --version').stdout.strip()

    def credentials(self, key):
        """A user's keys and token labels, without their times of last use."""
        listed = self.ssh_json(key, "ssh-key", "list")
        return ([(k["fingerprint"], k["name"]) for k in listed["keys"]],
                [(t["id"], t["label"]) for t in listed["api_tokens"]])

    def uptime(self):
        quoted = shlex.quote("cut -d' ' -f1 /proc/uptime")
        return float(self.vm_ok("ssh", "up1", quoted).stdout)

    def test_previous_release_data_dir_with_a_running_vm_and_job(self):
        prev_runner = runner_version(os.path.dirname(PREV_BIN))
        cur_runner = runner_version(os.path.dirname(h.WARREN_BIN))
        print("\nrunner: previous %s, current %s (%s)" % (
            prev_runner, cur_runner, "differ" if prev_runner != cur_runner else "the same"),
            file=sys.stderr)
        self.assertTrue(prev_runner.startswith("warren-run "), prev_runner)

        # ---- On the previous release.
        user = h.Key(self.tmp, "dora")
        self.make_user("dora", user)
        token = self.ssh_ok(user, "ssh-key", "generate-api-key", "--label", "agent").stdout.strip()
        self.assertTrue(token.startswith("wr1."))
        t = time.monotonic()
        self.vm_ok("new", "--name", "up1")
        print("new on the previous release: %.1f s" % (time.monotonic() - t), file=sys.stderr)
        self.vm_ok("ssh", "up1", "echo before-upgrade > ~/kept; sync")
        self.assertEqual(self.guest_runner(), prev_runner)
        before = {vm["name"]: vm for vm in self.ssh_json(self.admin, "ls")["vms"]}
        self.assertEqual(before["up1"]["state"], "running")
        uptime_before = self.uptime()
        # A job: a line a second for 30 s, then exit 3.
        self.vm_ok("ssh", "--wait-seconds", "1", "up1",
                   "for i in $(seq 1 30); do echo tick $i; sleep 1; done; echo last; exit 3")
        jobs = self.ssh_json(self.admin, "jobs")["jobs"]
        self.assertEqual(len(jobs), 1, jobs)
        job = jobs[0]["job"]
        self.assertFalse(jobs[0]["finished"])
        keys_before = self.credentials(user)

        # ---- Stopped; the current build on the same data dir.
        self.assertEqual(self.server.stop(), 0)
        time.sleep(3)  # the job goes on while no warren runs
        t = time.monotonic()
        type(self).server = self.start_vm_server(binary=h.WARREN_BIN)
        print("current build up on the old data dir in %.1f s" % (time.monotonic() - t),
              file=sys.stderr)
        log = self.server.log()
        m = re.findall(r"store: upgrading .* to schema version (\d+)", log)
        print("store upgrade steps at start: %s" % (m or "none (same schema)"), file=sys.stderr)

        after = {vm["name"]: vm for vm in self.ssh_json(self.admin, "ls")["vms"]}
        self.assertEqual(after["up1"]["id"], before["up1"]["id"])
        self.assertEqual(after["up1"]["state"], "running")
        self.assertEqual(self.credentials(user), keys_before)
        r = subprocess.run(["curl", "-sS", "--max-time", "30", "-H", "Authorization: Bearer " +
                            token, "--data-binary", "whoami", "-w", "\n%{http_code}",
                            "http://127.0.0.1:%d/exec" % self.server.http_port],
                           capture_output=True, text=True, timeout=60)
        self.assertTrue(r.stdout.endswith("\n200"), r.stdout + r.stderr)
        self.assertIn("dora", r.stdout)

        # The job: everything to its end, across the restart and the runner's replacement.
        t = time.monotonic()
        out = ""
        code = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = self.vm("wait", job, "--wait-seconds", "30")
            out += r.stdout
            if "last" in out:
                code = r.returncode
                break
        print("job waited to its end in %.1f s" % (time.monotonic() - t), file=sys.stderr)
        self.assertIn("last", out, out)
        self.assertEqual(code, 3)
        ticks = [int(n) for n in re.findall(r"tick (\d+)", out)]
        self.assertEqual(ticks, list(range(ticks[0], 31)), out)

        # The same guest, not rebooted, with its disk.
        uptime_after = self.uptime()
        self.assertGreater(uptime_after, uptime_before)
        self.assertEqual(self.vm_ok("ssh", "up1", "cat ~/kept").stdout, "before-upgrade\n")

        # The runner: this build's once it connected.
        self.assertEqual(self.guest_runner(), cur_runner)
        installed = re.search(r'guest runner installed vm="?%s' % after["up1"]["id"],
                              self.server.log())
        self.assertEqual(bool(installed), prev_runner != cur_runner, self.server.log_tail())

        self.vm_ok("rm", "up1")


if __name__ == "__main__":
    h.main()
