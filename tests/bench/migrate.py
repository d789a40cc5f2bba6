#!/usr/bin/python3
"""A live migration's downtime and total time, and a cold one's, in one run (issue 18).

Starts the second-host fixture (tests/integration/second_host.py: a libvirtd in namespaces of
its own, qemu+ssh, or qemu+tls with --tls) and `warren serve --host local=qemu:///system
--host second=URI`, makes a tiny VM on the local host with a --disk GiB disk and writes --mib
MiB of random data into it (dd, synced), then:
  - `migrate VM second` while a probe loop runs `ssh VM true` through the lobby over one kept
    OpenSSH connection: the longest gap between two answers is the downtime a user sees
    (the control connection is dialled again on the new host; its reconnect is in it);
    warren's own downtime_ms (libvirt's stop-and-copy, then the last overlay's copy and the
    resume) and total_ms are printed beside it;
  - stop, `migrate VM local` (cold: the layers through the storage API), start;
  - the data written read back (sha256 in the guest) after each move;
  - baselines in the same run: cp of a file of the disk's size on this machine
    (`cp` of a fresh --mib MiB file, synced) and a `virsh vol-upload` of it to the second host
    (the storage API's own rate, which the disk copy rides).
Everything it made is removed. Usage: tests/bench/migrate.py [--disk 2] [--mib 200] [--tls]
"""
import argparse
import json
import os
import subprocess
import threading
import time

from two_hosts import TwoHosts, second_host


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--disk", type=int, default=2, help="the VM's disk, GiB")
    ap.add_argument("--mib", type=int, default=200, help="MiB written into it before the move")
    ap.add_argument("--memory", default="512M")
    ap.add_argument("--tls", action="store_true", help="reach the second host over qemu+tls")
    args = ap.parse_args()
    world = TwoHosts(tls=args.tls)
    name = "bench-mover"
    lobby, data, uri = world.lobby, world.data, world.uri
    try:
        world.cleanup.append(("rm", name))  # also when the run fails half-way
        lobby("new", "--image", "tiny", "--name", name, "--host", "local", "--cpu", "1",
              "--memory", args.memory, "--disk", "%dG" % args.disk)

        def run_long(cmd):
            """`ssh VM CMD`, waited for to the end (past its wait it is a job)."""
            out = lobby("ssh", "--wait-seconds", "45", name, cmd).stdout
            while True:
                jobs = [j for j in json.loads(lobby("jobs", "--json").stdout)["jobs"]
                        if not j["finished"]]
                if not jobs:
                    return out
                out += lobby("wait", jobs[0]["job"], "--wait-seconds", "45",
                             check=False).stdout

        def blob_sum():
            return run_long("sha256sum $HOME/blob").split()[0]

        run_long("'dd if=/dev/urandom of=$HOME/blob bs=1M count=%d 2>/dev/null; sync'" %
                 args.mib)
        written = blob_sum()

        # The probe: ssh VM true, back to back, each answer's time kept.
        answers, stop = [], threading.Event()

        def probe():
            while not stop.is_set():
                r = lobby("ssh", name, "true", timeout=300, check=False)
                if r.returncode == 0:
                    answers.append(time.monotonic())

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        time.sleep(3)
        t0 = time.monotonic()
        live = json.loads(lobby("migrate", name, "second", "--json").stdout)
        t1 = time.monotonic()
        time.sleep(5)
        stop.set()
        t.join(timeout=300)
        during = [a for a in answers if a >= t0 - 1]
        gaps = [b - a for a, b in zip(during, during[1:])]
        before = [b - a for a, b in zip(answers, answers[1:]) if b < t0]
        seen_gap = max(gaps) if gaps else float("nan")
        typical = sorted(before)[len(before) // 2] if before else float("nan")

        after_live = blob_sum()
        lobby("stop", name)
        cold = json.loads(lobby("migrate", name, "local", "--json").stdout)
        lobby("start", name)
        deadline = time.monotonic() + 300
        while lobby("ssh", name, "true", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the VM moved cold did not come back")
            time.sleep(2)
        after_cold = blob_sum()
        if not written == after_live == after_cold:
            raise RuntimeError("the data changed: %s %s %s" % (written, after_live, after_cold))

        # Baselines: cp of the data on this machine, and the storage API's upload rate.
        blob = os.path.join(data, "blob.bin")
        with open(blob, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(1 << 20))
        c0 = time.monotonic()
        subprocess.run(["cp", blob, blob + ".copy"], check=True)
        subprocess.run(["sync"], check=True)
        cp_s = time.monotonic() - c0
        second_host.ensure_pool(uri)
        u0 = time.monotonic()
        second_host.upload(uri, blob, "bench-blob.bin")
        up_s = time.monotonic() - u0
        second_host.virsh(uri, "vol-delete", "--pool", second_host.POOL, "bench-blob.bin",
                          check=False)

        mib = args.mib
        transport = world.transport
        print("migrate: tiny VM (TCG, %s memory, %d GiB disk, %d MiB written), local -> second "
              "over %s (the fixture: another netns on this machine), one run" %
              (args.memory, args.disk, mib, transport))
        print("  live: total %.1f s (command %.1f s); warren's downtime %d ms; "
              "disk copy %.1f s for %.0f MiB; memory sent %s MiB" % (
                  live["total_ms"] / 1000, t1 - t0, live.get("downtime_ms", -1),
                  live["disk_ms"] / 1000, live["disk_bytes"] / 2**20,
                  "%.0f" % (live["memory_bytes"] / 2**20) if "memory_bytes" in live else "?"))
        print("  live: longest gap between answers of `ssh VM true` %.1f s (typical %.2f s "
              "before the move; %d answers during it)" % (seen_gap, typical, len(during)))
        print("  cold (second -> local): total %.1f s; disk copy %.1f s for %.0f MiB" % (
            cold["total_ms"] / 1000, cold["disk_ms"] / 1000, cold["disk_bytes"] / 2**20))
        print("  the %d MiB written read back the same (sha256) after each move" % mib)
        print("  baseline: cp of %d MiB here %.2f s; vol-upload of it to second %.1f s "
              "(%.1f MB/s)" % (mib, cp_s, up_s, mib * 2**20 / up_s / 1e6))
    finally:
        world.close()


if __name__ == "__main__":
    main()
