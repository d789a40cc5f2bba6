#!/usr/bin/python3
"""POST /exec, API tokens, HTTPS and /metrics (on its own listener) on the real `warren serve`
(no VMs).

Every /exec status that needs no VM is checked with curl (200, 400, 401, 403, 404, 405,
409, 413, 429); the VM ones (409 for a stopped VM, 422 with output, 504, a job) are in
test_http_exec_vm.py. Tokens are minted over SSH with `ssh-key generate-api-key`; forged
and expired ones are signed here with the server's own secret (read from its data
directory, as only a test may), which also proves the token format is what the docs say.
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import subprocess
import time

import warren_harness


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class ExecTestCase(warren_harness.LobbyTestCase):
    KEYS = ("tagged",)
    SCHEME = "http"

    def url(self, path="/exec", server=None):
        server = server or self.server
        return "%s://127.0.0.1:%d%s" % (self.SCHEME, server.http_port, path)

    def curl(self, body=None, token=None, method="POST", path="/exec", headers=(), server=None,
             extra=()):
        """(status, parsed JSON body or text, headers text) of one curl request."""
        args = ["curl", "-sS", "--max-time", "60", "-X", method, "-D", "-",
                "-o", "-", "-w", "\n%{http_code}"]
        if self.SCHEME == "https":
            args += ["--cacert", self.cert]
        if token is not None:
            args += ["-H", "Authorization: Bearer " + token]
        for h in headers:
            args += ["-H", h]
        if body is not None:
            args += ["--data-binary", "@-"]
        args += list(extra)
        args.append(self.url(path, server))
        r = subprocess.run(args, input=(body or "").encode() if isinstance(body, str) else body,
                           capture_output=True, timeout=90)
        out = r.stdout.decode("utf-8", "replace")
        self.assertEqual(r.returncode, 0, "curl failed: %s" % r.stderr.decode())
        text, _, code = out.rpartition("\n")
        head, _, payload = text.partition("\r\n\r\n")
        try:
            parsed = json.loads(payload) if payload.strip() else None
        except ValueError:
            parsed = payload
        return int(code), parsed, head

    def mint(self, key, *flags):
        r = self.ssh_ok(key, "ssh-key", "generate-api-key", *flags)
        token = r.stdout.strip()
        self.assertTrue(token.startswith("wr1."), r.stdout + r.stderr)
        self.assertIn("Bearer", r.stderr)
        self.assertNotIn(token, self.server.log())  # never logged
        return token

    def sign(self, payload, server=None):
        """A token signed with the server's secret, for claims `ssh-key` would not mint."""
        with open(os.path.join((server or self.server).data_dir, "token-signing.key")) as f:
            secret = bytes.fromhex(f.read().strip())
        signed = "wr1." + b64url(json.dumps(payload, separators=(",", ":")).encode())
        mac = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
        return signed + "." + b64url(mac)

    def label_id(self, key, label):
        listed = self.ssh_json(key, "ssh-key", "list")
        for entry in listed["api_tokens"]:
            if entry["label"] == label:
                return entry["id"]
        self.fail("no label %s in %s" % (label, listed))


class HttpExecTest(ExecTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.token = None

    def setUp(self):
        if HttpExecTest.token is None:
            HttpExecTest.token = self.mint(self.admin, "--label", "main")

    def test_200_runs_the_command_as_json(self):
        status, body, head = self.curl("whoami", self.token)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["user"], "admin")
        self.assertIn("application/json", head.lower())
        # The JSON form, and help over /exec.
        status, body, _ = self.curl(json.dumps({"command": "help ssh-key"}), self.token)
        self.assertEqual(status, 200, body)
        status, body, _ = self.curl('{"command": "whoami"}', self.token,
                                    headers=["Content-Type: application/json"])
        self.assertEqual(status, 200, body)
        self.assertIn("api_tokens", self.curl("ssh-key list", self.token)[1])
        # The audit line names the surface and the token's label id, never the token.
        self.assert_log("surface=exec")
        self.assertIn("token:" + self.label_id(self.admin, "main"), self.server.log())

    def test_stdin_reaches_the_command(self):
        other = warren_harness.Key(self.tmp, "stdin-key")
        status, body, _ = self.curl(
            json.dumps({"command": "ssh-key add --name from-stdin", "stdin": other.public_line}),
            self.token)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["key"]["fingerprint"], other.fingerprint)

    def test_400_bad_requests(self):
        for body in ["", "   ", "{not json", '{"command": 5}', '{"command": ""}', "{}",
                     '{"command": "whoami", "wait_seconds": 46}',
                     '{"command": "whoami", "wait_seconds": -1}',
                     '{"command": "whoami", "stdin": 7}',
                     "ls --no-such-flag", "ls 'unterminated"]:
            status, parsed, _ = self.curl(body, self.token)
            self.assertEqual(status, 400, "%r -> %s %s" % (body, status, parsed))
            self.assertIn("error", parsed, body)

    def test_401_missing_bad_forged_revoked_and_expired_tokens(self):
        status, body, head = self.curl("whoami")
        self.assertEqual(status, 401)
        self.assertIn("www-authenticate: bearer", head.lower())
        for bad in ["nope", "wr1.", "wr1.abc.def", self.token[:-2], self.token + "x",
                    self.token[:10] + ("A" if self.token[10] != "A" else "B") + self.token[11:]]:
            status, body, _ = self.curl("whoami", bad)
            self.assertEqual(status, 401, bad)
        status, body, _ = self.curl("whoami", headers=["Authorization: Basic Zm9vOmJhcg=="])
        self.assertEqual(status, 401)

        # Revoked: removing the label refuses its tokens at once; a new label of the same
        # name does not revive them.
        t1 = self.mint(self.admin, "--label", "short")
        t2 = self.mint(self.admin, "--label", "short")
        self.assertEqual(self.curl("whoami", t1)[0], 200)
        self.assertEqual(self.curl("whoami", t2)[0], 200)
        removed = self.ssh_json(self.admin, "ssh-key", "remove", "short")
        self.assertEqual(removed["revoked_tokens"], 2)
        for t in (t1, t2):
            status, body, _ = self.curl("whoami", t)
            self.assertEqual(status, 401)
            self.assertIn("revoked", body["error"])
        t3 = self.mint(self.admin, "--label", "short")
        self.assertEqual(self.curl("whoami", t3)[0], 200)
        self.assertEqual(self.curl("whoami", t1)[0], 401)

        # Expiry takes effect at once: a token valid for two more seconds, then not.
        label = self.label_id(self.admin, "short")
        now = int(time.time())
        soon = self.sign({"v": 1, "u": "admin", "l": label, "c": [], "t": "", "e": now + 2,
                          "i": now})
        self.assertEqual(self.curl("whoami", soon)[0], 200)
        time.sleep(max(0, now + 2 - time.time()) + 0.2)
        status, body, _ = self.curl("whoami", soon)
        self.assertEqual(status, 401)
        self.assertIn("expired", body["error"])

        # Forged: the same claims signed with another secret; a token naming another
        # user's label.
        payload = {"v": 1, "u": "admin", "l": label, "c": [], "t": "", "e": 0, "i": now}
        signed = "wr1." + b64url(json.dumps(payload).encode())
        forged = signed + "." + b64url(hmac.new(b"x" * 32, signed.encode(),
                                                 hashlib.sha256).digest())
        self.assertEqual(self.curl("whoami", forged)[0], 401)
        self.make_user("mallory", self.keys["tagged"])
        self.assertEqual(self.curl("whoami", self.sign(dict(payload, u="mallory")))[0], 401)
        self.ssh_ok(self.admin, "user", "rm", "mallory")

    def test_403_commands_outside_the_token(self):
        limited = self.mint(self.admin, "--label", "lsonly", "--cmds", "'whoami,ssh-key list'")
        self.assertEqual(self.curl("whoami", limited)[0], 200)
        for command in ["user ls", "ssh-key add x", "ls", "new", "ssh-key generate-api-key "
                        "--label again"]:
            status, body, _ = self.curl(command, limited)
            self.assertEqual(status, 403, "%s -> %s" % (command, body))
        # A restricted token can mint only narrower tokens (inheriting its limits)...
        narrower = self.mint(self.admin, "--label", "narrow", "--cmds", "whoami,ssh-key")
        status, body, _ = self.curl("ssh-key generate-api-key --label narrower2 --cmds whoami",
                                    narrower)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["restrictions"]["cmds"], ["whoami"])
        self.assertEqual(self.curl("user ls", body["token"])[0], 403)
        status, body, _ = self.curl("ssh-key generate-api-key --label wider --cmds whoami,user",
                                    narrower)
        self.assertEqual(status, 403, body)
        status, body, _ = self.curl("ssh-key generate-api-key --label inherits", narrower)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["restrictions"]["cmds"], ["whoami", "ssh-key"])
        # ... and cannot remove a wider label.
        status, body, _ = self.curl("ssh-key remove main", narrower)
        self.assertEqual(status, 403, body)

    def test_404_unknown_command_and_endpoint(self):
        status, body, _ = self.curl("frobnicate", self.token)
        self.assertEqual(status, 404)
        self.assertIn("unknown command", body["error"])
        self.assertEqual(self.curl("whoami", self.token, path="/exec/more")[0], 404)
        self.assertEqual(self.curl("ssh-key remove no-such-label", self.token)[0], 404)

    def test_405_wrong_method(self):
        for method in ("GET", "PUT", "DELETE"):
            status, body, head = self.curl(None, self.token, method=method)
            self.assertEqual(status, 405, method)
            self.assertIn("allow: post", head.lower())

    def test_409_conflict(self):
        status, body, _ = self.curl("user add admin --key '%s'" % self.admin.public_line,
                                    self.token)
        self.assertEqual(status, 409, body)
        # A label may not take a key's name (they share one namespace).
        key_name = self.ssh_json(self.admin, "ssh-key", "list")["keys"][0]["name"]
        status, body, _ = self.curl("ssh-key generate-api-key --label " + key_name, self.token)
        self.assertEqual(status, 409, body)

    def test_413_body_too_large(self):
        def padded(n):
            return json.dumps({"command": "whoami", "stdin": "x" * n})

        status, body, _ = self.curl(padded(64 * 1024), self.token)
        self.assertEqual(status, 413)
        self.assertIn("too large", body["error"])
        # Chunked (no Content-Length): refused once past the limit.
        status, body, _ = self.curl(padded(200 * 1024), self.token,
                                    headers=["Transfer-Encoding: chunked"])
        self.assertEqual(status, 413)
        # A large body is answered without being read whole: 8 MiB, refused at once.
        status, body, _ = self.curl(padded(8 << 20), self.token)
        self.assertEqual(status, 413)
        # Just under the limit is fine.
        status, body, _ = self.curl(padded(60 * 1024), self.token)
        self.assertEqual(status, 200, body)
        self.assertEqual(self.curl("whoami", self.token)[0], 200)

    def test_429_rate_limit_per_token(self):
        burst_token = self.mint(self.admin, "--label", "burst")
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=30)
        codes = []
        for _ in range(120):
            conn.request("POST", "/exec", body="whoami",
                         headers={"Authorization": "Bearer " + burst_token})
            r = conn.getresponse()
            r.read()
            codes.append(r.status)
        conn.close()
        self.assertIn(429, codes)
        self.assertGreaterEqual(codes.count(200), 40)  # the burst
        status, body, head = self.curl("whoami", burst_token)
        if status == 429:
            self.assertIn("retry-after", head.lower())
        # Another label has its own bucket.
        self.assertEqual(self.curl("whoami", self.token)[0], 200)

    def test_metrics(self):
        self.curl("whoami", self.token)
        self.curl("frobnicate", self.token)
        # Not where users and agents reach warren: on the --metrics listener only.
        status, _, _ = self.curl(method="GET", path="/metrics")
        self.assertEqual(status, 404)
        conn = http.client.HTTPConnection("127.0.0.1", self.server.metrics_port, timeout=10)
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        text = r.read().decode()
        self.assertEqual(r.status, 200)
        self.assertIn("text/plain", r.getheader("Content-Type"))
        samples = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$', line)
            self.assertIsNotNone(m, "not Prometheus text: %r" % line)
            samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        self.assertGreaterEqual(samples['warren_http_requests_total{route="/exec",code="200"}'], 1)
        self.assertGreaterEqual(samples['warren_http_requests_total{route="/exec",code="404"}'], 1)
        self.assertGreaterEqual(
            samples['warren_command_duration_seconds_count{command="whoami"}'], 1)
        self.assertEqual(
            samples['warren_command_duration_seconds_bucket{command="whoami",le="+Inf"}'],
            samples['warren_command_duration_seconds_count{command="whoami"}'])
        self.assertGreaterEqual(
            samples['warren_commands_total{command="whoami",surface="exec",code="ok"}'], 1)
        self.assertIn('warren_vms{state="running"}', samples)
        self.assertIn("warren_ssh_connections", samples)
        self.assertIn("warren_mcp_sessions", samples)
        self.assertIn("warren_http_connections", samples)
        # A lobby SSH connection held open shows in the gauge.
        client = self.paramiko_client(self.admin)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            m = re.search(r"^warren_ssh_connections (\S+)$", text, re.M)
            self.assertGreaterEqual(float(m.group(1)), 1)
        finally:
            client.close()
        conn.close()

    def test_token_labels_in_ssh_key_list_and_rename(self):
        self.mint(self.admin, "--label", "listed", "--tag", "ci", "--exp", "30d")
        listed = self.ssh_json(self.admin, "ssh-key", "list")
        entry = [e for e in listed["api_tokens"] if e["label"] == "listed"][0]
        self.assertEqual(len(entry["id"]), 32)
        self.assertEqual(entry["tokens"][0]["restrictions"]["tag"], "ci")
        text = self.ssh_ok(self.admin, "ssh-key", "list").stdout
        self.assertIn("API token labels", text)
        self.assertIn("listed", text)
        self.ssh_ok(self.admin, "ssh-key", "rename", "listed", "renamed")
        self.assertIn("renamed", self.ssh_ok(self.admin, "ssh-key", "list").stdout)


class HttpsExecTest(ExecTestCase):
    """The same listener over HTTPS with a self-signed certificate made by openssl."""
    SCHEME = "https"

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        cls.cert = os.path.join(cls.tmp, "cert.pem")
        key = os.path.join(cls.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", cls.cert],
                       check=True, capture_output=True)
        return super().start_server(data_dir, admin_key,
                                    list(extra_args) + ["--tls-cert", cls.cert, "--tls-key", key])

    def test_https_exec_and_health(self):
        self.assert_log("(HTTPS)")
        token = self.mint(self.admin, "--label", "tls")
        status, body, _ = self.curl("whoami", token)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["user"], "admin")
        self.assertEqual(self.curl(None, method="GET", path="/healthz")[0], 200)
        self.assertEqual(self.curl("whoami", "wr1.bad.token")[0], 401)
        # Plain HTTP to the HTTPS port gets nowhere; an unknown CA is refused by curl.
        r = subprocess.run(["curl", "-sS", "--max-time", "5",
                            "http://127.0.0.1:%d/healthz" % self.server.http_port],
                           capture_output=True)
        self.assertNotEqual(r.stdout.strip(), b'{"status":"ok"}')
        r = subprocess.run(["curl", "-sS", "--max-time", "5",
                            "https://127.0.0.1:%d/healthz" % self.server.http_port],
                           capture_output=True)
        self.assertNotEqual(r.returncode, 0)
        # Keep-alive over TLS: several requests on one connection.
        import ssl
        ctx = ssl.create_default_context(cafile=self.cert)
        conn = http.client.HTTPSConnection("127.0.0.1", self.server.http_port, context=ctx,
                                           timeout=10)
        for _ in range(3):
            conn.request("POST", "/exec", body="whoami",
                         headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
        conn.close()

    def test_bad_certificate_is_refused_at_start(self):
        bad = os.path.join(self.tmp, "bad.pem")
        with open(bad, "w") as f:
            f.write("not a certificate\n")
        server = warren_harness.Server(os.path.join(self.tmp, "data-bad"), self.admin,
                                       ["--tls-cert", bad, "--tls-key", bad])
        with self.assertRaises(RuntimeError) as ctx:
            server.start()
        server.stop()
        self.assertIn("TLS certificate", str(ctx.exception))


if __name__ == "__main__":
    warren_harness.main()
