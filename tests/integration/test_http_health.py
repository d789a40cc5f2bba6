#!/usr/bin/python3
"""The real `warren serve` answers its HTTP health check next to the SSH lobby."""
import json
import urllib.error
import urllib.request

import warren_harness


class HttpHealthTest(warren_harness.LobbyTestCase):
    def get(self, path, method="GET"):
        req = urllib.request.Request(
            "http://127.0.0.1:%d%s" % (self.server.http_port, path), method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def test_healthz(self):
        status, body = self.get("/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body), {"status": "ok"})

    def test_unknown_path_is_json_404(self):
        status, body = self.get("/nope")
        self.assertEqual(status, 404)
        self.assertIn("error", json.loads(body))

    def test_ssh_still_serves_beside_http(self):
        self.ssh_ok(self.admin, "whoami")


if __name__ == "__main__":
    warren_harness.main()
