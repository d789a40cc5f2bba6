#!/usr/bin/python3
"""Channels and connections on the SSH lobby: concurrency, stdin, limits, hostile peers."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paramiko  # noqa: E402

import warren_harness as h  # noqa: E402


def run_channel(transport, command, stdin_data=None, timeout=20):
    """Runs one exec channel to completion: (exit status, stdout, stderr)."""
    chan = transport.open_session(timeout=timeout)
    chan.settimeout(timeout)
    chan.exec_command(command)
    if stdin_data is not None:
        chan.sendall(stdin_data)
    chan.shutdown_write()
    out, err = b"", b""
    while True:
        data = chan.recv(65536)
        if not data:
            break
        out += data
    while True:
        data = chan.recv_stderr(65536)
        if not data:
            break
        err += data
    status = chan.recv_exit_status()
    chan.close()
    return status, out.decode(), err.decode()


class ChannelsTest(h.LobbyTestCase):
    KEYS = ("frank", "frank2")

    def connect(self, key=None):
        client = self.paramiko_client(key or self.admin)
        self.addCleanup(client.close)
        return client.get_transport()

    def test_several_exec_channels_on_one_connection(self):
        t = self.connect()
        # Open them all first so they are open at the same time, then run them in parallel.
        commands = ["whoami --json", "help", "help whoami", "no-such-command", "ssh-key list"] * 2
        chans = []
        for command in commands:
            chan = t.open_session(timeout=10)
            chan.settimeout(20)
            chans.append(chan)
        for chan, command in zip(chans, commands):
            chan.exec_command(command)
        results = []
        for chan in chans:
            out = b""
            while True:
                data = chan.recv(65536)
                if not data:
                    break
                out += data
            results.append((chan.recv_exit_status(), out.decode()))
        for (status, out), command in zip(results, commands):
            if command == "no-such-command":
                self.assertEqual(status, h.EXIT["not_found"])
            else:
                self.assertEqual(status, 0, command)
            if command == "whoami --json":
                self.assertEqual(json.loads(out)["user"], "admin")
            if command == "help":
                self.assertIn("ssh-key", out)

    def test_output_respects_a_small_window_and_a_stalled_reader(self):
        t = self.connect()
        expected = run_channel(t, "help --json")[1]
        self.assertGreater(len(expected), 8 * 1024)
        # A 1 KiB window: the server may send only that much until the client reads.
        slow = t.open_session(window_size=1024, max_packet_size=512, timeout=10)
        slow.settimeout(20)
        slow.exec_command("help --json")
        time.sleep(0.3)  # the server is now blocked on slow's window, not on anything else
        for _ in range(3):
            self.assertEqual(run_channel(t, "whoami")[0], 0)
        out = b""
        while True:
            data = slow.recv(300)
            if not data:
                break
            out += data
        self.assertEqual(slow.recv_exit_status(), 0)
        self.assertEqual(out.decode(), expected)

    def test_both_directions_stall_and_recover(self):
        # The REPL without a pty reads stdin as fast as its commands finish. With the
        # client not reading stdout (16 KiB window), the commands block on output, stdin
        # backs up into libssh and the client's window; once the client reads, everything
        # held back must still arrive, in order.
        t = self.connect()
        chan = t.open_session(window_size=16 * 1024, max_packet_size=8 * 1024, timeout=10)
        chan.settimeout(30)
        chan.invoke_shell()  # no pty: the REPL reads a script
        script = b"help --json\n" * 60 + b"\n" * (1536 * 1024) + b"whoami\n"

        def feed():
            try:
                chan.sendall(script)
                chan.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException):
                pass

        feeder = threading.Thread(target=feed)
        feeder.start()
        time.sleep(1.0)
        out = b""
        while True:
            data = chan.recv(65536)
            if not data:
                break
            out += data
        feeder.join(30)
        self.assertEqual(chan.recv_exit_status(), 0)
        text = out.decode()
        self.assertEqual(text.count('"commands"'), 60)
        self.assertEqual(text.count("using:  key"), 1)
        self.assertTrue(text.rstrip().endswith("the key you are using"), text[-300:])

    def test_parallel_threads_on_one_connection(self):
        t = self.connect()
        results = []
        lock = threading.Lock()

        def worker():
            r = run_channel(t, "whoami --json")
            with lock:
                results.append(r)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        self.assertEqual(len(results), 8)
        for status, out, err in results:
            self.assertEqual(status, 0, err)
            self.assertEqual(json.loads(out)["user"], "admin")

    def test_stdin_round_trip(self):
        frank, frank2 = self.keys["frank"], self.keys["frank2"]
        self.make_user("frank", frank)
        t = self.connect(frank)
        status, out, err = run_channel(
            t, "ssh-key add --name from-stdin", stdin_data=(frank2.public_line + "\n").encode())
        self.assertEqual(status, 0, err)
        self.assertIn(frank2.fingerprint, out)
        status, out, _ = run_channel(t, "ssh-key list --json")
        self.assertIn("from-stdin", out)
        self.assertEqual(self.ssh_json(frank2, "whoami")["user"], "frank")

    def test_large_stdin_is_refused_not_wedged(self):
        t = self.connect()
        chan = t.open_session(timeout=10)
        chan.settimeout(30)
        chan.exec_command("ssh-key add --name big")
        payload = b"#" * (1 << 20)

        def feed():
            try:
                chan.sendall(payload)
                chan.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException):
                pass  # the command may finish (and close) before all of it is sent

        feeder = threading.Thread(target=feed)
        feeder.start()
        status = chan.recv_exit_status()
        feeder.join(30)
        self.assertEqual(status, h.EXIT["too_large"])
        # The connection is still good.
        self.assertEqual(run_channel(t, "whoami")[0], 0)

    def test_closing_a_channel_cancels_its_command(self):
        t = self.connect()
        chan = t.open_session(timeout=10)
        chan.exec_command("ssh-key add --name never-1")  # waits for stdin
        time.sleep(0.3)
        # paramiko's close() sends EOF first, which ends stdin normally; a bare
        # CHANNEL_CLOSE (what a client that gives up sends) must cancel the command.
        m = paramiko.Message()
        m.add_byte(paramiko.common.cMSG_CHANNEL_CLOSE)
        m.add_int(chan.remote_chanid)
        t._send_user_message(m)
        self.assert_log('cmd="ssh-key add" caller=key:%s user=admin surface=ssh code=cancelled'
                        % self.admin.fingerprint)
        self.assertEqual(run_channel(t, "whoami")[0], 0)

    def test_disconnecting_cancels_running_commands(self):
        client = self.paramiko_client(self.admin)
        t = client.get_transport()
        chans = [t.open_session(timeout=10) for _ in range(2)]
        for chan in chans:
            chan.exec_command("ssh-key add --name never-2")
        time.sleep(0.3)
        before = self.server.log().count("code=cancelled")
        client.close()
        deadline = time.monotonic() + 5
        while self.server.log().count("code=cancelled") < before + 2:
            if time.monotonic() > deadline:
                self.fail("commands not cancelled; log end:\n" + self.server.log_tail())
            time.sleep(0.02)
        self.ssh_ok(self.admin, "whoami")

    def test_env_requests_are_accepted_and_ignored(self):
        t = self.connect()
        chan = t.open_session(timeout=10)
        chan.settimeout(20)
        chan.update_environment({"LANG": "C.UTF-8", "WARREN_TEST": "1"})
        chan.exec_command("whoami")
        self.assertEqual(chan.recv_exit_status(), 0)
        chan.close()

    def test_channel_limit_per_connection(self):
        t = self.connect()
        opened = []
        with self.assertRaises(paramiko.ChannelException):
            for _ in range(11):
                opened.append(t.open_session(timeout=10))
        self.assertEqual(len(opened), 10)
        for chan in opened:
            chan.close()
        # Closed channels free their slots.
        deadline = time.monotonic() + 5
        while True:
            try:
                self.assertEqual(run_channel(t, "whoami")[0], 0)
                break
            except paramiko.ChannelException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def test_port_forwarding_is_refused(self):
        t = self.connect()
        with self.assertRaises(paramiko.ChannelException):
            t.open_channel("direct-tcpip", ("127.0.0.1", 9), ("127.0.0.1", 0), timeout=10)
        with self.assertRaises(paramiko.SSHException):
            t.request_port_forward("127.0.0.1", 0)
        r = self.ssh(self.admin, options=("-W", "127.0.0.1:9"))
        self.assertEqual(r.returncode, 255)
        self.assertIn("prohibited", r.stderr)
        self.assertEqual(run_channel(t, "whoami")[0], 0)

    def test_sftp_is_refused_clearly(self):
        t = self.connect()
        chan = t.open_session(timeout=10)
        with self.assertRaises(paramiko.SSHException):
            chan.invoke_subsystem("sftp")
        r = subprocess.run(
            ["sftp", "-F", "none", "-b", "-", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
             "-o", "UserKnownHostsFile=" + self.known_hosts, "-o", "StrictHostKeyChecking=yes",
             "-i", self.admin.path, "-P", str(self.server.port), "lobby@127.0.0.1"],
            input="ls\n", capture_output=True, text=True, timeout=20)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("subsystem request failed", r.stderr)
        self.assert_log("subsystem refused")

    def test_100_concurrent_sessions(self):
        started = time.monotonic()
        procs = []
        try:
            for _ in range(100):
                procs.append(subprocess.Popen(
                    self.ssh_args(self.admin, "whoami", "--json"),
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            outputs = [p.communicate(timeout=60) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        elapsed = time.monotonic() - started
        for p, (out, err) in zip(procs, outputs):
            self.assertEqual(p.returncode, 0, err.decode())
            self.assertEqual(json.loads(out)["user"], "admin")
        print("\n100 concurrent ssh sessions in %.2fs" % elapsed, file=sys.stderr)

    def test_100_concurrent_paramiko_connections_held_open(self):
        # All 100 connected and authenticated at the same time, then each runs a command.
        clients = []
        try:
            errors = []

            def connect():
                try:
                    c = self.paramiko_client(self.admin)
                    clients.append(c)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=connect) for _ in range(100)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(60)
            self.assertEqual(errors, [])
            self.assertEqual(len(clients), 100)
            for c in clients:
                self.assertEqual(run_channel(c.get_transport(), "whoami")[0], 0)
        finally:
            for c in clients:
                c.close()

    def test_oversized_command_lines(self):
        t = self.connect()
        # Over the interpreter's line limit but within an SSH packet: a clear error.
        status, out, err = run_channel(t, "help " + "x" * (100 * 1024))
        self.assertEqual(status, h.EXIT["too_large"])
        self.assertIn("limit", err)
        # 1 MiB does not fit in an SSH packet libssh accepts (256 KiB): that connection is
        # dropped, and only that one.
        other = self.connect()
        with self.assertRaises((paramiko.SSHException, EOFError, OSError)):
            run_channel(t, "help " + "x" * (1 << 20))
        self.assertEqual(run_channel(other, "whoami")[0], 0)
        self.ssh_ok(self.admin, "whoami")

    def test_garbage_and_half_open_connections_do_not_disturb_others(self):
        socks = []
        try:
            for i in range(30):
                s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
                socks.append(s)
                if i % 3 == 1:
                    s.sendall(b"SSH-2.0-stalled\r\n")  # then nothing: stuck in key exchange
                elif i % 3 == 2:
                    s.sendall(os.urandom(64 * 1024) if i % 2 else b"\x00" * 300 + b"\n")
            started = time.monotonic()
            self.assertEqual(self.ssh_json(self.admin, "whoami")["user"], "admin")
            t = self.connect()
            self.assertEqual(run_channel(t, "whoami")[0], 0)
            self.assertLess(time.monotonic() - started, 5.0)
        finally:
            for s in socks:
                s.close()
        self.ssh_ok(self.admin, "whoami")


class ShutdownTest(h.LobbyTestCase):
    def test_sigterm_with_running_commands_exits_cleanly(self):
        client = self.paramiko_client(self.admin)
        self.addCleanup(client.close)
        t = client.get_transport()
        chans = []
        for _ in range(3):
            chan = t.open_session(timeout=10)
            chan.exec_command("ssh-key add --name pending")  # blocks reading stdin
            chans.append(chan)
        # And one connection stuck before authentication.
        stuck = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        self.addCleanup(stuck.close)
        time.sleep(0.3)
        started = time.monotonic()
        self.assertEqual(self.server.stop(timeout=10), 0, self.server.log_tail())
        self.assertLess(time.monotonic() - started, 3.0)
        deadline = time.monotonic() + 5
        while t.is_active() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertFalse(t.is_active())


if __name__ == "__main__":
    h.main()
