#!/usr/bin/python3
"""POST /exec against real VMs (tiny image, libvirt + QEMU): the statuses that need a VM —
200 with {stdout, stderr, exit_code} (stdout_base64 for bytes that are not UTF-8, byte for
byte, from either body form), 422 with the output of a failing command, a job
handed back after wait_seconds, 504 past the server's --exec-timeout, 409 for a stopped
VM — and tag scope: a token (and an SSH key) limited to a tag cannot see, use, copy,
retag or delete another VM, over /exec or SSH.

Serial (guests share 2 cores); skips when the tiny image or libvirt is missing (fails under
CI).
"""
import base64
import json
import os
import time
import unittest

import warren_harness as h
from test_http_exec import ExecTestCase
from test_vm_e2e import GUEST_REACH_TIMEOUT, IMAGES, VmTestCase, have_image


@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class HttpExecVmTest(VmTestCase, ExecTestCase):
    EXEC_TIMEOUT = 4

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", "none",
                                      "--guest-reach-timeout", GUEST_REACH_TIMEOUT,
                                      "--exec-timeout", str(cls.EXEC_TIMEOUT)])
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    def exec(self, token, command, **fields):
        return self.curl(json.dumps(dict(fields, command=command)), token)

    def test_exec_on_vms_and_tag_scope(self):
        for name in ("hx-tagged", "hx-other"):
            self.remove_on_exit(name)
        admin = self.mint(self.admin, "--label", "vm-admin")
        # `new` over /exec, tagged. Under TCG it may outlast the 4 s --exec-timeout: then it
        # is answered 504 and goes on, as a gateway timeout does.
        status, body, _ = self.exec(admin, "new --image tiny --name hx-tagged --tag t1")
        self.assertIn(status, (200, 504), body)
        self.vm_ok("new", "--image", "tiny", "--name", "hx-other")
        deadline = time.monotonic() + 180
        while True:
            r = self.ssh(self.admin, "stat", "hx-tagged", "--json")
            if r.returncode == 0 and json.loads(r.stdout).get("state") == "running":
                break
            if time.monotonic() > deadline:
                # Say why (a boot that failed and was undone, or one still going), not only
                # that a later command found no VM.
                self.fail("hx-tagged is not running 180 s after `new` over /exec: %s %s\n%s" % (
                    r.stdout, r.stderr, self.server.log()[-3000:]))
            time.sleep(0.5)
        status, body, _ = self.exec(admin, "ssh hx-tagged true")
        self.assertEqual(status, 200, body)

        # 200: the command's output and status as JSON.
        status, body, head = self.exec(admin, "ssh hx-tagged echo hello")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "hello\n")
        self.assertEqual(body["exit_code"], 0)
        status, body, _ = self.exec(admin, "ssh hx-tagged cat", stdin="from stdin")
        self.assertEqual((status, body["stdout"]), (200, "from stdin"), body)

        # Bytes that are not UTF-8 come back as stdout_base64, byte for byte, whichever body
        # form asked (a JSON object or the bare command line).
        status, body, _ = self.exec(admin, "ssh hx-tagged 'head -c 64 /dev/urandom | tee /tmp/r.bin'")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "", body)
        got = base64.b64decode(body["stdout_base64"])
        self.assertEqual(len(got), 64)
        status, copy, _ = self.exec(admin, "ssh hx-tagged 'base64 /tmp/r.bin'")
        self.assertEqual(got, base64.b64decode(copy["stdout"]))
        status, body, _ = self.curl("ssh hx-tagged 'cat /tmp/r.bin >&2'", admin)
        self.assertEqual(status, 200, body)
        self.assertEqual(base64.b64decode(body["stderr_base64"]), got)

        # 422 with the output of a command that failed in the VM.
        status, body, head = self.exec(admin, "ssh hx-tagged 'echo out; echo err >&2; exit 3'")
        self.assertEqual(status, 422, body)
        self.assertEqual((body["stdout"], body["stderr"], body["exit_code"]),
                         ("out\n", "err\n", 3))
        self.assertIn("x-warren-exit-status: 3", head.lower())

        # A command still running after wait_seconds comes back as a job.
        status, body, _ = self.exec(admin, "ssh hx-tagged 'echo started; sleep 60'",
                                    wait_seconds=1)
        self.assertEqual(status, 200, body)
        job = body["job"]
        self.assertTrue(job.startswith("hx-tagged/"), body)
        self.assertEqual(body["stdout"], "started\n")
        status, body, _ = self.exec(admin, "kill " + job)
        self.assertEqual(status, 200, body)

        # 504: still running at the server's --exec-timeout (4 s) while it waits 10 s.
        started = time.monotonic()
        status, body, _ = self.exec(admin, "ssh hx-tagged sleep 30", wait_seconds=10)
        self.assertEqual(status, 504, body)
        self.assertLess(time.monotonic() - started, self.EXEC_TIMEOUT + 4)
        self.assertIn("still running", body["error"])

        # Tag scope over /exec: the other VM does not exist for a t1 token.
        tagged = self.mint(self.admin, "--label", "t1-only", "--tag", "t1")
        status, body, _ = self.exec(tagged, "ls")
        self.assertEqual(status, 200, body)
        names = json.dumps(body)
        self.assertIn("hx-tagged", names)
        self.assertNotIn("hx-other", names)
        for command in ["stat hx-other", "ssh hx-other true", "cp hx-other hx-copy",
                        "stop hx-other", "console hx-other", "jobs hx-other"]:
            status, body, _ = self.exec(tagged, command)
            self.assertEqual(status, 404, "%s -> %s %s" % (command, status, body))
            self.assertNotIn(self.vm_id("hx-other"), json.dumps(body))
        status, body, _ = self.exec(tagged, "rm hx-other")
        self.assertIn(status, (404, 422), body)
        self.assertEqual(body.get("deleted", []), [])
        self.assertIn("hx-other", self.vm_ok("ls").stdout)
        status, body, _ = self.exec(tagged, "tag hx-tagged other")
        self.assertEqual(status, 403, body)
        status, body, _ = self.exec(tagged, "ssh hx-tagged true")
        self.assertEqual(status, 200, body)

        # The same limits on an SSH key, over SSH.
        key = h.Key(self.tmp, "t1-key")
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "t1-key", "--tag", "t1",
                    input=key.public_line + "\n")
        for command in (["stat", "hx-other"], ["ssh", "hx-other", "true"],
                        ["cp", "hx-other", "hx-copy"]):
            self.assert_status(self.ssh(key, *command), "not_found", " ".join(command))
        self.assertNotIn("hx-other", self.ssh_ok(key, "ls").stdout)
        self.assertIn("hx-other", self.vm_ok("ls").stdout)

        # 409: a stopped VM cannot run a command.
        self.vm_ok("stop", "hx-other")
        status, body, _ = self.exec(admin, "ssh hx-other true")
        self.assertEqual(status, 409, body)
        self.assertIn("stopped", body["error"])


if __name__ == "__main__":
    h.main()
