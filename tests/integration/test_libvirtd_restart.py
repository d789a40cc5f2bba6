#!/usr/bin/python3
"""warren survives libvirtd restarts (issue 16), on real libvirt + QEMU (TCG) and the tiny image.

The test runs in a mount namespace of its own (it re-executes itself under `unshare --mount`)
with a private /run, /etc/libvirt (a copy without autostarted networks, pools or domains),
/var/lib/libvirt, /var/cache/libvirt and /var/log/libvirt. qemu:///system there is a
libvirtd of the test's own: killing it never touches the machine's shared daemon that other
tests use, and the namespace (with its daemons, killed at the end) goes with the test.

  1. idle: warren started the daemon (none ran in the namespace); a running tiny VM; the
     daemon SIGKILLed; warren notices, restarts it, reconnects, reconciles, reports every
     state; `ls` shows the VM running, `ssh VM cmd` works, and the guest was not rebooted.
  2. mid-`new`: the daemon SIGKILLed early in a `new` (while the host defines and starts the
     domain) and later (while the guest boots); afterwards the VM exists fully or not at all
     (virsh, DATA/vms, DATA/disks, DATA/tmp and the records agree, as the crash points
     check them) and a retry of `new` works.
  3. a daemon warren did not start (the test's own): killed, warren waits without starting
     one, answers VM commands at once with "VM host unavailable ... reconnecting"; started
     again by the test, warren reconnects and the VM runs on.

Prints the time from the kill to the reconnection ([timing] lines). Needs root, unshare,
libvirt and the tiny image; skips saying why when they are missing (fails under CI).
"""
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

NS_ENV = "WARREN_LIBVIRTD_TEST_NS"
PRIVATE = ("/etc/libvirt", "/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt")
LIBVIRTD = "/usr/sbin/libvirtd"
PID_FILE = "/run/libvirtd.pid"
VIRTLOGD_PID_FILE = "/run/virtlogd.pid"
KVM_MASK = "/run/warren/kvm-masked"  # the launcher's (libvirtd_launcher.h)


def _reexec_in_namespace():
    """Runs this script again in a private mount namespace (once; root only)."""
    if os.environ.get(NS_ENV) or os.geteuid() != 0 or not shutil.which("unshare"):
        return
    os.environ[NS_ENV] = "1"
    sys.stdout.flush()
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable,
                          os.path.abspath(sys.argv[0])] + sys.argv[1:])


def _copy_dirs_only(src, dst):
    """The directory tree of `src` (owners, modes), no files: libvirt's state starts empty."""
    for top, dirs, _ in os.walk(src):
        rel = os.path.relpath(top, src)
        target = os.path.normpath(os.path.join(dst, rel))
        os.makedirs(target, exist_ok=True)
        st = os.stat(top)
        os.chown(target, st.st_uid, st.st_gid)
        os.chmod(target, st.st_mode & 0o7777)


def _ignore_autostart(directory, names):
    """What a copy of /etc/libvirt leaves out: definitions and autostart links of the shared
    daemon's domains, networks and pools (ours must not start them twice)."""
    rel = os.path.relpath(directory, "/etc/libvirt")
    skip = {n for n in names if n == "autostart"}
    if rel == "qemu":
        skip |= {n for n in names if n.endswith(".xml")}
    if rel == ".":
        skip |= {n for n in names if n in ("storage", "secrets")}
    return skip


def _run(*argv, check=True, timeout=60):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s%s" % (" ".join(argv), r.stdout, r.stderr))
    return r


def _pid_of(pid_file):
    try:
        with open(pid_file, encoding="ascii") as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def _kill_daemons():
    for pid_file in (PID_FILE, VIRTLOGD_PID_FILE):
        pid = _pid_of(pid_file)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


_DATA_DIRS = []  # the test's data dirs, for _kill_leftover_qemu


def _kill_leftover_qemu():
    """QEMUs of the test's VMs that outlived their daemon (a test that failed half-way):
    nothing of the test may keep running after it."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if "qemu-system" in cmdline and any(d + "/" in cmdline for d in _DATA_DIRS):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _private_libvirt():
    """Mounts the namespace's own libvirt directories. Returns why not, or None."""
    if not os.environ.get(NS_ENV):
        return "needs root and unshare (util-linux) for a private libvirtd"
    root = tempfile.mkdtemp(prefix="warren-libvirtd-ns-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    # Its daemons and guests die with the test (registered first: atexit runs them last).
    atexit.register(_kill_daemons)
    atexit.register(_kill_leftover_qemu)
    _run("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run")
    for path in PRIVATE:
        mine = os.path.join(root, path.strip("/").replace("/", "_"))
        if path == "/etc/libvirt":
            shutil.copytree(path, mine, symlinks=True, ignore=_ignore_autostart)
        elif path == "/var/cache/libvirt" and os.path.isdir(path):
            shutil.copytree(path, mine, symlinks=True)  # QEMU's capabilities: no re-probe
        elif os.path.isdir(path):
            _copy_dirs_only(path, mine)
        else:
            os.makedirs(mine)
        os.makedirs(path, exist_ok=True)
        _run("mount", "--bind", mine, path)
    return None


_reexec_in_namespace()
WHY_NOT = _private_libvirt() if os.environ.get(NS_ENV) else "needs root and unshare"

import test_crash_points as crash_points  # noqa: E402  (after the namespace is set up)
import warren_harness as h  # noqa: E402
from test_vm_e2e import IMAGES, VmTestCase  # noqa: E402


def daemon_answers():
    return _run("virsh", "-c", "qemu:///system", "version", check=False,
                timeout=10).returncode == 0


def start_own_libvirtd():
    """Starts libvirtd as an operator would (not warren): with /dev/kvm masked as warren's
    launcher masks it under TCG, so no domain start stalls on a KVM that cannot run guests."""
    env = dict(os.environ, LIBVIRT_LOG_OUTPUTS="3:file:/var/log/libvirt/libvirtd.log")
    if os.path.exists("/dev/kvm") and os.path.exists(KVM_MASK):
        argv = ["unshare", "--mount", "--propagation", "slave", "sh", "-c",
                "mount --bind %s /dev/kvm && exec %s --daemon" % (KVM_MASK, LIBVIRTD)]
    else:
        argv = [LIBVIRTD, "--daemon"]
    subprocess.run(argv, env=env, check=True, timeout=60, capture_output=True)
    deadline = time.monotonic() + 30
    while not daemon_answers():
        assert time.monotonic() < deadline, "libvirtd did not answer"
        time.sleep(0.1)


def kill_libvirtd():
    """SIGKILLs the namespace's libvirtd; returns its pid and when."""
    pid = _pid_of(PID_FILE)
    assert pid is not None, "no libvirtd runs in the test's namespace"
    os.kill(pid, signal.SIGKILL)
    return pid, time.monotonic()


@unittest.skipIf(WHY_NOT, WHY_NOT or "")
class LibvirtdRestartTest(VmTestCase):
    # The crash points' checks: this data dir's domains, records, files and layers agree.
    ours = crash_points.CrashPointsTest.ours
    records = crash_points.CrashPointsTest.records
    problems = crash_points.CrashPointsTest.problems
    console_tail = crash_points.CrashPointsTest.console_tail
    unused_layers = crash_points.CrashPointsTest.unused_layers
    NEW = ("--cpu", "1", "--memory", "512M")

    @classmethod
    def setUpClass(cls):
        assert not daemon_answers(), "a libvirtd answers in the test's private namespace"
        super().setUpClass()
        _DATA_DIRS.append(cls.data)
        # Runs before the class's other cleanups: removing the domains needs a daemon.
        cls.addClassCleanup(cls.ensure_daemon)
        assert "vmhost: started libvirtd" in cls.server.log(), cls.server.log_tail(40)

    @classmethod
    def ensure_daemon(cls):
        deadline = time.monotonic() + 15  # warren may be restarting its own
        while not daemon_answers():
            if time.monotonic() > deadline:
                start_own_libvirtd()
                return
            time.sleep(0.2)

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", cls.EGRESS,
                                      "--vm-image", "tiny", "--guest-reach-timeout", "15"])
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    def reconnections(self):
        return re.findall(r"reconnected to libvirt at \S+ after ([0-9.]+) s", self.server.log())

    def wait_reconnected(self, before, killed_at, what, timeout=90):
        """Waits for reconnection number before+1; prints and returns the figures."""
        deadline = time.monotonic() + timeout
        while len(self.reconnections()) <= before:
            self.assertLess(time.monotonic(), deadline, "warren did not reconnect:\n" +
                            self.server.log_tail(40))
            time.sleep(0.05)
        seen_s = time.monotonic() - killed_at
        logged_s = float(self.reconnections()[before])
        print("[timing] %s: reconnected %.2f s after the kill (warren's outage: %.1f s)" %
              (what, seen_s, logged_s), flush=True)
        return seen_s

    def state_of(self, name):
        vms = {vm["name"]: vm for vm in self.records().values()}
        return vms[name]["state"] if name in vms else None

    def uptime(self, name):
        return float(self.vm_ok("ssh", name, "cat /proc/uptime").stdout.split()[0])

    def test_1_idle_daemon_warren_started(self):
        self.vm_ok("new", "--name", "idle", *self.NEW)
        up_before = self.uptime("idle")
        before = len(self.reconnections())
        reports = self.server.log().count("vmhost: full report")
        old_pid, killed_at = kill_libvirtd()
        self.wait_reconnected(before, killed_at, "idle, warren's daemon")
        log = self.server.log()
        self.assertIn("lost the connection to libvirt at qemu:///system", log)
        self.assertIn("restarting the daemon", log)
        self.assertIn("reconcile: after reconnecting to libvirt", log)
        new_pid = _pid_of(PID_FILE)
        self.assertIsNotNone(new_pid, "warren did not start libvirtd again")
        self.assertNotEqual(new_pid, old_pid)
        # Every state reported again once reconnected (the usage meter's full report).
        deadline = time.monotonic() + 20
        while log.count("vmhost: full report") <= reports:
            self.assertLess(time.monotonic(), deadline, "no full report after reconnecting")
            time.sleep(0.1)
            log = self.server.log()
        self.assertEqual(self.state_of("idle"), "running")
        self.assertEqual(self.vm_ok("ssh", "idle", "echo still-here").stdout, "still-here\n")
        self.assertGreater(self.uptime("idle"), up_before, "the guest was rebooted")
        # And warren still drives the daemon it restarted: a state change goes through.
        self.vm_ok("pause", "idle")
        self.assertEqual(self.state_of("idle"), "paused")
        self.vm_ok("resume", "idle")
        self.assertEqual(self.state_of("idle"), "running")
        self.assertEqual(self.problems(), [])

    def test_2_mid_new(self):
        for n, delay in enumerate((0.4, 2.5)):
            name = "mid-%d" % n
            before = len(self.reconnections())
            client = subprocess.Popen(
                self.ssh_args(self.admin, "new", "--name", name, *self.NEW),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            time.sleep(delay)
            _, killed_at = kill_libvirtd()
            out, err = client.communicate(timeout=180)
            self.wait_reconnected(before, killed_at, "`new` killed after %.1f s" % delay)
            state = self.state_of(name)
            print("point %d: `new` cut %.1f s in: exit %d, %s; the VM is %s" %
                  (n, delay, client.returncode, (err.strip().splitlines() or ["-"])[-1],
                   state or "absent"), flush=True)
            if client.returncode == 0:
                self.assertEqual(state, "running", out)
            else:
                self.assertIsNone(state, "a refused `new` left %s behind (%s)" % (name, err))
            self.assertEqual(self.problems(), [], self.server.log_tail(40))
            if state is None:
                self.vm_ok("new", "--name", name, *self.NEW)
            self.assertEqual(self.vm_ok("ssh", name, "echo made").stdout, "made\n")
            self.vm_ok("rm", name)
        self.assertEqual(self.problems(), [])

    def test_3_daemon_warren_did_not_start(self):
        if self.state_of("idle") is None:
            self.vm_ok("new", "--name", "idle", *self.NEW)
        # warren's daemon goes; the test's own takes its place, then warren starts again
        # and finds it (so it is not warren's to restart).
        self.server.stop()
        kill_libvirtd()
        deadline = time.monotonic() + 10
        while daemon_answers():
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        start_own_libvirtd()
        type(self).server = self.start_vm_server()
        self.assertNotIn("vmhost: started libvirtd", self.server.log())
        self.assertEqual(self.state_of("idle"), "running")

        before = len(self.reconnections())
        _, killed_at = kill_libvirtd()
        self.assertTrue(self.server.wait_for_log("lost the connection to libvirt", timeout=30),
                        self.server.log_tail(20))
        # Commands during the outage answer at once, saying why; stat shows the VM as its
        # host's state allows (unreachable), with why.
        t0 = time.monotonic()
        stat = self.vm_ok("stat", "idle", timeout=60).stdout
        self.assertLess(time.monotonic() - t0, 10)
        self.assertIn("unreachable", stat)
        self.assertIn("VM host unavailable", stat)
        for command in (("ssh", "idle", "true"), ("stop", "idle")):
            t0 = time.monotonic()
            r = self.vm(*command, timeout=60)
            took = time.monotonic() - t0
            self.assertNotEqual(r.returncode, 0, command)
            self.assertIn("VM host unavailable", r.stderr, command)
            self.assertIn("reconnecting", r.stderr, command)
            self.assertLess(took, 10, "%s took %.1f s during the outage" % (command, took))
        print("[timing] a VM command during the outage answered in %.2f s: %s" %
              (took, r.stderr.strip().splitlines()[-1]), flush=True)
        time.sleep(2)
        self.assertIsNone(_pid_of(PID_FILE), "warren started a daemon that was not its own")
        self.assertNotIn("restarting the daemon", self.server.log())
        self.assertEqual(self.state_of("idle"), "unreachable")  # ls answers, without the host

        start_own_libvirtd()
        self.wait_reconnected(before, killed_at, "the operator's daemon, back after ~3 s")
        self.assertEqual(self.state_of("idle"), "running")
        self.assertEqual(self.vm_ok("ssh", "idle", "echo back").stdout, "back\n")
        self.vm_ok("rm", "idle")
        self.assertEqual(self.problems(), [])
        self.assertEqual(self.ours(), {})


if __name__ == "__main__":
    h.main()
