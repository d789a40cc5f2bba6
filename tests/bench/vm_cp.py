#!/usr/bin/python3
"""cp latency at a 2 GiB and a 20 GiB disk, through the SSH lobby.

Starts its own `warren serve` (VMs on, guests without network) over the tiny image in
WARREN_TEST_IMAGES; for each disk size makes a source VM, writes 32 MiB into it, then runs
`cp SRC` N times (removing each copy) and prints the medians of the disk fork alone
(`copy_seconds`: snapshot + overlays + define + start, measured by warren) and of the
whole `cp` as the client sees it (sync in the source, fork, the copy booting until it runs a
command), and the 20 GiB / 2 GiB ratio of each, all from one run. A fork does not copy the
disk, so the ratio should be about 1. Usage: tests/bench/vm_cp.py [--runs N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import warren_harness as h  # noqa: E402

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="warren-bench-")
    os.makedirs("/var/lib/warren-test", exist_ok=True)
    data = tempfile.mkdtemp(prefix="bench-", dir="/var/lib/warren-test")
    os.chmod(data, 0o711)
    server = None
    try:
        key = h.Key(tmp, "bench")
        server = h.Server(data, key, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", "none"]).start(120)
        kh = os.path.join(tmp, "known_hosts")
        with open(kh, "w") as f:
            f.write("[127.0.0.1]:%d %s\n" % (server.port, server.host_public_key()))

        def ssh(*cmd):
            argv = ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                    "-i", key.path, "-o", "UserKnownHostsFile=" + kh,
                    "-o", "StrictHostKeyChecking=yes", "-p", str(server.port),
                    "lobby@127.0.0.1"] + list(cmd)
            t = time.monotonic()
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError("%s: %d %s" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
            return time.monotonic() - t, r.stdout

        results = {}
        for disk in ("2G", "20G"):
            src = "bench-src-" + disk.lower()
            ssh("new", "--image", "tiny", "--name", src, "--cpu", "1", "--memory", "256M",
                "--disk", disk)
            ssh("ssh", src, "head -c 33554432 /dev/urandom > ~/blob && sync")
            forks, totals = [], []
            for i in range(args.runs):
                copy = "bench-copy-%s-%d" % (disk.lower(), i)
                wall, out = ssh("cp", src, copy, "--json")
                forks.append(json.loads(out)["copy_seconds"])
                totals.append(wall)
                ssh("rm", copy)
            ssh("rm", src)
            results[disk] = (statistics.median(forks), statistics.median(totals))

        print("cp of a running tiny VM with 32 MiB written, median of %d, TCG, 2 cores"
              % args.runs)
        for disk, (fork, total) in results.items():
            print("  disk %-4s fork %6.3fs  whole cp (sync, fork, copy boots) %6.2fs"
                  % (disk, fork, total))
        (f2, t2), (f20, t20) = results["2G"], results["20G"]
        print("ratio 20G/2G: fork %.2f, whole cp %.2f" % (f20 / f2, t20 / t2))
    finally:
        if server:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
