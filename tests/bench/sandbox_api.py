#!/usr/bin/python3
"""The sandbox API against plain SSH, in one run: create → first exec → destroy of one
sandbox over REST (/v1/sandboxes) and over MCP (/mcp/sandbox), against `new --sandbox` →
`ssh VM true` → `rm` over OpenSSH (a new connection per step, as a script would make);
medians of each phase and the ratios against SSH. Then 20 sandboxes created at once by one
user over REST: the time until all of them answer an exec, and the host memory they use
(MemAvailable before and after).

Starts its own `warren serve` (VMs on, guests without network, the tiny image from
WARREN_TEST_IMAGES, a test size of 1 vCPU / 256 MiB, room for 20 of them on a 2-core host)
and removes everything it made. Usage:
  tests/bench/sandbox_api.py [--runs 3] [--many 20]
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import mcp_http  # noqa: E402
import vm_bench  # noqa: E402


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


class Rest:
    def __init__(self, port, token):
        self.base = "http://127.0.0.1:%d" % port
        self.token = token

    def call(self, method, path, body=None, want=(200, 201)):
        args = ["curl", "-sS", "--max-time", "900", "-X", method, "-w", "\n%{http_code}",
                "-H", "Authorization: Bearer " + self.token]
        if body is not None:
            args += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
        t = time.monotonic()
        r = subprocess.run(args + [self.base + path], capture_output=True, text=True, timeout=960)
        took = time.monotonic() - t
        text, _, code = r.stdout.rpartition("\n")
        if r.returncode != 0 or int(code or 0) not in want:
            raise RuntimeError("%s %s: curl %d, HTTP %s %s %s" % (method, path, r.returncode,
                                                                 code, text[-300:], r.stderr))
        return took, json.loads(text)


def timed(f, *a, **kw):
    t = time.monotonic()
    out = f(*a, **kw)
    return time.monotonic() - t, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--many", type=int, default=20)
    args = ap.parse_args()

    bench = vm_bench.VmBench()
    made = []
    try:
        server = bench.start(["--vm-image", "tiny", "--sandbox-size", "test=1,256M,1G",
                              "--sandbox-overcommit", str(max(1, args.many / 2)),
                              "--user-max-vms", "none", "--user-max-cpu", "none",
                              "--user-max-memory", "none"])
        token = bench.ssh("ssh-key", "generate-api-key", "--label", "bench")[1].strip()
        rest = Rest(server.http_port, token)
        mcp = mcp_http.McpClient(server.http_port, token, path="/mcp/sandbox", timeout=900)
        mcp.initialize()

        phases = {k: {"create": [], "exec": [], "destroy": []} for k in ("ssh", "rest", "mcp")}
        for run in range(args.runs):
            name = "bench-ssh-%d" % run
            made.append(name)
            phases["ssh"]["create"].append(
                bench.ssh("new", "--sandbox", "--size", "test", "--name", name)[0])
            phases["ssh"]["exec"].append(bench.ssh("ssh", name, "true")[0])
            phases["ssh"]["destroy"].append(bench.ssh("rm", name)[0])
            made.remove(name)

            took, sbx = rest.call("POST", "/v1/sandboxes", {"size": "test"})
            made.append(sbx["id"])
            phases["rest"]["create"].append(took)
            took, out = rest.call("POST", "/v1/sandboxes/%s/exec" % sbx["id"], {"command": "true"})
            assert out["exit_code"] == 0, out
            phases["rest"]["exec"].append(took)
            phases["rest"]["destroy"].append(rest.call("DELETE", "/v1/sandboxes/" + sbx["id"])[0])
            made.remove(sbx["id"])

            took, res = timed(mcp.call, "create_sandbox", size="test")
            sid = res["structuredContent"]["id"]
            made.append(sid)
            phases["mcp"]["create"].append(took)
            took, res = timed(mcp.call, "exec", sandbox_id=sid, command="true")
            assert res["structuredContent"]["exit_code"] == 0, res
            phases["mcp"]["exec"].append(took)
            phases["mcp"]["destroy"].append(timed(mcp.call, "destroy_sandbox", sandbox_id=sid)[0])
            made.remove(sid)

        print("create -> first exec -> destroy, median of %d runs (s):" % args.runs)
        base = {p: statistics.median(v) for p, v in phases["ssh"].items()}
        for surface in ("ssh", "rest", "mcp"):
            med = {p: statistics.median(v) for p, v in phases[surface].items()}
            total = sum(med.values())
            print("  %-4s create %7.2f  exec %6.3f  destroy %6.3f  total %7.2f  "
                  "(vs ssh: create %.2f, exec %.2f, destroy %.2f, total %.2f)" % (
                      surface, med["create"], med["exec"], med["destroy"], total,
                      med["create"] / base["create"], med["exec"] / base["exec"],
                      med["destroy"] / base["destroy"], total / sum(base.values())))

        before = mem_available_mib()
        t0 = time.monotonic()

        # A create slower than the REST deadline (20 guests booting on 2 cores) is answered
        # 504 and goes on; the list says when every one of them runs.
        def create(_):
            rest.call("POST", "/v1/sandboxes", {"size": "test", "timeout_minutes": 30},
                      want=(201, 504))
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.many) as pool:
            list(pool.map(create, range(args.many)))
        while True:
            _, listed = rest.call("GET", "/v1/sandboxes")
            made[:] = [s["id"] for s in listed["sandboxes"]]
            if sum(s["status"] == "running" for s in listed["sandboxes"]) >= args.many:
                break
            if time.monotonic() - t0 > 900:
                raise RuntimeError("not all %d sandboxes run after 900 s: %s" % (args.many, listed))
            time.sleep(1)

        def answer(sid):
            rest.call("POST", "/v1/sandboxes/%s/exec" % sid, {"command": "true"})
            return time.monotonic() - t0
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.many) as pool:
            answered = list(pool.map(answer, list(made)))
        after = mem_available_mib()
        print("%d sandboxes at once by one user: all answered in %.1f s (first %.1f s, median "
              "%.1f s); host memory used %.0f MiB (%.0f MiB each; each has 256 MiB)" % (
                  args.many, max(answered), min(answered), statistics.median(answered),
                  before - after, (before - after) / args.many))
        for sid in list(made):
            rest.call("DELETE", "/v1/sandboxes/" + sid)
            made.remove(sid)
    finally:
        for name in made:
            try:
                bench.ssh("rm", name)
            except RuntimeError:
                pass
        bench.close()


if __name__ == "__main__":
    main()
