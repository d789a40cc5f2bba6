#!/usr/bin/python3
"""The Streamable HTTP transport rules of /mcp, checked with curl (what SDK peers never send)
against the real `warren serve` on loopback, and token scope over MCP on a lobby without VMs:

- a bad Origin -> 403, a loopback one is fine; no or a bad token -> 401 with WWW-Authenticate;
- sessions: initialize hands out Mcp-Session-Id; unknown -> 404, missing -> 400, another
  token's -> 404; DELETE ends one;
- MCP-Protocol-Version: unsupported -> 400; 2025-06-18 negotiates;
- a JSON-RPC batch -> 400 with a JSON-RPC error; malformed JSON -> a JSON-RPC parse error
  (JSON, not HTML); an oversized body -> 413; GET -> 405;
- a --cmds token runs nothing else (help still works); a revoked token stops at once, also
  inside its open session.
Tag scope, jobs and restarts need VMs: test_mcp_vm.py.
"""
import json
import os
import subprocess
import unittest

import mcp_http
import warren_harness as h

PING = '{"jsonrpc":"2.0","id":1,"method":"ping"}'


class McpTransportTest(h.LobbyTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.url = "http://127.0.0.1:%d/mcp" % cls.server.http_port

    def setUp(self):
        self.token = mcp_http.mint_token(self, self.admin, label="t" + os.urandom(3).hex())

    def curl(self, *args, body=None, method="POST", token="default", session=None,
             url=None, content_type="application/json"):
        """curl; returns (status, headers dict, body bytes)."""
        hdr_file = os.path.join(self.tmp, "headers")
        cmd = ["curl", "-s", "-o", "-", "-D", hdr_file, "-X", method,
               "-H", "Accept: application/json, text/event-stream"]
        if content_type:
            cmd += ["-H", "Content-Type: " + content_type]
        token = self.token if token == "default" else token
        if token:
            cmd += ["-H", "Authorization: Bearer " + token]
        if session:
            cmd += ["-H", "Mcp-Session-Id: " + session]
        if body is not None:
            cmd += ["--data-binary", "@-"]
        cmd += list(args) + [url or self.url]
        r = subprocess.run(cmd, input=body.encode() if isinstance(body, str) else body,
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(hdr_file, encoding="latin-1") as f:
            lines = f.read().splitlines()
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return status, headers, r.stdout

    def session(self, token=None):
        c = mcp_http.McpClient(self.server.http_port, token or self.token)
        c.initialize()
        self.addCleanup(c.close)
        return c

    def test_origin(self):
        s = self.session()
        status, _, body = self.curl("-H", "Origin: http://evil.example.com", body=PING,
                                    session=s.session)
        self.assertEqual(status, 403, body)
        self.assertIn("error", json.loads(body))
        for origin in ("http://localhost:6274", "http://127.0.0.1:9", "http://[::1]:80"):
            status, _, body = self.curl("-H", "Origin: " + origin, body=PING, session=s.session)
            self.assertEqual(status, 200, (origin, body))

    def test_auth(self):
        status, headers, body = self.curl(body=PING, token=None)
        self.assertEqual(status, 401, body)
        self.assertIn("Bearer", headers.get("www-authenticate", ""))
        self.assertIn("Authorization", json.loads(body)["error"]["message"])
        status, _, _ = self.curl(body=PING, token="wr1.forged.token")
        self.assertEqual(status, 401)

    def test_sessions(self):
        s = self.session()
        self.assertRegex(s.session, r"^[0-9a-f]{32}$")
        status, _, body = self.curl(body=PING, session=s.session)
        self.assertEqual((status, json.loads(body)["result"]), (200, {}))
        status, _, body = self.curl(body=PING, session="0" * 32)
        self.assertEqual(status, 404, body)
        status, _, body = self.curl(body=PING)
        self.assertEqual(status, 400, body)
        # Another token cannot use this session.
        other = mcp_http.mint_token(self, self.admin, label="o" + os.urandom(3).hex())
        status, _, _ = self.curl(body=PING, session=s.session, token=other)
        self.assertEqual(status, 404)
        status, _, _ = self.curl(method="DELETE", session=s.session)
        self.assertEqual(status, 200)
        status, _, _ = self.curl(body=PING, session=s.session)
        self.assertEqual(status, 404)

    def test_protocol_version(self):
        s = self.session()
        status, _, body = self.curl("-H", "MCP-Protocol-Version: 2099-01-01", body=PING,
                                    session=s.session)
        self.assertEqual(status, 400, body)
        c = mcp_http.McpClient(self.server.http_port, self.token)
        self.addCleanup(c.close)
        self.assertEqual(c.initialize("2025-06-18")["protocolVersion"], "2025-06-18")
        status, _, _ = self.curl("-H", "MCP-Protocol-Version: 2025-06-18", body=PING,
                                 session=c.session)
        self.assertEqual(status, 200)

    def test_batch_malformed_oversized_get(self):
        s = self.session()
        status, headers, body = self.curl(body="[" + PING + "]", session=s.session)
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["code"], -32600)
        status, headers, body = self.curl(body='{"jsonrpc": "2.0", "id": 1, "meth', session=s.session)
        self.assertEqual(status, 400)
        self.assertTrue(headers["content-type"].startswith("application/json"), headers)
        self.assertEqual(json.loads(body)["error"]["code"], -32700)
        big = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + "a" * (2 << 20) + '"}}'
        # "Expect:" off: this checks the body limit, not 100-continue handling.
        status, _, _ = self.curl("-H", "Expect:", body=big, session=s.session)
        self.assertEqual(status, 413)
        status, headers, _ = self.curl(method="GET", session=s.session)
        self.assertEqual(status, 405)
        self.assertIn("POST", headers.get("allow", ""))
        status, _, _ = self.curl(body=PING, session=s.session, content_type="text/plain")
        self.assertEqual(status, 400)

    def test_cmds_token_runs_nothing_else(self):
        token = mcp_http.mint_token(self, self.admin, "--cmds", "whoami", label="narrow")
        c = mcp_http.McpClient(self.server.http_port, token)
        self.addCleanup(c.close)
        info = c.initialize()
        self.assertIn("whoami", info["instructions"])
        self.assertIn("limited", info["instructions"])
        r = c.exec("whoami")
        self.assertFalse(r["isError"], r)
        for command in ("ls", "ssh-key list", "user ls", "new --name x"):
            r = c.exec(command)
            self.assertTrue(r["isError"], (command, r))
        r = c.call("exec_read_only", command="ls")
        self.assertTrue(r["isError"], r)
        r = c.exec("help")  # help always runs, listing only what it may do
        self.assertFalse(r["isError"], r)
        self.assertIn("whoami", mcp_http.text_of(r))
        self.assertNotIn("ssh-key", mcp_http.text_of(r))

    def test_revocation_takes_effect_at_once(self):
        token = mcp_http.mint_token(self, self.admin, label="soon-gone")
        c = self.session(token)
        self.assertFalse(c.exec("whoami")["isError"])
        self.ssh_ok(self.admin, "ssh-key", "remove", "soon-gone")
        r = c.request("tools/call", {"name": "exec", "arguments": {"command": "whoami"}})
        self.assertEqual(r.status, 401, r.body)

    def test_curated_endpoints(self):
        for path in ("/mcp/claude", "/mcp/openai"):
            c = mcp_http.McpClient(self.server.http_port, self.token, path=path)
            self.addCleanup(c.close)
            c.initialize()
            names = {t["name"] for t in c.request("tools/list").result()["tools"]}
            self.assertEqual(names, {"list_vms", "create_vm", "run_vm_command", "get_cli_help"})
            r = c.call("get_cli_help", command="new")
            self.assertIn("--name", mcp_http.text_of(r))


if __name__ == "__main__":
    h.main()
