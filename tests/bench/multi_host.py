#!/usr/bin/python3
"""A VM on a remote libvirt host against one on this machine, in one run (issue 18).

Starts the second-host fixture (tests/integration/second_host.py: a libvirtd in namespaces of
its own, reached over qemu+ssh, or qemu+tls with --tls), then `warren serve --host
local=qemu:///system --host second=URI`, and one tiny VM on each host. Then, alternating
between the two so load drifts hit both alike:
  - `ssh VM true` through the lobby over one kept OpenSSH connection (ControlMaster): the
    command's round trip through warren's control connection to the guest — over the VM's
    unix socket locally, over libvirt's channel stream remotely;
  - sftp of --mib MiB up and down through a NAME@HOST login, sha256-checked.
Prints p50/p90 latency, MB/s and the remote/local ratios. Everything it made is removed.
Usage: tests/bench/multi_host.py [--runs 30] [--mib 16] [--tls]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import vm_bench
from two_hosts import TwoHosts, h


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--tls", action="store_true", help="reach the second host over qemu+tls")
    args = ap.parse_args()
    world = TwoHosts(tls=args.tls)
    tmp = world.tmp

    def lobby(*cmd, timeout=600):
        return world.lobby(*cmd, timeout=timeout).stdout

    try:
        vms = {"local": "bench-near", "second": "bench-far"}
        for host, name in vms.items():
            world.cleanup.append(("rm", name))
            t = time.monotonic()
            lobby("new", "--image", "tiny", "--name", name, "--host", host, "--cpu", "1",
                  "--memory", "512M", "--disk", "1G")
            print("[new on %s: %.1f s]" % (host, time.monotonic() - t), flush=True)
            stat = json.loads(lobby("stat", name, "--json"))
            assert stat["host"] == host, stat
            lobby("ssh", name, "true")  # the control connection up, as in use

        lat = {h_: [] for h_ in vms}
        for _ in range(args.runs):
            for host, name in vms.items():
                t = time.monotonic()
                lobby("ssh", name, "true")
                lat[host].append((time.monotonic() - t) * 1000)

        src = os.path.join(tmp, "src.bin")
        with open(src, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(1 << 20))
        want = h.file_sha256(src)
        size = args.mib << 20

        def sftp(name, batch_text):
            batch = os.path.join(tmp, "batch")
            with open(batch, "w") as f:
                f.write(batch_text)
            argv = world.sftp_args(name, batch)
            t = time.monotonic()
            r = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=1800)
            if r.returncode != 0:
                raise RuntimeError("sftp: " + r.stderr[-400:])
            return time.monotonic() - t

        mbs = {}
        for host, name in vms.items():
            sftp(name, "ls\n")
            down = os.path.join(tmp, "down.bin")
            if os.path.exists(down):
                os.remove(down)
            up = sftp(name, "put src.bin up.bin\n")
            get = sftp(name, "get up.bin down.bin\n")
            if h.file_sha256(down) != want:
                raise RuntimeError(host + ": the file came back different")
            mbs[host] = (size / up / 1e6, size / get / 1e6)

        transport = world.transport
        print("tiny VMs (TCG) on this machine's libvirt and on a second libvirtd over %s "
              "(the fixture: another netns on this machine), one run" % transport)
        print("%-28s %10s %10s %10s %10s" % ("", "true p50", "true p90", "put MB/s", "get MB/s"))
        for host in vms:
            print("%-28s %8.1fms %8.1fms %10.2f %10.2f" % (
                host, statistics.median(lat[host]), vm_bench.pct(lat[host], 90), mbs[host][0],
                mbs[host][1]))
        print("%-28s %10.2f %10.2f %10.2f %10.2f" % (
            "ratio second / local", statistics.median(lat["second"]) /
            statistics.median(lat["local"]),
            vm_bench.pct(lat["second"], 90) / vm_bench.pct(lat["local"], 90),
            mbs["second"][0] / mbs["local"][0], mbs["second"][1] / mbs["local"][1]))
    finally:
        world.close()


if __name__ == "__main__":
    main()
