#!/usr/bin/python3
"""The web proxy's cost, in one run, against the same server in a debian guest
(tests/integration/web_guest_server.py on port 8000) reached three ways:

- through warren's web proxy: http://bench-web.warren.localhost:PORT/ on `serve --web`,
  with the owner's API token as a bearer (the proxy checks it on every request);
- through `ssh -L PORT:localhost:8000 bench-web@HOST` (warren's SSH VM route: the other way
  an HTTP client on the host reaches a VM's port);
- from inside the guest to 127.0.0.1:8000 (no proxy at all; under TCG the guest's own CPU
  makes this slower than it would be on KVM).

Figures: time to first byte (curl's time_starttransfer, median and p90 of SAMPLES), small-page
requests/s (REQUESTS sequential GETs, one connection each) and MB/s of one BIG download.
Ratios are proxy / ssh -L. The target: TTFB within 1.5x of ssh -L, throughput at least its.

  sudo WARREN_TEST_IMAGES=/var/lib/warren-test/images python3 tests/bench/web_proxy.py
"""
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import web_guest_server  # noqa: E402
from vm_bench import VmBench, b64_file, lat_text  # noqa: E402

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))
BIG = int(os.environ.get("BENCH_BIG_MIB", "200")) << 20
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "30"))
VM = "bench-web"

# Runs on the host and in the guest alike: prints one JSON line.
CLIENT = r"""
import http.client, json, subprocess, sys, time
host, port, vhost, token, n, big, samples = sys.argv[1:8]
port, n, big, samples = int(port), int(n), int(big), int(samples)
headers = {"Host": vhost}
if token != "-":
    headers["Authorization"] = "Bearer " + token
def get(path):
    c = http.client.HTTPConnection(host, port, timeout=300)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    size = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        size += len(b)
    c.close()
    assert r.status == 200, (r.status, path)
    return size
get("/hello.txt")
t = time.monotonic()
for i in range(n):
    get("/hello.txt?i=%d" % i)
rps = n / (time.monotonic() - t)
t = time.monotonic()
got = get("/big?bytes=%d" % big) if big else 0
mbs = got / (time.monotonic() - t) / 1e6 if big else 0
ttfb = []
for i in range(samples):
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{time_starttransfer}",
            "-H", "Host: " + vhost]
    if token != "-":
        argv += ["-H", "Authorization: Bearer " + token]
    out = subprocess.run(argv + ["http://%s:%d/hello.txt?s=%d" % (host, port, i)],
                         capture_output=True, text=True).stdout
    ttfb.append(float(out))
print(json.dumps({"rps": rps, "mbs": mbs, "bytes": got, "ttfb": ttfb}))
"""


def guest(bench, command):
    return bench.ssh("ssh", VM, shlex.quote(command))[1]


def run_client(args):
    r = subprocess.run(["python3", "-c", CLIENT] + [str(a) for a in args],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    bench = VmBench()
    forward = None
    try:
        server = bench.start()
        secs, _ = bench.ssh("new", "--name", VM, "--image", "debian", "--cpu", "1", "--memory",
                            "1G")
        print("new %s (debian): %.1f s" % (VM, secs))
        guest(bench, web_guest_server.start_command(8000, "bench") + " && " +
              b64_file("/tmp/client.py", CLIENT))
        deadline = time.monotonic() + 60
        while "hello" not in guest(bench, "curl -s http://127.0.0.1:8000/hello.txt || true"):
            if time.monotonic() > deadline:
                raise RuntimeError("the guest's server never answered")
            time.sleep(1)
        token = json.loads(bench.ssh("ssh-key", "generate-api-key", "--label", "bench",
                                     "--json")[1])["token"]
        vhost = "%s.warren.localhost:%d" % (VM, server.web_port)
        proxy = run_client(["127.0.0.1", server.web_port, vhost, token, REQUESTS, BIG, SAMPLES])

        port, forward = bench.forward(VM, 8000, "/hello.txt", "hello")
        sshl = run_client(["127.0.0.1", port, "127.0.0.1:%d" % port, "-", REQUESTS, BIG,
                           SAMPLES])
        out = guest(bench, "python3 /tmp/client.py 127.0.0.1 8000 127.0.0.1:8000 - %d 0 %d" %
                    (REQUESTS, SAMPLES))
        inside = json.loads(out.strip().splitlines()[-1])

        print("\n%d sequential GETs (a connection each), one %d MiB GET, %d curl samples\n" %
              (REQUESTS, BIG >> 20, SAMPLES))
        print("%-40s %10s %10s   %s" % ("", "req/s", "MB/s", "time to first byte"))
        for label, r in (("host -> web proxy (bearer)", proxy), ("host -> ssh -L", sshl),
                         ("guest -> 127.0.0.1:8000", inside)):
            print("%-40s %10.1f %10s   %s" % (label, r["rps"],
                                             "%.1f" % r["mbs"] if r["mbs"] else "-",
                                             lat_text(r["ttfb"])))
        print("\nratio proxy / ssh -L: req/s %.2f, MB/s %.2f, TTFB (medians) %.2f" %
              (proxy["rps"] / sshl["rps"], proxy["mbs"] / sshl["mbs"],
               statistics.median(proxy["ttfb"]) / statistics.median(sshl["ttfb"])))
        assert proxy["bytes"] == BIG and sshl["bytes"] == BIG, (proxy["bytes"], sshl["bytes"])
    except BaseException:
        if bench.server is not None:
            print("--- warren's log, its end:\n" + bench.server.log_tail(15), file=sys.stderr)
        raise
    finally:
        if forward is not None:
            forward.kill()
            forward.wait()
        if bench.server is not None:
            try:
                bench.ssh("rm", VM)
            except RuntimeError as e:
                print("rm %s: %s" % (VM, e), file=sys.stderr)
        bench.close()


if __name__ == "__main__":
    main()
