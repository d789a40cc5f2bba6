#!/usr/bin/python3
"""Sessions per second: `ssh … help` against warren vs `ssh … true` against Debian's sshd.

Both servers run on loopback in this run, with the same client, key and key exchange; rounds
alternate between them so load on the machine hits both alike. Prints a table and the ratio
warren/sshd. Usage: tests/bench/ssh_sessions.py [--sessions N] [--parallel P] [--rounds R]
"""
import argparse
import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import vm_bench  # noqa: E402
import warren_harness  # noqa: E402


BENCH_USER = "warren-bench"


def ensure_bench_user():
    """A system user whose shell is /bin/sh, so `ssh … true` measures sshd, not a login
    shell's rc files (root's bash here runs pyenv on every `bash -c`)."""
    if subprocess.run(["id", BENCH_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/bin/sh", BENCH_USER], check=True)
    # "!" (locked) makes sshd without PAM refuse even key logins; "*" only forbids passwords.
    subprocess.run(["usermod", "-p", "*", BENCH_USER], check=True)


class Sshd:
    """Debian's sshd on loopback with its own host key; BENCH_USER logs in with our key."""

    def __init__(self, tmp, client_pub):
        ensure_bench_user()
        self.dir = os.path.join(tmp, "sshd")
        os.makedirs(self.dir)
        os.chmod(tmp, 0o755)  # sshd reads authorized_keys as BENCH_USER
        os.makedirs("/run/sshd", exist_ok=True)
        self.host_key = os.path.join(self.dir, "host_ed25519")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.host_key],
                       check=True)
        auth = os.path.join(self.dir, "authorized_keys")
        shutil.copy(client_pub, auth)
        self.port = vm_bench.free_port()
        self.proc = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null",
             "-o", "ListenAddress=127.0.0.1", "-o", f"Port={self.port}",
             "-o", f"HostKey={self.host_key}", "-o", "UsePAM=no",
             "-o", f"AuthorizedKeysFile={auth}", "-o", "StrictModes=no",
             "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
             "-o", "PermitRootLogin=prohibit-password", "-o", "PidFile=none",
             "-o", "MaxStartups=200", "-o", "LogLevel=ERROR"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        with open(self.host_key + ".pub") as f:
            key = " ".join(f.read().split()[:2])
        with open(self.known_hosts, "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {key}\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def ssh_argv(port, key, known_hosts, user, command):
    # One key exchange for both servers: libssh 0.10 has no sntrup761, which OpenSSH would
    # otherwise pick for sshd, so an unpinned run would compare kex algorithms, not servers.
    return ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "KexAlgorithms=curve25519-sha256",
            "-i", key, "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-p", str(port), f"{user}@127.0.0.1", command]


def run_sessions(argv, sessions, parallel, latencies=None):
    """Runs `sessions` ssh processes, `parallel` at a time; returns sessions per second and
    appends each session's wall time (s) to `latencies`."""
    def one(_):
        start = time.monotonic()
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError(f"ssh failed ({r.returncode}): {r.stderr.decode()[-300:]}")
        return time.monotonic() - start
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        times = list(pool.map(one, range(sessions)))
    if latencies is not None:
        latencies.extend(times)
    return sessions / (time.monotonic() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="warren-bench-")
    server = sshd = None
    try:
        key = warren_harness.Key(tmp, "bench")
        server = warren_harness.Server(os.path.join(tmp, "data"), admin_key=key).start()
        warren_kh = os.path.join(tmp, "warren_known_hosts")
        with open(warren_kh, "w") as f:
            f.write(f"[127.0.0.1]:{server.port} {server.host_public_key()}\n")
        sshd = Sshd(tmp, key.path + ".pub")
        targets = {
            "warren help": ssh_argv(server.port, key.path, warren_kh, "lobby", "help"),
            "sshd true": ssh_argv(sshd.port, key.path, sshd.known_hosts, BENCH_USER, "true"),
        }
        for argv in targets.values():  # warm up and check both answer
            run_sessions(argv, 3, 1)
        results = {name: [] for name in targets}
        latencies = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, argv in targets.items():
                results[name].append(
                    run_sessions(argv, args.sessions, args.parallel, latencies[name]))
        print(f"ssh sessions/s, {args.sessions} sessions x {args.rounds} rounds, "
              f"{args.parallel} at a time, loopback, {os.cpu_count()} cores")
        best = {}
        for name, rates in results.items():
            best[name] = max(rates)
            print(f"  {name:12s} best {best[name]:7.1f}/s   rounds: "
                  + " ".join(f"{r:.1f}" for r in rates))
        print(f"  ratio warren/sshd: {best['warren help'] / best['sshd true']:.2f}")
        print("session wall time, ms (one ssh process: connect, key exchange, auth, command)")
        for name, times in latencies.items():
            print(f"  {name:12s} p10 {vm_bench.pct(times, 10) * 1000:6.1f}   "
                  f"p50 {vm_bench.pct(times, 50) * 1000:6.1f}   "
                  f"p90 {vm_bench.pct(times, 90) * 1000:6.1f}   "
                  f"max {max(times) * 1000:6.1f}")
        p50 = {name: vm_bench.pct(times, 50) for name, times in latencies.items()}
        print(f"  p50 ratio warren/sshd: {p50['warren help'] / p50['sshd true']:.2f}")
    finally:
        if sshd:
            sshd.stop()
        if server:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
