#!/usr/bin/python3
"""The second libvirt host fixture (tests/integration/second_host.py, issue 18) is a real
remote libvirt host: from the root namespace, through qemu+ssh and qemu+tls only,

  1. both URIs reach the fixture's libvirtd, not the machine's shared daemon (a domain
     defined there is not in qemu:///system's list; sshd logged root's key login), and a
     TLS client without the fixture's certificates is refused;
  2. the tiny image's kernel, initrd and base disk and a seed are uploaded into a pool of
     that host with `virsh vol-upload` (checksums compared on the far side), an overlay
     volume is made on it, and a TCG domain defined from them boots (the guest announces
     its host key on the console, which virtlogd writes on that host);
  3. the host goes away: libvirtd stopped, an open connection fails and new ones are
     refused; started again, a new connection sees the guest still running (same QEMU);
  4. warren's guest control reaches that guest through its control channel over each URI
     (libvirt_channel_test run against it: CHANNEL_TEST names the binary, default
     build/tests/libvirt_channel_test).

Then the fixture's teardown leaves nothing (processes, namespace, veth, directory). Needs
root, the tools second_host.missing() names and the tiny image; skips saying why when they
are missing, fails under CI.
"""
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import second_host  # noqa: E402
import warren_harness as h  # noqa: E402

SHARED = "qemu:///system"


def shared_domains():
    """The shared daemon's domains (None when it does not answer)."""
    r = second_host.virsh(SHARED, "list", "--all", "--name", check=False, timeout=30)
    return set(r.stdout.split()) if r.returncode == 0 else None


class SecondHostTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = second_host.missing_for_a_guest()
        if why:
            second_host.skip_or_fail(why)
        t0 = time.monotonic()
        cls.host = second_host.SecondHost()
        cls.addClassCleanup(cls.close_host)
        print("[timing] second host up in %.2f s at %s" % (time.monotonic() - t0,
                                                           cls.host.addr), flush=True)
        cls.name = "w2h-%d-tiny" % os.getpid()
        cls.guest = None

    @classmethod
    def close_host(cls):
        host = cls.host
        if cls.guest is not None and host.daemon_answers():
            cls.guest.remove()
            second_host.virsh(host.uri, "pool-destroy", second_host.POOL, check=False)
            second_host.virsh(host.uri, "pool-undefine", second_host.POOL, check=False)
        host.close()
        left = host.leftovers()
        assert not left, "the fixture left: %s" % left

    def test_1_remote_uris_reach_the_second_daemon(self):
        shared_before = shared_domains()
        xml = second_host.tiny_domain_xml("w2h-%d-probe" % os.getpid(), "/nonexistent/k",
                                          "/nonexistent/i", "", "/nonexistent/d.qcow2",
                                          "/nonexistent/s.img", "/run/probe.sock",
                                          "/var/log/libvirt/qemu/probe.log")
        path = self.host.path("probe.xml")
        with open(path, "w") as f:
            f.write(xml)
        for uri in (self.host.ssh_uri, self.host.tls_uri):
            second_host.virsh(uri, "define", path)
            try:
                names = second_host.virsh(uri, "list", "--all", "--name").stdout.split()
                self.assertIn("w2h-%d-probe" % os.getpid(), names, uri)
                if shared_before is not None:
                    self.assertNotIn("w2h-%d-probe" % os.getpid(), shared_domains() or set())
                # Both transports see the same daemon: what one defined, the other lists.
                other = self.host.tls_uri if uri == self.host.ssh_uri else self.host.ssh_uri
                self.assertIn("w2h-%d-probe" % os.getpid(),
                              second_host.virsh(other, "list", "--all", "--name").stdout)
            finally:
                second_host.virsh(uri, "undefine", "w2h-%d-probe" % os.getpid())
        self.assertIn("Accepted publickey for root from %s" % self.host.host_addr,
                      self.host.sshd_log())
        # TLS pins the client too: no certificates (an empty pkipath), no connection.
        empty = self.host.path("pki-empty")
        os.makedirs(empty, exist_ok=True)
        r = second_host.virsh("qemu+tls://%s/system?pkipath=%s" % (self.host.addr, empty),
                              "list", check=False, timeout=30)
        self.assertNotEqual(r.returncode, 0)

    def test_2_upload_and_boot_a_tcg_guest(self):
        t0 = time.monotonic()
        type(self).guest = guest = second_host.TinyGuest(
            self.host, self.host.uri, self.name, self.host.client_public_key())
        uploaded_s = time.monotonic() - t0
        size = sum(os.path.getsize(os.path.join(guest.image, f))
                   for f in ("vmlinuz", "initrd.img", "rootfs.qcow2"))
        print("[timing] vol-upload of the tiny image (%.1f MiB) over qemu+ssh: %.2f s" % (
            size / 2**20, uploaded_s), flush=True)
        for file, remote in guest.uploaded.items():
            far = self.host.run("sha256sum", remote).stdout.split()[0]
            self.assertEqual(far, h.file_sha256(os.path.join(guest.image, file)), file)
        info = second_host.virsh(self.host.uri, "vol-info", "--pool", second_host.POOL,
                                 self.name + ".qcow2").stdout
        self.assertIn("Capacity:", info)
        t0 = time.monotonic()
        guest.start()
        state = second_host.virsh(self.host.uri, "domstate", self.name).stdout.strip()
        self.assertEqual(state, "running")
        key = guest.host_key(timeout=240)
        print("[timing] the guest on the second host announced its key %.1f s after start" %
              (time.monotonic() - t0), flush=True)
        self.assertTrue(key.startswith("ssh-ed25519 "))
        # It runs under TCG in the second host's namespaces: QEMU's netns is the fixture's.
        xml = second_host.virsh(self.host.uri, "dumpxml", self.name).stdout
        self.assertIn("type='qemu'", xml)
        self.assertNotIn(self.name, shared_domains() or set())

    def qemu_pid(self):
        r = self.host.run("cat", "/run/libvirt/qemu/%s.pid" % self.name, check=False)
        return int(r.stdout.strip()) if r.stdout.strip().isdigit() else None

    def test_3_host_goes_away_and_comes_back(self):
        if self.guest is None:
            self.skipTest("needs test_2's guest")
        qemu = self.qemu_pid()
        self.assertIsNotNone(qemu)
        # An open connection (virsh's shell, over ssh) and one over TLS, both alive first.
        shells = []
        for uri in (self.host.ssh_uri, self.host.tls_uri):
            p = subprocess.Popen(["virsh", "-c", uri], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            shells.append(p)
        try:
            for p in shells:
                p.stdin.write("domstate %s\n" % self.name)
                p.stdin.flush()
            # libvirt 9.0's ssh transport runs virt-ssh-helper on the far side (no nc).
            helper = re.compile(r"^virt-ssh-helper qemu:///system$", re.M)
            deadline = time.monotonic() + 30
            while not helper.search(self.host.run("ps", "-eo", "args").stdout):
                self.assertLess(time.monotonic(), deadline, "no virt-ssh-helper on the host")
                time.sleep(0.1)
            time.sleep(0.5)
            t0 = time.monotonic()
            self.host.stop_libvirtd()
            print("[timing] libvirtd stopped in %.2f s" % (time.monotonic() - t0), flush=True)
            for uri in (self.host.ssh_uri, self.host.tls_uri):
                r = second_host.virsh(uri, "list", check=False, timeout=60)
                self.assertNotEqual(r.returncode, 0, uri)
                print("while stopped, %s: %s" % (uri.split(":")[0], " / ".join(
                    r.stderr.strip().splitlines())), flush=True)
            for p in shells:
                p.stdin.write("domstate %s\nquit\n" % self.name)
                p.stdin.flush()
                out, _ = p.communicate(timeout=60)
                self.assertIn("running", out)  # the answer from before the stop
                self.assertRegex(out, r"(?i)error|end of file|closed|not connected", out)
        finally:
            for p in shells:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                for stream in (p.stdin, p.stdout):
                    stream.close()
        self.assertEqual(self.qemu_pid(), qemu)  # QEMU runs on without its daemon
        t0 = time.monotonic()
        self.host.start_libvirtd()
        for uri in (self.host.ssh_uri, self.host.tls_uri):
            self.assertEqual(second_host.virsh(uri, "domstate", self.name).stdout.strip(),
                             "running", uri)
        print("[timing] libvirtd back and answering remotely in %.2f s" %
              (time.monotonic() - t0), flush=True)
        self.assertEqual(self.qemu_pid(), qemu)
        # SIGKILL (a crash) too: the same, and the guest still there afterwards.
        self.host.stop_libvirtd(sig=signal.SIGKILL)
        self.assertNotEqual(second_host.virsh(self.host.uri, "list", check=False).returncode, 0)
        self.host.start_libvirtd()
        self.assertEqual(second_host.virsh(self.host.uri, "domstate", self.name).stdout.strip(),
                         "running")

    def test_4_guest_control_through_the_libvirt_channel(self):
        """warren's guest control reaches the guest on that host through its control channel
        (vmhost/libvirt_channel.h, virDomainOpenChannel on a connection of each transport):
        libvirt_channel_test in its remote mode runs exec, 4 MiB each way (sha256), a second
        channel after the first closed, one refused while held, LibvirtHost::DialControl of a
        remote host, and no descriptor left."""
        if self.guest is None:
            self.skipTest("needs test_2's guest")
        binary = os.environ.get("CHANNEL_TEST") or os.path.join(
            h.SOURCE_DIR, "build", "tests", "libvirt_channel_test")
        self.assertTrue(os.access(binary, os.X_OK), "no %s (build it)" % binary)
        for uri in (self.host.ssh_uri, self.host.tls_uri):
            env = dict(os.environ, WARREN_CHANNEL_URI=uri, WARREN_CHANNEL_DOMAIN=self.name,
                       WARREN_CHANNEL_KEY=self.host.path("etc", "id_ed25519"))
            t0 = time.monotonic()
            r = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=600)
            out = r.stdout + r.stderr
            for line in out.splitlines():
                if line.startswith("[timing]"):
                    print(line, flush=True)
            print("[timing] libvirt_channel_test over %s: %.1f s" % (
                uri.split(":")[0], time.monotonic() - t0), flush=True)
            self.assertEqual(r.returncode, 0, "%s:\n%s" % (uri, out[-6000:]))
            self.assertNotIn("SKIPPED", out)
            self.assertRegex(out, r"\[  PASSED  \] [0-9]+ tests")


if __name__ == "__main__":
    h.main()
