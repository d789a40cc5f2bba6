#!/usr/bin/python3
"""warren's /mcp driven by MCP peers nobody on this team wrote, on a lobby without VMs:

- the official MCP TypeScript SDK client (@modelcontextprotocol/sdk): connect with a bearer
  token, list tools, call exec; at /mcp/sandbox, the four tools, their annotations, the
  instructions and a tool error (the sandbox flows with guests are test_sandbox_api.py);
- MCP Inspector's CLI with --strict: tools/list (schema portability) on every endpoint,
  /mcp/sandbox included, and a tools/call;
- the MCP conformance suite (@modelcontextprotocol/conformance) against a server started
  with the test-only --mcp-conformance-fixtures flag, behind a small loopback proxy that adds
  the bearer header (the suite sends none), at /mcp and at /mcp/sandbox;
  tests/integration/mcp_conformance_expected.yaml lists only scenarios for features warren
  does not offer.

The peers come from .peers/ (packaging/install-peers.sh, pinned versions); a missing peer
fails the test with that instruction. The VM part of the SDK flow is test_mcp_vm.py.
"""
import http.client
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

import mcp_http
import warren_harness as h

HERE = os.path.dirname(os.path.abspath(__file__))


def run_peer(args, timeout=300, cwd=None):
    env = dict(os.environ, PATH=mcp_http.peer_path(), NO_COLOR="1", CI="1")
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def sdk_client(url, token, mode, *extra, timeout=900):
    """Runs mcp_sdk_client.mjs from inside .peers/ so its imports resolve there."""
    run_dir = tempfile.mkdtemp(prefix="run-", dir=os.path.dirname(mcp_http.PEERS))
    try:
        script = os.path.join(run_dir, "mcp_sdk_client.mjs")
        shutil.copy(os.path.join(HERE, "mcp_sdk_client.mjs"), script)
        return run_peer(["node", script, url, token, mode, *extra], timeout=timeout)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


class AuthProxy:
    """A loopback HTTP proxy to warren that adds "Authorization: Bearer TOKEN" and streams
    responses through (SSE included), for peers that cannot send a header."""

    def __init__(self, upstream_port, token):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # close-delimited: no re-chunking needed

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "keep-alive", "authorization")}
                headers["Authorization"] = "Bearer " + token
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    self.send_response(resp.status)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                             "keep-alive"):
                            self.send_header(k, v)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    while True:
                        chunk = resp.read1(65536)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the peer stopped reading (it has what it wanted)
                finally:
                    conn.close()

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class McpPeersTest(h.LobbyTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        mcp_http.peer_path()  # fail early and clearly without the peers

    def token(self, *flags, label="peer"):
        return mcp_http.mint_token(self, self.admin, *flags, label=label + os.urandom(3).hex())

    def url(self, server=None):
        return "http://127.0.0.1:%d/mcp" % (server or self.server).http_port

    def test_sdk_client_lists_and_calls_tools(self):
        r = sdk_client(self.url(), self.token(), "basic", timeout=120)
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        steps = [json.loads(line)["step"] for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(steps, ["connected", "tools", "whoami", "ls", "done"])
        self.assert_log("cmd=whoami caller=token:")
        self.assert_log("surface=mcp code=ok")

    def test_sdk_client_at_the_sandbox_endpoint(self):
        from test_sandbox_api import sandbox_sdk_client, steps_of
        url = "http://127.0.0.1:%d/mcp/sandbox" % self.server.http_port
        r = sandbox_sdk_client(url, self.token(), "tools", timeout=120)
        self.assertEqual(r.returncode, 0, "SDK client:\n%s\n%s" % (r.stdout, r.stderr))
        self.assertEqual(steps_of(r), ["connected", "tools", "error", "done"])

    def test_inspector_strict_tools_list_and_call(self):
        header = "Authorization: Bearer " + self.token()
        for path in ("/mcp", "/mcp/claude", "/mcp/openai", "/mcp/sandbox"):
            url = "http://127.0.0.1:%d%s" % (self.server.http_port, path)
            r = run_peer(["mcp-inspector", "--cli", url, "--transport", "http", "--method",
                          "tools/list", "--strict", "--header", header], timeout=120)
            self.assertEqual(r.returncode, 0, "inspector --strict %s:\n%s\n%s"
                             % (path, r.stdout, r.stderr))
            # No portability finding at all, warnings included.
            self.assertNotIn("Warning", r.stderr, r.stderr)
            names = {t["name"] for t in json.loads(r.stdout)["tools"]}
            self.assertTrue(names, r.stdout)
        r = run_peer(["mcp-inspector", "--cli", self.url(), "--transport", "http", "--method",
                      "tools/call", "--tool-name", "exec", "--tool-arg", "command=whoami",
                      "--header", header], timeout=120)
        self.assertEqual(r.returncode, 0, "inspector tools/call:\n%s\n%s" % (r.stdout, r.stderr))
        result = json.loads(r.stdout)
        self.assertFalse(result.get("isError"), r.stdout)
        self.assertIn("admin", mcp_http.text_of(result))


class McpConformanceTest(h.LobbyTestCase):
    """The official conformance suite against a server with the test-only fixture tools."""

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        return super(McpConformanceTest, cls).start_server(
            data_dir, admin_key, list(extra_args) + ["--mcp-conformance-fixtures"])

    def test_conformance_suite(self):
        mcp_http.peer_path()
        token = mcp_http.mint_token(self, self.admin, label="conformance")
        # The suite's DNS-rebinding check wants "localhost" in the URL.
        proxy = AuthProxy(self.server.http_port, token)
        self.addCleanup(proxy.close)
        # /mcp/sandbox carries the fixtures too under the test-only flag, so the suite checks
        # its transport and tools/call path as it does /mcp's.
        for path in ("/mcp", "/mcp/sandbox"):
            out = os.path.join(self.tmp, "conformance-results" + path.replace("/", "-"))
            r = run_peer(["conformance", "server", "--url",
                          "http://localhost:%d%s" % (proxy.port, path), "-o", out,
                          "--expected-failures",
                          os.path.join(HERE, "mcp_conformance_expected.yaml")], timeout=600)
            self.assertEqual(r.returncode, 0, "conformance at %s:\n%s\n%s"
                             % (path, r.stdout[-8000:], r.stderr[-3000:]))
            self.assertIn("Baseline check passed", r.stdout)


if __name__ == "__main__":
    h.main()
