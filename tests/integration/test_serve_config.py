#!/usr/bin/python3
"""`warren serve` as an operator runs it (no VMs): the config file and --print-config, JSON
logs, no secret in the log at --log-level debug through a real session (API token over /exec
and MCP, an SSH key added, an OAuth sign-in), SIGHUP (a new TLS certificate for new
connections, seen by a real TLS client; a bad one keeps the old; the log level re-read from
the file) and sd_notify (READY=1 only once every listener accepts, RELOADING=1/READY=1 around
a reload, STOPPING=1 at the end) on a NOTIFY_SOCKET the test binds."""
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import mcp_http
import oauth_flow
import warren_harness as h

REDIRECT = "http://127.0.0.1:9/callback"


def serve_cmd(*args):
    return subprocess.run([h.WARREN_BIN, "serve", *args], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def make_cert(directory, name):
    """A self-signed certificate for 127.0.0.1: (cert path, key path, SHA-256 of its DER)."""
    cert, key = os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=" + name, "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    der = ssl.PEM_cert_to_DER_cert(read(cert))
    return cert, key, hashlib.sha256(der).hexdigest()


def served_fingerprint(port):
    """SHA-256 of the certificate a fresh TLS connection to 127.0.0.1:port is shown."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()


class PrintConfigTest(h.LobbyTestCase):
    """--print-config and the config file's errors: no server needed."""

    @classmethod
    def start_server(cls, *a, **kw):
        return None

    @classmethod
    def pin_host_key(cls, server):
        pass

    def test_print_config_shows_file_flags_and_defaults(self):
        conf = write(os.path.join(self.tmp, "a.conf"),
                     "# comment\nhttp = \"0.0.0.0:8000\"\nlog-format = json\n"
                     "pool = [\"tiny=2\",\n  \"debian=1\"]\nssh = \"0.0.0.0:22\"\n")
        r = serve_cmd("--config", conf, "--ssh", "127.0.0.1:0", "--print-config")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn('http = "0.0.0.0:8000"  # %s line 2\n' % conf, out)
        self.assertIn('log-format = "json"  # %s line 3\n' % conf, out)
        self.assertIn('pool = ["tiny=2", "debian=1"]  # %s line 4\n' % conf, out)
        self.assertIn('ssh = "127.0.0.1:0"  # command line\n', out)  # the flag wins
        self.assertIn('data-dir = "/var/lib/warren"  # default\n', out)
        self.assertIn("log-level = \"info\"  # default\n", out)
        # The output is itself a config file giving the same configuration.
        again = write(os.path.join(self.tmp, "b.conf"), out)
        r2 = serve_cmd("--config", again, "--print-config")
        self.assertEqual(r2.returncode, 0, r2.stderr)
        strip = lambda text: [l.split("  # ")[0] for l in text.splitlines()[1:]]
        self.assertEqual(strip(r2.stdout), strip(out))
        # Every serve flag of --help is a key (but --help, --config, --print-config).
        help_text = serve_cmd("--help").stdout
        flags = set(re.findall(r"^\s+(?:-\w,)?--([a-z0-9-]+)", help_text, re.M))
        keys = set(re.findall(r"^([a-z0-9-]+) = ", out, re.M))
        self.assertEqual(flags - keys, {"help", "config", "print-config"})
        # No secret: flags hold paths (tls-key, admin-key), never key material.
        self.assertNotIn("PRIVATE KEY", out)

    def test_errors_name_key_and_line(self):
        conf = write(os.path.join(self.tmp, "bad.conf"), "ssh = \"127.0.0.1:0\"\n\nsssh = 1\n")
        r = serve_cmd("--config", conf, "--print-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("%s line 3: unknown key \"sssh\"" % conf, r.stderr)
        conf = write(os.path.join(self.tmp, "bad2.conf"), "# x\nssh-max-logins = 0\n")
        r = serve_cmd("--config", conf, "--print-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("%s line 2 (key ssh-max-logins)" % conf, r.stderr)
        r = serve_cmd("--config", os.path.join(self.tmp, "missing.conf"), "--print-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing.conf", r.stderr)
        # The default file (/etc/warren/warren.conf) may be missing; the packaged example,
        # every key commented out, changes nothing.
        example = os.path.join(h.SOURCE_DIR, "packaging", "warren.conf")
        r = serve_cmd("--config", example, "--print-config")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(" line ", r.stdout.split("\n", 1)[1])


class JsonLogNoSecretsTest(h.LobbyTestCase):
    """A real session at --log-level debug in JSON: every line an object; no credential in
    any line."""

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        conf = write(os.path.join(cls.tmp, "warren.conf"),
                     "log-level = debug\nlog-format = json\n")
        return super().start_server(data_dir, admin_key, ["--config", conf] + list(extra_args))

    def test_session_logs_json_and_no_secret(self):
        secrets = []
        # An API token, used over /exec and MCP.
        token = self.ssh_ok(self.admin, "ssh-key", "generate-api-key", "--label",
                            "agent").stdout.strip()
        self.assertTrue(token.startswith("wr1."))
        secrets.append(token)
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=30)
        conn.request("POST", "/exec", body="whoami", headers={"Authorization": "Bearer " + token})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200, resp.read())
        resp.read()
        mcp = mcp_http.McpClient(self.server.http_port, token)
        mcp.initialize()
        self.assertIn("admin", mcp_http.text_of(mcp.exec("whoami")))
        mcp.end()
        # An SSH key added (its private half must never show).
        extra = h.Key(self.tmp, "extra")
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "extra", input=extra.public_line)
        # An OAuth sign-in: the page secret, the code, the access and refresh tokens.
        web = oauth_flow.Http(self.server.http_port)
        client_id = web.register([REDIRECT], "Secret Test")
        verifier, challenge = oauth_flow.pkce()
        status, _, _, code, page_secret = web.open_page(client_id, REDIRECT, challenge)
        self.assertEqual(status, 200)
        self.ssh_ok(self.admin, "authorize", code)
        poll = web.poll(page_secret)
        self.assertEqual(poll["status"], "approved", poll)
        auth_code = oauth_flow.code_from_redirect(poll["redirect"])["code"]
        status, _, tokens = web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual(status, 200, tokens)
        status, _, _ = web.mcp_initialize(tokens["access_token"])
        self.assertEqual(status, 200)
        secrets += [page_secret, auth_code, verifier, tokens["access_token"],
                    tokens["refresh_token"]]
        # The data dir's secrets and every private key.
        for name in ("token-signing.key", "integration.key", "ssh_host_ed25519_key"):
            path = os.path.join(self.server.data_dir, name)
            if os.path.exists(path):
                secrets.append(read(path).strip())
        for key in (self.admin, extra):
            secrets.append(read(key.path).strip())
        self.assert_log('"cmd":"authorize"')
        self.assert_log('"surface":"mcp"')
        time.sleep(0.2)  # the last lines written

        log = self.server.log()
        lines = [l for l in log.splitlines() if l.strip()]
        levels = set()
        audits = []
        for line in lines:
            entry = json.loads(line)  # every line is one JSON object
            self.assertEqual(list(entry)[:3], ["ts", "level", "msg"], line)
            self.assertRegex(entry["ts"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            levels.add(entry["level"])
            if entry["msg"] == "audit":
                audits.append(entry)
        self.assertIn("debug", levels)  # --log-level debug took effect (http request lines)
        self.assertTrue(any(a.get("cmd") == "whoami" and a.get("surface") == "exec"
                            and a.get("user") == "admin" for a in audits), audits)
        self.assertTrue(any(a.get("cmd") == "ssh-key add" for a in audits), audits)
        for secret in secrets:
            self.assertGreater(len(secret), 10)
            for piece in [secret] + [p for p in re.split(r"[.\s]+", secret) if len(p) >= 16]:
                self.assertNotIn(piece, log, "a secret is in the log")


class ReloadAndNotifyTest(h.LobbyTestCase):
    """SIGHUP and sd_notify, with a NOTIFY_SOCKET the test binds."""

    @classmethod
    def start_server(cls, *a, **kw):
        return None

    @classmethod
    def pin_host_key(cls, server):
        pass

    def start(self, conf, notify_name, extra=()):
        """warren serve with NOTIFY_SOCKET=notify_name; returns (server, datagram socket)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind("\0" + notify_name[1:] if notify_name.startswith("@") else notify_name)
        sock.settimeout(20)
        server = h.Server(os.path.join(self.tmp, "data"), self.admin,
                          ["--config", conf] + list(extra))
        self.addCleanup(server.stop)
        old = os.environ.get("NOTIFY_SOCKET")
        os.environ["NOTIFY_SOCKET"] = notify_name
        try:
            server.start()
        finally:
            if old is None:
                del os.environ["NOTIFY_SOCKET"]
            else:
                os.environ["NOTIFY_SOCKET"] = old
        return server, sock

    def test_ready_only_once_every_listener_accepts(self):
        # Started by hand, so READY=1 is read the moment it comes, before any log is looked at.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind("\0warren-notify-%d" % os.getpid())
        sock.settimeout(30)
        fd, log_path = tempfile.mkstemp(prefix="warren-notify-", suffix=".log")
        self.addCleanup(os.remove, log_path)
        env = dict(os.environ, NOTIFY_SOCKET="@warren-notify-%d" % os.getpid())
        proc = subprocess.Popen(
            [h.WARREN_BIN, "serve", "--config", "/dev/null", "--vms", "off",
             "--data-dir", os.path.join(self.tmp, "data-r"), "--admin-key",
             self.admin.path + ".pub", "--ssh", "127.0.0.1:0", "--http", "127.0.0.1:0",
             "--web", "127.0.0.1:0", "--metrics", "127.0.0.1:0"],
            stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        os.close(fd)
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait()))
        message = sock.recv(4096).decode()
        self.assertEqual(message, "READY=1")
        # At READY every listener accepts: each port is in the log already and connects.
        log = read(log_path)
        for name in ("ssh", "http", "web", "metrics"):
            m = re.search(r"%s listening on 127\.0\.0\.1:(\d+)" % name, log)
            self.assertTrue(m, "%s not listening at READY:\n%s" % (name, log))
            socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=5).close()
        self.assertIn("serving", log)
        # No datagram until a signal: SIGHUP brackets the reload; SIGTERM says STOPPING.
        proc.send_signal(signal.SIGHUP)
        reloading = sock.recv(4096).decode()
        self.assertRegex(reloading, r"^RELOADING=1\nMONOTONIC_USEC=\d+$")
        self.assertEqual(sock.recv(4096).decode(), "READY=1")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(sock.recv(4096).decode(), "STOPPING=1")
        self.assertEqual(proc.wait(timeout=30), 0)

    def test_no_ready_when_a_listener_fails(self):
        busy = socket.socket()
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        path = os.path.join(self.tmp, "notify-fail.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind(path)
        sock.settimeout(0.5)
        env = dict(os.environ, NOTIFY_SOCKET=path)
        r = subprocess.run(
            [h.WARREN_BIN, "serve", "--config", "/dev/null", "--vms", "off",
             "--data-dir", os.path.join(self.tmp, "data-f"), "--admin-key",
             self.admin.path + ".pub", "--ssh", "127.0.0.1:0", "--http", "127.0.0.1:0",
             "--web", "127.0.0.1:%d" % busy.getsockname()[1], "--metrics", "127.0.0.1:0"],
            capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--web", r.stderr)
        with self.assertRaises(socket.timeout):
            sock.recv(4096)

    def test_sighup_reloads_tls_and_log_level(self):
        cert_a, key_a, fp_a = make_cert(self.tmp, "a")
        cert_b, key_b, fp_b = make_cert(self.tmp, "b")
        self.assertNotEqual(fp_a, fp_b)
        cert, key = os.path.join(self.tmp, "tls.crt"), os.path.join(self.tmp, "tls.key")
        write(cert, read(cert_a))
        write(key, read(key_a))
        conf = write(os.path.join(self.tmp, "reload.conf"),
                     'tls-cert = "%s"\ntls-key = "%s"\nlog-level = info\n' % (cert, key))
        server, sock = self.start(conf, os.path.join(self.tmp, "notify.sock"))
        self.assertEqual(sock.recv(4096).decode(), "READY=1")
        port = server.http_port
        self.assertEqual(served_fingerprint(port), fp_a)
        self.assertEqual(served_fingerprint(server.web_port), fp_a)  # the web listener too
        # An open connection keeps its certificate; new ones get the new one.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        held = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
        self.addCleanup(held.close)

        def reload():
            server.proc.send_signal(signal.SIGHUP)
            self.assertTrue(sock.recv(4096).decode().startswith("RELOADING=1\n"))
            self.assertEqual(sock.recv(4096).decode(), "READY=1")

        write(cert, read(cert_b))
        write(key, read(key_b))
        self.assertEqual(served_fingerprint(port), fp_a)  # nothing re-read before SIGHUP
        reload()
        self.assertEqual(served_fingerprint(port), fp_b)
        self.assertEqual(served_fingerprint(server.web_port), fp_b)
        self.assertEqual(hashlib.sha256(held.getpeercert(binary_form=True)).hexdigest(), fp_a)
        held.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"200", held.recv(4096))
        # A broken certificate: an error logged, the one in use kept.
        write(cert, "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        reload()
        self.assert_log("reload: keeping the TLS certificate in use", server=server)
        self.assert_log("reload: the web listener keeps its TLS certificate", server=server)
        self.assertEqual(served_fingerprint(port), fp_b)
        self.assertEqual(served_fingerprint(server.web_port), fp_b)
        # A key that does not match: the same.
        write(cert, read(cert_a))
        reload()
        self.assertIn("key values mismatch", server.log())
        self.assertEqual(served_fingerprint(port), fp_b)
        write(key, read(key_a))
        reload()
        self.assertEqual(served_fingerprint(port), fp_a)

        # The log level, from the file: debug shows each HTTP request, info does not.
        self.assertNotIn("DEBUG", server.log())
        write(conf, 'tls-cert = "%s"\ntls-key = "%s"\nlog-level = debug\n' % (cert, key))
        reload()
        self.assert_log("reload: log level debug", server=server)
        served_fingerprint(port)
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        self.addCleanup(conn.close)
        conn.request("GET", "/healthz?probe=1")
        self.assertEqual(conn.getresponse().status, 200)
        self.assert_log("DEBUG http request", server=server)
        self.assertNotIn("probe=1", server.log())  # the query is not logged
        # A config file broken meanwhile: the level stays, the error says which line.
        write(conf, 'log-level = debug\nlog-levle = error\n')
        reload()
        self.assert_log("reload: the configuration cannot be read", server=server)
        self.assertIn("line 2: unknown key \"log-levle\"", server.log())
        write(conf, 'tls-cert = "%s"\ntls-key = "%s"\nlog-level = warn\n' % (cert, key))
        reload()
        mark = len(server.log())
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        self.addCleanup(conn.close)
        conn.request("GET", "/healthz")
        self.assertEqual(conn.getresponse().status, 200)
        time.sleep(0.3)
        self.assertNotIn("DEBUG", server.log()[mark:])
        self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    h.main()
