#!/usr/bin/python3
"""new (and cp) -> first command latency through the SSH lobby, for the tiny and the default
image: taken from the warm pool, restored from a saved template, booted, copied and copied
live, in one run.

For each image it starts its own `warren serve` (VMs on, guests without network, that image
as the default, `--vm-templates default --pool IMAGE=1`), waits until the server has saved
the template of its default shape, then runs N times: `new` of the default shape taken from
the pool (once the pool has refilled and the host is quiet). Then it restarts the server
with `--pool none` and runs N times each: `new` restored from the template, and
`new --disk 11` (another shape: booted); then N times each `cp SRC` and `cp --live SRC` of
a running VM of the default shape (a fresh SRC every 4 copies, so no chain gets deep enough to
be flattened meanwhile). Where the server holds warm memory for VM starts (serve
--warm-memory, vmhost/warm_memory.h), the template's `new` and `cp --live` run again with
`--warm-memory 0`, the baseline of the ratio it prints for them. Each `new` or `cp` is followed by the first `ssh VM true`; it prints
the medians and each one's time relative to the boot's. It also
reports the RSS of each idle VM's QEMU (template-restored and booted) and, for the default
image, how many such idle VMs fit in 20 GiB. Also times `ssh VM true` on the warm control
connection against the lobby's own `whoami` (the SSH-to-warren floor every `ssh VM …`
pays). Usage: tests/bench/vm_new.py [--runs N] [--images tiny,debian]
"""
import argparse
import glob
import json
import os
import re
import statistics
import time

import vm_bench


def qemu_rss_mib(data_dir, vm_id):
    """The resident memory of the QEMU running VM `vm_id` (its command line names the VM's
    directory), in MiB; None when it is not found."""
    needle = os.path.join(data_dir, "vms", vm_id)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
            if "qemu-system" not in cmd or needle not in cmd:
                continue
            with open("/proc/%s/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            continue
    return None


def pool_ready(log):
    """Ids of the pooled VMs the server's log says are ready, in order."""
    return re.findall(r"pool: vm ([a-z0-9]+) of \S+ ready", log)


def bench_image(image, runs, warm_runs):
    bench = vm_bench.VmBench()
    try:
        # First with a warm pool of one: each `new` takes the pooled VM, then the pool refills.
        bench.start(["--vm-image", image, "--vm-templates", "default", "--pool", image + "=1"])

        def ssh(*cmd):
            return bench.ssh(*cmd)[0]

        def stat(name):
            return json.loads(bench.ssh("stat", name, "--json")[1])

        t0 = time.monotonic()
        while not glob.glob(os.path.join(bench.data, "templates", "*", "template.json")):
            if time.monotonic() - t0 > 900:
                raise RuntimeError("no template of %s after 900 s" % image)
            time.sleep(1)
        template_ready = time.monotonic() - t0
        out = {"template_ready": template_ready}

        def measure(how, extra, runs, before=None, key=None):
            news, firsts, rss = [], [], []
            for i in range(runs):
                if before:
                    before(i)
                name = "bench-%s-%s-%d" % (image, how, i)
                news.append(ssh("new", "--name", name, *extra))
                firsts.append(ssh("ssh", name, "true"))
                made = stat(name)
                if made["made"] != how:
                    raise RuntimeError("%s was made by %s, not %s" % (name, made["made"], how))
                # Once, on the first server (a rerun under another key only times new).
                if i == 0 and key is None:
                    time.sleep(10)  # idle: what a parked VM holds
                    rss.append(qemu_rss_mib(bench.data, made["id"]))
                    if how == "template" and warm_runs:
                        out["warm"] = [ssh("ssh", name, "true") for _ in range(warm_runs)]
                        out["floor"] = [ssh("whoami") for _ in range(warm_runs)]
                ssh("rm", name)
            out[key or how] = (statistics.median(news), statistics.median(firsts),
                               rss[0] if rss else None)

        def pooled_one(i):
            # The pool holds its next VM, paused and connected, and the host is quiet again.
            t = time.monotonic()
            while len(pool_ready(bench.server.log())) < i + 1:
                if time.monotonic() - t > 600:
                    raise RuntimeError("the pool did not refill in 600 s")
                time.sleep(0.5)
            if i == 0:
                time.sleep(10)
                out["pooled_rss"] = qemu_rss_mib(bench.data, pool_ready(bench.server.log())[0])
            time.sleep(5)

        measure("pool", (), runs, pooled_one)
        # Then without the pool: restored from the template (the same one), and booted.
        bench.restart(["--vm-image", image, "--vm-templates", "default", "--pool", "none"])
        measure("template", (), runs)
        measure("boot", ("--disk", "11"), runs)

        def copies(how, flags, key=None):
            cps, firsts, src = [], [], None
            for i in range(runs):
                if i % 4 == 0:
                    if src:
                        ssh("rm", src)
                    src = "bench-%s-%s-src-%d" % (image, how, i)
                    ssh("new", "--name", src)
                    ssh("ssh", src, "true")
                name = "bench-%s-%s-%d" % (image, how, i)
                cps.append(ssh("cp", src, name, *flags))
                firsts.append(ssh("ssh", name, "true"))
                made = stat(name)["made"]
                if made != how:
                    raise RuntimeError("%s was made by %s, not %s" % (name, made, how))
                ssh("rm", name)
            ssh("rm", src)
            out[key or how] = (statistics.median(cps), statistics.median(firsts), None)

        copies("copy", ())
        copies("live-copy", ("--live",))
        warm = re.search(r"warm memory: up to (\d+) MiB", bench.server.log())
        out["warm_memory"] = int(warm.group(1)) if warm else 0
        if out["warm_memory"]:
            # The same restores without memory held for them (serve --warm-memory 0).
            bench.restart(["--vm-image", image, "--vm-templates", "default", "--pool", "none",
                           "--warm-memory", "0"])
            measure("template", (), runs, key="template-cold")
            copies("live-copy", ("--live",), key="live-copy-cold")
        # Booted with QEMU's own translation cache (1 GiB) instead of warren's cap: its RSS.
        bench.restart(["--vm-image", image, "--vm-templates", "none", "--vm-tb-cache", "0"])
        name = "bench-%s-uncapped" % image
        ssh("new", "--name", name, "--disk", "11")
        ssh("ssh", name, "true")
        time.sleep(10)
        out["uncapped_rss"] = qemu_rss_mib(bench.data, stat(name)["id"])
        ssh("rm", name)
        return out
    finally:
        bench.close()


def host_memory_facts():
    """What sets the cost of a restore's fresh memory on this host (vmhost/README.md, "Where a
    restore's time goes"): transparent huge pages, and whether free memory is reported to a
    hypervisor below (virtio-balloon free page reporting) and from which block order."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None
    thp = read("/sys/kernel/mm/transparent_hugepage/enabled") or "?"
    thp = re.search(r"\[(\w+)\]", thp).group(1) if "[" in thp else thp
    order = read("/sys/module/page_reporting/parameters/page_reporting_order")
    reporting = ("free page reporting from order %s (%d KiB blocks)" % (order, 4 << int(order))
                 if order is not None else "no free page reporting")
    return "transparent huge pages %s, %s" % (thp, reporting)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warm", type=int, default=30, help="ssh VM true repetitions")
    ap.add_argument("--images", default="tiny,debian")
    args = ap.parse_args()

    results = {}
    for n, image in enumerate(args.images.split(",")):
        results[image] = bench_image(image, args.runs, args.warm if n == 0 else 0)

    print("new (or cp) -> first command, median of %d, TCG, 2 cores, default shape "
          "(2 vCPU, 2 GiB)" % args.runs)
    print("host memory: %s; warm memory %s" % (host_memory_facts(), ", ".join(
        "%s %d MiB" % (image, r["warm_memory"]) for image, r in results.items())))
    for image, r in results.items():
        bt = sum(r["boot"][:2])
        print("  %-7s template saved %.0f s after start" % (image, r["template_ready"]))
        for how in ("pool", "template", "boot", "copy", "live-copy"):
            new, first, rss = r[how]
            total = new + first
            verb = {"copy": "cp", "live-copy": "cp --live"}.get(how, "new")
            print("  %-7s %-9s %-9s %6.2fs  first ssh %5.2fs  total %6.2fs  (%.2fx boot)  "
                  "idle RSS %s MiB" % (image, how, verb, new, first, total, total / bt,
                                       "%.0f" % rss if rss else "?"))
        for how in ("template", "live-copy"):
            if r.get(how + "-cold"):
                cold, warm = sum(r[how + "-cold"][:2]), sum(r[how][:2])
                print("  %-7s %-9s without warm memory: total %6.2fs; with %d MiB: %.2fs "
                      "(%.2fx)" % (image, how, cold, r["warm_memory"], warm, warm / cold))
        rss = r["template"][2]
        if r.get("uncapped_rss") and r["boot"][2]:
            print("  %-7s booted without the translation-cache cap: idle RSS %.0f MiB "
                  "(%.2fx the capped)" % (image, r["uncapped_rss"],
                                          r["uncapped_rss"] / r["boot"][2]))
        if r.get("pooled_rss"):
            print("  %-7s idle pooled (paused) VM RSS %.0f MiB" % (image, r["pooled_rss"]))
        if rss:
            print("  %-7s idle VMs in 20 GiB: %d" % (image, int(20 * 1024 // rss)))
    for r in results.values():
        if "warm" in r:
            w, f = statistics.median(r["warm"]), statistics.median(r["floor"])
            print("ssh VM true on the warm control connection: median %.0f ms over %d; "
                  "lobby whoami %.0f ms; ratio %.2f" % (w * 1000, len(r["warm"]), f * 1000, w / f))


if __name__ == "__main__":
    main()
