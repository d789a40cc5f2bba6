#!/usr/bin/python3
"""Integrations and web sharing for a VM on a remote VM host (issue 18), end to end.

A VM on another host is reached only through libvirt's channel stream for its control
connection (docs/multi_host.md), and everything at the VM's edge rides that connection: the
integrations endpoint (remote forwards on the guest's 127.77.0.1, its /etc/hosts block) and
the web proxy's way to the VM's ports. test_vm_integrations.py and test_vm_web.py prove them
on this machine's host; this proves them on the second host of second_host.py (a libvirtd in
namespaces of its own, over qemu+ssh), with warren serving as test_multi_host.py does:
  --host local=qemu:///system --host second=qemu+ssh://... --host-isolated second
after `warren isolate` was run on that host. One tiny VM, `new --host second --egress
integrations` (no network device at all: whatever it reaches goes through its control
connection), runs busybox httpd on its route port 8000 and on 3000:

  1. the VM is on the second host's libvirtd, not this machine's;
  2. integrations: the guest calls its integration by name (http://api.<int-domain>/...)
     and the test's loopback upstream (int_upstream.py) receives the request, path and query
     kept, with the injected header; warren's log names the calling VM. An integration not
     attached is refused (403) with nothing sent upstream; `integrations attach` reaches the
     running guest (its name resolves there, its own bearer arrives) and `integrations
     detach` takes it away again; 16 MiB stream down through it into the guest whole (the
     upstream's hash). The secrets are nowhere in the guest (files, processes'
     environments), in the VM's files on the remote host or in warren's log;
  3. web sharing: the VM's web address (the URL `stat` prints) answers the owner (a
     `browser` session handed to the VM's host, and a bearer API token) with the guest's
     page, and anonymous visitors get 401 and not a byte of it; 16 MiB of the guest's come
     out whole (the guest's hash); after `share set-public` anonymous visitors get the page
     while the owner-only port NAME-p3000 still answers only the owner, and after `share
     set-private` anonymous visitors are refused again (the owner is not);
  4. the second libvirtd stops (the VM's control connection goes with warren's connection
     to it; the VM runs on): the web page is an error meanwhile, and once the daemon is back
     the page and the integration answer again, from the same guest.

Needs root, libvirt, QEMU, sshd and the tiny image; fails under CI when one is missing.
"""
import hashlib
import os
import shlex
import time

import int_upstream
import second_host
import test_vm_integrations as vi
import test_vm_web as vw
import warren_harness as h
from two_host_case import TwoHostVmTestCase

VM = "far-edge"
BIG = 16 << 20  # bytes streamed each way through the remote control connection


class RemoteEdgeTest(TwoHostVmTestCase):
    EGRESS = "none"

    # Helpers of the local-host tests, shared rather than copied.
    tiny_get = vi.VmIntegrationsTest.tiny_get
    tiny_until = vi.VmIntegrationsTest.tiny_until
    last = vi.VmIntegrationsTest.last
    assert_file_has_no_secret = vi.VmIntegrationsTest.assert_file_has_no_secret
    get = vw.VmWebTest.get
    host = vw.VmWebTest.host
    json_of = vw.VmWebTest.json_of
    sign_in = vw.VmWebTest.sign_in
    session_cookie_name = vw.VmWebTest.session_cookie_name
    host_session = vw.VmWebTest.host_session
    assert_no_page = vw.VmWebTest.assert_no_page

    FAR_SERVE_ARGS = ["--vm-templates", "none", "--pool", "none", "--guest-slowdown-max", "1"]

    @classmethod
    def setUpClass(cls):
        cls.upstream = int_upstream.Upstream()
        cls.addClassCleanup(cls.upstream.close)
        super().setUpClass()
        cls.port = cls.server.web_port
        up = cls.upstream.url
        for argv in (("--name", "api", "--target", up + "/base", "--header",
                      "X-Api-Key:" + vi.SECRET1),
                     ("--name", "later", "--target", up, "--bearer", vi.SECRET2)):
            r = cls.run_cls(cls.admin, "integrations", "add", "http-proxy", *argv)
            assert r.returncode == 0, r.stdout + r.stderr
        t0 = time.monotonic()
        r = cls.run_cls(cls.admin, "new", "--name", VM, "--image", "tiny", "--host", "second",
                        "--egress", "integrations", "--integration", "api", "--memory", "256M",
                        "--disk", "1G", "--cpu", "1", timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        print("[timing] new on the second host (image upload included): %.1f s" %
              (time.monotonic() - t0), flush=True)
        # The guest's pages: the route port (8000) and an owner-only one (3000).
        r = cls.run_cls(cls.admin, "ssh", VM, shlex.quote(
            "mkdir -p /tmp/www /tmp/www3 && echo 'page of %s' > /tmp/www/index.html && "
            "echo 'page of %s-3000' > /tmp/www3/index.html && "
            "busybox httpd -p 8000 -h /tmp/www && busybox httpd -p 3000 -h /tmp/www3" %
            (VM, VM)), timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        r = cls.run_cls(cls.admin, "rm", VM, timeout=300)
        if r.returncode != 0:
            print("rm %s: %s%s" % (VM, r.stdout, r.stderr), flush=True)
        super().tearDownClass()


    def guest(self, vm, command, timeout=300):
        # One word for the lobby's tokenizer: the guest's shell gets the command as written.
        return self.vm("ssh", vm, shlex.quote(command), timeout=timeout)

    def at_endpoint(self, name, path):
        """A guest command: busybox wget of integration `name` at the endpoint's address with
        its Host header (for a name the guest's /etc/hosts does not list), then @status."""
        return ("wget -q -O - --header 'Host: %s.%s' http://%s%s 2>&1; s=$?; echo; "
                "echo @status=$s" % (name, vi.DOMAIN, vi.ENDPOINT, path))

    def until_refused(self, name, path, seconds=60):
        """Asks for integration `name` at the endpoint until the proxy refuses it (403)."""
        deadline = time.monotonic() + seconds
        while True:
            out = self.guest(VM, self.at_endpoint(name, path)).stdout
            if "403" in out and "@status=0" not in out:
                return out
            if time.monotonic() > deadline:
                self.fail("%s was not refused in %s: %r\n--- log:\n%s" %
                          (name, VM, out, self.server.log_tail(30)))
            time.sleep(2)

    def test_1_the_vm_runs_on_the_second_host(self):
        stat = self.ssh_json(self.admin, "stat", VM)
        self.assertEqual((stat["host"], stat["state"], stat["egress"]),
                         ("second", "running", "integrations"), stat)
        far = second_host.virsh(self.far.uri, "list", "--all", "--name").stdout.split()
        self.assertIn("warren-" + stat["id"], far)
        near = second_host.virsh("qemu:///system", "list", "--all", "--name").stdout.split()
        self.assertNotIn("warren-" + stat["id"], near)
        # No network device: what the guest reaches below goes through its control connection.
        self.assertNotIn("eth0", self.guest(VM, "ls /sys/class/net").stdout)

    def test_2_integrations_from_the_remote_guest(self):
        vm_id = self.vm_id(VM)
        # The guest calls its integration by name; the upstream gets it with the header.
        out = self.tiny_until(VM, vi.url("api", "/far/items?q=a%20b&n=2"),
                              "ok /base/far/items?q=a%20b&n=2", seconds=120)
        got = self.last("/base/far/items")
        self.assertEqual(got["path"], "/base/far/items?q=a%20b&n=2")
        self.assertEqual(got["headers"]["x-api-key"], vi.SECRET1)
        self.assertEqual(got["headers"]["host"], "127.0.0.1:%d" % self.upstream.port)
        self.assertNotIn(vi.SECRET1, out)
        self.assert_log("integration vm=%s name=api method=GET status=200" % vm_id)

        # Not attached: refused with nothing sent upstream.
        before = len(self.upstream.requests)
        out = self.until_refused("later", "/not-yet")
        self.assertEqual(len(self.upstream.requests), before, out)
        self.assert_log("integration vm=%s name=later method=GET status=403" % vm_id)
        # Attached while the VM runs: the running guest resolves its name, its bearer arrives.
        self.vm_ok("integrations", "attach", "later", "vm:" + VM)
        self.tiny_until(VM, vi.url("later", "/now"), "ok /now", seconds=120)
        self.assertEqual(self.last("/now")["headers"]["authorization"], "Bearer " + vi.SECRET2)
        self.assertIn("later.%s" % vi.DOMAIN, self.guest(VM, "cat /etc/hosts").stdout)
        # Detached: refused again, and its name leaves the guest's /etc/hosts.
        self.vm_ok("integrations", "detach", "later", "vm:" + VM)
        self.until_refused("later", "/gone")
        self.assertFalse(self.upstream.matching("/gone"))
        deadline = time.monotonic() + 60
        while "later.%s" % vi.DOMAIN in self.guest(VM, "cat /etc/hosts").stdout:
            self.assertLess(time.monotonic(), deadline, "later stayed in /etc/hosts")
            time.sleep(2)
        # api still works, and streams: 16 MiB down into the guest, whole.
        t = time.monotonic()
        out = self.guest(VM, "wget -q -O - '%s' | sha256sum" %
                         vi.url("api", "/big?bytes=%d" % BIG)).stdout
        took = time.monotonic() - t
        self.assertEqual(out.split()[:1], [int_upstream.big_body_sha256(BIG)],
                         out + self.server.log_tail(10))
        print("[timing] 16 MiB through the integration into the remote guest: %.1f s" % took,
              flush=True)

        # The secrets are nowhere in the guest, nor in the VM's files on the remote host.
        out = self.guest(VM, vi.secret_scan(["/etc", "/home", "/root", "/tmp", "/var", "/run",
                                             "/usr/local"]) + "; sync", timeout=600).stdout
        self.assertEqual(out.strip(), "scanned", VM + " holds a secret:\n" + out)
        vm_dir = os.path.join(self.far.warren_files(), "vms", vm_id)
        self.assertTrue(os.path.isdir(vm_dir), vm_dir)
        files = [os.path.join(root, f) for sub in ("vms", "disks")
                 for root, _, names in os.walk(os.path.join(self.far.warren_files(), sub))
                 for f in names]
        mine = [p for p in files if vm_id in p and os.path.isfile(p) and not os.path.islink(p)]
        self.assertTrue(any(p.startswith(vm_dir) for p in mine), files)
        for path in mine:
            self.assert_file_has_no_secret(path)
        for s in (vi.SECRET1, vi.SECRET2):
            self.assertNotIn(s, self.server.log(), "warren's log")

    def test_3_web_private_for_the_owner_then_public(self):
        want = "http://%s:%d/" % (self.host(VM), self.port)
        self.assertEqual(self.json_of("stat", VM)["url"], want)
        page = "page of %s\n" % VM
        # Private: anonymous visitors get no byte of the page.
        r = self.get(VM, "/", headers={"Accept": "application/json"})
        self.assertEqual(r.status, 401, r)
        self.assert_no_page(r, VM)
        r = self.get(VM, "/")
        self.assertEqual(r.status, 401, r)
        self.assert_no_page(r, VM)
        # The owner: a browser session handed to the VM's host, and a bearer token.
        mine = self.host_session(self.sign_in(self.admin), VM)
        r = self.get(VM, "/", cookies=mine)
        self.assertEqual((r.status, r.text()), (200, page), r)
        token = self.json_of("ssh-key", "generate-api-key", "--label", "owner")["token"]
        auth = {"Authorization": "Bearer " + token}
        r = self.get(VM, "/", headers=auth)
        self.assertEqual((r.status, r.text()), (200, page), r)
        # Owner-only port: the owner only.
        label = VM + "-p3000"
        r = self.get(label, "/", headers=auth)
        self.assertEqual((r.status, r.text()), (200, "page of %s-3000\n" % VM), r)
        # A bigger body streams whole out of the remote guest.
        sha = self.guest(VM, "head -c %d /dev/urandom > /tmp/www/big && sha256sum /tmp/www/big"
                         % BIG).stdout.split()[0]
        t = time.monotonic()
        r = self.get(VM, "/big", headers=auth, timeout=300)
        took = time.monotonic() - t
        self.assertEqual((r.status, len(r.body), hashlib.sha256(r.body).hexdigest()),
                         (200, BIG, sha))
        print("[timing] 16 MiB through the web proxy out of the remote guest: %.1f s" % took,
              flush=True)

        # Public: anyone gets the page; the owner-only port stays the owner's.
        self.vm_ok("share", "set-public", VM)
        self.assertEqual(self.json_of("share", "show", VM)["status"], "public")
        r = self.get(VM, "/")
        self.assertEqual((r.status, r.text()), (200, page), r)
        r = self.get(label, "/", headers={"Accept": "application/json"})
        self.assertEqual(r.status, 401, r)
        self.assert_no_page(r, VM + "-3000")

        # Private again, at once.
        self.vm_ok("share", "set-private", VM)
        r = self.get(VM, "/", headers={"Accept": "application/json"})
        self.assertEqual(r.status, 401, r)
        self.assert_no_page(r, VM)
        r = self.get(VM, "/", cookies=mine)
        self.assertEqual((r.status, r.text()), (200, page), r)

    def test_4_both_come_back_after_the_remote_daemon_restarts(self):
        # The control connection of a remote VM rides warren's libvirt connection to its
        # host (a local VM's does not): when that daemon goes and comes back, the connection
        # is dialled again and the integration and the web page work again, the VM having
        # run on meanwhile.
        self.vm_ok("share", "set-public", VM)
        self.addCleanup(self.vm, "share", "set-private", VM)
        self.far.stop_libvirtd()
        try:
            deadline = time.monotonic() + 60
            while self.ssh_json(self.admin, "stat", VM)["state"] != "unreachable":
                self.assertLess(time.monotonic(), deadline, "the host never went unreachable")
                time.sleep(1)
            # Meanwhile the page is an error at once, not the page and not a hang.
            t = time.monotonic()
            r = self.get(VM, "/", headers={"Accept": "application/json"}, timeout=60)
            self.assertGreaterEqual(r.status, 500, r)
            self.assert_no_page(r, VM)
            print("[timing] the web page while the host is away: %d in %.1f s" %
                  (r.status, time.monotonic() - t), flush=True)
        finally:
            self.far.start_libvirtd()
        t = time.monotonic()
        deadline = t + 180
        while True:
            r = self.get(VM, "/", headers={"Accept": "application/json"}, timeout=60)
            if r.status == 200:
                break
            self.assertLess(time.monotonic(), deadline, "the page never came back: %r\n%s" %
                            (r, self.server.log_tail(30)))
            time.sleep(1)
        self.assertEqual(r.text(), "page of %s\n" % VM)
        print("[timing] the web page back %.1f s after the daemon started" %
              (time.monotonic() - t), flush=True)
        self.tiny_until(VM, vi.url("api", "/back"), "ok /base/back", seconds=180)
        self.assertEqual(self.last("/base/back")["headers"]["x-api-key"], vi.SECRET1)
        print("[timing] the integration back %.1f s after the daemon started" %
              (time.monotonic() - t), flush=True)
        # The same guest: its web server (started once, in /tmp) still runs.
        self.assertEqual(self.ssh_json(self.admin, "stat", VM)["state"], "running")


if __name__ == "__main__":
    h.main()
