#!/usr/bin/python3
"""new -> first command latency through the SSH lobby, for the tiny and the default image.

Starts its own `warren serve` (VMs on, guests without network) over the images in
WARREN_TEST_IMAGES, then for each image runs `new` and the first `ssh VM true` N times and
prints the median of each phase, plus each image's time relative to tiny's in the same run.
Also times `ssh VM true` on the warm control connection against the lobby's own `whoami`
(the SSH-to-warren floor that every `ssh VM …` pays). Usage: tests/bench/vm_new.py [--runs N]
"""
import argparse
import statistics

import vm_bench


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warm", type=int, default=30, help="ssh VM true repetitions")
    args = ap.parse_args()

    bench = vm_bench.VmBench()
    try:
        bench.start()

        def ssh(*cmd):
            return bench.ssh(*cmd)[0]

        results = {}
        for image, mem in (("tiny", "512M"), ("debian", "1G")):
            news, firsts = [], []
            for i in range(args.runs):
                name = "bench-%s-%d" % (image, i)
                news.append(ssh("new", "--image", image, "--name", name, "--cpu", "1",
                                "--memory", mem))
                firsts.append(ssh("ssh", name, "true"))
                if image == "tiny" and i == 0:
                    warm = [ssh("ssh", name, "true") for _ in range(args.warm)]
                    floor = [ssh("whoami") for _ in range(args.warm)]
                ssh("rm", name)
            results[image] = (statistics.median(news), statistics.median(firsts))

        print("new -> first command, median of %d, TCG, 1 vCPU, 2 cores" % args.runs)
        base = sum(results["tiny"])
        for image, (new, first) in results.items():
            total = new + first
            print("  %-7s new %6.2fs  first ssh %5.2fs  total %6.2fs  (%.2fx tiny)"
                  % (image, new, first, total, total / base))
        w, f = statistics.median(warm), statistics.median(floor)
        print("ssh VM true on the warm control connection: median %.0f ms over %d; "
              "lobby whoami %.0f ms; ratio %.2f" % (w * 1000, args.warm, f * 1000, w / f))
    finally:
        bench.close()


if __name__ == "__main__":
    main()
