#!/usr/bin/python3
"""Latency of `ls` through POST /exec vs the same command over SSH, against one warren.

/exec: one keep-alive HTTP connection (http.client), as an agent's HTTP client keeps one;
SSH: OpenSSH `ssh -p PORT lobby@127.0.0.1 ls`, a new connection per command as a person
types it. Rounds alternate between the two so load on the machine hits both alike. Prints
the medians and the ratio ssh/exec. The server runs without VMs (`ls` reads the store).
Usage: tests/bench/exec_latency.py [--runs N] [--rounds R]
"""
import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import vm_bench  # noqa: E402
import warren_harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20, help="commands per surface per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="warren-bench-exec-")
    server = None
    try:
        admin = warren_harness.Key(tmp, "admin")
        server = warren_harness.Server(os.path.join(tmp, "data"), admin,
                                       ["--exec-rate", "100000", "--exec-burst", "100000"])
        server.start()
        known_hosts = os.path.join(tmp, "known_hosts")
        with open(known_hosts, "w") as f:
            f.write("[127.0.0.1]:%d %s\n" % (server.port, server.host_public_key()))
        ssh = ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
               "-i", admin.path, "-o", "UserKnownHostsFile=" + known_hosts,
               "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
               "-p", str(server.port), "lobby@127.0.0.1"]
        token = subprocess.run(ssh + ["ssh-key", "generate-api-key", "--label", "bench"],
                               check=True, capture_output=True, text=True).stdout.strip()
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)

        def exec_ls():
            conn.request("POST", "/exec", body="ls",
                         headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError("/exec ls answered %d" % r.status)

        def ssh_ls():
            subprocess.run(ssh + ["ls"], check=True, capture_output=True)

        exec_ls()  # warm both paths once
        ssh_ls()
        times = {"exec": [], "ssh": []}
        for _ in range(args.rounds):
            for name, fn in (("exec", exec_ls), ("ssh", ssh_ls)):
                for _ in range(args.runs):
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
        conn.close()

        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        p90 = {k: vm_bench.pct(v, 90) * 1000 for k, v in times.items()}
        print("%-34s %10s %10s %6s" % ("surface", "median ms", "p90 ms", "n"))
        print("%-34s %10.2f %10.2f %6d" % ("POST /exec ls (keep-alive)", med["exec"], p90["exec"],
                                           len(times["exec"])))
        print("%-34s %10.2f %10.2f %6d" % ("ssh HOST ls (new connection)", med["ssh"], p90["ssh"],
                                           len(times["ssh"])))
        print("ratio ssh/exec (median): %.1fx" % (med["ssh"] / med["exec"]))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
