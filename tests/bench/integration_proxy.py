#!/usr/bin/python3
"""The integrations proxy's cost, in one run: a debian guest (`--egress integrations`)
asks `http://bench.int.warren.internal/…` (warren's proxy, over the VM's control
connection, to a loopback upstream of the bench's own that the integration points at), and
the host asks the upstream directly with the same client:

- requests/s: sequential small GETs (one connection each, as the proxy closes every one),
  the client a python3 http.client loop, timed where it runs;
- MB/s: one large GET read to its end;
- curl latency (time_total, median and p90 of SAMPLES small GETs): from the guest to the
  integration, vs from the host to a listener inside the guest forwarded with `ssh -L`
  through warren (`ssh -L PORT:localhost:8000 bench-int@HOST`: the other way an SSH
  channel carries HTTP between host and guest), vs from the host to the upstream directly.

Ratios are guest-through-proxy / host-direct. Under TCG the guest's own CPU dominates:
read the guest's numbers as an upper bound of the proxy's cost.

  sudo WARREN_TEST_IMAGES=/var/lib/warren-test/images python3 tests/bench/integration_proxy.py
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
import int_upstream  # noqa: E402
from vm_bench import VmBench, b64_file, lat_text  # noqa: E402

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))
BIG = int(os.environ.get("BENCH_BIG_MIB", "64")) << 20
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "30"))
VM = "bench-int"

# Runs on the host and in the guest alike: prints one JSON line.
CLIENT = r"""
import http.client, json, subprocess, sys, time, urllib.parse
base, n, big, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlsplit(base)
def get(path):
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=120)
    c.request("GET", path)
    r = c.getresponse()
    size = 0
    while True:
        b = r.read(65536)
        if not b:
            break
        size += len(b)
    c.close()
    assert r.status == 200, r.status
    return size
get("/warm")
t = time.monotonic()
for i in range(n):
    get("/small?i=%d" % i)
rps = n / (time.monotonic() - t)
t = time.monotonic()
got = get("/big?bytes=%d" % big)
mbs = got / (time.monotonic() - t) / 1e6
lat = []
for i in range(samples):
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}",
                          base + "/lat?i=%d" % i], capture_output=True, text=True).stdout
    lat.append(float(out))
print(json.dumps({"rps": rps, "mbs": mbs, "bytes": got, "lat": lat}))
"""

LATENCY = r"""
import json, subprocess, sys
base, samples = sys.argv[1], int(sys.argv[2])
lat = []
for i in range(samples):
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}",
                          base + "/hello.txt"], capture_output=True, text=True).stdout
    lat.append(float(out))
print(json.dumps({"lat": lat}))
"""


def guest(bench, command):
    """One guest command (one word for the lobby's tokenizer); returns its stdout."""
    return bench.ssh("ssh", VM, shlex.quote(command))[1]


def main():
    bench = VmBench()
    upstream = int_upstream.Upstream()
    forward = None
    try:
        bench.start()
        bench.ssh("integrations", "add", "http-proxy", "--name", "bench", "--target",
                  upstream.url, "--bearer", "bench-" + os.urandom(8).hex())
        secs, _ = bench.ssh("new", "--name", VM, "--image", "debian", "--cpu", "1", "--memory",
                            "1G", "--egress", "integrations", "--integration", "bench")
        print("new %s (debian, egress integrations): %.1f s" % (VM, secs))
        # The client, and a listener inside the guest for the ssh -L comparison.
        guest(bench, b64_file("/tmp/client.py", CLIENT) + " && " +
                  b64_file("/tmp/lat.py", LATENCY) +
                  " && mkdir -p /tmp/www && echo hello-from-vm > /tmp/www/hello.txt && "
                  "(setsid python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www "
                  ">/dev/null 2>&1 </dev/null &)")
        # The guest's name appears with the endpoint's first refresh.
        deadline = time.monotonic() + 60
        while True:
            try:
                out = guest(bench, "curl -s -o /dev/null -w '%{http_code}' "
                                   "http://bench.int.warren.internal/ready")
            except RuntimeError:
                out = ""
            if out.strip() == "200":
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the integration never answered in the guest")
            time.sleep(2)

        out = guest(bench, "python3 /tmp/client.py http://bench.int.warren.internal "
                           "%d %d %d" % (REQUESTS, BIG, SAMPLES))
        inside = json.loads(out.strip().splitlines()[-1])
        host_run = subprocess.run(["python3", "-c", CLIENT, upstream.url, str(REQUESTS),
                                   str(BIG), str(SAMPLES)], capture_output=True, text=True,
                                  check=True)
        host = json.loads(host_run.stdout.strip().splitlines()[-1])

        port, forward = bench.forward(VM, 8000, "/hello.txt", "hello-from-vm")
        fwd = json.loads(subprocess.run(["python3", "-c", LATENCY, "http://127.0.0.1:%d" % port,
                                         str(SAMPLES)], capture_output=True, text=True,
                                        check=True).stdout)

        print("\n%d sequential GETs, one %d MiB GET, %d curl samples each\n" %
              (REQUESTS, BIG >> 20, SAMPLES))
        print("%-44s %10s %10s" % ("", "req/s", "MB/s"))
        print("%-44s %10.1f %10.1f" % ("guest -> bench.int.warren.internal (proxy)",
                                       inside["rps"], inside["mbs"]))
        print("%-44s %10.1f %10.1f" % ("host  -> upstream directly", host["rps"], host["mbs"]))
        print("%-44s %10.3f %10.3f" % ("ratio proxy / direct", inside["rps"] / host["rps"],
                                       inside["mbs"] / host["mbs"]))
        print("\ncurl time_total")
        print("  guest -> integration (proxy)            " + lat_text(inside["lat"]))
        print("  host  -> ssh -L into the guest          " + lat_text(fwd["lat"]))
        print("  host  -> upstream directly              " + lat_text(host["lat"]))
        print("  ratio integration / ssh -L (medians)    %.2f" %
              (statistics.median(inside["lat"]) / statistics.median(fwd["lat"])))
        assert inside["bytes"] == BIG and host["bytes"] == BIG, (inside["bytes"], host["bytes"])
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
        upstream.close()
        bench.close()


if __name__ == "__main__":
    main()
