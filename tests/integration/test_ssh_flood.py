#!/usr/bin/python3
"""Fair shares on the SSH listener under floods of unauthenticated connections.

Floods come from 127.0.0.2 (each client socket is bound to it before connect), the owner
logs in from 127.0.0.1: two source addresses. 1,100 connections that stay idle, or that send
their identification line and then stall, must not keep the owner out (`ssh whoami` within
2 s, 20 times out of 20), must not cost a thread each, and must be cut to 127.0.0.2's own
share. Also: the MaxStartups-like early drop, silent connections displaced or timed out,
clients that wait for the server's line first (ssh-keyscan), and the login limits.
"""

import os
import resource
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paramiko  # noqa: E402

import warren_harness as h  # noqa: E402

FLOOD_SOURCE = "127.0.0.2"
FLOOD_SIZE = 1100
# The server's defaults the tests count on (lobby/ssh/ssh_admission.h).
STARTUPS_PER_SOURCE = 128
HANDSHAKES_PER_SOURCE = 16
HELLO = b"SSH-2.0-flood\r\n"


def raise_open_file_limit(wanted=8192):
    """The flood's sockets, and the server's (it inherits the limit): 1,100 each and more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))  # root may raise it
            return
        except (ValueError, OSError):
            wanted = hard
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    if wanted < 2 * FLOOD_SIZE + 200:
        raise RuntimeError("RLIMIT_NOFILE hard limit %d is too low for a flood of %d"
                           % (hard, FLOOD_SIZE))


class Flood:
    """Client sockets from one source address, held open until close()."""

    def __init__(self, port, count, source=FLOOD_SOURCE, hello=None):
        self.socks = []
        self.connect_errors = 0
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((source, 0))
                s.settimeout(5)
                s.connect(("127.0.0.1", port))
                if hello is not None:
                    s.sendall(hello)
            except OSError:
                self.connect_errors += 1
                s.close()
                continue
            self.socks.append(s)

    @staticmethod
    def closed_by_server(sock):
        """True once the server has closed `sock` (reads away what the server sent)."""
        sock.setblocking(False)  # a timeout socket would wait, then raise TimeoutError
        while True:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:  # reset
                return True
            if not data:
                return True

    def open_count(self):
        self.socks = [s for s in self.socks if not self._closed_then_forget(s)]
        return len(self.socks)

    def _closed_then_forget(self, sock):
        if self.closed_by_server(sock):
            sock.close()
            return True
        return False

    def settle(self, at_most, timeout=10):
        """Waits (bounded) until the server holds at most `at_most`; returns what it holds."""
        deadline = time.monotonic() + timeout
        n = self.open_count()
        while n > at_most and time.monotonic() < deadline:
            time.sleep(0.05)
            n = self.open_count()
        # The server's answer to the last of them may still be on its way: one more look.
        time.sleep(0.2)
        return self.open_count()

    def close(self):
        for s in self.socks:
            s.close()
        self.socks = []


def timed_ssh(argv, timeout=10):
    """(exit status or None on timeout, seconds, stderr) of one `ssh` run."""
    started = time.monotonic()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started, "timed out"
    return r.returncode, time.monotonic() - started, r.stderr


def thread_count(pid):
    with open("/proc/%d/status" % pid, encoding="ascii") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads line for pid %d" % pid)


def settled_thread_count(pid, bound, timeout=5.0):
    """The thread count once it is at most `bound`, or the last seen after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        n = thread_count(pid)
        if n <= bound or time.monotonic() > deadline:
            return n
        time.sleep(0.05)


class FloodTestCase(h.LobbyTestCase):
    SERVER_ARGS = ()

    @classmethod
    def setUpClass(cls):
        raise_open_file_limit()
        super().setUpClass()

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        return super().start_server(data_dir, admin_key, tuple(cls.SERVER_ARGS) + tuple(extra_args))

    def flood(self, count, **kwargs):
        f = Flood(self.server.port, count, **kwargs)
        self.addCleanup(f.close)
        return f

    def timed_whoami(self):
        """(exit status, seconds, stderr) of one `ssh whoami` from 127.0.0.1."""
        return timed_ssh(self.ssh_args(self.admin, "whoami"))

    def assert_owner_served(self, times=20, within=2.0):
        for i in range(times):
            status, seconds, err = self.timed_whoami()
            self.assertEqual(status, 0, "ssh whoami #%d failed: %s\n%s"
                             % (i + 1, err, self.server.log_tail()))
            self.assertLess(seconds, within, "ssh whoami #%d took %.2fs" % (i + 1, seconds))

    def quiet_thread_count(self):
        """The server's threads with no connection open: the most of a few samples."""
        self.ssh_ok(self.admin, "whoami")  # every lazily started thread is up
        time.sleep(0.3)
        return max(thread_count(self.server.proc.pid) for _ in range(3))

    def wait_until_owner_served(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.timed_whoami()[0] == 0:
                return
            time.sleep(0.1)
        self.fail("the owner was still refused:\n" + self.server.log_tail())


class IdleFloodTest(FloodTestCase):
    # Long enough that the flood is held for the whole test: what protects the owner here is
    # the per-address share, not the timeout.
    SERVER_ARGS = ("--ssh-version-timeout", "60")

    def test_owner_is_served_while_1100_idle_connections_are_held(self):
        quiet = self.quiet_thread_count()
        before = self.paramiko_client(self.admin)  # logged in before the flood
        self.addCleanup(before.close)
        flood = self.flood(FLOOD_SIZE)
        self.assertEqual(flood.connect_errors, 0)
        held = flood.settle(STARTUPS_PER_SOURCE)
        self.assert_owner_served()
        # 127.0.0.2 keeps its share (its newest connections), the rest are closed.
        self.assertLessEqual(held, STARTUPS_PER_SOURCE)
        self.assertGreater(held, STARTUPS_PER_SOURCE - 10)
        # A session opened before the flood goes on working throughout.
        _, stdout, _ = before.exec_command("whoami")
        self.assertIn("admin", stdout.read().decode())
        self.assertEqual(stdout.channel.recv_exit_status(), 0)
        # Idle sockets cost no thread: at most the paramiko login's connection thread more.
        self.assertLessEqual(settled_thread_count(self.server.proc.pid, quiet + 2), quiet + 2)
        self.assertEqual(flood.open_count(), held, "the server let the idle flood go early")
        self.assert_log("too many unauthenticated connections from this address")


class TalkingFloodTest(FloodTestCase):
    def test_owner_is_served_while_1100_connections_stall_after_their_version_line(self):
        quiet = self.quiet_thread_count()
        flood = self.flood(FLOOD_SIZE, hello=HELLO)
        self.assertEqual(flood.connect_errors, 0)
        held = flood.settle(STARTUPS_PER_SOURCE)
        # 16 of them in a key exchange that goes nowhere (a thread each), the rest waiting
        # for a slot without one.
        threads = thread_count(self.server.proc.pid)
        self.assert_owner_served()
        bound = quiet + HANDSHAKES_PER_SOURCE + 1  # + 1: a login of the owner's ending
        self.assertLessEqual(threads, bound)
        # The owner's login just served winds down (its connection and command threads end
        # a moment after the answer; later on a loaded machine): the flood's threads hold.
        self.assertLessEqual(settled_thread_count(self.server.proc.pid, bound), bound)
        self.assertLessEqual(held, STARTUPS_PER_SOURCE)
        self.assertGreater(held, HANDSHAKES_PER_SOURCE)
        # Over its share, 127.0.0.2's next connections are refused at once.
        extra = self.flood(20, hello=HELLO)
        self.assertEqual(extra.settle(0, timeout=5), 0)
        self.assert_log("ssh connection refused peer=127.0.0.2:")


class StartupRuleTest(FloodTestCase):
    # Small numbers, and per-address limits out of the way, to see the rule itself.
    SERVER_ARGS = ("--ssh-max-startups", "4:50:8", "--ssh-max-startups-per-source", "1000",
                   "--ssh-max-handshakes-per-source", "1000", "--ssh-version-timeout", "60")

    def test_early_drop_keeps_at_most_full_unauthenticated_connections(self):
        flood = self.flood(40, hello=HELLO)
        held = flood.settle(8)
        self.assertLessEqual(held, 8)
        self.assertGreaterEqual(held, 4)  # below BEGIN nothing is dropped
        self.assert_log("unauthenticated connections")
        flood.close()
        self.wait_until_owner_served()


class DisplacementTest(FloodTestCase):
    # FULL alone (8:100:8): nothing dropped below 8, everything at 8.
    SERVER_ARGS = ("--ssh-max-startups", "8", "--ssh-max-startups-per-source", "1000",
                   "--ssh-version-timeout", "60")

    def test_at_full_a_new_connection_displaces_the_oldest_silent_one(self):
        flood = self.flood(8)  # silent, and FULL
        self.assertEqual(flood.settle(8), 8)
        # Refused at FULL if that were all; the owner's first login displaces one, after it
        # there is room again (7 startups).
        self.assert_owner_served(times=3)
        self.assertEqual(flood.settle(7), 7)
        self.assert_log("reason=\"too many unauthenticated connections\"")


class SilenceTest(FloodTestCase):
    SERVER_ARGS = ("--ssh-version-timeout", "1")

    def test_silent_connections_are_greeted_then_closed_after_the_version_timeout(self):
        silent = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        self.addCleanup(silent.close)
        talking = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        self.addCleanup(talking.close)
        # Our line comes first, without waiting for the client's.
        self.assertEqual(silent.recv(256), b"SSH-2.0-warren\r\n")
        talking.sendall(HELLO)
        started = time.monotonic()
        silent.settimeout(5)
        while silent.recv(4096):
            pass
        self.assertLess(time.monotonic() - started, 3)
        # One that spoke is in its key exchange, which has the whole pre-auth window.
        time.sleep(1.5)
        self.assertFalse(Flood.closed_by_server(talking))
        self.assert_log("silent past the version timeout")

    def test_ssh_keyscan_which_waits_for_the_server_first(self):
        r = subprocess.run(["ssh-keyscan", "-T", "5", "-t", "ed25519", "-p",
                            str(self.server.port), "127.0.0.1"],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(" ".join(self.server.host_public_key().split()[:2]), r.stdout)


class LoginLimitTest(FloodTestCase):
    SERVER_ARGS = ("--ssh-max-logins-per-user", "2")

    def test_a_user_over_its_logins_is_refused_until_one_ends(self):
        clients = [self.paramiko_client(self.admin) for _ in range(2)]
        for c in clients:
            self.addCleanup(c.close)
        with self.assertRaises(paramiko.AuthenticationException):
            self.addCleanup(self.paramiko_client(self.admin).close)
        status, _, err = self.timed_whoami()
        self.assertEqual(status, 255, err)
        self.assertIn("Permission denied", err)
        self.assert_log("user admin has its maximum of 2 logins")
        clients[0].close()
        self.wait_until_owner_served()


if __name__ == "__main__":
    h.main()
