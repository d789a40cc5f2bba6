#!/usr/bin/python3
"""`new` from each host's own template against a boot, on this machine's host and on a remote
one, in one run (issue 18: templates per host).

Starts TwoHosts(templates=True) (two_hosts.py: the second-host fixture over qemu+ssh, or
qemu+tls with --tls, and `warren serve --vm-templates default --vm-image tiny`), waits until
the template keeper has made the default shape's template on both hosts, then, alternating
hosts and ways so load drifts hit all alike, --runs times each:
  - template: `new --host H` of the default shape (restored from H's template);
  - boot: `new --host H --memory 320M` (a shape without a template: booted);
each timed from the command to the first `ssh VM true` answered, the VM removed after.
Prints the medians, template/boot per host and remote/local per way. Everything it made is
removed. Usage: tests/bench/remote_new.py [--runs 5] [--tls]
"""
import argparse
import json
import statistics
import time

from two_hosts import TwoHosts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tls", action="store_true", help="reach the second host over qemu+tls")
    args = ap.parse_args()
    world = TwoHosts(tls=args.tls, templates=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            log = world.server.log()
            made = [line for line in log.splitlines() if "templates: made the template" in line]
            if any("on host second" in m for m in made) and any(
                    "on host local" in m for m in made):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("no templates on both hosts:\n" + log[-3000:])
            time.sleep(1)
        times = {(host, way): [] for host in ("local", "second") for way in ("template", "boot")}
        made_as = {}
        n = 0
        for run in range(args.runs):
            for host in ("local", "second"):
                for way in ("template", "boot"):
                    n += 1
                    name = "rn-%d" % n
                    world.cleanup.append(("rm", name))
                    extra = [] if way == "template" else ["--memory", "320M"]
                    t0 = time.monotonic()
                    out = json.loads(world.lobby("new", "--name", name, "--host", host,
                                                 "--json", *extra).stdout)
                    world.lobby("ssh", name, "true")
                    times[(host, way)].append(time.monotonic() - t0)
                    made_as[(host, way)] = out.get("made")
                    world.lobby("rm", name)
                    world.cleanup.remove(("rm", name))
        med = {k: statistics.median(v) for k, v in times.items()}
        print("remote_new: tiny, %d runs each, second host over %s (a netns on this machine)" %
              (args.runs, world.transport))
        for host in ("local", "second"):
            for way in ("template", "boot"):
                print("  %-6s %-8s (made=%s): median %.2f s  [%s]" % (
                    host, way, made_as[(host, way)], med[(host, way)],
                    ", ".join("%.2f" % t for t in times[(host, way)])))
            print("  %-6s template/boot: %.2f" % (host, med[(host, "template")] /
                                                  med[(host, "boot")]))
        for way in ("template", "boot"):
            print("  remote/local %-8s: %.2f" % (way, med[("second", way)] /
                                                 med[("local", way)]))
    finally:
        world.close()


if __name__ == "__main__":
    main()
