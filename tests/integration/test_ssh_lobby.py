#!/usr/bin/python3
"""The SSH lobby's commands, driven by OpenSSH's `ssh` against a real `warren serve`."""

import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import warren_harness as h  # noqa: E402


class LobbyCommandsTest(h.LobbyTestCase):
    KEYS = ("alice", "alice2", "alice3", "bob", "carol", "dave", "dave_r", "dave_w", "dave_n")

    def test_help_lists_commands(self):
        r = self.ssh_ok(self.admin, "help")
        for word in ("help", "whoami", "ssh-key list", "ssh-key add", "user add"):
            self.assertIn(word, r.stdout)

    def test_help_json_parses(self):
        data = self.ssh_json(self.admin, "help")
        names = json.dumps(data)
        self.assertIn("whoami", names)
        self.assertIn("ssh-key", names)

    def test_help_one_command(self):
        r = self.ssh_ok(self.admin, "help", "whoami")
        self.assertIn("whoami", r.stdout)
        self.assertIn("--json", r.stdout)

    def test_whoami_json(self):
        data = self.ssh_json(self.admin, "whoami")
        self.assertEqual(data["user"], "admin")
        self.assertTrue(data["admin"])
        in_use = [k for k in data["keys"] if k.get("in_use")]
        self.assertEqual(len(in_use), 1)
        self.assertEqual(in_use[0]["fingerprint"], self.admin.fingerprint)

    def test_any_login_name_reaches_the_lobby(self):
        for user in ("lobby", "root", "some-name"):
            data = self.ssh_json(self.admin, "whoami", user=user)
            self.assertEqual(data["user"], "admin")

    def test_ssh_key_add_list_rename_remove(self):
        alice, alice2, alice3 = self.keys["alice"], self.keys["alice2"], self.keys["alice3"]
        self.make_user("alice", alice)

        # Add by argument; the new key logs in.
        self.ssh_ok(alice, "ssh-key", "add", "--name", "second", "'%s'" % alice2.public_line)
        listed = self.ssh_json(alice, "ssh-key", "list")
        self.assertIn(alice2.fingerprint, json.dumps(listed))
        self.assertEqual(self.ssh_json(alice2, "whoami")["user"], "alice")

        # Add from stdin.
        self.ssh_ok(alice, "ssh-key", "add", "--name", "third", input=alice3.public_line + "\n")
        self.assertEqual(self.ssh_json(alice3, "whoami")["user"], "alice")

        # Rename, then remove by the new name: that key no longer logs in.
        self.ssh_ok(alice, "ssh-key", "rename", "second", "renamed")
        listed = json.dumps(self.ssh_json(alice, "ssh-key", "list"))
        self.assertIn("renamed", listed)
        self.assertNotIn('"second"', listed)
        self.ssh_ok(alice, "ssh-key", "remove", "renamed")
        r = self.ssh(alice2, "whoami")
        self.assertEqual(r.returncode, 255, r.stderr)

        # Remove by fingerprint.
        self.ssh_ok(alice, "ssh-key", "remove", alice3.fingerprint)
        r = self.ssh(alice3, "whoami")
        self.assertEqual(r.returncode, 255, r.stderr)
        self.assertEqual(self.ssh_json(alice, "whoami")["user"], "alice")

    def test_user_add_ls_rm_as_admin_only(self):
        bob, carol = self.keys["bob"], self.keys["carol"]
        self.make_user("bob", bob)
        users = json.dumps(self.ssh_json(self.admin, "user", "ls"))
        self.assertIn("bob", users)

        # Not an admin: refused with the permission-denied status.
        self.assert_status(self.ssh(bob, "user", "ls"), "permission_denied")
        r = self.ssh(bob, "user", "add", "carol", "--key", "'%s'" % carol.public_line)
        self.assert_status(r, "permission_denied")
        self.assertEqual(self.ssh(carol, "whoami").returncode, 255)

        self.ssh_ok(self.admin, "user", "rm", "bob")
        self.assertNotIn("bob", json.dumps(self.ssh_json(self.admin, "user", "ls")))
        self.assertEqual(self.ssh(bob, "whoami").returncode, 255)

    def test_exit_statuses_follow_the_map(self):
        self.assert_status(self.ssh(self.admin, "no-such-command"), "not_found")
        self.assert_status(self.ssh(self.admin, "whoami", "--no-such-flag"), "invalid_argument")
        self.assert_status(self.ssh(self.admin, "ssh-key", "remove", "no-such-key"), "not_found")
        self.assert_status(self.ssh(self.admin, "help", "'unterminated"), "invalid_argument")

    def test_json_errors(self):
        r = self.ssh(self.admin, "no-such-command", "--json")
        self.assert_status(r, "not_found")
        self.assertIn("error", json.loads(r.stdout))
        r = self.ssh(self.admin, "whoami", "--no-such-flag", "--json")
        self.assert_status(r, "invalid_argument")
        self.assertIsInstance(json.loads(r.stdout)["error"], str)

    def test_restricted_key(self):
        dave, narrow, wide, narrower = (
            self.keys["dave"], self.keys["dave_r"], self.keys["dave_w"], self.keys["dave_n"])
        self.make_user("dave", dave)
        self.ssh_ok(dave, "ssh-key", "add", "--name", "limited", "--cmds", "'whoami,ssh-key add'",
                    "'%s'" % narrow.public_line)

        self.assertEqual(self.ssh_json(narrow, "whoami")["user"], "dave")
        self.assert_status(self.ssh(narrow, "ssh-key", "list"), "permission_denied")
        self.assert_status(self.ssh(narrow, "ssh-key", "remove", "dave@test"), "permission_denied")

        # A restricted key can only mint keys no wider than itself: without --cmds the new
        # key inherits the limits, and an explicitly wider list is refused.
        self.ssh_ok(narrow, "ssh-key", "add", "--name", "inherits", "'%s'" % wide.public_line)
        self.assertEqual(self.ssh_json(wide, "whoami")["user"], "dave")
        self.assert_status(self.ssh(wide, "ssh-key", "list"), "permission_denied")
        r = self.ssh(narrow, "ssh-key", "add", "--name", "wider", "--cmds", "'whoami,ssh-key'",
                     "'%s'" % narrower.public_line)
        self.assert_status(r, "permission_denied")
        self.assertEqual(self.ssh(narrower, "whoami").returncode, 255)
        self.ssh_ok(narrow, "ssh-key", "add", "--name", "narrower", "--cmds", "whoami",
                    "'%s'" % narrower.public_line)
        self.assertEqual(self.ssh_json(narrower, "whoami")["user"], "dave")
        self.assert_status(self.ssh(narrower, "ssh-key", "add", "x"), "permission_denied")


class IndependentClientsTest(h.LobbyTestCase):
    """Clients nobody on this team wrote: dropbear's dbclient and PuTTY's plink."""

    @unittest.skipUnless(shutil.which("dbclient") and shutil.which("dropbearconvert"),
                         "dropbear-bin is not installed")
    def test_dbclient(self):
        home = os.path.join(self.tmp, "dbhome")
        os.makedirs(os.path.join(home, ".ssh"), exist_ok=True)
        # dropbear pins by host name alone, and refuses unknown hosts without a tty.
        with open(os.path.join(home, ".ssh", "known_hosts"), "w", encoding="ascii") as f:
            f.write("127.0.0.1 %s\n" % self.server.host_public_key())
        key = os.path.join(self.tmp, "admin.dropbear")
        subprocess.run(["dropbearconvert", "openssh", "dropbear", self.admin.path, key],
                       check=True, capture_output=True)
        base = ["dbclient", "-i", key, "-p", str(self.server.port), "lobby@127.0.0.1"]
        env = dict(os.environ, HOME=home)
        r = subprocess.run(base + ["whoami", "--json"], capture_output=True, text=True,
                           timeout=30, env=env, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["user"], "admin")
        r = subprocess.run(base + ["no-such-command"], capture_output=True, text=True,
                           timeout=30, env=env, stdin=subprocess.DEVNULL)
        self.assert_status(r, "not_found")

    @unittest.skipUnless(shutil.which("plink") and shutil.which("puttygen"),
                         "putty-tools is not installed")
    def test_plink(self):
        ppk = os.path.join(self.tmp, "admin.ppk")
        subprocess.run(["puttygen", self.admin.path, "-O", "private", "-o", ppk],
                       check=True, capture_output=True)
        host_fp = subprocess.run(
            ["ssh-keygen", "-lf", os.path.join(self.server.data_dir, "ssh_host_ed25519_key.pub")],
            check=True, capture_output=True, text=True).stdout.split()[1]
        base = ["plink", "-batch", "-ssh", "-P", str(self.server.port), "-i", ppk,
                "-hostkey", host_fp, "lobby@127.0.0.1"]
        env = dict(os.environ, HOME=self.tmp)
        r = subprocess.run(base + ["whoami", "--json"], capture_output=True, text=True,
                           timeout=30, env=env, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["user"], "admin")
        r = subprocess.run(base + ["no-such-command"], capture_output=True, text=True,
                           timeout=30, env=env, stdin=subprocess.DEVNULL)
        self.assert_status(r, "not_found")


class RestartTest(h.LobbyTestCase):
    KEYS = ("erin",)

    def test_host_key_and_store_survive_a_restart(self):
        erin = self.keys["erin"]
        self.make_user("erin", erin)
        key_file = os.path.join(self.server.data_dir, "ssh_host_ed25519_key")
        self.assertEqual(os.stat(key_file).st_mode & 0o777, 0o600)
        with open(key_file, "rb") as f:
            private_before = f.read()
        public_before = self.server.host_public_key()

        started = time.monotonic()
        self.assertEqual(self.server.stop(), 0, self.server.log_tail())
        self.assertLess(time.monotonic() - started, 3.0, "SIGTERM must stop the server quickly")

        # Restart on the same data dir, without --admin-key: the store has users already.
        server = h.Server(self.server.data_dir, admin_key=None)
        self.addCleanup(server.stop)
        server.start()
        self.assertEqual(server.host_public_key(), public_before)
        with open(key_file, "rb") as f:
            self.assertEqual(f.read(), private_before)

        # The old known_hosts line (for the host key) still verifies on the new port.
        with open(self.known_hosts, encoding="ascii") as f:
            pinned = f.read().split(" ", 1)[1]
        with open(self.known_hosts, "w", encoding="ascii") as f:
            f.write("[127.0.0.1]:%d %s" % (server.port, pinned))
        self.assertEqual(self.ssh_json(erin, "whoami", port=server.port)["user"], "erin")
        self.assertEqual(self.ssh_json(self.admin, "whoami", port=server.port)["user"], "admin")
        self.assertEqual(server.stop(), 0, server.log_tail())

        # Restarting with the same --admin-key is idempotent.
        again = h.Server(self.server.data_dir, admin_key=self.admin)
        self.addCleanup(again.stop)
        again.start()
        self.assertEqual(again.stop(), 0, again.log_tail())

    def test_empty_store_without_admin_key_is_refused(self):
        data = os.path.join(self.tmp, "empty")
        r = subprocess.run(
            [h.WARREN_BIN, "serve", "--ssh", "127.0.0.1:0", "--http", "127.0.0.1:0",
             "--data-dir", data],
            capture_output=True, text=True, timeout=20,
        )
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--admin-key", r.stderr)

    def test_bad_listen_address_is_refused(self):
        r = subprocess.run(
            [h.WARREN_BIN, "serve", "--ssh", "127.0.0.1", "--data-dir",
             os.path.join(self.tmp, "data")],
            capture_output=True, text=True, timeout=20,
        )
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--ssh", r.stderr)


if __name__ == "__main__":
    h.main()
