#!/usr/bin/python3
"""Two VM hosts under one warren (issue 18), through the real surfaces.

The second host is the fixture of second_host.py: a libvirtd of its own in network and mount
namespaces this test makes, reached over qemu+ssh (the real remote transport: virt-ssh-helper
behind sshd), with private /var/lib/warren, /run and libvirt directories, so nothing of it can
be seen from here except through libvirt's API. warren serves with
  --host local=qemu:///system --host second=qemu+ssh://root@ADDR/system?... --host-isolated second
and is driven with OpenSSH:
  1. `hosts` lists both, reachable, with their accelerator and isolation;
  2. `new --host second` boots a tiny VM there (the image uploaded to that host through
     libvirt's storage API), a command runs in it through the lobby and through a NAME@HOST
     login, and a VM placed on its own goes where there is room; `ls -l`/`stat` say where;
  3. `cp` of the remote VM is made on the remote host;
  4. the second libvirtd stops: its VMs show `unreachable`, commands on them are refused
     `unavailable` naming the host, `new` goes to the local host; it starts again and
     everything comes back (the VM still running, commands answered);
  5. `rm` leaves nothing of the VM on the remote host;
  6. the remote host isolates its VMs: the operator ran `warren isolate` there (as
     docs/multi_host.md says) before declaring it with --host-isolated; a guest there with
     `--egress all` reaches neither that host's loopback (slirp's 10.0.2.2) nor its address,
     and does once the rules are removed (so the probe could succeed and the rules stop it);
  9. warren restarts while the remote daemon is down: it serves, shows the host and its VM
     unreachable, connects by itself once the daemon is back, reconciles that host, and the
     VM answers.

  m. `migrate`: a running VM moves live local -> second with a job running through the
     move (its output whole after it, none lost), its disk kept, nothing of it left here; a
     stopped one moves cold back; a migrate to a drained or unreachable host is refused and
     the VM stays where it was, running; a target whose libvirtd is SIGKILLed while the move
     writes there fails the move, the VM runs on here with its job and data, and once the
     target is back its reconcile collects what the move left there (and the move works);
     and a running VM moves live back from the second host, whose daemon reaches this
     machine's through --host-peer-uri local=... (second_host.reach_back()), its job whole.

Needs root, libvirt, QEMU, sshd and the tiny image; fails under CI when one is missing.
"""
import http.client
import json
import os
import signal
import subprocess
import threading
import time
import unittest

import second_host
import warren_harness as h
from two_host_case import TwoHostVmTestCase


class MultiHostTest(TwoHostVmTestCase):
    EGRESS = "none"

    @classmethod
    def far_serve_args(cls, far):
        return ["--host-peer-uri", "local=" + far.reach_back(), "--vm-templates", "none",
                "--pool", "none", "--guest-slowdown-max", "1"]

    def hosts(self):
        return {x["name"]: x for x in self.ssh_json(self.admin, "hosts")["hosts"]}

    def wait_state(self, name, state, timeout=180):
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.ssh_json(self.admin, "stat", name).get("state")
            if seen == state:
                return
            time.sleep(1)
        self.fail("%s stayed %s, not %s" % (name, seen, state))

    def wait_unreachable(self, timeout=60):
        """Until warren has noticed the second daemon is gone (hosts says so)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.hosts()["second"]["state"] == "unreachable":
                return
            time.sleep(1)

    def assert_back(self, name, vm_id):
        """The VM on the second host runs there and answers a command again."""
        self.wait_state(name, "running")
        self.assertIn("warren-" + vm_id, self.far_domains())
        deadline = time.monotonic() + 180
        while True:
            r = self.vm("ssh", name, "cat", "/etc/hostname")
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), name)

    def test_1_hosts_lists_both(self):
        hosts = self.hosts()
        self.assertEqual(set(hosts), {"local", "second"})
        self.assertEqual(hosts["second"]["state"], "up", hosts)
        self.assertTrue(hosts["second"]["reachable"])
        self.assertTrue(hosts["second"]["isolated"])
        self.assertEqual(hosts["second"]["accel"], "tcg")
        self.assertIn(self.far.addr, hosts["second"]["uri"])
        self.assertGreater(hosts["second"]["memory_mib"], 0)
        self.assertTrue(any(i.startswith("tiny@") for i in hosts["local"]["images"]), hosts)
        text = self.vm_ok("hosts").stdout
        self.assertIn("second", text)
        self.assertIn("local", text)

    def test_2_a_vm_on_the_remote_host(self):
        t0 = time.monotonic()
        self.vm_ok("new", "--name", "far-one", "--image", "tiny", "--host", "second",
                   "--memory", "256M", "--disk", "1G", "--cpu", "1", timeout=600)
        print("[timing] new on the second host (image upload included): %.1f s" %
              (time.monotonic() - t0), flush=True)
        stat = self.ssh_json(self.admin, "stat", "far-one")
        self.assertEqual(stat["host"], "second")
        # The image was sent there, and the host says it has it now.
        self.assertIn(stat["image"], self.hosts()["second"]["images"])
        self.assertEqual(stat["state"], "running")
        vm_id = stat["id"]
        # On the second daemon, not this machine's.
        self.assertIn("warren-" + vm_id, self.far_domains())
        r = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True)
        self.assertNotIn("warren-" + vm_id, r.stdout)
        # A command through the lobby, over the remote control channel.
        out = self.vm_ok("ssh", "far-one", "cat", "/etc/hostname").stdout
        self.assertEqual(out.strip(), "far-one")
        # Through a NAME@HOST login with OpenSSH.
        login = subprocess.run(self.ssh_args(self.admin, "uname", "-n", user="far-one"),
                               capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
        self.assertEqual(login.returncode, 0, login.stderr)
        self.assertEqual(login.stdout.strip(), "far-one")
        self.assertIn("HOST", self.vm_ok("ls", "-l").stdout)
        # A forward (-W) into the remote VM: busybox httpd there, reached through the login.
        self.vm_ok("ssh", "far-one", "mkdir -p www && echo hello-far > www/hello.txt && "
                   "busybox httpd -p 127.0.0.1:8000 -h www")
        fwd = subprocess.run(self.ssh_args(self.admin, user="far-one",
                                           options=("-W", "localhost:8000")),
                             input=b"GET /hello.txt HTTP/1.0\r\n\r\n", capture_output=True,
                             timeout=120)
        self.assertEqual(fwd.returncode, 0, fwd.stderr)
        self.assertTrue(fwd.stdout.endswith(b"hello-far\n"), fwd.stdout)
        # Its web page through warren's web proxy, once shared (the route port, 8000).
        self.vm_ok("share", "set-public", "far-one")
        conn = http.client.HTTPConnection("127.0.0.1", self.server.web_port, timeout=60)
        conn.request("GET", "/hello.txt",
                     headers={"Host": "far-one.warren.localhost:%d" % self.server.web_port})
        page = conn.getresponse()
        body = page.read()
        conn.close()
        self.assertEqual(page.status, 200, body[:300])
        self.assertEqual(body, b"hello-far\n")

    def test_3_cp_stays_on_the_remote_host(self):
        self.vm_ok("cp", "far-one", "far-two", timeout=600)
        stat = self.ssh_json(self.admin, "stat", "far-two")
        self.assertEqual(stat["host"], "second")
        self.assertIn("warren-" + stat["id"], self.far_domains())
        self.assertEqual(self.vm_ok("ssh", "far-two", "cat", "/etc/hostname").stdout.strip(),
                         "far-two")
        self.vm_ok("rm", "far-two")
        self.assertNotIn("warren-" + stat["id"], self.far_domains())

    def test_4_the_remote_host_goes_away_and_comes_back(self):
        vm_id = self.ssh_json(self.admin, "stat", "far-one")["id"]
        self.far.stop_libvirtd()
        try:
            self.wait_unreachable()
            hosts = self.hosts()
            self.assertEqual(hosts["second"]["state"], "unreachable", hosts)
            self.assertEqual(self.ssh_json(self.admin, "stat", "far-one")["state"], "unreachable")
            ls = {v["name"]: v["state"] for v in self.ssh_json(self.admin, "ls")["vms"]}
            self.assertEqual(ls["far-one"], "unreachable")
            r = self.vm("stop", "far-one")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("second", r.stderr)
            # A new VM goes where it can.
            self.vm_ok("new", "--name", "near-one", "--image", "tiny", "--memory", "256M",
                       "--disk", "1G", "--cpu", "1", timeout=600)
            self.assertEqual(self.ssh_json(self.admin, "stat", "near-one")["host"], "local")
        finally:
            self.far.start_libvirtd()
        # Back: the VM ran on meanwhile (QEMU outlives its daemon), and answers.
        self.assert_back("far-one", vm_id)
        self.vm_ok("rm", "near-one")

    def test_5_rm_leaves_nothing_on_the_remote_host(self):
        vm_id = self.ssh_json(self.admin, "stat", "far-one")["id"]
        self.vm_ok("rm", "far-one")
        self.assertNotIn("warren-" + vm_id, self.far_domains())
        pools = second_host.virsh(self.far.uri, "pool-list", "--all", "--name").stdout
        self.assertNotIn(vm_id, pools)

    def probe(self, vm, addr, port):
        r = self.vm("ssh", vm, "printf 'hi\\n' | nc -w 3 %s %d 2>&1; echo" % (addr, port),
                    timeout=120)
        return r.stdout

    def test_6_the_remote_host_isolates_its_vms(self):
        port = 18000 + os.getpid() % 1000
        token = "far-listener-%d" % os.getpid()
        listener = self.far.popen(
            "python3", "-c",
            "import socket,sys\n"
            "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('0.0.0.0', %d)); s.listen(8)\n"
            "while True:\n"
            "    c,_=s.accept(); c.sendall(b'%s\\n'); c.close()\n" % (port, token),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(listener.wait, 10)
        self.addCleanup(listener.kill)
        # The listener answers inside the host (a local client there gets the token).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = self.far.run("python3", "-c", "import socket; print(socket.create_connection("
                             "('127.0.0.1', %d), 3).recv(100).decode())" % port, check=False)
            if token in r.stdout:
                break
            time.sleep(0.5)
        self.assertIn(token, r.stdout, r.stderr)

        self.vm_ok("new", "--name", "far-net", "--image", "tiny", "--host", "second",
                   "--egress", "all", "--memory", "256M", "--disk", "1G", "--cpu", "1",
                   timeout=600)
        self.addCleanup(self.vm, "rm", "far-net")
        for addr in ("10.0.2.2", self.far.addr):
            out = self.probe("far-net", addr, port)
            self.assertNotIn(token, out, "the guest reached %s:%d on the remote host" % (addr, port))
        # Without the rules the same probe gets through: the rules are what stops it.
        self.far.run(h.WARREN_BIN, "isolate", "--remove", "--data-dir", "/var/lib/warren")
        try:
            deadline = time.monotonic() + 30
            out = ""
            while time.monotonic() < deadline and token not in out:
                out = self.probe("far-net", "10.0.2.2", port)
            self.assertIn(token, out, "the probe never got through, even without the rules")
        finally:
            self.far.run(h.WARREN_BIN, "isolate", "--data-dir", "/var/lib/warren")
        out = self.probe("far-net", "10.0.2.2", port)
        self.assertNotIn(token, out)

    def test_9_warren_restarts_while_the_remote_host_is_down(self):
        self.vm_ok("new", "--name", "far-late", "--image", "tiny", "--host", "second",
                   "--memory", "256M", "--disk", "1G", "--cpu", "1", timeout=600)
        self.addCleanup(self.vm, "rm", "far-late")
        vm_id = self.ssh_json(self.admin, "stat", "far-late")["id"]
        self.far.stop_libvirtd()
        try:
            self.restart_server()
            # The lobby serves, the host and its VM are unreachable, nothing was removed.
            self.assertEqual(self.hosts()["second"]["state"], "unreachable")
            self.assertEqual(self.ssh_json(self.admin, "stat", "far-late")["state"],
                             "unreachable")
        finally:
            self.far.start_libvirtd()
        # warren connects on its own (no command needed to wake it) and reconciles that host.
        self.assertTrue(self.server.wait_for_log("reconcile of host second", 120),
                        "no reconcile of the second host once it answered")
        self.assert_back("far-late", vm_id)


    # --- migrate (these run after the tests above: name order) ---------------------------

    def local_domains(self):
        r = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True)
        return [d for d in r.stdout.split() if d]

    def test_m1_migrate_a_running_vm_with_a_job(self):
        self.vm_ok("new", "--name", "mover", "--image", "tiny", "--host", "local",
                   "--memory", "256M", "--disk", "1G", "--cpu", "1", timeout=600)
        vm_id = self.ssh_json(self.admin, "stat", "mover")["id"]
        self.vm_ok("ssh", "mover", "'echo kept > ~/file; sync'")
        # A job that runs across the move: its output before, during and after it.
        r = self.vm("ssh", "--wait-seconds", "1", "mover",
                    "'echo started; for i in $(seq 1 40); do echo tick $i; echo $i >> ~/ticks;"
                    " sync; sleep 1; done; echo finished; exit 3'")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("started", r.stdout)
        job = [j for j in self.ssh_json(self.admin, "jobs")["jobs"] if not j["finished"]][0]
        # Other commands on the VM go on while it moves: the move has libvirt connections of
        # its own, so the hosts' shared ones (each `stat`'s Inspect) are not held behind it.
        moving, stats = threading.Event(), []

        def stat_while_moving():
            while not moving.is_set():
                s0 = time.monotonic()
                r = self.vm("stat", "mover", "--json", timeout=120)
                if r.returncode == 0 and not moving.is_set():
                    stats.append(time.monotonic() - s0)

        # Commands in the guest meanwhile: one issued while the VM is stopped at the
        # switchover waits until it runs on the target (VmHosts::DialControl) rather than be
        # refused as paused or stopped. (One whose channel was open at the switchover may
        # fail with the old connection: that is not what this checks.)
        refused = []

        def exec_while_moving():
            while not moving.is_set():
                r = self.vm("ssh", "mover", "true", timeout=120)
                if r.returncode != 0 and "start or resume it first" in r.stderr:
                    refused.append(r.stderr.strip())

        t0 = time.monotonic()
        pollers = [threading.Thread(target=f, daemon=True)
                   for f in (stat_while_moving, exec_while_moving)]
        for p in pollers:
            p.start()
        out = self.ssh_json(self.admin, "migrate", "mover", "second", timeout=600)
        took = time.monotonic() - t0
        moving.set()
        for p in pollers:
            p.join(timeout=130)
        self.assertEqual(refused, [], "a command during the move was refused, not delayed")
        print("[timing] migrate live local -> second: %.1f s (%s); %d stats answered meanwhile, "
              "slowest %.1f s" % (took, json.dumps(out), len(stats), max(stats or [0])),
              flush=True)
        if took > 4:
            self.assertGreaterEqual(len(stats), 2, "stat waited for the move")
        self.assertTrue(out["live"])
        self.assertEqual(out["to"], "second")
        self.assertGreaterEqual(out["downtime_ms"], 0)
        stat = self.ssh_json(self.admin, "stat", "mover")
        self.assertEqual(stat["host"], "second")
        self.assertEqual(stat["state"], "running")
        self.assertIn("warren-" + vm_id, self.far_domains())
        self.assertNotIn("warren-" + vm_id, self.local_domains())
        # Nothing of it is left here.
        self.assertFalse(os.path.exists(os.path.join(self.data, "vms", vm_id)))
        self.assertFalse([f for f in os.listdir(os.path.join(self.data, "disks"))
                          if f.startswith(vm_id)] if os.path.isdir(
                              os.path.join(self.data, "disks")) else [])
        # The job ran on through the move, and its output is whole.
        r = self.vm("wait", job["job"], "--wait-seconds", "45", timeout=200)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("finished", r.stdout)
        ticks = [int(line.split()[1]) for line in r.stdout.splitlines()
                 if line.startswith("tick ")]
        self.assertTrue(ticks and ticks[-1] == 40, r.stdout)
        self.assertEqual(ticks, list(range(ticks[0], 41)), r.stdout)  # none lost
        self.assertEqual(self.vm_ok("ssh", "mover", "cat", "~/file").stdout.strip(), "kept")
        # What it wrote to its disk while it moved is there too (the last overlay's copy).
        self.assertEqual(self.vm_ok("ssh", "mover", "cat", "~/ticks").stdout.split(),
                         [str(i) for i in range(1, 41)])
        self.assertEqual(self.vm_ok("ssh", "mover", "cat", "/etc/hostname").stdout.strip(),
                         "mover")

    def test_m2_migrate_a_stopped_vm_cold(self):
        vm_id = self.ssh_json(self.admin, "stat", "mover")["id"]
        self.vm_ok("ssh", "mover", "'echo moved-cold > ~/file2; sync'")
        self.vm_ok("stop", "mover")
        t0 = time.monotonic()
        out = self.ssh_json(self.admin, "migrate", "mover", "local", timeout=600)
        print("[timing] migrate cold second -> local: %.1f s (%s)" %
              (time.monotonic() - t0, json.dumps(out)), flush=True)
        self.assertFalse(out["live"])
        stat = self.ssh_json(self.admin, "stat", "mover")
        self.assertEqual(stat["host"], "local")
        self.assertEqual(stat["state"], "stopped")
        self.assertIn("warren-" + vm_id, self.local_domains())
        self.assertNotIn("warren-" + vm_id, self.far_domains())
        pools = second_host.virsh(self.far.uri, "pool-list", "--all", "--name").stdout
        self.assertNotIn(vm_id, pools)
        self.vm_ok("start", "mover", timeout=300)
        deadline = time.monotonic() + 180
        while True:
            r = self.vm("ssh", "mover", "cat", "~/file", "~/file2")
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        self.assertEqual(r.stdout.split(), ["kept", "moved-cold"], r.stderr)
        self.assertEqual(self.vm_ok("ssh", "mover", "cat", "~/ticks").stdout.split(),
                         [str(i) for i in range(1, 41)])

    def test_m3_a_refused_migrate_leaves_the_vm_where_it_was(self):
        vm_id = self.ssh_json(self.admin, "stat", "mover")["id"]
        self.vm_ok("hosts", "drain", "second")
        try:
            r = self.vm("migrate", "mover", "second")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("drained", r.stderr)
        finally:
            self.vm_ok("hosts", "undrain", "second")
        # A target that does not answer: refused before anything moves.
        self.far.stop_libvirtd()
        try:
            self.wait_unreachable()
            r = self.vm("migrate", "mover", "second")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("second", r.stderr)
        finally:
            self.far.start_libvirtd()
        stat = self.ssh_json(self.admin, "stat", "mover")
        self.assertEqual(stat["host"], "local")
        self.assertIn("warren-" + vm_id, self.local_domains())
        self.assertNotIn("warren-" + vm_id, self.far_domains())
        self.assertEqual(stat["state"], "running")
        self.assertEqual(self.vm_ok("ssh", "mover", "cat", "~/file").stdout.strip(), "kept")
        self.vm_ok("rm", "mover")
        self.assertNotIn("warren-" + vm_id, self.local_domains())

    def far_leftovers(self, vm_id):
        """What of VM `vm_id` is in warren's directory on the second host."""
        root = self.far.warren_files()
        found = []
        for sub in ("vms", "disks"):
            d = os.path.join(root, sub)
            if os.path.isdir(d):
                found += [os.path.join(sub, f) for f in os.listdir(d) if f.startswith(vm_id)]
        return found

    def test_m4_a_target_that_dies_mid_move_leaves_the_vm_where_it_was(self):
        self.vm_ok("new", "--name", "mover2", "--image", "tiny", "--host", "local",
                   "--memory", "256M", "--disk", "1G", "--cpu", "1", timeout=600)
        vm_id = self.ssh_json(self.admin, "stat", "mover2")["id"]
        # Enough written that its layers take a while to cross.
        self.vm_ok("ssh", "mover2", "'head -c 60M /dev/urandom > ~/blob; sha256sum ~/blob"
                   " > ~/blob.sum; sync'", timeout=300)
        r = self.vm("ssh", "--wait-seconds", "1", "mover2",
                    "'for i in $(seq 1 30); do echo tick $i; sleep 1; done; echo finished'")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = [j for j in self.ssh_json(self.admin, "jobs")["jobs"] if not j["finished"]][0]
        result = {}

        def move():
            result["r"] = self.vm("migrate", "mover2", "second", timeout=600)

        mover = threading.Thread(target=move, daemon=True)
        mover.start()
        # The second libvirtd dies once the move has begun writing there.
        deadline = time.monotonic() + 120
        while not self.far_leftovers(vm_id) and mover.is_alive():
            self.assertLess(time.monotonic(), deadline, "the move wrote nothing there")
            time.sleep(0.05)
        self.assertTrue(mover.is_alive(), "the move ended before the target was killed: %s" %
                        result.get("r"))
        seen = self.far_leftovers(vm_id)
        self.far.stop_libvirtd(sig=signal.SIGKILL)
        try:
            mover.join(timeout=300)
            r = result["r"]
            print("[timing] killed the target with %s there; migrate said: %s" %
                  (seen, r.stderr.strip()), flush=True)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("stays on local", r.stderr)
            stat = self.ssh_json(self.admin, "stat", "mover2")
            self.assertEqual(stat["host"], "local")
            self.assertEqual(stat["state"], "running")
            self.assertIn("warren-" + vm_id, self.local_domains())
            self.assertEqual(self.vm_ok("ssh", "mover2", "'sha256sum -c ~/blob.sum'",
                                        timeout=120).returncode, 0)
        finally:
            self.far.start_libvirtd()
        # The job ran on, its output whole.
        r = self.vm("wait", job["job"], "--wait-seconds", "45", timeout=200)
        self.assertEqual(r.returncode, 0, r.stderr)
        ticks = [int(line.split()[1]) for line in r.stdout.splitlines()
                 if line.startswith("tick ")]
        self.assertTrue(ticks and ticks[-1] == 30, r.stdout)
        self.assertEqual(ticks, list(range(ticks[0], 31)), r.stdout)  # none lost
        # Once the host is back, its reconcile collects what the move left there.
        deadline = time.monotonic() + 120
        while self.far_leftovers(vm_id) and time.monotonic() < deadline:
            time.sleep(1)
        self.assertEqual(self.far_leftovers(vm_id), [])
        self.assertNotIn("warren-" + vm_id, self.far_domains())
        # And the move works now.
        out = self.ssh_json(self.admin, "migrate", "mover2", "second", timeout=600)
        self.assertTrue(out["live"])
        self.assertEqual(self.vm_ok("ssh", "mover2", "'sha256sum -c ~/blob.sum'",
                                    timeout=120).returncode, 0)

    def test_m5_a_running_vm_moves_live_from_the_remote_host_back(self):
        # The second host's daemon reaches this machine's by the URI given with
        # --host-peer-uri local=... (the fixture's sshd on the veth's host side).
        vm_id = self.ssh_json(self.admin, "stat", "mover2")["id"]
        self.assertEqual(self.ssh_json(self.admin, "stat", "mover2")["host"], "second")
        r = self.vm("ssh", "--wait-seconds", "1", "mover2",
                    "'for i in $(seq 1 20); do echo back $i; echo $i >> ~/back; sync; sleep 1;"
                    " done; echo finished'")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = [j for j in self.ssh_json(self.admin, "jobs")["jobs"] if not j["finished"]][0]
        t0 = time.monotonic()
        out = self.ssh_json(self.admin, "migrate", "mover2", "local", timeout=600)
        print("[timing] migrate live second -> local: %.1f s (%s)" %
              (time.monotonic() - t0, json.dumps(out)), flush=True)
        self.assertTrue(out["live"])
        stat = self.ssh_json(self.admin, "stat", "mover2")
        self.assertEqual((stat["host"], stat["state"]), ("local", "running"))
        self.assertIn("warren-" + vm_id, self.local_domains())
        self.assertNotIn("warren-" + vm_id, self.far_domains())
        r = self.vm("wait", job["job"], "--wait-seconds", "45", timeout=200)
        self.assertEqual(r.returncode, 0, r.stderr)
        nums = [int(line.split()[1]) for line in r.stdout.splitlines()
                if line.startswith("back ")]
        self.assertEqual(nums, list(range(nums[0], 21)), r.stdout)
        self.assertEqual(self.vm_ok("ssh", "mover2", "cat", "~/back").stdout.split(),
                         [str(i) for i in range(1, 21)])
        self.assertEqual(self.vm_ok("ssh", "mover2", "'sha256sum -c ~/blob.sum'",
                                    timeout=120).returncode, 0)
        self.vm_ok("rm", "mover2")
        self.assertEqual(self.far_leftovers(vm_id), [])
        self.assertNotIn("warren-" + vm_id, self.local_domains())

if __name__ == "__main__":
    unittest.main(verbosity=2)
