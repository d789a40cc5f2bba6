#!/usr/bin/python3
"""VMs end to end on real libvirt + QEMU (TCG), driven through the SSH lobby with OpenSSH.

One tiny VM walks the whole life: new -> a command's stdout, stderr and exit status -> a
stdin round trip -> a job that outlives its wait and is read back after a warren restart ->
kill of a whole process tree -> stop/start keeps a file -> rm leaves no domain, disk or
record. Others kill warren with SIGKILL in the middle of `new` and check the restart cleans
up, and take a guest's sshd away for good. Those guests get no network device
(`--vm-egress none`): they reach nothing at all, not even the host's loopback.

A second server (`--vm-egress all`, user-mode NAT) proves outbound network from the tiny
image and boots the default Debian image. Its guests are sent only to an HTTP listener on a
TEST-NET address in a network namespace the test makes (outside_net.py); a loopback
listener of the test's own, which QEMU's gateway 10.0.2.2 leads to, stays unreached: the
host's isolation rules close it (test_vm_isolation.py tries every other way in).

Needs root, libvirt and QEMU, and the images from packaging/images (WARREN_TEST_IMAGES,
default /var/lib/warren-test/images); skips, saying why, when they are missing (fails under CI).
"""
import glob
import hashlib
import http.server
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import outside_net
import warren_harness as h

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")
# serve --guest-reach-timeout for the guest tests: how long a command waits for a booting
# guest's runner. Two guest lanes, the niced sanitizer builds and a restart's boot share 2
# cores in CI (tests/CMakeLists.txt): 15 s was once too short for a tiny guest's restart.
GUEST_REACH_TIMEOUT = "60"
# serve --vm-ready-timeout: how long `new` (and a copy's boot) waits for the guest to answer
# before it removes the VM. The product's 180 s fits a machine doing its own work; beside
# another guest lane and the clang builds a debian guest's first boot has come close.
VM_READY_TIMEOUT = "360"
# Under qemu:///system QEMU runs as libvirt-qemu: VM files cannot live in a 0700 temp dir.
DATA_PARENT = os.environ.get("WARREN_TEST_DATA_DIR", "/var/lib/warren-test")


def have_image(name):
    return bool(glob.glob(os.path.join(IMAGES, name + "@*", "rootfs.qcow2")))


# virsh is fine in a test: the product never uses it.
VIRSH = ["virsh", "-c", "qemu:///system"]


def domains():
    """Names of every libvirt domain."""
    out = subprocess.run(VIRSH + ["list", "--all", "--name"],
                         capture_output=True, text=True, timeout=30)
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


def domains_of(data_dir):
    """Names of the domains whose files live in `data_dir`: one server's, as warren itself
    tells them apart (guest tests run two at a time, each server naming its domains
    warren-ID)."""
    out = set()
    for name in domains():
        xml = subprocess.run(VIRSH + ["dumpxml", "--inactive", name], capture_output=True,
                             text=True, timeout=30).stdout
        if data_dir + "/" in xml:
            out.add(name)
    return out


def remove_domains_of(data_dir):
    """Destroys and undefines every domain whose files live in `data_dir`: a test whose server
    died or was killed must not leave VMs that the next test would count as its own."""
    for name in domains_of(data_dir):
        subprocess.run(VIRSH + ["destroy", name], capture_output=True, timeout=60)
        subprocess.run(VIRSH + ["undefine", name, "--managed-save", "--snapshots-metadata"],
                       capture_output=True, timeout=60)


class LoopbackListener:
    """An HTTP server on 127.0.0.1 port 0 that answers every GET with a random token and
    counts the requests: what a guest reaches through QEMU's gateway (10.0.2.2:port)."""

    def __init__(self):
        self.token = os.urandom(8).hex()
        self.requests = 0
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                listener.requests += 1
                body = listener.token.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self):
        return "http://10.0.2.2:%d/" % self.port

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def http_get(listener, tries):
    """A guest shell command: GET / from the listener through QEMU's gateway with busybox nc
    (the tiny image's busybox wget crashes), retried once a second."""
    return ("i=0; until printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 10.0.2.2 %d; do "
            "i=$((i+1)); [ $i -lt %d ] || exit 1; sleep 1; done" % (listener.port, tries))


@unittest.skipUnless(os.geteuid() == 0, "needs root for libvirt's system daemon")
@unittest.skipUnless(shutil.which("virsh") and have_image("tiny"),
                     "needs libvirt and the tiny image in " + IMAGES)
class VmTestCase(h.LobbyTestCase):
    """One warren server with VMs for the class; EGRESS says what its guests may reach."""
    EGRESS = "none"
    EGRESS_ALLOW = []  # serve --vm-egress-allow ranges
    SERVE_ARGS = []  # more serve flags

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="warren-it-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        os.makedirs(DATA_PARENT, exist_ok=True)
        cls.data = tempfile.mkdtemp(prefix="e2e-", dir=DATA_PARENT)
        os.chmod(cls.data, 0o711)
        cls.addClassCleanup(shutil.rmtree, cls.data, ignore_errors=True)
        cls.addClassCleanup(remove_domains_of, cls.data)  # after the server stopped
        # warren keeps its isolation chain while any domain of the host runs (other tests'
        # may): the test removes it once its server is gone.
        cls.addClassCleanup(outside_net.remove_chain, cls.data)
        cls.keys = {"admin": h.Key(cls.tmp, "admin")}
        cls.admin = cls.keys["admin"]
        cls.server = cls.start_vm_server()

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", cls.EGRESS,
                                      "--guest-reach-timeout", GUEST_REACH_TIMEOUT,
                                      "--vm-ready-timeout", VM_READY_TIMEOUT] +
                          [a for r in cls.EGRESS_ALLOW for a in ("--vm-egress-allow", r)] +
                          cls.SERVE_ARGS)
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    @classmethod
    def restart_server(cls, sig=signal.SIGTERM):
        if sig == signal.SIGTERM:
            cls.server.stop()
        else:
            cls.server.proc.send_signal(sig)
            cls.server.proc.wait(timeout=10)
        cls.server = cls.start_vm_server()

    @classmethod
    def run_cls(cls, key, *command, timeout=120):
        """A lobby command from class set-up (LobbyTestCase.ssh needs an instance)."""
        return subprocess.run(cls.ssh_args(cls, key, *command), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def vm(self, *command, **kwargs):
        kwargs.setdefault("timeout", 300)
        return self.ssh(self.admin, *command, **kwargs)

    def vm_ok(self, *command, **kwargs):
        kwargs.setdefault("timeout", 300)
        return self.ssh_ok(self.admin, *command, **kwargs)

    def assert_gone(self, name, vm_id):
        self.assertNotIn(name, self.vm_ok("ls").stdout)
        self.assertFalse([d for d in domains() if d.endswith(vm_id)], domains())
        self.assertFalse(os.path.exists(os.path.join(self.data, "vms", vm_id)))

    def remove_on_exit(self, name):
        """Removes the VM when the test ends, also when it fails half-way."""
        self.addCleanup(lambda: self.vm("rm", name))

    def vm_id(self, name):
        return self.ssh_json(self.admin, "stat", name)["id"]

    def listener(self):
        listener = LoopbackListener()
        self.addCleanup(listener.close)
        return listener


class VmEndToEndTest(VmTestCase):
    # The reach timeout as set, whatever CI's load: test_guest_whose_sshd_is_gone times it
    # (the host's load stretching it is guest_local_test's and the soak's).
    SERVE_ARGS = ["--guest-slowdown-max", "1"]

    def test_tiny_vm_whole_life(self):
        self.remove_on_exit("e2e-tiny")
        created = self.ssh_json(self.admin, "new", "--image", "tiny", "--name", "e2e-tiny",
                                "--cpu", "1", "--memory", "512M", timeout=300)
        self.assertEqual(created["name"], "e2e-tiny")
        vm_id = self.vm_id("e2e-tiny")
        self.assertTrue([d for d in domains() if d.endswith(vm_id)])

        # Output, stderr apart, exit status propagated.
        r = self.vm("ssh", "e2e-tiny", "echo hi; echo err >&2; exit 3")
        self.assertEqual((r.stdout, r.stderr, r.returncode), ("hi\n", "err\n", 3))

        # A client that never closes its stdin (an interactive terminal) still gets the end.
        client = self.paramiko_client(self.admin)
        self.addCleanup(client.close)
        chan = client.get_transport().open_session()
        chan.settimeout(30)
        chan.exec_command("ssh e2e-tiny echo open-stdin")
        out = b""
        while True:
            data = chan.recv(4096)
            if not data:
                break
            out += data
        self.assertEqual((out, chan.recv_exit_status()), (b"open-stdin\n", 0))

        # Closing the SSH channel before the command ends stops its whole process tree.
        chan = client.get_transport().open_session()
        chan.exec_command("ssh e2e-tiny 'sleep 301 & setsid sleep 303 & sleep 302'")
        deadline = time.monotonic() + 20
        while "sleep 302" not in self.vm_ok("ssh", "e2e-tiny", "ps").stdout:
            self.assertLess(time.monotonic(), deadline, "the command never started")
            time.sleep(0.3)
        chan.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ps = self.vm_ok("ssh", "e2e-tiny", "ps").stdout
            if not any(("sleep %d" % n) in ps for n in (301, 302, 303)):
                break
            time.sleep(0.5)
        for n in (301, 302, 303):
            self.assertNotIn("sleep %d" % n, ps)

        # stdin streams in; 1 MiB of random bytes comes back as the same checksum.
        blob = os.urandom(1 << 20)
        r = subprocess.run(self.ssh_args(self.admin, "ssh", "e2e-tiny", "sha256sum"),
                           input=blob, capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[0].decode(), hashlib.sha256(blob).hexdigest())

        # A command still running after --wait-seconds becomes a job...
        r = self.vm("ssh", "--wait-seconds", "1", "e2e-tiny",
                    "echo started; sleep 4; echo finished; exit 4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("started", r.stdout)
        job = json.loads(self.vm_ok("jobs", "--json").stdout)["jobs"][0]
        self.assertFalse(job["finished"])
        self.assertTrue(job["job"].startswith("e2e-tiny/"))
        # ...which outlives a warren restart and is read back with wait.
        self.restart_server()
        r = self.vm("wait", job["job"], "--wait-seconds", "30")
        self.assertIn("finished", r.stdout)
        self.assertNotIn("started", r.stdout)  # only output not yet delivered
        self.assertEqual(r.returncode, 4)

        # kill stops the command's whole process tree.
        # Also what left the process group: setsid, and a double-forked daemon whose parent
        # is gone (the runner's monitor is a child subreaper, so it is still below it).
        r = self.vm_ok("ssh", "--wait-seconds", "1", "e2e-tiny", shlex.quote(
            "sleep 101 & setsid sleep 103 & (setsid sh -c 'sleep 104 &' &); sleep 102"))
        running = [j for j in self.ssh_json(self.admin, "jobs")["jobs"] if not j["finished"]]
        self.assertEqual(len(running), 1)
        self.assertIn("sleep 104", self.vm_ok("ssh", "e2e-tiny", "ps").stdout)
        self.vm_ok("kill", running[0]["job"])
        ps = self.vm_ok("ssh", "e2e-tiny", "ps").stdout
        for n in (101, 102, 103, 104):
            self.assertNotIn("sleep %d" % n, ps)

        # No network device: the guest reaches nothing, not even the host's loopback.
        listener = self.listener()
        r = self.vm("ssh", "e2e-tiny", shlex.quote(http_get(listener, tries=1)))
        self.assert_status(r, "command_failed")
        self.assertIn("unreachable", r.stderr)
        self.assertEqual(listener.requests, 0)

        # The disk persists across stop/start.
        self.vm_ok("ssh", "e2e-tiny", "echo kept > ~/file; sync")
        self.vm_ok("stop", "e2e-tiny")
        self.assertEqual(self.ssh_json(self.admin, "stat", "e2e-tiny")["state"], "stopped")
        self.vm_ok("start", "e2e-tiny")
        self.assertEqual(self.vm_ok("ssh", "e2e-tiny", "cat ~/file").stdout, "kept\n")

        # rm leaves nothing behind.
        gone = self.ssh_json(self.admin, "rm", "e2e-tiny")
        self.assertEqual(gone, {"deleted": ["e2e-tiny"], "failed": []})
        self.assert_gone("e2e-tiny", vm_id)

    def test_bad_input_gets_clear_errors(self):
        self.assert_status(self.vm("ssh", "no-such-vm", "true"), "not_found")
        self.assert_status(self.vm("new", "--name", "Bad_Name"), "invalid_argument")
        self.assert_status(self.vm("new", "--name", "web-p8080"), "invalid_argument")
        self.assert_status(self.vm("new", "--image", "no-such-image"), "not_found")
        self.assert_status(self.vm("new", "--memory", "1T", "--image", "tiny"), "invalid_argument")
        # More than the host has (24 GiB machines, tens of GiB of free disk): a clear refusal.
        r = self.vm("new", "--image", "tiny", "--name", "too-big", "--memory", "60G")
        self.assert_status(r, "limit_exceeded")
        self.assertIn("not enough memory on the host", r.stderr)
        r = self.vm("new", "--image", "tiny", "--name", "too-big", "--disk", "1000G")
        self.assert_status(r, "limit_exceeded")
        self.assertIn("not enough disk on the host", r.stderr)
        listing = self.vm_ok("ls").stdout
        self.assertNotIn("Bad_Name", listing)
        self.assertNotIn("too-big", listing)

    def test_sigkill_during_new_leaves_nothing(self):
        self.remove_on_exit("e2e-killed")
        proc = subprocess.Popen(
            self.ssh_args(self.admin, "new", "--image", "tiny", "--name", "e2e-killed",
                          "--cpu", "1", "--memory", "512M"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Kill warren once the domain exists, while new still waits for the guest.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if domains_of(self.data) and \
                        os.path.isdir(os.path.join(self.data, "vms")) and \
                        os.listdir(os.path.join(self.data, "vms")):
                    break
                time.sleep(0.1)
            self.restart_server(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        self.assertNotIn("e2e-killed", self.vm_ok("ls").stdout)
        self.assertFalse(os.listdir(os.path.join(self.data, "vms")), self.server.log_tail(40))
        # The name is free again.
        self.vm_ok("new", "--image", "tiny", "--name", "e2e-killed", "--cpu", "1",
                   "--memory", "512M")
        vm_id = self.vm_id("e2e-killed")
        self.vm_ok("rm", "e2e-killed")
        self.assert_gone("e2e-killed", vm_id)

    def test_guest_whose_sshd_is_gone(self):
        self.remove_on_exit("e2e-nosshd")
        self.vm_ok("new", "--image", "tiny", "--name", "e2e-nosshd", "--cpu", "1",
                   "--memory", "512M")
        # The guest's user has sudo: it can take the control sshd away for good (init keeps
        # respawning the launcher, which finds no sshd). The command's own connection dies.
        self.vm("ssh", "e2e-nosshd", shlex.quote(
            "sudo sh -c 'mv /usr/sbin/sshd /usr/sbin/sshd.gone; "
            "kill $(pidof warren-launcher) $(pidof sshd)'"), timeout=120)
        started = time.monotonic()
        r = self.vm("ssh", "e2e-nosshd", "true", timeout=120)
        self.assert_status(r, "unavailable")
        self.assertIn("e2e-nosshd", r.stderr)
        # Within the reach timeout (GUEST_REACH_TIMEOUT) and a connection attempt, not forever.
        self.assertLess(time.monotonic() - started, int(GUEST_REACH_TIMEOUT) + 30)
        # The lobby is unaffected, and rm still cleans up.
        self.assertEqual(self.ssh_json(self.admin, "stat", "e2e-nosshd")["state"], "running")
        vm_id = self.vm_id("e2e-nosshd")
        self.vm_ok("rm", "e2e-nosshd")
        self.assert_gone("e2e-nosshd", vm_id)


@unittest.skipUnless(shutil.which("nft") and shutil.which("ip"), "needs nft and iproute2")
class VmEgressTest(VmTestCase):
    """Guests with user-mode NAT reach an outside listener of the test's own, and not the
    host's loopback."""
    EGRESS = "all"

    @classmethod
    def setUpClass(cls):
        cls.outside = outside_net.OutsideNetwork()
        cls.addClassCleanup(cls.outside.close)
        super().setUpClass()

    def outside_get(self, tries):
        """A guest shell command: GET / from the outside listener with busybox nc (the tiny
        image's busybox wget crashes), retried once a second."""
        return ("i=0; until printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 %s %d; do "
                "i=$((i+1)); [ $i -lt %d ] || exit 1; sleep 1; done" %
                (outside_net.OUTSIDE_ADDR, outside_net.PORT, tries))

    def assert_default_route(self, vm):
        """The guest has its IPv4 default route (DHCP done) the moment `new` returned."""
        r = self.vm_ok("ssh", vm, "cat /proc/net/route")
        routes = [line.split() for line in r.stdout.splitlines()[1:]]
        self.assertIn("00000000", [route[1] for route in routes if len(route) > 1], r.stdout)

    def test_tiny_reaches_the_outside_not_the_host(self):
        self.remove_on_exit("e2e-net")
        self.vm_ok("new", "--image", "tiny", "--name", "e2e-net", "--cpu", "1",
                   "--memory", "512M")
        # The tiny image takes its DHCP lease beside the control launcher; `new` waited for
        # its default route, so the first try reaches the outside.
        self.assert_default_route("e2e-net")
        r = self.vm_ok("ssh", "e2e-net", shlex.quote(self.outside_get(tries=1)))
        self.assertTrue(r.stdout.startswith("HTTP/1.0 200"), r.stdout)
        self.assertEqual(r.stdout.splitlines()[-1], self.outside.tokens["outside"])
        listener = self.listener()
        r = self.vm("ssh", "e2e-net", shlex.quote(http_get(listener, tries=2)))
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertEqual(listener.requests, 0)
        vm_id = self.vm_id("e2e-net")
        self.vm_ok("rm", "e2e-net")
        self.assert_gone("e2e-net", vm_id)

    @unittest.skipUnless(have_image("debian"), "needs the debian image in " + IMAGES)
    def test_default_debian_image(self):
        self.remove_on_exit("e2e-debian")
        self.vm_ok("new", "--name", "e2e-debian", "--cpu", "1", "--memory", "1G",
                   "--env", "GREETING=hello", timeout=300)
        # Ready means networked: udev loads virtio_net and networkd asks DHCP seconds after
        # the control port first answers, and `new` waits for them.
        self.assert_default_route("e2e-debian")
        self.assertTrue(self.ssh_json(self.admin, "stat", "e2e-debian")["image"]
                        .startswith("debian@"))
        r = self.vm_ok("ssh", "e2e-debian",
                       "id -un; sudo -n true && echo sudo-ok; python3 -V; "
                       "git --version >/dev/null && echo git-ok; echo $GREETING")
        self.assertEqual(r.stdout.split(), ["dev", "sudo-ok", "Python", "3.11.2", "git-ok",
                                            "hello"])
        # Outbound network (user-mode NAT), proven against the test's outside listener; at
        # once: `new` waited for the guest's default route (udev loads virtio_net late).
        r = self.vm_ok("ssh", "e2e-debian", "curl -sS --max-time 10 http://%s:%d/" %
                       (outside_net.OUTSIDE_ADDR, outside_net.PORT))
        self.assertEqual(r.stdout.strip(), self.outside.tokens["outside"])
        listener = self.listener()
        r = self.vm("ssh", "e2e-debian", "curl -sS --max-time 5 " + listener.url())
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertEqual(listener.requests, 0)
        # Docker is not running after boot; the first use starts it (socket activation).
        self.assertEqual(self.vm("ssh", "e2e-debian", "systemctl is-active docker").stdout,
                         "inactive\n")
        r = self.vm_ok("ssh", "e2e-debian",
                       "sudo docker info --format {{.ServerVersion}}; systemctl is-active docker")
        lines = r.stdout.split()
        self.assertEqual(lines[-1], "active", r.stdout + r.stderr)
        self.assertRegex(lines[0], r"^\d+\.\d+")
        vm_id = self.vm_id("e2e-debian")
        self.vm_ok("rm", "e2e-debian")
        self.assert_gone("e2e-debian", vm_id)


if __name__ == "__main__":
    h.main()
