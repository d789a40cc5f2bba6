#!/usr/bin/python3
"""`integrations …` through OpenSSH's `ssh` against a real `warren serve` (no VMs): the
secret is shown by no command, written to no log and stored sealed (the raw database file
and the key file are searched), survives a restart, and a key limited to a tag sees only
what its tag uses."""

import json
import os
import stat
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import warren_harness as h  # noqa: E402

BEARER = "sk_live_ITSECRETBEARER5150"
HEADER_VALUE = "hv-ITSECRETHEADER4242"


class IntegrationCommandsTest(h.LobbyTestCase):
    KEYS = ("alice", "carol", "carol_ci")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.alice = cls.keys["alice"]

    def setUp(self):
        # Outputs of every command a test ran, searched for the secrets at the end.
        self.outputs = []

    def run_ssh(self, key, *command):
        r = self.ssh(key, *command)
        self.outputs.append(r.stdout + r.stderr)
        return r

    def assert_no_secret(self, text, where):
        for secret in (BEARER, HEADER_VALUE, "ITSECRET"):
            self.assertNotIn(secret, text, where)

    def test_secrets_are_never_shown_logged_or_stored_in_plaintext(self):
        self.make_user("alice", self.alice)
        r = self.run_ssh(self.alice, "integrations", "add", "http-proxy", "--name", "stripe",
                         "--target", "https://api.stripe.com", "--bearer", BEARER,
                         "--header", "X-Api-Key:" + HEADER_VALUE, "--attach", "tag:sandbox")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Authorization: Bearer ****, X-Api-Key: ****", r.stdout)
        self.assertIn("http://stripe.int.warren.internal/", r.stdout)

        listed = json.loads(self.run_ssh(self.alice, "integrations", "list", "--json").stdout)
        self.assertEqual([i["name"] for i in listed["integrations"]], ["stripe"])
        item = listed["integrations"][0]
        self.assertEqual(item["bearer"], "****")
        self.assertEqual(item["headers"], {"X-Api-Key": "****"})
        self.assertEqual(item["attachments"], ["tag:sandbox"])
        fingerprint = item["fingerprint"]
        self.assertRegex(fingerprint, r"^[0-9a-f]{12}$")
        for command in (("integrations", "show", "stripe"), ("integrations", "list"),
                        ("integrations", "show", "stripe", "--json"),
                        ("integrations", "attach", "stripe", "all"),
                        ("integrations", "detach", "stripe", "all", "--json"),
                        ("help", "integrations", "add")):
            self.assertEqual(self.run_ssh(self.alice, *command).returncode, 0, command)

        # Refusals name the problem, never the value.
        bad = self.run_ssh(self.alice, "integrations", "add", "http-proxy", "--name", "x",
                           "--target", "https://api.example.com", "--header",
                           "NoColon" + HEADER_VALUE)
        self.assert_status(bad, "invalid_argument")
        self.assertIn("NAME:VALUE", bad.stderr)
        bad = self.run_ssh(self.alice, "integrations", "add", "http-proxy", "--name", "x",
                           "--target", "https://u:%s@api.example.com" % BEARER)
        self.assert_status(bad, "invalid_argument")
        self.assert_status(self.run_ssh(self.alice, "integrations", "add", "http-proxy",
                                        "--name", "stripe", "--target", "https://h"),
                           "conflict")
        self.assert_status(self.run_ssh(self.alice, "integrations", "show", "nope"), "not_found")

        # The key file, and the store's raw bytes after a restart.
        key_file = os.path.join(self.server.data_dir, "integration.key")
        self.assertEqual(stat.S_IMODE(os.stat(key_file).st_mode), 0o600)
        self.server.stop()
        with open(os.path.join(self.server.data_dir, "store", "data.mdb"), "rb") as f:
            raw = f.read()
        self.assertIn(b"X-Api-Key", raw)
        self.assertNotIn(BEARER.encode(), raw)
        self.assertNotIn(HEADER_VALUE.encode(), raw)
        log = self.server.log()
        self.assertIn('audit cmd="integrations add"', log)
        self.assert_no_secret(log, "the server log")
        for out in self.outputs:
            self.assert_no_secret(out, "a command's output")

        type(self).server = self.start_server(data_dir=self.server.data_dir)
        again = self.ssh_json(self.alice, "integrations", "show", "stripe")
        self.assertEqual(again["fingerprint"], fingerprint)  # the same key, the same seal

    def test_a_tag_limited_key_sees_only_its_tags_integrations(self):
        carol, tagged = self.keys["carol"], self.keys["carol_ci"]
        self.make_user("carol", carol)
        self.ssh_ok(carol, "ssh-key", "add", "--name", "ci", "--tag", "ci",
                    "'%s'" % tagged.public_line)
        for name, attach in (("shared", "tag:ci"), ("private", "tag:prod")):
            self.ssh_ok(carol, "integrations", "add", "http-proxy", "--name", name,
                        "--target", "https://%s.example.com" % name, "--bearer", BEARER,
                        "--attach", attach)
        seen = self.ssh_json(tagged, "integrations", "list")
        self.assertEqual([i["name"] for i in seen["integrations"]], ["shared"])
        self.assert_status(self.ssh(tagged, "integrations", "show", "private"), "not_found")
        for command in (("integrations", "remove", "shared"),
                        ("integrations", "rename", "shared", "other"),
                        ("integrations", "attach", "shared", "all"),
                        ("integrations", "add", "http-proxy", "--name", "mine", "--target",
                         "https://x.example.com")):
            self.assert_status(self.ssh(tagged, *command), "permission_denied", " ".join(command))
        self.ssh_ok(tagged, "integrations", "detach", "shared", "tag:ci")
        self.assertEqual(self.ssh_json(tagged, "integrations", "list")["integrations"], [])


if __name__ == "__main__":
    h.main()
