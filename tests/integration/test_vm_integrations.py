#!/usr/bin/python3
"""Integrations end to end (issue 12) on the real `warren serve` with real QEMU guests: the
proxy, the guest endpoint (127.77.0.1 over each VM's control connection, /etc/hosts, the
CA) and the egress policies, against a loopback HTTP upstream of the test's own
(int_upstream.py) that records what arrives.

- a debian guest (curl): the header (--header) and the bearer (--bearer) arrive upstream,
  the VM's own Authorization replaced, path and query passed, https with warren's CA trusted
  by the guest; 50 MiB streamed down (size and hash), a body uploaded (hash);
- attach by tag (--attach tag:T, `integrations attach N tag:T`, then `tag VM T`): 403 with
  the one-line reason before; detach mid-download cuts it within seconds;
- another owner's integration name (404) and the same owner's not attached (403) refused;
- egress: `integrations` (a tiny guest) reaches its integration and nothing else (no
  network device, no outside, no DNS); `none` reaches nothing, integrations included;
  `cp --egress integrations` of an `all` VM carries its attachments and is cut off, the
  source not; `egress VM none` on a running VM cuts its integration;
- the secrets nowhere in the guest (processes' environments, /etc, /home, /root, /tmp,
  /var), on the VM's disk files on the host, in warren's log, in any command's output.

Needs root, libvirt, QEMU, iproute2 and both images (WARREN_TEST_IMAGES); under CI a
missing piece fails, it does not skip.
"""
import base64
import os
import shlex
import shutil
import subprocess
import sys
import time
import unittest

import int_upstream
import outside_net as net
import warren_harness as h
from test_vm_e2e import IMAGES, VmTestCase, have_image
from test_vm_isolation import destroy_domains_under

DOMAIN = "int.warren.internal"
ENDPOINT = "127.77.0.1"  # the guest endpoint's address (GuestEndpoint, vmhost/guest_control.h)
SECRET1 = "hv-" + os.urandom(8).hex()  # a header's value
SECRET2 = "bt-" + os.urandom(8).hex()  # a bearer
SECRET3 = "tg-" + os.urandom(8).hex()  # the tag-attached integration's header
SECRETS = (SECRET1, SECRET2, SECRET3)
BIG = 50 << 20


def url(name, path="/", https=False):
    return "%s://%s.%s%s" % ("https" if https else "http", name, DOMAIN, path)


def curl(target, *extra):
    """A guest command: curl printing the body, then the status on a line of its own."""
    return "curl -sS -m 60 %s -w '\\n@status=%%{http_code}\\n' '%s'" % (" ".join(extra), target)


def curl_at_endpoint(name, path):
    """curl of integration `name` at the endpoint's address with its Host header: for a
    name the guest's /etc/hosts does not (or no longer) list."""
    return curl("http://%s%s" % (ENDPOINT, path), "-H 'Host: %s.%s'" % (name, DOMAIN))


def status_of(out):
    for line in out.splitlines():
        if line.startswith("@status="):
            return int(line[len("@status="):])
    return None


def secret_scan(paths):
    """A guest command listing files under `paths` holding any secret, and processes whose
    environment does. The secrets are on no command line (sudo logs those to the journal):
    the script, with them in base64, is written to /dev/shm (not on the disk) and run as
    root; grep, which sees them, runs inside it."""
    lines = ["for b in %s; do" % " ".join(base64.b64encode(s.encode()).decode() for s in SECRETS),
             "  p=$(echo $b | base64 -d)",
             "  grep -rlsF --exclude-dir=proc -e \"$p\" %s" % " ".join(paths),
             "  for e in /proc/[0-9]*/environ; do grep -qsF -e \"$p\" $e && echo $e; done",
             "done",
             "echo scanned"]
    script = base64.b64encode("\n".join(lines).encode()).decode()
    return ("echo %s | base64 -d > /dev/shm/scan.sh && sudo -n sh /dev/shm/scan.sh; "
            "rm -f /dev/shm/scan.sh" % script)


@unittest.skipUnless(shutil.which("ip"), "needs iproute2")
@unittest.skipUnless(have_image("debian"), "needs the debian image in " + IMAGES)
class VmIntegrationsTest(VmTestCase):
    EGRESS = "all"
    KEYS = ("bob",)

    @classmethod
    def setUpClass(cls):
        cls.outside = net.OutsideNetwork()
        cls.addClassCleanup(cls.outside.close)
        cls.upstream = int_upstream.Upstream()
        cls.addClassCleanup(cls.upstream.close)
        cls.outputs = []  # every lobby command's output, searched for the secrets
        super().setUpClass()
        # After the server stopped (cleanups run last-in first-out): what is left goes.
        cls.addClassCleanup(lambda: destroy_domains_under(cls.data))
        cls.keys["bob"] = h.Key(cls.tmp, "bob")
        cls.run_lobby(cls.admin, "user", "add", "bob", "--key",
                      "'%s'" % cls.keys["bob"].public_line, check=True)
        for name, image, memory in (("int-deb", "debian", "1G"), ("int-tin", "tiny", "512M")):
            cls.run_lobby(cls.admin, "new", "--image", image, "--name", name, "--cpu", "1",
                          "--memory", memory, "--egress", "all", timeout=600, check=True)
        up = cls.upstream.url
        for argv in (("--name", "api", "--target", up + "/base", "--header",
                      "X-Api-Key:" + SECRET1, "--attach", "vm:int-deb", "--attach", "vm:int-tin"),
                     ("--name", "bear", "--target", up, "--bearer", SECRET2, "--attach",
                      "tag:tagged"),
                     ("--name", "later", "--target", up, "--header", "X-Tag-Key:" + SECRET3)):
            cls.run_lobby(cls.admin, "integrations", "add", "http-proxy", *argv, check=True)
        cls.run_lobby(cls.keys["bob"], "integrations", "add", "http-proxy", "--name", "bobs",
                      "--target", up, "--bearer", SECRET2, "--attach", "all", check=True)

    @classmethod
    def run_lobby(cls, key, *command, timeout=120, check=False):
        r = subprocess.run(cls.ssh_args(cls, key, *command), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        cls.outputs.append(r.stdout + r.stderr)
        if check and r.returncode != 0:
            raise AssertionError("%s: %d\n%s%s" % (" ".join(command), r.returncode, r.stdout,
                                                    r.stderr))
        return r

    @classmethod
    def tearDownClass(cls):
        for name in ("int-deb", "int-tin"):
            r = cls.run_lobby(cls.admin, "rm", name, timeout=300)
            if r.returncode != 0:
                print("rm %s: %s%s" % (name, r.stdout, r.stderr), file=sys.stderr)
        # What the endpoint and the watcher did, for a failure's reader (the log goes).
        noise = ("ssh login", "ssh connection closed", "audit cmd=ssh ", "guest endpoint set up",
                 "guest endpoint listening")
        print("\n".join(l for l in cls.server.log().splitlines()
                        if not any(n in l for n in noise)), file=sys.stderr)
        super().tearDownClass()

    def lobby(self, *command, key=None, timeout=300):
        return self.run_lobby(key or self.admin, *command, timeout=timeout)

    def lobby_ok(self, *command, key=None, timeout=300):
        r = self.lobby(*command, key=key, timeout=timeout)
        self.assertEqual(r.returncode, 0, "%s: %s%s" % (" ".join(command), r.stdout, r.stderr))
        return r

    def guest(self, vm, command, timeout=300):
        # One word for the lobby's tokenizer: the guest's shell gets the command as written.
        return self.lobby("ssh", vm, shlex.quote(command), timeout=timeout)

    def until_status(self, vm, command, want, seconds=180):
        """Runs `command` in `vm` until its @status is `want` (the guest's /etc/hosts and
        the forwards follow a change within the watcher's round, which a guest slowed by
        another guest test and the sanitizer builds beside it can stretch past a minute);
        returns its output."""
        deadline = time.monotonic() + seconds
        while True:
            out = self.guest(vm, command).stdout
            if status_of(out) == want:
                return out
            if time.monotonic() > deadline:
                self.fail("%s in %s: wanted %d, got:\n%s\n--- log:\n%s" %
                          (command, vm, want, out, self.server.log_tail(40)))
            time.sleep(2)

    def last(self, prefix):
        got = self.upstream.matching(prefix)
        self.assertTrue(got, "nothing arrived upstream at " + prefix)
        return got[-1]

    # ---- the debian guest ------------------------------------------------------------

    def test_1_header_bearer_path_query_and_https(self):
        out = self.until_status("int-deb", curl(url("api", "/v1/items?q=a%20b&n=2"),
                                                "-H 'Authorization: Bearer from-the-vm'"), 200)
        self.assertIn("ok /base/v1/items?q=a%20b&n=2", out)
        got = self.last("/base/v1/items")
        self.assertEqual(got["path"], "/base/v1/items?q=a%20b&n=2")
        self.assertEqual(got["headers"]["x-api-key"], SECRET1)
        self.assertEqual(got["headers"]["host"], "127.0.0.1:%d" % self.upstream.port)
        # api adds no Authorization: the VM's passes.
        self.assertEqual(got["headers"]["authorization"], "Bearer from-the-vm")

        # https, warren's CA trusted by the guest (no -k).
        out = self.until_status("int-deb", curl(url("api", "/tls?x=1", https=True)), 200)
        self.assertIn("ok /base/tls?x=1", out)
        self.assertEqual(self.last("/base/tls")["headers"]["x-api-key"], SECRET1)

        # The bearer replaces what the VM says, also a second Authorization.
        self.lobby_ok("tag", "int-deb", "tagged")
        out = self.until_status("int-deb", curl(url("bear", "/who"),
                                                "-H 'Authorization: Bearer from-the-vm'",
                                                "-H 'authorization: Basic Zm9vOmJhcg=='"), 200)
        got = self.last("/who")
        auth = [v for k, v in got["header_list"] if k.lower() == "authorization"]
        self.assertEqual(auth, ["Bearer " + SECRET2])
        self.assertNotIn(SECRET2, out)

    def test_2_streams_50_mib_down_and_a_body_up(self):
        path = "/big?bytes=%d" % BIG
        t = time.monotonic()
        out = self.guest("int-deb", "curl -sS -m 300 '%s' | python3 -c 'import sys, hashlib; "
                         "d = sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest())'"
                         % url("api", path), timeout=400)
        took = time.monotonic() - t
        self.assertEqual(out.stdout.split(), [str(BIG), int_upstream.big_body_sha256(BIG)],
                         out.stderr + self.server.log_tail(5))
        print("\n50 MiB through the proxy into the guest: %.1f s, %.1f MB/s" %
              (took, BIG / took / 1e6), file=sys.stderr)
        # A body up, both framings.
        out = self.guest("int-deb", "head -c 3000000 /dev/urandom > /tmp/up && sha256sum /tmp/up"
                         " && " + curl(url("api", "/upload"), "--data-binary @/tmp/up") + " && " +
                         curl(url("api", "/upload-chunked"), "-H 'Transfer-Encoding: chunked'",
                              "--data-binary @/tmp/up")).stdout
        sha = out.split()[0]
        for p in ("/base/upload", "/base/upload-chunked"):
            got = self.last(p)
            self.assertEqual((got["method"], got["body_len"], got["body_sha"]),
                             ("POST", 3000000, sha), p)
        self.assertIn("3000000 " + sha, out)

    def test_3_attach_by_tag_and_unattached_refused(self):
        # `later` is attached to nothing: 403 with the reason.
        probe = curl_at_endpoint("later", "/t")
        out = self.guest("int-deb", probe).stdout
        self.assertEqual(status_of(out), 403, out)
        self.assertIn("integration later is not attached to VM int-deb", out)
        lines = [l for l in out.splitlines() if l.strip()]
        self.assertEqual(len(lines), 2, out)  # one line, then @status
        self.lobby_ok("integrations", "attach", "later", "tag:later-tag")
        self.assertEqual(status_of(self.guest("int-deb", probe).stdout), 403)
        self.lobby_ok("tag", "int-deb", "later-tag")
        self.until_status("int-deb", curl(url("later", "/t")), 200)
        self.assertEqual(self.last("/t")["headers"]["x-tag-key"], SECRET3)
        # Off the tag, off the integration.
        self.lobby_ok("tag", "-d", "int-deb", "later-tag")
        self.until_status("int-deb", probe, 403)

    def test_4_other_vms_and_other_owners_names_are_refused(self):
        # bob's `bobs` is attached to all of bob's VMs: none of the admin's.
        out = self.guest("int-deb", curl_at_endpoint("bobs", "/b")).stdout
        self.assertEqual(status_of(out), 404, out)
        self.assertIn("no integration bobs for this VM's owner", out)
        # The same owner's integration attached to another VM only.
        self.lobby_ok("integrations", "add", "http-proxy", "--name", "tinonly", "--target",
                      self.upstream.url, "--header", "X-Api-Key:" + SECRET1, "--attach",
                      "vm:int-tin")
        self.until_status("int-tin", "wget -q -O - %s; s=$?; echo; echo @status=$s" %
                          url("tinonly", "/mine"), 0)
        out = self.guest("int-deb", curl_at_endpoint("tinonly", "/x")).stdout
        self.assertEqual(status_of(out), 403, out)
        self.assertIn("integration tinonly is not attached to VM int-deb", out)
        self.assertFalse(self.upstream.matching("/x"))
        # Its name is not in int-deb's /etc/hosts either.
        hosts = self.guest("int-deb", "cat /etc/hosts").stdout
        self.assertIn("api.%s" % DOMAIN, hosts)
        self.assertNotIn("tinonly", hosts)

    def test_5_detach_cuts_a_running_download(self):
        path = "/big?bytes=%d&delay_ms=20" % BIG  # 50 MiB over some 16 s and more
        cmd = ("curl -sS -m 300 -o /tmp/cut '%s'; echo rc=$?; stat -c size=%%s /tmp/cut"
               % url("api", path))
        p = subprocess.Popen(self.ssh_args(self.admin, "ssh", "int-deb", shlex.quote(cmd)), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while self.upstream.sent.get("/base" + path, 0) < (2 << 20):
                if p.poll() is not None:
                    self.fail("the download ended before the detach: %r" % (p.communicate(),))
                self.assertLess(time.monotonic(), deadline, "the download never started")
                time.sleep(0.1)
            asked = time.monotonic()
            self.lobby_ok("integrations", "detach", "api", "vm:int-deb")
            detached = time.monotonic()
            print("\ndetach took %.2f s, %d bytes sent by then" %
                  (detached - asked, self.upstream.sent["/base" + path]), file=sys.stderr)
            out, err = p.communicate(timeout=60)
            took = time.monotonic() - detached
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        print("\ndetach cut the download %.2f s after the command returned (ssh round trip "
              "included)" % took, file=sys.stderr)
        self.assertLess(took, 5, out + err)
        self.assertNotIn("rc=0", out)
        size = int(out.split("size=")[1].split()[0])
        self.assertLess(size, BIG)
        # The upstream saw its client go (it may still be writing into socket buffers).
        deadline = time.monotonic() + 30
        while "/base" + path not in self.upstream.broken:
            if time.monotonic() > deadline:
                ss = subprocess.run(["ss", "-tnpo", "sport = :%d or dport = :%d" % (
                    self.upstream.port, self.upstream.port)], capture_output=True, text=True)
                self.fail("the upstream still writes: %s\n%s" % (self.upstream.sent, ss.stdout))
            time.sleep(0.2)
        self.assertLess(self.upstream.sent["/base" + path], BIG)
        # Detached: the endpoint refuses it with the reason. Asked at the endpoint's address,
        # as the name leaves the guest's /etc/hosts once its refresh has run (the test used
        # to race that refresh and lost whenever it came first).
        out = self.until_status("int-deb", curl_at_endpoint("api", "/gone"), 403)
        self.assertIn("integration api is not attached to VM int-deb", out)
        self.lobby_ok("integrations", "attach", "api", "vm:int-deb")
        self.until_status("int-deb", curl(url("api", "/back")), 200)

    # ---- egress ----------------------------------------------------------------------

    def tiny_get(self, vm, target):
        """busybox wget in a tiny guest: the body, then @status=wget's exit status."""
        return self.guest(vm, "wget -q -O - '%s' 2>&1; s=$?; echo; echo @status=$s" % target).stdout

    def tiny_until(self, vm, target, want, seconds=60):
        """tiny_get until the output holds `want`: a guest from an image older than the
        endpoint gets it after one reconnect (vmhost/guest/README.md), a few seconds after
        `new` or `cp` returned."""
        deadline = time.monotonic() + seconds
        while True:
            out = self.tiny_get(vm, target)
            if want in out:
                return out
            if time.monotonic() > deadline:
                self.fail("%s from %s: %r\n--- log:\n%s" % (target, vm, out,
                                                             self.server.log_tail(30)))
            time.sleep(2)

    def reaches_outside(self, vm):
        out = self.guest(vm, "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 %s %d 2>&1" %
                         (net.OUTSIDE_ADDR, net.PORT)).stdout
        return self.outside.tokens["outside"] in out

    def assert_cut_off(self, vm):
        self.assertNotIn("eth0", self.guest(vm, "ls /sys/class/net").stdout)
        self.assertFalse(self.reaches_outside(vm))
        dns = self.guest(vm, "nslookup example.com 10.0.2.3 2>&1; echo @rc=$?").stdout
        self.assertNotIn("@rc=0", dns)

    def test_6_integrations_egress_reaches_only_its_integrations(self):
        self.remove_on_exit("int-only")
        self.lobby_ok("new", "--image", "tiny", "--name", "int-only", "--cpu", "1", "--memory",
                      "512M", "--egress", "integrations", "--integration", "api", timeout=600)
        self.assertEqual(self.ssh_json(self.admin, "stat", "int-only")["egress"], "integrations")
        self.tiny_until("int-only", url("api", "/only?z=1"), "ok /base/only?z=1")
        self.assertEqual(self.last("/base/only")["headers"]["x-api-key"], SECRET1)
        self.assert_cut_off("int-only")
        # The `all` VMs do reach the outside: the probe would see it.
        self.assertTrue(self.reaches_outside("int-tin"))

    def test_7_none_reaches_nothing_not_even_integrations(self):
        self.remove_on_exit("int-none")
        self.lobby_ok("new", "--image", "tiny", "--name", "int-none", "--cpu", "1", "--memory",
                      "512M", "--egress", "none", "--integration", "api", timeout=600)
        before = len(self.upstream.requests)
        time.sleep(15)  # past a reconnect and a sweep of the watcher: still nothing
        out = self.tiny_get("int-none", url("api", "/none"))
        self.assertNotIn("ok /", out)
        out = self.guest("int-none", "wget -q -O - --header 'Host: api.%s' "
                         "http://%s/none 2>&1; echo @status=$?" % (DOMAIN, ENDPOINT)).stdout
        self.assertNotIn("ok /", out)
        self.assert_cut_off("int-none")
        self.assertEqual(len(self.upstream.requests), before)

    def test_8_a_copy_cut_off_keeps_its_integrations(self):
        self.remove_on_exit("int-tcopy")
        copied = self.ssh_json(self.admin, "cp", "int-tin", "int-tcopy", "--egress",
                               "integrations", timeout=600)
        self.assertEqual(copied["egress"], "integrations")
        api = self.ssh_json(self.admin, "integrations", "show", "api")
        self.assertIn("vm:int-tcopy", api["attachments"])
        self.tiny_until("int-tcopy", url("api", "/copy"), "ok /base/copy")
        self.assert_cut_off("int-tcopy")
        self.assertTrue(self.reaches_outside("int-tin"))
        self.assertEqual(self.ssh_json(self.admin, "stat", "int-tin")["egress"], "all")

    # ---- the secrets, and last: egress none on a running VM --------------------------

    def test_9_secrets_nowhere_then_egress_none_cuts(self):
        for key, command in ((self.admin, ("integrations", "list", "--json")),
                             (self.admin, ("integrations", "show", "api", "--json")),
                             (self.admin, ("integrations", "show", "bear")),
                             (self.admin, ("integrations", "list")),
                             (self.keys["bob"], ("integrations", "list", "--json")),
                             (self.admin, ("stat", "int-deb", "--json")),
                             (self.admin, ("ls", "-l"))):
            self.assertEqual(self.run_lobby(key, *command).returncode, 0, command)
        # In the guests: files and every process's environment.
        for vm in ("int-deb", "int-tin"):
            out = self.guest(vm, secret_scan(["/etc", "/home", "/root", "/tmp", "/var", "/run",
                                              "/usr/local"]) + "; sync", timeout=600).stdout
            self.assertIn("scanned", out)
            self.assertEqual(out.strip(), "scanned", vm + " holds a secret:\n" + out)
        # On the host: every file of the two VMs (their disk overlays above all).
        for vm in ("int-deb", "int-tin"):
            vm_dir = os.path.join(self.data, "vms", self.vm_id(vm))
            self.assertTrue(os.path.isdir(vm_dir), vm_dir)
            for root, _, files in os.walk(vm_dir):
                for f in files:
                    path = os.path.join(root, f)
                    if os.path.isfile(path) and not os.path.islink(path):  # not control.sock
                        self.assert_file_has_no_secret(path)
        log = self.server.log()
        self.assertIn("integration vm=", log)
        for s in SECRETS:
            self.assertNotIn(s, log, "warren's log")
            for out in self.outputs:
                self.assertNotIn(s, out, "a command's output")

        # egress none on the running VM cuts its integration.
        self.lobby_ok("egress", "int-deb", "none")
        deadline = time.monotonic() + 30
        while True:
            out = self.guest("int-deb", curl_at_endpoint("api", "/after-none")).stdout
            if status_of(out) != 200:
                break
            self.assertLess(time.monotonic(), deadline, out)
            time.sleep(2)
        self.assertFalse(self.upstream.matching("/base/after-none"), out)

    def assert_file_has_no_secret(self, path):
        needles = [s.encode() for s in SECRETS]
        overlap = max(len(n) for n in needles)
        tail = b""
        with open(path, "rb") as f:
            while True:
                chunk = f.read(8 << 20)
                if not chunk:
                    break
                buf = tail + chunk
                for n in needles:
                    self.assertNotIn(n, buf, "a secret is in " + path)
                tail = buf[-overlap:]


if __name__ == "__main__":
    h.main()
