#!/usr/bin/python3
"""The web listener as `warren serve` sets it up (no VMs needed), with curl:

- HTTPS with `--tls-cert/--tls-key` (a wildcard certificate for *.warren.localhost made with
  openssl): `browser` prints an https:// link, the sign-in sets a `__Host-` cookie marked
  Secure, the domain's page says who is signed in, and the same certificate serves --http;
- `--web off`: no listener, `browser` fails `unavailable` saying why, and no URL is printed;
- an unknown host is 404, and a host outside the domain too.
"""
import json
import os
import re
import shutil
import subprocess

import warren_harness as h


def curl(*args):
    return subprocess.run(["curl", "-s", "-S", "-i", "--max-time", "20"] + list(args),
                          capture_output=True, text=True)


class WebListenerTlsTest(h.LobbyTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cert = os.path.join(cls.tmp, "web.crt")
        cls.key = os.path.join(cls.tmp, "web.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=warren.localhost", "-keyout", cls.key, "-out", cls.cert,
                        "-addext",
                        "subjectAltName=DNS:warren.localhost,DNS:*.warren.localhost,"
                        "DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True)
        cls.tls = cls.start_server(data_dir=os.path.join(cls.tmp, "tls"),
                                   extra_args=["--tls-cert", cls.cert, "--tls-key", cls.key])

    def test_https_sign_in_sets_a_host_prefixed_secure_cookie(self):
        self.assertIsNotNone(shutil.which("curl"), "apt-get install curl")
        out = self.ssh_ok(self.admin, "browser", "--json", port=self.tls.port).stdout
        link = json.loads(out)["url"]
        self.assertTrue(link.startswith("https://warren.localhost:%d/__warren/login?token="
                                        % self.tls.web_port), link)
        r = curl("--cacert", self.cert, link)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^HTTP/1.1 30[23]")
        cookie = re.search(r"(?im)^set-cookie: (__Host-[^=]+)=([^;\r\n]+)(.*)$", r.stdout)
        self.assertIsNotNone(cookie, r.stdout)
        attrs = cookie.group(3).lower()
        for want in ("secure", "httponly", "samesite=lax", "path=/"):
            self.assertIn(want, attrs)
        self.assertNotIn("domain=", attrs)
        page = curl("--cacert", self.cert, "-H", "Cookie: %s=%s" % (cookie.group(1),
                                                                    cookie.group(2)),
                    "https://warren.localhost:%d/" % self.tls.web_port)
        self.assertIn("admin", page.stdout)
        # A private VM host says how to sign in, over TLS too (no VM of that name: 404).
        r = curl("--cacert", self.cert, "-H", "Accept: application/json",
                 "https://nosuchvm.warren.localhost:%d/" % self.tls.web_port)
        self.assertRegex(r.stdout, r"^HTTP/1.1 (401|404)")
        # The same certificate serves the HTTP bridge.
        r = curl("--cacert", self.cert, "https://localhost:%d/healthz" % self.tls.http_port)
        self.assertRegex(r.stdout, r"^HTTP/1.1 200")

    def test_hosts_outside_the_domain_are_not_served(self):
        r = curl("--cacert", self.cert, "--resolve",
                 "example.com:%d:127.0.0.1" % self.tls.web_port,
                 "https://example.com:%d/" % self.tls.web_port, "-k")
        self.assertRegex(r.stdout, r"^HTTP/1.1 404")


class WebListenerOffTest(h.LobbyTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.off = cls.start_server(data_dir=os.path.join(cls.tmp, "off"),
                                   extra_args=["--web", "off"])

    def test_no_listener_no_link(self):
        self.assertIsNone(self.off.web_port)
        self.assertNotIn("web listening", self.off.log())
        r = self.ssh(self.admin, "browser", port=self.off.port)
        self.assert_status(r, "unavailable")
        self.assertIn("web", r.stderr)
        self.assertNotIn("http", r.stdout)


if __name__ == "__main__":
    h.main()
