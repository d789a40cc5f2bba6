#!/usr/bin/python3
"""The sandbox API (seed 004) on real guests (libvirt + QEMU), serial:

- seed 004's transcript through the official MCP SDK client at /mcp/sandbox: create, exec
  with cwd, env and timeout_ms (a command killed at its timeout, its process tree gone),
  state kept between calls, a failing command as a result, extend, destroy;
- the same over REST with curl: 201 and Location, list, get, exec, extend, usage, delete,
  then 404;
- one sandbox, many surfaces: made over REST, driven over MCP, over `ssh HOST ssh ID …` and
  over `ssh ID@HOST`, each seeing what the others wrote; made over MCP, destroyed over REST.

The server defines a small size (`--sandbox-size test=1,256M,1G`, the tiny image) so
sandboxes fit a 2-core host. Needs the MCP peers in .peers/ (packaging/install-peers.sh); a missing peer fails.
"""
import json
import os
import re
import subprocess
import time
import unittest

import mcp_http
import warren_harness as h
from test_mcp_peers import run_peer
from test_vm_e2e import GUEST_REACH_TIMEOUT, IMAGES, VmTestCase, have_image

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = "test"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def sandbox_sdk_client(url, token, mode, *extra, timeout=1200):
    """Runs mcp_sdk_sandbox_client.mjs from inside .peers/ so its imports resolve there."""
    import shutil
    import tempfile
    run_dir = tempfile.mkdtemp(prefix="run-", dir=os.path.dirname(mcp_http.PEERS))
    try:
        script = os.path.join(run_dir, "mcp_sdk_sandbox_client.mjs")
        shutil.copy(os.path.join(HERE, "mcp_sdk_sandbox_client.mjs"), script)
        return run_peer(["node", script, url, token, mode, *extra], timeout=timeout)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def steps_of(r):
    return [json.loads(line)["step"] for line in r.stdout.splitlines() if line.startswith("{")]


@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class SandboxApiTest(VmTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        mcp_http.peer_path()

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", "none",
                                      "--vm-image", "tiny", "--guest-reach-timeout", GUEST_REACH_TIMEOUT,
                                      "--sandbox-size", SIZE + "=1,256M,1G",
                                      # Two one-vCPU sandboxes at once on a 2-core host.
                                      "--sandbox-overcommit", "4",
                                      # A first boot under TCG may outlast the default 120 s.
                                      "--exec-timeout", "600"])
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    def token(self, label):
        return mcp_http.mint_token(self, self.admin, label=label + os.urandom(3).hex())

    def rest(self, method, path, token, body=None, timeout=900):
        """curl METHOD http://…/v1PATH; returns (status, parsed body, headers)."""
        args = ["curl", "-sS", "-X", method, "-D", "-", "--max-time", str(timeout),
                "-H", "Authorization: Bearer " + token]
        if body is not None:
            args += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
        args.append("http://127.0.0.1:%d/v1%s" % (self.server.http_port, path))
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 30)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Text mode reads "\r\n" as "\n".
        head, _, payload = r.stdout.replace("\r\n", "\n").partition("\n\n")
        status = int(head.split()[1])
        headers = {}
        for line in head.split("\n")[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, json.loads(payload) if payload.strip() else None, headers

    def rest_ok(self, method, path, token, body=None, status=200):
        got, data, headers = self.rest(method, path, token, body)
        self.assertEqual(got, status, "%s %s: %s" % (method, path, data))
        return data, headers

    def destroy_on_exit(self, sid):
        self.addCleanup(lambda: self.vm("rm", sid))

    def test_1_seed_004_over_mcp_with_the_sdk_client(self):
        url = "http://127.0.0.1:%d/mcp/sandbox" % self.server.http_port
        r = sandbox_sdk_client(url, self.token("sdk"), "seed", SIZE)
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        self.assertEqual(steps_of(r), ["connected", "tools", "create", "exec", "failing",
                                       "timeout", "extend", "destroy", "done"])
        sid = json.loads(r.stdout.splitlines()[2])["sandbox"]["id"]
        self.assertNotIn(sid, self.vm_ok("ls").stdout)
        self.assert_log("cmd=new")
        self.assert_log("surface=mcp")

    def test_2_seed_004_over_rest_with_curl(self):
        token = self.token("rest")
        made, headers = self.rest_ok("POST", "/sandboxes", token,
                                     {"size": SIZE, "timeout_minutes": 30}, status=201)
        sid = made["id"]
        self.destroy_on_exit(sid)
        self.assertRegex(sid, r"^sbx-[a-z0-9]+$")
        self.assertEqual((made["status"], made["size"]), ("running", SIZE))
        self.assertRegex(made["expires_at"], RFC3339)
        self.assertEqual(headers.get("location"), "/v1/sandboxes/" + sid)

        listed, _ = self.rest_ok("GET", "/sandboxes", token)
        self.assertIn(made, listed["sandboxes"])
        got, _ = self.rest_ok("GET", "/sandboxes/" + sid, token)
        self.assertEqual(got, made)

        out, _ = self.rest_ok("POST", "/sandboxes/%s/exec" % sid, token,
                              {"command": 'pwd; echo "$GREETING"', "cwd": "/tmp",
                               "env": {"GREETING": "hello"}})
        self.assertEqual((out["stdout"], out["exit_code"], out["truncated"]),
                         ("/tmp\nhello\n", 0, False), out)
        self.assertIsInstance(out["duration_ms"], int)
        # A failing command is a result: 200 with its exit code.
        out, _ = self.rest_ok("POST", "/sandboxes/%s/exec" % sid, token,
                              {"command": "echo '2 failing'; exit 1", "timeout_ms": 180000})
        self.assertEqual((out["stdout"], out["exit_code"]), ("2 failing\n", 1), out)
        t0 = time.monotonic()
        out, _ = self.rest_ok("POST", "/sandboxes/%s/exec" % sid, token,
                              {"command": "sleep 60", "timeout_ms": 2000})
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual((out.get("timed_out"), out["exit_code"]), (True, 124), out)

        ext, _ = self.rest_ok("POST", "/sandboxes/%s/extend" % sid, token,
                              {"additional_minutes": 10})
        self.assertEqual(ext["id"], sid)
        self.assertGreater(ext["expires_at"], made["expires_at"])
        usage, _ = self.rest_ok("GET", "/usage?vm=" + sid, token)
        self.assertIsInstance(usage, dict)

        # Bad requests are 400 with the reason, before anything runs.
        status, err, _ = self.rest("POST", "/sandboxes/%s/exec" % sid, token,
                                   {"command": "true", "timeout_ms": 600001})
        self.assertEqual(status, 400, err)
        self.assertIn("timeout_ms", err["error"])

        gone, _ = self.rest_ok("DELETE", "/sandboxes/" + sid, token)
        self.assertEqual(gone, {"id": sid, "status": "destroyed"})
        status, err, _ = self.rest("GET", "/sandboxes/" + sid, token)
        self.assertEqual(status, 404, err)
        self.assert_log("surface=rest")

    def test_3_one_sandbox_every_surface(self):
        token = self.token("mixed")
        made, _ = self.rest_ok("POST", "/sandboxes", token, {"size": SIZE}, status=201)
        sid = made["id"]
        self.destroy_on_exit(sid)
        self.rest_ok("POST", "/sandboxes/%s/exec" % sid, token,
                     {"command": "echo rest > /tmp/made-by"})

        url = "http://127.0.0.1:%d/mcp/sandbox" % self.server.http_port
        r = sandbox_sdk_client(url, token, "drive", sid)
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        self.assertIn('"made_by":"rest"', r.stdout)

        # Over SSH: the lobby's ssh command, and straight in as ID@HOST.
        r = self.vm_ok("ssh", sid, "cat /tmp/mcp-was-here")
        self.assertEqual(r.stdout, "mcp\n")
        r = self.ssh(self.admin, "cat /tmp/made-by", user=sid, timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "rest\n"), r.stderr)

        # Made over MCP, destroyed over REST.
        c = mcp_http.McpClient(self.server.http_port, token, path="/mcp/sandbox", timeout=900)
        self.addCleanup(c.close)
        c.initialize()
        res = c.call("create_sandbox", size=SIZE, timeout_minutes=5)
        self.assertFalse(res["isError"], res)
        other = res["structuredContent"]["id"]
        self.destroy_on_exit(other)
        listed, _ = self.rest_ok("GET", "/sandboxes", token)
        self.assertEqual({s["id"] for s in listed["sandboxes"]} >= {sid, other}, True, listed)
        gone, _ = self.rest_ok("DELETE", "/sandboxes/" + other, token)
        self.assertEqual(gone["status"], "destroyed")
        res = c.call("destroy_sandbox", sandbox_id=sid)
        self.assertFalse(res["isError"], res)
        self.assertNotIn(sid, self.vm_ok("ls").stdout)


if __name__ == "__main__":
    h.main()
