#!/usr/bin/python3
"""Authentication on the SSH lobby: public keys only, unknown keys get a banner."""

import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paramiko  # noqa: E402

import warren_harness as h  # noqa: E402


class AuthTest(h.LobbyTestCase):
    KEYS = ("stranger",) + tuple("spare%d" % i for i in range(7))

    def transport(self):
        """A paramiko transport that has verified the pinned host key, not yet authenticated."""
        sock_client = paramiko.SSHClient()
        sock_client.load_host_keys(self.known_hosts)
        t = paramiko.Transport(("127.0.0.1", self.server.port))
        self.addCleanup(t.close)
        t.start_client(timeout=10)
        pinned = sock_client.get_host_keys().lookup("[127.0.0.1]:%d" % self.server.port)
        self.assertIsNotNone(pinned)
        self.assertEqual(t.get_remote_server_key(), pinned["ssh-ed25519"])
        return t

    def test_known_key_logs_in(self):
        r = self.ssh_ok(self.admin, "whoami")
        self.assertIn("admin", r.stdout)
        self.assert_log("ssh login")
        self.assert_log("key=" + self.admin.fingerprint)

    def test_unknown_key_is_refused_with_a_banner(self):
        stranger = self.keys["stranger"]
        r = self.ssh(stranger, "whoami")
        self.assertEqual(r.returncode, 255)
        self.assertIn("Permission denied (publickey)", r.stderr)
        # The banner says how to get in, naming the refused key so it can be pasted.
        self.assertIn("not registered", r.stderr)
        self.assertIn("user add NAME --key", r.stderr)
        self.assertIn("ssh-key add", r.stderr)
        self.assertIn(stranger.public_line.split()[1], r.stderr)
        self.assert_log("unknown key")
        # Key blobs never reach the log; fingerprints do.
        self.assertFalse(stranger.public_line.split()[1] in self.server.log(),
                         "a key blob was logged")
        self.assert_log("key=" + stranger.fingerprint)

    def test_openssh_password_auth_is_refused(self):
        r = self.ssh(None, "whoami", options=(
            "-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no"))
        self.assertEqual(r.returncode, 255)
        self.assertIn("Permission denied", r.stderr)

    def test_openssh_keyboard_interactive_is_refused(self):
        r = self.ssh(None, "whoami", options=(
            "-o", "PreferredAuthentications=keyboard-interactive",
            "-o", "PubkeyAuthentication=no"))
        self.assertEqual(r.returncode, 255)
        self.assertIn("Permission denied", r.stderr)

    def test_paramiko_password_auth_is_refused(self):
        t = self.transport()
        with self.assertRaises(paramiko.AuthenticationException) as cm:
            t.auth_password("admin", "hunter2")
        # Only publickey is advertised.
        if isinstance(cm.exception, paramiko.BadAuthenticationType):
            self.assertEqual(cm.exception.allowed_types, ["publickey"])
        self.assertFalse(t.is_authenticated())
        self.assertFalse("hunter2" in self.server.log(), "a password was logged")

    def test_paramiko_keyboard_interactive_is_refused(self):
        t = self.transport()
        with self.assertRaises(paramiko.AuthenticationException):
            t.auth_interactive("admin", lambda title, instructions, prompts: ["x"] * len(prompts))
        self.assertFalse(t.is_authenticated())

    def test_auth_none_lists_only_publickey(self):
        t = self.transport()
        with self.assertRaises(paramiko.BadAuthenticationType) as cm:
            t.auth_none("admin")
        self.assertEqual(cm.exception.allowed_types, ["publickey"])

    def test_auth_attempts_are_bounded(self):
        t = self.transport()
        for i in range(6):
            key = paramiko.Ed25519Key.from_private_key_file(self.keys["spare%d" % i].path)
            with self.assertRaises(paramiko.AuthenticationException):
                t.auth_publickey("admin", key)
        # After the sixth failure the server hangs up.
        deadline = time.monotonic() + 5
        while t.is_active() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertFalse(t.is_active(), "the server kept the connection after 6 failures")
        self.assert_log("too many auth failures")
        # And it keeps serving everyone else.
        self.ssh_ok(self.admin, "whoami")

    def test_unauthenticated_connections_are_dropped_after_20s(self):
        started = time.monotonic()
        # One peer finishes the key exchange and then never authenticates...
        t = self.transport()
        # ... another opens TCP, reads the server's banner and says nothing.
        raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=40)
        self.addCleanup(raw.close)
        self.assertTrue(raw.recv(256).startswith(b"SSH-2.0-"))
        while raw.recv(4096):  # the server may say goodbye (SSH_MSG_DISCONNECT) first
            pass
        while t.is_active() and time.monotonic() - started < 40:
            time.sleep(0.1)
        self.assertFalse(t.is_active(), "the unauthenticated peer was not dropped")
        self.assertGreater(time.monotonic() - started, 15)
        self.assert_log("ssh auth timeout")

    def test_paramiko_publickey_with_pinned_host_key(self):
        client = self.paramiko_client(self.admin)
        self.addCleanup(client.close)
        _, stdout, _ = client.exec_command("whoami")
        self.assertIn("admin", stdout.read().decode())
        self.assertEqual(stdout.channel.recv_exit_status(), 0)

    def test_wrong_host_key_is_detected_by_the_client(self):
        # Sanity check of the pinning itself: a different pinned key must fail.
        other = os.path.join(self.tmp, "other_known_hosts")
        with open(other, "w", encoding="ascii") as f:
            f.write("[127.0.0.1]:%d %s\n" % (self.server.port, self.admin.public_line))
        args = self.ssh_args(self.admin, "whoami")
        args[args.index("UserKnownHostsFile=" + self.known_hosts)] = "UserKnownHostsFile=" + other
        r = subprocess.run(args, capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 255)


if __name__ == "__main__":
    h.main()
