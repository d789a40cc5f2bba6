#!/usr/bin/python3
"""MCP with real VMs (libvirt + QEMU, the tiny image), serial:

- the official MCP TypeScript SDK client with a bearer token: create a VM, run a command in
  it (stdout, stderr, exit code, stdin), follow a job with `wait`, delete it;
- token scope: a token limited to a tag cannot see, use, copy or delete a VM outside it;
- a job started over MCP survives a restart of warren and is read back with `wait`.
"""
import json
import os
import unittest

import mcp_http
import test_vm_e2e as e2e
import warren_harness as h
from test_mcp_peers import sdk_client


class McpVmTest(e2e.VmTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        mcp_http.peer_path()

    def client(self, token):
        c = mcp_http.McpClient(self.server.http_port, token, timeout=600)
        self.addCleanup(c.close)
        c.initialize()
        return c

    def other_vm(self):
        """A VM of the admin's without a tag."""
        if not getattr(type(self), "_other", None):
            type(self)._other = "mcp-other"  # removed by tearDownClass, also after a failure
            self.vm_ok("new", "--name", "mcp-other", "--image", "tiny")
        return "mcp-other"

    @classmethod
    def tearDownClass(cls):
        # Before the class cleanups stop the (possibly restarted) server.
        if getattr(cls, "_other", None):
            r = cls("test_1_sdk_client_vm_life").vm("rm", cls._other)
            if r.returncode != 0:
                raise AssertionError("rm %s: %s" % (cls._other, r.stderr))
        super().tearDownClass()

    def test_1_sdk_client_vm_life(self):
        token = mcp_http.mint_token(self, self.admin, label="sdk")
        url = "http://127.0.0.1:%d/mcp" % self.server.http_port
        r = sdk_client(url, token, "vm", "tiny")
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        steps = [json.loads(line)["step"] for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(steps, ["connected", "tools", "whoami", "ls", "new", "ssh", "job", "wait",
                                 "rm", "done"])

    def test_2_tag_scoped_token_cannot_reach_other_vms(self):
        other = self.other_vm()
        token = mcp_http.mint_token(self, self.admin, "--tag", "agent", label="tagged")
        c = self.client(token)
        r = c.exec("ls")
        self.assertFalse(r["isError"], r)
        self.assertNotIn(other, mcp_http.text_of(r))
        for command in ("stat " + other, "ssh %s true" % other, "cp " + other, "rm " + other,
                        "rename %s mcp-renamed" % other, "wait %s/00000001" % other):
            r = c.exec(command)
            self.assertTrue(r["isError"], (command, r))
            self.assertRegex(mcp_http.text_of(r).lower(), "no vm named|not found", (command, r))
        # Nor can it pull the VM into its tag.
        r = c.exec("tag %s agent" % other)
        self.assertTrue(r["isError"], r)
        self.assertNotIn("agent", self.vm_ok("stat", other).stdout)
        self.assertIn(other, self.vm_ok("ls").stdout)

    def test_3_job_survives_restart(self):
        other = self.other_vm()
        token = mcp_http.mint_token(self, self.admin, label="jobs")
        c = self.client(token)
        r = c.exec("ssh %s 'echo before; sleep 8; echo after'" % other, wait_seconds=1)
        self.assertFalse(r["isError"], r)
        sc = r["structuredContent"]
        self.assertFalse(sc["finished"], sc)
        job = sc["job"]
        type(self).restart_server()
        c = self.client(token)
        out = sc["stdout"]
        done = None
        for _ in range(6):
            w = c.call("wait", job=job, wait_seconds=15)
            self.assertFalse(w["isError"], w)
            out += w["structuredContent"]["stdout"]
            if w["structuredContent"]["finished"]:
                done = w["structuredContent"]
                break
        self.assertIsNotNone(done, out)
        self.assertEqual(done["exit_code"], 0)
        self.assertIn("before", out)
        self.assertIn("after", out)



if __name__ == "__main__":
    h.main()
