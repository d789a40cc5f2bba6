#!/usr/bin/python3
"""The sandbox API's latency and a burst, in one run:

1. create → first exec (`true`) → destroy, each timed, over REST (/v1/sandboxes, keep-alive
   http.client), over MCP (/mcp/sandbox: create_sandbox, exec, destroy_sandbox) and, for
   comparison, over SSH (`new` → `ssh VM true` → `rm`), --runs times each (default 3):
   medians per step and of the whole.
2. --burst sandboxes (default 20) created at once by one user over REST: the time until all
   have answered, until each has run its first command, and the host memory they took
   (MemAvailable before and after, /proc/meminfo).

Starts its own `warren serve` (VMs on, guests without network, the images from
WARREN_TEST_IMAGES) with a test size (`--sandbox-size bench=1,512M`) and
`--sandbox-overcommit` (default 10) so a burst fits a small host. Removes what it made.
Usage: tests/bench/sandbox_api.py [--runs 3] [--burst 20] [--image debian]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import mcp_http  # noqa: E402
import vm_bench  # noqa: E402

SIZE = "bench"


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


class Rest:
    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        self.token = token

    def call(self, method, path, body=None, want=200):
        headers = {"Authorization": "Bearer " + self.token}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body)
        try:
            self.conn.request(method, "/v1" + path, body=data, headers=headers)
            resp = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            # An idle keep-alive connection the server closed: once more on a fresh one.
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.conn.host, self.conn.port, timeout=900)
            self.conn.request(method, "/v1" + path, body=data, headers=headers)
            resp = self.conn.getresponse()
        payload = json.loads(resp.read() or b"null")
        if resp.status != want:
            raise RuntimeError("%s %s: %d %s" % (method, path, resp.status, payload))
        return payload

    def close(self):
        self.conn.close()


def timed(fn):
    t = time.monotonic()
    out = fn()
    return time.monotonic() - t, out


def report(name, rows):
    """rows: [(create, exec, destroy)] in seconds."""
    cols = list(zip(*rows))
    med = [statistics.median(c) for c in cols]
    print("%-5s create %6.2f s  first exec %6.3f s  destroy %6.2f s  whole %6.2f s  (median of %d)"
          % (name, med[0], med[1], med[2], statistics.median([sum(r) for r in rows]), len(rows)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--image", default="debian", help="the image of the SSH comparison")
    ap.add_argument("--overcommit", default="10")
    args = ap.parse_args()

    bench = vm_bench.VmBench()
    try:
        server = bench.start(extra_args=["--sandbox-size", SIZE + "=1,512M",
                                         "--sandbox-overcommit", args.overcommit,
                                         "--exec-rate", "1000", "--exec-burst", "1000",
                                         "--exec-timeout", "600"])
        token = bench.ssh("ssh-key", "generate-api-key", "--label", "bench")[1].strip()

        rest = Rest(server.http_port, token)
        rows = []
        for _ in range(args.runs):
            c, made = timed(lambda: rest.call("POST", "/sandboxes", {"size": SIZE}, want=201))
            sid = made["id"]
            e, _ = timed(lambda: rest.call("POST", "/sandboxes/%s/exec" % sid, {"command": "true"}))
            d, _ = timed(lambda: rest.call("DELETE", "/sandboxes/" + sid))
            rows.append((c, e, d))
        report("REST", rows)

        mcp = mcp_http.McpClient(server.http_port, token, path="/mcp/sandbox", timeout=900)
        mcp.initialize()
        rows = []
        for _ in range(args.runs):
            c, made = timed(lambda: mcp.call("create_sandbox", size=SIZE))
            if made.get("isError"):
                raise RuntimeError("create_sandbox: %s" % made)
            sid = made["structuredContent"]["id"]
            e, _ = timed(lambda: mcp.call("exec", sandbox_id=sid, command="true"))
            d, _ = timed(lambda: mcp.call("destroy_sandbox", sandbox_id=sid))
            rows.append((c, e, d))
        mcp.close()
        report("MCP", rows)

        rows = []
        for i in range(args.runs):
            name = "bench-ssh-%d" % i
            c, _ = timed(lambda: bench.ssh("new", "--image", args.image, "--name", name, "--cpu",
                                           "1", "--memory", "512M"))
            e, _ = timed(lambda: bench.ssh("ssh", name, "true"))
            d, _ = timed(lambda: bench.ssh("rm", name))
            rows.append((c, e, d))
        report("SSH", rows)

        before = mem_available_mib()
        made, errors = [None] * args.burst, []
        answered = [0.0] * args.burst
        ran = [0.0] * args.burst
        t0 = time.monotonic()

        def one(i):
            r = Rest(server.http_port, token)
            try:
                made[i] = r.call("POST", "/sandboxes", {"size": SIZE}, want=201)["id"]
                answered[i] = time.monotonic() - t0
                r.call("POST", "/sandboxes/%s/exec" % made[i], {"command": "true"})
                ran[i] = time.monotonic() - t0
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(str(e)[:300])
            finally:
                r.close()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(args.burst)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = mem_available_mib()
        ok = [i for i in range(args.burst) if ran[i] > 0]
        print("burst %d at once: %d made; all answered in %.1f s, all ran a command in %.1f s; "
              "host memory used %d MiB (%d MiB each)"
              % (args.burst, len(ok), max(answered), max(ran), before - after,
                 (before - after) // max(1, len(ok))))
        for e in errors:
            print("  refused or failed: " + e)
        for sid in made:
            if sid:
                rest.call("DELETE", "/sandboxes/" + sid)
        rest.close()
    finally:
        bench.close()


if __name__ == "__main__":
    main()
