#!/usr/bin/python3
"""`ssh whoami` from 127.0.0.1 while 127.0.0.2 floods the SSH listener.

Rounds on one server: no flood (the baseline), 1,100 idle connections held, 1,100
connections that send their identification line and then stall, and no flood again. Each
round runs N logins one after the other, each capped at 10 s, and prints how many
succeeded, their mean, median and worst time, the ratio of the mean to the baseline's, and
the server's thread count while the flood is held. Loopback logins are bimodal here (about
12 ms, or 52 ms when a 40 ms delayed-ACK stall hits, flood or not), hence the mean over
many. WARREN_BIN picks the binary, so an older build gives the "before" figures.
Usage: tests/bench/ssh_flood.py [--logins N] [--connections C]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import test_ssh_flood as flood  # noqa: E402
import warren_harness as h  # noqa: E402


def logins(argv, n):
    """[(ok, seconds)] of n logins in a row."""
    return [(status == 0, seconds) for status, seconds, _ in
            (flood.timed_ssh(argv) for _ in range(n))]


def wait_served(argv, timeout=30):
    """After a round: until a login works again (the stalled ones may hold 20 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and flood.timed_ssh(argv)[0] != 0:
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logins", type=int, default=40)
    ap.add_argument("--connections", type=int, default=flood.FLOOD_SIZE)
    args = ap.parse_args()
    flood.raise_open_file_limit()

    tmp = tempfile.mkdtemp(prefix="warren-bench-")
    server = None
    try:
        key = h.Key(tmp, "bench")
        server = h.Server(os.path.join(tmp, "data"), admin_key=key).start()
        known_hosts = os.path.join(tmp, "known_hosts")
        with open(known_hosts, "w") as f:
            f.write("[127.0.0.1]:%d %s\n" % (server.port, server.host_public_key()))
        # The integration tests' own `ssh` command line (it reads only these two attributes).
        argv = h.LobbyTestCase.ssh_args(
            types.SimpleNamespace(known_hosts=known_hosts, server=server), key, "whoami")
        logins(argv, 3)  # warm-up

        rounds = [("no flood", None), ("idle flood", False), ("stalled-hello flood", True),
                  ("no flood again", None)]
        print("ssh whoami from 127.0.0.1, %d logins a round; floods of %d connections from %s; "
              "%s; %d cores" % (args.logins, args.connections, flood.FLOOD_SOURCE,
                                os.path.basename(h.WARREN_BIN), os.cpu_count()))
        baseline = None
        for name, hello in rounds:
            held = None
            if hello is not None:
                held = flood.Flood(server.port, args.connections,
                                   hello=flood.HELLO if hello else None)
                time.sleep(1)  # let the listener take them all
            try:
                threads = flood.thread_count(server.proc.pid)
                results = logins(argv, args.logins)
            finally:
                if held is not None:
                    held.close()
            ok = [s for good, s in results if good]
            line = "  %-20s %3d/%d ok" % (name, len(ok), len(results))
            if ok:
                mean = statistics.mean(ok)
                line += "  mean %5.1f ms  median %5.1f ms  worst %6.1f ms" % (
                    mean * 1e3, statistics.median(ok) * 1e3, max(ok) * 1e3)
                if baseline is None:
                    baseline = mean
                else:
                    line += "  ratio %.2f" % (mean / baseline)
            else:
                failed = statistics.median(s for _, s in results)
                line += "  (each failed after %.1f ms)" % (failed * 1e3)
            print(line + "  threads %d" % threads)
            if hello is not None:
                wait_served(argv)
    finally:
        if server:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
