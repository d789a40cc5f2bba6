#!/usr/bin/python3
"""Host isolation and egress policies on real QEMU guests (issue 12).

A tiny and a debian guest with `--egress all` try, over TCP, UDP and ICMP, everything the
host's isolation rules (vmhost/egress_firewall.h: nftables on QEMU's user) must close: a
listener of the test's own on the host's loopback (what slirp's gateway 10.0.2.2 and every
other alias in 10.0.2.0/24 lead to), the same listener on every address of the host's
interfaces (eth0's and the test veth's host side), and a listener inside the other VM by
every address a guest could try. Each fails, while a listener on an "outside" TEST-NET
address in a network namespace the test makes (outside_net.py) answers, and DNS through
slirp's 10.0.2.3 still works. A private address in that namespace answers only once warren
runs with `--vm-egress-allow` for it. `--egress none` reaches nothing; `cp --egress
integrations` of an `all` VM gives a copy with no network device while the source keeps
its own; `egress VM none` then `egress VM all` on a running VM take effect. A restart of
warren neither loses nor doubles its chain (`nft -j list table inet warren`), and serve
refuses to run VMs when nft is missing.

Slirp answers ICMP to other hosts only through unprivileged ICMP sockets, which
net.ipv4.ping_group_range normally forbids: the test opens it for QEMU's group while it
runs (and puts it back), so the outside answering a ping proves the ICMP probes could
succeed.

Needs root, libvirt, QEMU, nft, iproute2 and both images (WARREN_TEST_IMAGES); under CI a
missing piece fails, it does not skip.
"""
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import outside_net as net
import warren_harness as h
from test_vm_e2e import DATA_PARENT, IMAGES, VmTestCase, have_image

# Guest probes. Each prints the listener's answer (its token) or an error, never both. The
# tiny image's busybox nc has no UDP (-u): UDP is probed from the debian guest, and every
# listener's hit count stays 0 whatever tried it.
TINY_TCP = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 %s %d 2>&1"
DEBIAN_PROBE = r"""
import socket, sys
addr, port, proto = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    if proto == "tcp":
        s = socket.create_connection((addr, port), timeout=3)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.sendto(b"probe", (addr, port))
        data = s.recv(4096)
    sys.stdout.write(data.decode("utf-8", "replace"))
except Exception as e:
    print("FAILED", type(e).__name__, e)
"""
DNS_QUERY = r"""
import socket, struct
q = struct.pack(">HHHHHH", 0x5157, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, ("%s", 53))
r = s.recv(512)
print("DNS-ANSWER" if r[:2] == b"\x51\x57" else "DNS-OTHER")
"""


def guest_script(path, source):
    """A guest shell command writing `source` to `path`: through base64, since a command
    line carries no newlines into the guest intact."""
    return "echo %s | base64 -d > %s" % (base64.b64encode(source.encode()).decode(), path)


def destroy_domains_under(data_dir):
    """Destroys and undefines every libvirt domain and pool whose files are in `data_dir`
    (virsh is fine in a test: the product never uses it)."""
    virsh = ["virsh", "-c", "qemu:///system"]
    names = subprocess.run(virsh + ["list", "--all", "--name"], capture_output=True, text=True,
                           timeout=30).stdout.split()
    for name in names:
        xml = subprocess.run(virsh + ["dumpxml", name], capture_output=True, text=True,
                             timeout=30).stdout
        if data_dir.rstrip("/") + "/" in xml:
            subprocess.run(virsh + ["destroy", name], capture_output=True, timeout=60)
            subprocess.run(virsh + ["undefine", name], capture_output=True, timeout=60)
    # Their storage pools too (a domain's directory, the disks pool).
    pools = subprocess.run(virsh + ["pool-list", "--all", "--name"], capture_output=True,
                           text=True, timeout=30).stdout.split()
    for pool in pools:
        xml = subprocess.run(virsh + ["pool-dumpxml", pool], capture_output=True, text=True,
                             timeout=30).stdout
        if "<path>" + data_dir.rstrip("/") + "/" in xml:
            subprocess.run(virsh + ["pool-destroy", pool], capture_output=True, timeout=60)
            subprocess.run(virsh + ["pool-undefine", pool], capture_output=True, timeout=60)


def host_addresses():
    """Every IPv4 address of the host's interfaces except loopback ones."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    addrs = []
    for line in out.splitlines():
        addr = line.split()[3].split("/")[0]
        if not addr.startswith("127."):
            addrs.append(addr)
    return addrs


def host_resolver_answers():
    """Whether the host's first IPv4 resolver answers a query (so DNS from a guest can)."""
    import socket
    import struct
    with open("/etc/resolv.conf") as f:
        servers = [l.split()[1] for l in f if l.startswith("nameserver") and "." in l]
    if not servers:
        return False
    q = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00" + \
        struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.sendto(q, (servers[0], 53))
        return bool(s.recv(512))
    except OSError:
        return False
    finally:
        s.close()


@unittest.skipUnless(shutil.which("nft") and shutil.which("ip"), "needs nft and iproute2")
@unittest.skipUnless(have_image("debian"), "needs the debian image in " + IMAGES)
class IsolationTest(VmTestCase):
    EGRESS = "all"

    @classmethod
    def setUpClass(cls):
        cls.outside = net.OutsideNetwork()
        cls.addClassCleanup(cls.outside.close)
        # Listeners of the test's own on the host: loopback, and every interface address.
        cls.loopback = net.Listener(*net.bound_pair("127.0.0.1", 0), "loopback-" + os.urandom(6).hex())
        cls.addClassCleanup(cls.loopback.close)
        cls.hostif = net.Listener(*net.bound_pair("0.0.0.0", 0), "hostif-" + os.urandom(6).hex())
        cls.addClassCleanup(cls.hostif.close)
        with open("/proc/sys/net/ipv4/ping_group_range") as f:
            cls.ping_range = f.read().strip()
        cls.addClassCleanup(cls.write_ping_range, cls.ping_range)
        cls.write_ping_range("0 2147483647")
        # This runs after the server stopped (cleanups go last-in first-out): whatever VM of
        # this class is left (setUpClass cut short, a failed rm) goes. VmTestCase removes the
        # chain.
        cls.addClassCleanup(lambda: destroy_domains_under(cls.data))
        super().setUpClass()
        cls.make_vms()

    @classmethod
    def write_ping_range(cls, value):
        with open("/proc/sys/net/ipv4/ping_group_range", "w") as f:
            f.write(value.replace("\t", " ") + "\n")

    # The image of each VM the tests make: which probe runs in it.
    IMAGE_OF = {"iso-tiny": "tiny", "iso-deb": "debian", "iso-none": "tiny", "iso-tcopy": "tiny"}

    @classmethod
    def lobby(cls, *command, timeout=60):
        # ssh_args reads only class state (server, keys, known hosts).
        return subprocess.run(cls.ssh_args(cls, cls.admin, *command), capture_output=True,
                              text=True, timeout=timeout)

    @classmethod
    def tearDownClass(cls):
        # Before the class cleanups stop the server (the last one: test_7 replaces it).
        for name in ("iso-tiny", "iso-deb"):
            r = cls.lobby("rm", name, timeout=120)
            if r.returncode != 0:
                print("rm %s: %s%s" % (name, r.stdout, r.stderr), file=sys.stderr)
        super().tearDownClass()

    @classmethod
    def make_vms(cls):
        lobby = cls.lobby
        for name, memory in (("iso-tiny", "512M"), ("iso-deb", "1G")):
            r = lobby("new", "--image", cls.IMAGE_OF[name], "--name", name, "--cpu", "1",
                      "--memory", memory, "--egress", "all", timeout=400)
            if r.returncode != 0:
                raise RuntimeError("new %s failed: %s%s" % (name, r.stdout, r.stderr))

    # ---- probes ----------------------------------------------------------------------

    def wait_for_link(self, vm, tries=30):
        """Until the guest has a default route (DHCP done); the tiny image takes its lease
        beside the control launcher."""
        for _ in range(tries):
            r = self.vm("ssh", vm, "ip route 2>/dev/null | grep -q default && echo up")
            if "up" in r.stdout:
                return
            time.sleep(1)
        self.fail(vm + " never got a default route")

    def probe(self, vm, targets):
        """{(addr, port, proto): output} for each target, probed from inside `vm`."""
        tiny = self.IMAGE_OF[vm] == "tiny"
        script = [] if tiny else [guest_script("/tmp/warren-probe.py", DEBIAN_PROBE)]
        for addr, port, proto in targets:
            script.append("echo '@@ %s %d %s'" % (addr, port, proto))
            if tiny:
                script.append(TINY_TCP % (addr, port))
            else:
                script.append("python3 /tmp/warren-probe.py %s %d %s" % (addr, port, proto))
            script.append("echo")
        r = self.vm("ssh", vm, "; ".join(script), timeout=300)
        out = {}
        key = None
        for line in r.stdout.splitlines():
            if line.startswith("@@ "):
                a, p, k = line[3:].split()
                key = (a, int(p), k)
                out[key] = ""
            elif key is not None:
                out[key] += line + "\n"
        self.assertEqual(set(out), set(targets), r.stdout + r.stderr)
        return out

    def ping(self, vm, addr):
        r = self.vm("ssh", vm, "sudo -n busybox ping -c 1 -W 3 %s >/dev/null 2>&1 && echo PONG"
                    % addr)
        return "PONG" in r.stdout

    def assert_reaches(self, results, key, token):
        self.assertIn(token, results[key], "%s did not answer: %r" % (key, results[key]))

    def assert_blocked(self, results, key, token):
        self.assertNotIn(token, results[key], "%s answered: %r" % (key, results[key]))

    def forbidden_targets(self, protos):
        """(addr, port, proto, token) a guest must not reach."""
        targets = []
        for proto in protos:
            # slirp maps its gateway and every other alias but the DNS one to 127.0.0.1.
            for alias in ("10.0.2.2", "10.0.2.9"):
                targets.append((alias, self.loopback.port, proto, self.loopback.token))
                targets.append((alias, self.hostif.port, proto, self.hostif.token))
            for addr in host_addresses():
                targets.append((addr, self.hostif.port, proto, self.hostif.token))
        return targets

    # ---- tests -------------------------------------------------------------------------

    def test_1_all_reaches_the_outside_but_never_the_host(self):
        # The listeners answer the host itself: what the guests miss is the rules' doing.
        self.assertIn(net.HOST_SIDE_ADDR, host_addresses())
        for vm in ("iso-tiny", "iso-deb"):
            with self.subTest(vm=vm):
                self.wait_for_link(vm)
                protos = ("tcp",) if self.IMAGE_OF[vm] == "tiny" else ("tcp", "udp")
                outside = [(net.OUTSIDE_ADDR, net.PORT, p) for p in protos]
                private = [(net.PRIVATE_ADDR, net.PORT, p) for p in protos]
                forbidden = self.forbidden_targets(protos)
                results = self.probe(vm, outside + private +
                                     [(a, p, k) for a, p, k, _ in forbidden])
                for key in outside:
                    self.assert_reaches(results, key, self.outside.tokens["outside"])
                for key in private:  # 10/8 stays closed without --vm-egress-allow
                    self.assert_blocked(results, key, self.outside.tokens["private"])
                for a, p, k, token in forbidden:
                    self.assert_blocked(results, (a, p, k), token)
        self.assertEqual(self.loopback.hits, 0)
        self.assertEqual(self.hostif.hits, 0)

    def test_2_icmp_reaches_the_outside_but_not_the_host(self):
        for vm in ("iso-tiny", "iso-deb"):
            with self.subTest(vm=vm):
                self.wait_for_link(vm)
                self.assertTrue(self.ping(vm, net.OUTSIDE_ADDR), vm + " cannot ping outside")
                for addr in host_addresses():
                    self.assertFalse(self.ping(vm, addr), "%s pinged the host at %s" % (vm, addr))
                self.assertFalse(self.ping(vm, net.PRIVATE_ADDR))

    def test_3_no_vm_reaches_another(self):
        token = "vm-" + os.urandom(6).hex()
        # A listener in the debian guest; the tiny one tries every address it could know.
        server = ("import socketserver as s\n"
                  "class H(s.StreamRequestHandler):\n"
                  "  def handle(self): self.wfile.write(b'%s\\n')\n"
                  "s.TCPServer(('0.0.0.0', 7777), H).serve_forever()\n" % token)
        self.vm_ok("ssh", "iso-deb", guest_script("/tmp/warren-listen.py", server) +
                   "; setsid -f python3 /tmp/warren-listen.py >/dev/null 2>&1 </dev/null")
        inside = self.vm_ok("ssh", "iso-deb",
                            guest_script("/tmp/warren-probe.py", DEBIAN_PROBE) +
                            "; sleep 1; python3 /tmp/warren-probe.py 127.0.0.1 7777 tcp").stdout
        self.assertIn(token, inside)  # it listens
        targets = [(a, 7777, "tcp") for a in
                   ["10.0.2.15", "10.0.2.2", "10.0.2.3", "10.0.2.16"] + host_addresses()]
        results = self.probe("iso-tiny", targets)
        for key in targets:
            self.assert_blocked(results, key, token)

    def test_4_dns_through_slirp_still_works(self):
        if not host_resolver_answers():
            self.fail("the host's resolver does not answer, so a guest's DNS cannot be tested")
        r = self.vm_ok("ssh", "iso-deb", guest_script("/tmp/warren-dns.py", DNS_QUERY % "10.0.2.3")
                       + "; python3 /tmp/warren-dns.py")
        self.assertIn("DNS-", r.stdout)

    def test_5_none_and_a_cut_off_copy(self):
        self.remove_on_exit("iso-none")
        self.vm_ok("new", "--image", "tiny", "--name", "iso-none", "--cpu", "1", "--memory",
                   "512M", "--egress", "none")
        self.assertEqual(self.ssh_json(self.admin, "stat", "iso-none")["egress"], "none")
        self.assertNotIn("eth0", self.vm_ok("ssh", "iso-none", "ls /sys/class/net").stdout)
        key = (net.OUTSIDE_ADDR, net.PORT, "tcp")
        self.assert_blocked(self.probe("iso-none", [key]), key, self.outside.tokens["outside"])

        self.remove_on_exit("iso-tcopy")
        copied = self.ssh_json(self.admin, "cp", "iso-tiny", "iso-tcopy", "--egress",
                               "integrations", timeout=300)
        self.assertEqual(copied["egress"], "integrations")
        self.assertNotIn("eth0", self.vm_ok("ssh", "iso-tcopy", "ls /sys/class/net").stdout)
        out = self.probe("iso-tcopy", [(net.OUTSIDE_ADDR, net.PORT, "tcp")])
        self.assert_blocked(out, (net.OUTSIDE_ADDR, net.PORT, "tcp"), self.outside.tokens["outside"])
        # The source keeps its network.
        self.assertEqual(self.ssh_json(self.admin, "stat", "iso-tiny")["egress"], "all")
        out = self.probe("iso-tiny", [(net.OUTSIDE_ADDR, net.PORT, "tcp")])
        self.assert_reaches(out, (net.OUTSIDE_ADDR, net.PORT, "tcp"),
                            self.outside.tokens["outside"])
        ls = self.vm_ok("ls", "-l").stdout
        self.assertRegex(ls, r"iso-tcopy .*integrations")

    def test_6_egress_command_on_a_running_vm(self):
        key = (net.OUTSIDE_ADDR, net.PORT, "tcp")
        token = self.outside.tokens["outside"]
        self.wait_for_link("iso-deb")
        r = self.vm_ok("egress", "iso-deb", "none")
        self.assertIn("network device removed while it runs", r.stdout)
        self.assert_blocked(self.probe("iso-deb", [key]), key, token)
        self.assertEqual(self.ssh_json(self.admin, "stat", "iso-deb")["egress"], "none")
        plugged_at = time.monotonic()
        changed = self.ssh_json(self.admin, "egress", "iso-deb", "all")
        self.assertTrue(changed["live"])
        self.assertLess(changed["downtime_seconds"], 30)
        print("\negress iso-deb none: %s\negress iso-deb all: %.3f s (hot-plug)" %
              (r.stdout.strip().splitlines()[-1], changed["downtime_seconds"]), file=sys.stderr)
        # systemd-networkd configures the new link by itself (DHCP).
        deadline = time.monotonic() + 60
        while True:
            out = self.probe("iso-deb", [key])
            if token in out[key]:
                print("egress iso-deb all: outside reached again after %.1f s (DHCP in the guest)"
                      % (time.monotonic() - plugged_at), file=sys.stderr)
                break
            self.assertLess(time.monotonic(), deadline, "no network after egress all: %r" % out)
            time.sleep(2)

    def test_7_restart_neither_loses_nor_doubles_the_rules(self):
        chain = net.chain_of(self.data)
        before = net.warren_chains()
        self.assertIn(chain, before)
        type(self).restart_server()
        after = net.warren_chains()
        self.assertEqual(after.get(chain), before[chain], (before, after))
        # With the private range opened, a guest reaches it; the chain is still one.
        type(self).server.stop()
        type(self).EGRESS_ALLOW = [net.PRIVATE_NET]
        type(self).server = type(self).start_vm_server()
        opened = net.warren_chains()
        self.assertEqual(opened[chain], before[chain] + 1, opened)
        self.assertEqual(len([c for c in opened if c == chain]), 1)
        self.wait_for_link("iso-deb")
        key = (net.PRIVATE_ADDR, net.PORT, "tcp")
        self.assert_reaches(self.probe("iso-deb", [key]), key, self.outside.tokens["private"])
        # Still nothing of the host.
        for addr in host_addresses():
            k = (addr, self.hostif.port, "tcp")
            self.assert_blocked(self.probe("iso-deb", [k]), k, self.hostif.token)

    def test_8_serve_refuses_vms_without_nft(self):
        data = tempfile.mkdtemp(prefix="iso-nonft-", dir=DATA_PARENT)
        os.chmod(data, 0o711)
        self.addCleanup(shutil.rmtree, data, ignore_errors=True)
        bindir = tempfile.mkdtemp(prefix="iso-path-")
        self.addCleanup(shutil.rmtree, bindir, ignore_errors=True)
        server = h.Server(data, self.admin, vms=True, extra_args=["--images-dir", IMAGES])
        path = os.environ["PATH"]
        # A PATH with everything but nft.
        for d in path.split(":"):
            if os.path.isdir(d):
                for name in os.listdir(d):
                    src = os.path.join(d, name)
                    dst = os.path.join(bindir, name)
                    if name != "nft" and not os.path.exists(dst):
                        os.symlink(src, dst)
        os.environ["PATH"] = bindir
        try:
            with self.assertRaises(RuntimeError) as e:
                server.start(timeout=120)
        finally:
            os.environ["PATH"] = path
            server.stop()
        self.assertIn("nftables", str(e.exception))
        self.assertIn("isolating the VMs of host local", str(e.exception))
        self.assertNotEqual(server.proc.returncode, 0)


if __name__ == "__main__":
    h.main()
