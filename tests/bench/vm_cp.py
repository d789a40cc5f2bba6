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
import statistics

import vm_bench


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    bench = vm_bench.VmBench()
    try:
        bench.start()

        def ssh(*cmd):
            return bench.ssh(*cmd)

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
        bench.close()


if __name__ == "__main__":
    main()
