#!/usr/bin/python3
"""The HTTP listener under abuse, against the real `warren serve`: slow headers (slowloris)
are dropped at --http-header-timeout while another source is served; one source past
--http-max-connections-per-source is refused while another is served; at the file
descriptor limit the accept loop pauses instead of spinning (CPU time read from /proc) and
serves again once connections close; the soft open-files limit is raised at start.

Floods come from 127.0.0.2 (any 127/8 address reaches the loopback listener), so the
owner's 127.0.0.1 is another source to the server."""
import os
import resource
import socket
import time
import urllib.request

import warren_harness as h

FLOOD_SOURCE = "127.0.0.2"


def connect_from(port, source=FLOOD_SOURCE, blocking=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    if blocking:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
    else:
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
    return s


def closed_by_server(s, timeout=0.5):
    """True when the server has closed (or reset) the connection."""
    s.settimeout(timeout)
    try:
        return s.recv(4096) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LimitsTestCase(h.LobbyTestCase):
    EXTRA = ()

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        return super().start_server(data_dir, admin_key, list(extra_args) + list(cls.EXTRA))

    def healthz(self, timeout=5):
        """(status, seconds) of GET /healthz from 127.0.0.1."""
        start = time.monotonic()
        url = "http://127.0.0.1:%d/healthz" % self.server.http_port
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            return r.status, time.monotonic() - start


class SlowlorisTest(LimitsTestCase):
    HEADER_TIMEOUT = 2
    EXTRA = ("--http-header-timeout", str(HEADER_TIMEOUT))

    def test_slow_headers_are_dropped_while_others_are_served(self):
        slow = [connect_from(self.server.http_port) for _ in range(50)]
        self.addCleanup(lambda: [s.close() for s in slow])
        header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
        start = time.monotonic()
        sent = 0
        dropped = set()
        worst = 0.0
        while time.monotonic() - start < self.HEADER_TIMEOUT + 1.5:
            for i, s in enumerate(slow):
                if i in dropped:
                    continue
                try:
                    s.send(header[sent:sent + 1])
                except OSError:
                    dropped.add(i)
            sent += 1
            status, took = self.healthz()
            self.assertEqual(status, 200)
            worst = max(worst, took)
            time.sleep(0.1)
        self.assertLess(sent, len(header))  # no slow header was ever complete
        self.assertLess(worst, 1.0, "the owner's request waited behind the slow ones")
        still_open = [i for i, s in enumerate(slow) if i not in dropped and not closed_by_server(s)]
        self.assertEqual(still_open, [], "slow headers outlived --http-header-timeout")


class PerSourceCapTest(LimitsTestCase):
    CAP = 8
    EXTRA = ("--http-max-connections-per-source", str(CAP))

    def test_one_source_over_its_cap_does_not_block_another(self):
        held = [connect_from(self.server.http_port) for _ in range(self.CAP)]
        self.addCleanup(lambda: [s.close() for s in held])
        time.sleep(0.2)  # all accepted
        over = connect_from(self.server.http_port)
        self.addCleanup(over.close)
        over.settimeout(2)
        start = time.monotonic()
        got = b""
        try:
            while True:
                part = over.recv(4096)
                if not part:
                    break
                got += part
        except ConnectionResetError:
            pass
        self.assertLess(time.monotonic() - start, 1.0)
        if got:
            self.assertTrue(got.startswith(b"HTTP/1.1 503"), got)
        status, took = self.healthz()
        self.assertEqual(status, 200)
        self.assertLess(took, 1.0)
        self.assert_log("open from 127.0.0.2")
        # One closes: that source is served again.
        held.pop().close()
        deadline = time.monotonic() + 3
        while True:
            s = connect_from(self.server.http_port)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            s.settimeout(2)
            try:
                reply = s.recv(4096)
            except OSError:
                reply = b""
            s.close()
            if reply.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply)


class DescriptorLimitTest(LimitsTestCase):
    # Caps above the descriptor limit set below, so the limit is what the flood hits.
    EXTRA = ("--http-max-connections", "100000", "--http-max-connections-per-source", "100000")
    FD_LIMIT = 64

    def test_accept_loop_pauses_at_the_limit_and_recovers(self):
        pid = self.server.proc.pid
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        self.addCleanup(resource.prlimit, pid, resource.RLIMIT_NOFILE, (soft, hard))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (self.FD_LIMIT, hard))
        flood = [connect_from(self.server.http_port, blocking=False) for _ in range(150)]
        self.addCleanup(lambda: [s.close() for s in flood])
        self.assert_log("pausing accepts")
        before = cpu_seconds(pid)
        start = time.monotonic()
        time.sleep(3)
        cpu = (cpu_seconds(pid) - before) / (time.monotonic() - start)
        print("warren's CPU at the descriptor limit: %.0f%%" % (100 * cpu))
        self.assertLess(cpu, 0.15, "the accept loop spins at the descriptor limit")
        for s in flood:
            s.close()
        flood.clear()
        deadline = time.monotonic() + 5
        while True:
            try:
                status, _ = self.healthz(timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.assertEqual(status, 200)
        self.assert_log("accepting connections again")


class OpenFilesLimitTest(h.LobbyTestCase):
    """Started with the common soft limit of 1024, warren raises it to what the caps need."""

    @classmethod
    def setUpClass(cls):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        low = min(1024, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        try:
            super().setUpClass()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        cls.hard = hard

    def test_soft_limit_is_raised_at_start(self):
        soft, _ = resource.prlimit(self.server.proc.pid, resource.RLIMIT_NOFILE)
        # --http-max-connections (4096) + the metrics listener's 32 + the web listener's 512
        # and its 8 rejecting + 4096 for the rest.
        self.assertEqual(soft, min(4096 + 32 + 512 + 8 + 4096, self.hard))
        self.assert_log("open files limit %d (was 1024" % soft)


if __name__ == "__main__":
    h.main()
