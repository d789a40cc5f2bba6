#!/usr/bin/python3
"""sftp throughput into a VM through warren (`sftp -P PORT NAME@HOST`) vs OpenSSH's sftp
straight to the guest's own sshd over the VM's control socket, in one run.

Starts its own `warren serve` (VMs on, guests without network), makes one VM, then puts and
gets a file of --mib MiB through warren. Then it stops warren (its VMs keep running: the
libvirt daemons outlive it), which frees the control socket (QEMU takes one client), and
repeats the transfers with `sftp -o ProxyCommand='socat - UNIX-CONNECT:…/control.sock'` as
dev with warren's control key: the same guest sshd and sftp-server, without warren in the
path. Prints MB/s for both and the ratio, checks every copy's sha256, and removes the VM.
Usage: tests/bench/sftp_throughput.py [--mib 64] [--image tiny]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import warren_harness as h  # noqa: E402

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")
VM = "bench-sftp"


def timed_sftp(base_args, batch_text, cwd):
    batch = os.path.join(cwd, "batch")
    with open(batch, "w") as f:
        f.write(batch_text)
    t = time.monotonic()
    # The destination stays last.
    r = subprocess.run(base_args[:-1] + ["-b", batch, base_args[-1]], capture_output=True,
                       text=True, cwd=cwd, timeout=1800)
    took = time.monotonic() - t
    if r.returncode != 0:
        raise RuntimeError("sftp failed: %s" % r.stderr[-600:])
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--image", default="tiny")
    args = ap.parse_args()
    size = args.mib << 20

    tmp = tempfile.mkdtemp(prefix="warren-bench-")
    os.makedirs("/var/lib/warren-test", exist_ok=True)
    data = tempfile.mkdtemp(prefix="bench-", dir="/var/lib/warren-test")
    os.chmod(data, 0o711)
    server = None
    key = h.Key(tmp, "bench")
    kh = os.path.join(tmp, "known_hosts")

    logs = []

    def start():
        s = h.Server(data, key, vms=True,
                     extra_args=["--images-dir", IMAGES, "--vm-egress", "none"]).start(120)
        logs.append(s.log_path)
        with open(kh, "w") as f:
            f.write("[127.0.0.1]:%d %s\n" % (s.port, s.host_public_key()))
        return s

    def lobby(s, *cmd):
        argv = ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-i", key.path, "-o", "UserKnownHostsFile=" + kh,
                "-o", "StrictHostKeyChecking=yes", "-p", str(s.port), "lobby@127.0.0.1"]
        r = subprocess.run(argv + list(cmd), capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError("%s: %d %s" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
        return r.stdout

    try:
        src = os.path.join(tmp, "src.bin")
        with open(src, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(1 << 20))
        want = h.file_sha256(src)

        server = start()
        lobby(server, "new", "--image", args.image, "--name", VM, "--cpu", "1", "--memory",
              "1G")
        vm_id = lobby(server, "stat", VM, "--json").split('"id": "')[1].split('"')[0]
        common = ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-q"]

        def measure(base, label):
            for f in ("down.bin",):
                if os.path.exists(os.path.join(tmp, f)):
                    os.remove(os.path.join(tmp, f))
            up = timed_sftp(base, "put src.bin up.bin\n", tmp)
            down = timed_sftp(base, "get up.bin down.bin\n", tmp)
            if h.file_sha256(os.path.join(tmp, "down.bin")) != want:
                raise RuntimeError(label + ": the file came back different")
            return size / up / 1e6, size / down / 1e6

        via_warren = ["sftp", "-F", "none"] + common + [
            "-i", key.path, "-o", "UserKnownHostsFile=" + kh, "-o", "StrictHostKeyChecking=yes",
            "-P", str(server.port), VM + "@127.0.0.1"]
        # One small transfer first, so the control connection is up (as it is in use).
        timed_sftp(via_warren, "ls\n", tmp)
        w_up, w_down = measure(via_warren, "warren")

        # Direct: stop warren so the control socket is free, then talk to the guest's sshd.
        server.stop()
        server = None
        time.sleep(2)  # the guest's launcher serves the next client once the last is gone
        sock = os.path.join(data, "vms", vm_id, "control.sock")
        direct = ["sftp", "-F", "none"] + common + [
            "-i", os.path.join(data, "control_ed25519"),
            # The socket leads only to this VM: its host key needs no pinning for a bench.
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "ProxyCommand=socat - UNIX-CONNECT:" + sock, "dev@" + VM]
        d_up, d_down = measure(direct, "direct")

        print("sftp of %d MiB into a %s VM (TCG), one run" % (args.mib, args.image))
        print("%-30s %8s %8s" % ("", "put MB/s", "get MB/s"))
        print("%-30s %8.1f %8.1f" % ("through warren (NAME@HOST)", w_up, w_down))
        print("%-30s %8.1f %8.1f" % ("guest sshd over control.sock", d_up, d_down))
        print("%-30s %8.2f %8.2f" % ("ratio warren / direct", w_up / d_up, w_down / d_down))
    finally:
        time.sleep(2)
        try:
            if server is None:
                server = start()
            lobby(server, "rm", VM)
        except Exception as e:  # noqa: BLE001
            print("cleanup: " + str(e), file=sys.stderr)
        if server is not None:
            server.stop()
        shutil.rmtree(data, ignore_errors=True)
        for log in logs:
            os.remove(log)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
