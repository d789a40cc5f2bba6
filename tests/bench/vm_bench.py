"""What the VM benchmarks share: their own `warren serve` with VMs on (guests without
network) over the images in WARREN_TEST_IMAGES, a key of their own, the server's host key
pinned, and an OpenSSH `ssh` into the lobby that times each command. close() removes the
server and every file it made. Also the small helpers every benchmark uses (pct, free_port)."""
import base64
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import warren_harness as h  # noqa: E402

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")


def b64_file(path, source):
    """A guest shell command writing `source` to `path` (no quoting to get wrong)."""
    return "echo %s | base64 -d > %s" % (base64.b64encode(source.encode()).decode(), path)


def pct(values, p):
    """The p-th percentile of `values` (nearest rank)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def lat_text(lat):
    return "median %6.2f ms  p90 %6.2f ms" % (statistics.median(lat) * 1e3, pct(lat, 90) * 1e3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VmBench:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="warren-bench-")
        os.makedirs("/var/lib/warren-test", exist_ok=True)
        # Under qemu:///system QEMU runs as libvirt-qemu: VM files cannot live in /tmp.
        self.data = tempfile.mkdtemp(prefix="bench-", dir="/var/lib/warren-test")
        os.chmod(self.data, 0o711)
        self.server = None
        self.key = None
        self.known_hosts = os.path.join(self.tmp, "known_hosts")

    def start(self, extra_args=()):
        """Starts the server (with `extra_args` for `warren serve`); returns it."""
        self.key = h.Key(self.tmp, "bench")
        return self._launch(extra_args)

    def restart(self, extra_args=()):
        """Stops the server and starts it again over the same data (and key)."""
        self.server.stop()
        return self._launch(extra_args)

    def _launch(self, extra_args):
        self.server = h.Server(self.data, self.key, vms=True,
                               extra_args=["--images-dir", IMAGES, "--vm-egress", "none"] +
                               list(extra_args))
        self.server.start(120)
        with open(self.known_hosts, "w") as f:
            f.write("[127.0.0.1]:%d %s\n" % (self.server.port, self.server.host_public_key()))
        return self.server

    def ssh(self, *cmd):
        """Runs one lobby command; returns (seconds, stdout). Raises when it fails."""
        return self.ssh_as(self.key, *cmd)

    def ssh_as(self, key, *cmd):
        """ssh() with another user's key."""
        argv = ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-i", key.path, "-o", "UserKnownHostsFile=" + self.known_hosts,
                "-o", "StrictHostKeyChecking=yes", "-p", str(self.server.port),
                "lobby@127.0.0.1"] + list(cmd)
        t = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError("%s: %d %s" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
        return time.monotonic() - t, r.stdout

    def forward(self, vm, guest_port, probe_path, want):
        """`ssh -L` through warren to `vm`'s localhost:guest_port, once GET probe_path answers
        with `want`: (the local port, the ssh process, to kill when done)."""
        port = free_port()
        proc = subprocess.Popen(
            ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
             "-i", self.key.path, "-o", "UserKnownHostsFile=" + self.known_hosts,
             "-o", "StrictHostKeyChecking=yes", "-p", str(self.server.port), "-N",
             "-o", "ExitOnForwardFailure=yes",
             "-L", "127.0.0.1:%d:localhost:%d" % (port, guest_port), vm + "@127.0.0.1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run(["curl", "-s", "http://127.0.0.1:%d%s" % (port, probe_path)],
                               capture_output=True, text=True)
            if want in r.stdout:
                return port, proc
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("the ssh -L forward never answered")
            time.sleep(0.3)

    def close(self):
        if self.server is not None:
            self.server.stop()
        # A VM the bench failed to remove (it stopped half-way) would outlive its files.
        names = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                               capture_output=True, text=True, timeout=30).stdout.split()
        for name in names:
            xml = subprocess.run(["virsh", "-c", "qemu:///system", "dumpxml", name],
                                 capture_output=True, text=True, timeout=30).stdout
            if self.data + "/" in xml:
                for verb in ("destroy", "undefine"):
                    subprocess.run(["virsh", "-c", "qemu:///system", verb, name],
                                   capture_output=True, timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.data, ignore_errors=True)
