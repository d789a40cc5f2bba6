#!/usr/bin/python3
"""MCP with real VMs (libvirt + QEMU, the tiny image), serial:

- the official MCP TypeScript SDK client with a bearer token: create a VM, run a command in
  it (stdout, stderr, exit code, stdin), follow a job with `wait`, delete it;
- token scope: a token limited to a tag cannot see, use, copy or delete a VM outside it;
- a job started over MCP survives a restart of warren and is read back with `wait`;
- what the guest prints comes back byte for byte: random bytes as base64, a PNG as an image;
- `wait` with wait_seconds 0 on a job that has ended reports its end, every time;
- the curated endpoints name only their own tools, also for a command that becomes a job;
- the seed flow with the SDK client (a debian VM, a git repo and its test suite, `cp
  --egress integrations`, the tests on the copy, the copy cut off but for its integration,
  which adds a bearer the VM never sees, both deleted);
- the "build something and host it" flow with the SDK client: a page served on 8000 by a
  systemd unit in a debian VM, `share show`, private to an anonymous visitor of the URL
  `new` printed, `share set-public`, the page fetched anonymously.
"""
import base64
import json
import os
import re
import time
import unittest

import int_upstream
import mcp_http
import test_vm_e2e as e2e
import warren_harness as h
from test_mcp_peers import run_peer, sdk_client


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


    def test_4_binary_output_is_byte_exact_and_images_are_images(self):
        other = self.other_vm()
        token = mcp_http.mint_token(self, self.admin, label="bytes")
        c = self.client(token)
        r = c.exec("ssh %s 'head -c 64 /dev/urandom | tee /tmp/rand.bin'" % other)
        self.assertFalse(r["isError"], r)
        sc = r["structuredContent"]
        self.assertEqual(sc["stdout"], "", sc)
        got = base64.b64decode(sc["stdout_base64"])
        self.assertEqual(len(got), 64)
        r = c.exec("ssh %s 'base64 /tmp/rand.bin'" % other)
        self.assertEqual(got, base64.b64decode(r["structuredContent"]["stdout"]))
        # The text content says so and carries the same base64.
        r = c.exec("ssh %s 'cat /tmp/rand.bin'" % other)
        self.assertIn("64 bytes that are not text, in base64", mcp_http.text_of(r))
        self.assertIn(sc["stdout_base64"], mcp_http.text_of(r))

        # A tiny PNG printed by the guest is an image block.
        r = c.exec("ssh %s 'printf %%s %s | base64 -d'" % (other, TINY_PNG))
        self.assertFalse(r["isError"], r)
        self.assertEqual(r["content"][0]["type"], "image", r)
        self.assertEqual(r["content"][0]["mimeType"], "image/png")
        self.assertEqual(r["content"][0]["data"], TINY_PNG)
        # A peer nobody here wrote takes the image (and its result) as valid.
        r = run_peer(["mcp-inspector", "--cli", "http://127.0.0.1:%d/mcp" % self.server.http_port,
                      "--transport", "http", "--method", "tools/call", "--tool-name", "exec",
                      "--tool-arg", "command=ssh %s 'printf %%s %s | base64 -d'" % (other, TINY_PNG),
                      "--header", "Authorization: Bearer " + token], timeout=300)
        self.assertEqual(r.returncode, 0, "inspector tools/call:\n%s\n%s" % (r.stdout, r.stderr))
        self.assertEqual(json.loads(r.stdout)["content"][0]["mimeType"], "image/png", r.stdout)
        # The curated run_vm_command maps the same decision.
        cur = mcp_http.McpClient(self.server.http_port, token, path="/mcp/claude", timeout=600)
        self.addCleanup(cur.close)
        cur.initialize()
        r = cur.call("run_vm_command", vm=other, command="printf %%s %s | base64 -d" % TINY_PNG)
        self.assertEqual((r["content"][0]["type"], r["content"][0]["data"]), ("image", TINY_PNG), r)

    def test_5_wait_without_time_on_an_ended_job_reports_its_end(self):
        other = self.other_vm()
        token = mcp_http.mint_token(self, self.admin, label="ended")
        c = self.client(token)
        r = c.exec("ssh %s 'sleep 1; echo done; exit 7'" % other, wait_seconds=0)
        sc = r["structuredContent"]
        self.assertFalse(sc["finished"], sc)
        job = sc["job"]
        time.sleep(6)  # it has ended in the guest; nothing has read its end yet
        for i in range(3):
            w = c.call("wait", job=job, wait_seconds=0)
            self.assertTrue(w["structuredContent"]["finished"], (i, w))
            self.assertEqual(w["structuredContent"]["exit_code"], 7, (i, w))
            self.assertTrue(w["isError"], (i, w))  # a non-zero exit is a failed call
            self.assertIn("[remote command exited with status 7]", mcp_http.text_of(w))

    def test_6_curated_endpoints_name_only_their_own_tools(self):
        other = self.other_vm()
        token = mcp_http.mint_token(self, self.admin, label="curated")
        full = self.client(token)
        lacking = re.compile(r"\b(exec|exec_read_only|wait|kill)\b")
        for path in ("/mcp/claude", "/mcp/openai"):
            c = mcp_http.McpClient(self.server.http_port, token, path=path, timeout=600)
            self.addCleanup(c.close)
            answers = [c.initialize(), c.request("tools/list").result(), c.call("list_vms")]
            job = c.call("run_vm_command", vm=other, command="echo started; sleep 60",
                         wait_seconds=1)
            self.assertFalse(job["structuredContent"]["finished"], job)
            self.assertIn("run_vm_command", mcp_http.text_of(job))
            answers.append(job)
            for tool, args in (("run_vm_command", {"vm": "no-such-vm", "command": "true"}),
                               ("run_vm_command", {"vm": other}),
                               ("get_cli_help", {"command": "frobnicate"}),
                               ("create_vm", {"name": "dev"})):
                r = c.call(tool, **args)
                self.assertTrue(r["isError"], (tool, r))
                answers.append(r)
            for answer in answers:
                for text in strings_of(answer):
                    self.assertIsNone(lacking.search(text), (path, text))
            # The job goes on; the full endpoint can stop it.
            r = full.exec("kill " + job["structuredContent"]["job"])
            self.assertFalse(r["isError"], r)

    @unittest.skipUnless(e2e.have_image("debian"), "needs the debian image in " + e2e.IMAGES)
    def test_7_seed_flow_untrusted_code_in_a_cut_off_copy(self):
        upstream = int_upstream.Upstream()
        self.addCleanup(upstream.close)
        bearer = "seed-" + os.urandom(8).hex()
        token = mcp_http.mint_token(self, self.admin, label="seed")
        url = "http://127.0.0.1:%d/mcp" % self.server.http_port
        r = sdk_client(url, token, "seed", "debian", upstream.url, bearer, timeout=1500)
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        steps = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([s["step"] for s in steps],
                         ["connected", "tools", "whoami", "ls", "integration", "new", "repo", "cp",
                          "tests", "cut_off", "integration_reached", "rm", "done"])
        got = upstream.matching("/seed")
        self.assertEqual(len(got), 1, got)
        self.assertEqual(got[0]["path"], "/seed?from=copy")
        self.assertEqual(got[0]["headers"]["authorization"], "Bearer " + bearer)
        self.assertNotIn(bearer, self.server.log())
        self.assertNotIn(bearer, r.stdout)

    def test_8_seed_flow_build_a_page_and_host_it(self):
        token = mcp_http.mint_token(self, self.admin, label="web")
        url = "http://127.0.0.1:%d/mcp" % self.server.http_port
        r = sdk_client(url, token, "web", "debian", timeout=1500)
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        steps = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([s["step"] for s in steps],
                         ["connected", "tools", "whoami", "ls", "new", "served", "share_show",
                          "private", "public", "rm", "done"])
        made = steps[4]
        self.assertEqual(made["url"], "http://%s.warren.localhost:%d/" % (made["name"],
                                                                        self.server.web_port))


# A 1x1 PNG.
TINY_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAA"
            "AABJRU5ErkJggg==")


def strings_of(value):
    """Every string value inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


if __name__ == "__main__":
    h.main()
