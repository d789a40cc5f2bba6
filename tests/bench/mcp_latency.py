#!/usr/bin/python3
"""MCP vs SSH in one run: the latency of `ssh VM true` as an MCP `exec` call against the same
command over OpenSSH (`ssh HOST ssh VM true`, a new SSH connection each time as an agent's
shell would make), and how many concurrent MCP clients the server holds: N clients
(default 200), each with its own session, each doing one call at the same moment, with no
errors allowed. Prints medians, p90s, the MCP/SSH ratio, and counts.

Starts its own `warren serve` (VMs on, guests without network, the tiny image from
WARREN_TEST_IMAGES) and removes everything it made. Usage:
  tests/bench/mcp_latency.py [--runs 30] [--clients 200]
"""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import mcp_http  # noqa: E402
import vm_bench  # noqa: E402

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=200)
    args = ap.parse_args()

    bench = vm_bench.VmBench()
    server = None
    vm = "bench-mcp"
    made_vm = False
    try:
        # One user's N sessions and N calls at once: the per-user bounds (64 of each by
        # default, fairness between users) would refuse most; this measures the server's.
        server = bench.start(["--mcp-max-sessions-per-user", str(args.clients),
                              "--command-queue-per-user", str(args.clients)])

        def ssh(*cmd):
            return bench.ssh(*cmd)[1]

        ssh("new", "--image", "tiny", "--name", vm, "--cpu", "1", "--memory", "512M")
        made_vm = True
        token = ssh("ssh-key", "generate-api-key", "--label", "bench").strip()

        client = mcp_http.McpClient(server.http_port, token)
        client.initialize()
        for _ in range(3):  # warm both paths
            client.exec("ssh %s true" % vm)
            ssh("ssh", vm, "true")

        mcp_times, ssh_times = [], []
        for _ in range(args.runs):
            t = time.monotonic()
            r = client.exec("ssh %s true" % vm)
            mcp_times.append(time.monotonic() - t)
            if r["isError"]:
                raise RuntimeError("MCP exec failed: %r" % r)
            t = time.monotonic()
            ssh("ssh", vm, "true")
            ssh_times.append(time.monotonic() - t)
        client.close()

        # N clients at once: each opens its own session, then all call together.
        n = args.clients
        clients = [mcp_http.McpClient(server.http_port, token, timeout=300) for _ in range(n)]
        errors = []
        barrier = threading.Barrier(n)
        call_times = [None] * n

        def run(i):
            c = clients[i]
            try:
                c.initialize()
                barrier.wait(timeout=300)
                t = time.monotonic()
                r = c.exec("whoami")
                call_times[i] = time.monotonic() - t
                if r["isError"]:
                    errors.append("client %d: %r" % (i, r))
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append("client %d: %s" % (i, e))
                try:
                    barrier.abort()
                except threading.BrokenBarrierError:
                    pass

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        held = sum(1 for c in clients if c.session)
        ok = sum(1 for x in call_times if x is not None) - len(errors)
        for c in clients:
            c.close()

        m_med, s_med = statistics.median(mcp_times), statistics.median(ssh_times)
        print("ssh VM true, %d runs each (median / p90):" % args.runs)
        print("  MCP exec (one session)      %7.1f ms / %7.1f ms" % (m_med * 1e3, vm_bench.pct(mcp_times, 90) * 1e3))
        print("  OpenSSH ssh HOST ssh VM true %7.1f ms / %7.1f ms" % (s_med * 1e3, vm_bench.pct(ssh_times, 90) * 1e3))
        print("  ratio MCP/SSH (median)       %7.2f" % (m_med / s_med))
        done = [x for x in call_times if x is not None]
        print("%d concurrent MCP clients: %d sessions held, %d calls ok, %d errors, "
              "wall %.2f s, call median %.1f ms, p90 %.1f ms, max %.1f ms"
              % (n, held, ok, len(errors), wall, statistics.median(done) * 1e3 if done else 0,
                 vm_bench.pct(done, 90) * 1e3 if done else 0, max(done) * 1e3 if done else 0))
        for e in errors[:5]:
            print("  error:", e)
        return 1 if errors or held != n else 0
    finally:
        if server is not None:
            if made_vm:
                try:
                    ssh("rm", vm)
                except Exception as e:  # noqa: BLE001
                    print("cleanup: rm %s: %s" % (vm, e), file=sys.stderr)
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
