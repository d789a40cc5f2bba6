"""The two-host world the multi-host benchmarks share (multi_host.py, migrate.py).

TwoHosts() starts the second-host fixture (tests/integration/second_host.py: a libvirtd in
namespaces of its own), runs `warren isolate` there as an operator would, then `warren serve
--host local=qemu:///system --host second=URI --host-isolated second` (the pool off, templates
off unless `templates`, guests without network, tiny the default image) and one kept OpenSSH connection to its lobby (ControlMaster).
`lobby(*cmd)` runs a lobby command over that connection. close() removes everything it made,
also after a failure half-way (each `cleanup` lobby command first, e.g. an `rm`).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import second_host  # noqa: E402
import warren_harness as h  # noqa: E402

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")


class TwoHosts:
    def __init__(self, tls=False, templates=False):
        why = second_host.missing()
        if why:
            sys.exit("two hosts: " + why)
        self.tmp = tempfile.mkdtemp(prefix="warren-bench-")
        os.makedirs("/var/lib/warren-test", exist_ok=True)
        self.data = tempfile.mkdtemp(prefix="bench-", dir="/var/lib/warren-test")
        os.chmod(self.data, 0o711)
        self.key = h.Key(self.tmp, "bench")
        self.known_hosts = os.path.join(self.tmp, "known_hosts")
        self.server = None
        self.master = None
        self.kept = None
        self.cleanup = []  # lobby commands close() runs first
        self.far = second_host.SecondHost()
        try:
            self.uri = self.far.tls_uri if tls else self.far.uri
            self.transport = "qemu+tls" if tls else "qemu+ssh"
            self.far.run(h.WARREN_BIN, "isolate", "--data-dir", "/var/lib/warren")
            self.server = h.Server(self.data, self.key, vms=True, extra_args=[
                "--images-dir", IMAGES, "--vm-egress", "none", "--vm-image", "tiny",
                "--vm-templates", "default" if templates else "none",
                "--pool", "none", "--host", "local=qemu:///system", "--host",
                "second=" + self.uri, "--host-isolated", "second"]).start(120)
            with open(self.known_hosts, "w") as f:
                f.write("[127.0.0.1]:%d %s\n" % (self.server.port, self.server.host_public_key()))
            sock = os.path.join(self.tmp, "master.sock")
            self.master = subprocess.Popen(self.ssh_base() + [
                "-o", "ControlMaster=yes", "-o", "ControlPath=" + sock, "-N", "lobby@127.0.0.1"])
            for _ in range(100):
                if os.path.exists(sock):
                    break
                time.sleep(0.1)
            self.kept = self.ssh_base() + ["-o", "ControlPath=" + sock, "lobby@127.0.0.1"]
        except BaseException:
            self.close()
            raise

    def ssh_base(self):
        return ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-i", self.key.path, "-o", "UserKnownHostsFile=" + self.known_hosts, "-o",
                "StrictHostKeyChecking=yes", "-p", str(self.server.port)]

    def lobby(self, *cmd, timeout=1800, check=True):
        r = subprocess.run(self.kept + list(cmd), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise RuntimeError("%s: %d %s" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
        return r

    def sftp_args(self, name, batch):
        return ["sftp", "-F", "none", "-q", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-i", self.key.path, "-o", "UserKnownHostsFile=" + self.known_hosts, "-o",
                "StrictHostKeyChecking=yes", "-P", str(self.server.port), "-b", batch,
                name + "@127.0.0.1"]

    def close(self):
        if self.kept is not None:
            for cmd in self.cleanup:
                self.lobby(*cmd, timeout=300, check=False)
        if self.master is not None:
            self.master.terminate()
            self.master.wait(timeout=10)
        if self.server is not None:
            self.server.stop()
            os.remove(self.server.log_path)
        self.far.close()
        shutil.rmtree(self.data, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
