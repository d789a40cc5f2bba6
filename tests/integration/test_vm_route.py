#!/usr/bin/python3
"""`ssh -p PORT NAME@HOST` straight into a VM, end to end on real libvirt + QEMU (TCG), through
the real lobby and real clients: OpenSSH ssh/sftp/scp, paramiko and expect.

One tiny VM serves every test: exec with stdin, stderr and exit status (also as
vm+NAME@HOST), SetEnv, a pty shell under expect (prompt, a window change seen by `stty
size`, Ctrl-C interrupting `sleep`, the exit status), `-L` to busybox httpd started in the
VM, `-W`, sftp and scp up and down with sha256 checks, 50 channels at once from paramiko
and a clean refusal past the limit, a connection dropped in the middle of an sftp download
(nothing left open in the guest, the VM still serves), scoped and removed keys, removing a
key closing the shell, sftp and forward it has open (and a token label ending its /exec and
MCP calls) within 2 s, Ctrl-C in the lobby REPL stopping `ssh VM sleep`, and last a
stopped VM's message. A second class boots the Debian image for legacy `scp -O` and a python3
server reached with -W. Guests get no network device (`--vm-egress none`).

Needs root, libvirt and QEMU, and the tiny image from packaging/images (WARREN_TEST_IMAGES,
default /var/lib/warren-test/images); skips, saying why, when they are missing (fails under CI).
"""
import glob
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import warren_harness as h
from mcp_http import McpClient, mint_token

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")
DATA_PARENT = os.environ.get("WARREN_TEST_DATA_DIR", "/var/lib/warren-test")
VM = "rt-tiny"


def have_image(name):
    return bool(glob.glob(os.path.join(IMAGES, name + "@*", "rootfs.qcow2")))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# expect helpers: a script failure exits 100+, otherwise the script exits with ssh's status.
EXPECT_PROCS = r"""
proc want {text} {
  expect {
    -ex $text {}
    timeout { puts "\nSCRIPT: timed out waiting for $text"; exit 101 }
    eof { puts "\nSCRIPT: eof waiting for $text"; exit 102 }
  }
}
proc finish {} {
  expect {
    eof {}
    timeout { puts "\nSCRIPT: the session did not end"; exit 104 }
  }
  set result [wait]
  exit [lindex $result 3]
}
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root for libvirt's system daemon")
@unittest.skipUnless(shutil.which("virsh") and have_image("tiny"),
                     "needs libvirt and the tiny image in " + IMAGES)
class VmRouteTest(h.LobbyTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="warren-it-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        os.makedirs(DATA_PARENT, exist_ok=True)
        cls.data = tempfile.mkdtemp(prefix="route-", dir=DATA_PARENT)
        os.chmod(cls.data, 0o711)
        cls.addClassCleanup(shutil.rmtree, cls.data, ignore_errors=True)
        cls.keys = {name: h.Key(cls.tmp, name)
                    for name in ("admin", "tagged", "lsonly", "gone", "revoked")}
        cls.admin = cls.keys["admin"]
        cls.server = h.Server(cls.data, cls.admin, vms=True,
                              extra_args=["--images-dir", IMAGES, "--vm-egress", "none"])
        # The harness keeps the log beside the data dir; it goes once the server has stopped.
        cls.addClassCleanup(lambda: cls.server.log_path and os.path.exists(cls.server.log_path)
                            and os.remove(cls.server.log_path))
        cls.addClassCleanup(cls.server.stop)
        cls.server.start(timeout=120)
        cls.pin_host_key(cls.server)
        # Cleanups run last-in first-out: the VM goes before the server stops.
        cls.addClassCleanup(lambda: subprocess.run(
            cls.ssh_args_cls(cls.admin, "rm", VM), capture_output=True, timeout=120))
        r = subprocess.run(cls.ssh_args_cls(cls.admin, "new", "--image", "tiny", "--name", VM,
                                            "--cpu", "1", "--memory", "512M"),
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("new failed: %s\n%s" % (r.stderr, cls.server.log_tail(40)))
        # busybox httpd in the VM, for the forwarding tests.
        r = subprocess.run(cls.ssh_args_cls(cls.admin, "ssh", VM,
                                            "mkdir -p www && echo hello-from-vm > www/hello.txt"
                                            " && busybox httpd -p 127.0.0.1:8000 -h www"),
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("httpd failed: " + r.stderr)

    @classmethod
    def ssh_args_cls(cls, key, *command, user="lobby", options=()):
        return h.LobbyTestCase.ssh_args(cls, key, *command, user=user, options=options)

    def into(self, *command, key=None, user=VM, options=(), **kwargs):
        """ssh NAME@HOST COMMAND: straight into the VM."""
        kwargs.setdefault("timeout", 120)
        return self.ssh(key or self.admin, *command, user=user, options=options, **kwargs)

    def sftp(self, batch, key=None, user=VM, timeout=300):
        path = os.path.join(self.tmp, "batch")
        with open(path, "w", encoding="ascii") as f:
            f.write(batch)
        args = ["sftp", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=" + self.known_hosts, "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "StrictHostKeyChecking=yes", "-i", (key or self.admin).path,
                "-P", str(self.server.port), "-b", path, user + "@127.0.0.1"]
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              cwd=self.tmp)

    def scp_args(self, *args):
        return ["scp", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=" + self.known_hosts, "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "StrictHostKeyChecking=yes", "-i", self.admin.path,
                "-P", str(self.server.port)] + list(args)

    def random_file(self, name, size):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        return path

    def guest_processes(self):
        return self.into("ps").stdout

    def run_expect(self, args, body, **env):
        """Runs `args` (an ssh with a terminal) under expect with `body`, EXPECT_PROCS and
        `env`; returns (ssh's exit status, transcript), failing on a script failure."""
        spawn = " ".join("{%s}" % a for a in args)
        script = "set timeout 30\nlog_user 1\n%s\nspawn %s\n%s\n" % (EXPECT_PROCS, spawn, body)
        path = os.path.join(self.tmp, self.id().rsplit(".", 1)[-1] + ".exp")
        with open(path, "w", encoding="utf-8") as f:
            f.write(script)
        r = subprocess.run(["expect", path], capture_output=True, timeout=180,
                           env=dict(os.environ, **env), stdin=subprocess.DEVNULL)
        transcript = r.stdout.decode("utf-8", "replace")
        self.assertLess(r.returncode, 100, "expect script failed:\n" + transcript)
        return r.returncode, transcript

    # ---- exec ----

    def test_exec_stdout_stderr_status_and_stdin(self):
        r = self.into("echo out; echo err >&2; exit 3")
        self.assertEqual((r.stdout, r.stderr, r.returncode), ("out\n", "err\n", 3))
        r = self.into("id -un; hostname", user="vm+" + VM)
        self.assertEqual((r.stdout, r.returncode), ("dev\n%s\n" % VM, 0), r.stderr)
        blob = os.urandom(1 << 20)
        r = subprocess.run(self.ssh_args(self.admin, "sha256sum", user=VM), input=blob,
                           capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[0].decode(), hashlib.sha256(blob).hexdigest())
        # The lobby stays reachable under any other login name.
        self.assertIn("admin", self.ssh_ok(self.admin, "whoami", user="someone").stdout)

    def test_closing_an_exec_channel_stops_the_command(self):
        client = self.paramiko_client(self.admin, user=VM)
        self.addCleanup(client.close)
        chan = client.get_transport().open_session()
        chan.exec_command("sleep 311 & sleep 312")
        deadline = time.monotonic() + 30
        while "sleep 312" not in self.guest_processes():
            self.assertLess(time.monotonic(), deadline, "the command never started")
            time.sleep(0.3)
        chan.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ps = self.guest_processes()
            if "sleep 311" not in ps and "sleep 312" not in ps:
                break
            time.sleep(0.5)
        self.assertNotIn("sleep 311", ps)
        self.assertNotIn("sleep 312", ps)

    def test_setenv(self):
        r = self.into("echo $GREETING/$LANG", options=("-o", "SetEnv=GREETING=hi LANG=C.UTF-8"))
        self.assertEqual((r.stdout, r.returncode), ("hi/C.UTF-8\n", 0), r.stderr)
        # With a terminal (a raw session: the variables are exported before the command).
        r = self.into("echo $GREETING", options=("-tt", "-o", "SetEnv=GREETING=\"it's so\""))
        self.assertEqual((r.stdout.strip(), r.returncode), ("it's so", 0), r.stderr)
        # Ours are not for the client to set.
        r = self.into("echo x${WARREN_JOB:+set}", options=("-o", "SetEnv=WARREN_JOB=forged"))
        self.assertNotEqual(r.stdout.strip(), "xforged")

    # ---- a shell with a pty, under expect ----

    def test_pty_shell_under_expect(self):
        args = self.ssh_args(self.admin, user=VM, tty=True,
                             options=("-o", "SetEnv=GREETING=hello"))
        body = r"""
want "$ "
send "echo \$GREETING-\$TERM\r"
want "hello-"
want "$ "
stty rows 33 columns 101 < $spawn_out(slave,name)
sleep 0.5
send "stty size\r"
want "33 101"
want "$ "
send "sleep 300; echo not-\$((6*7))\r"
sleep 1
send "\003"
want "$ "
send "exit 7\r"
finish
"""
        t0 = time.monotonic()
        status, transcript = self.run_expect(args, body, TERM="vt100")
        self.assertEqual(status, 7, transcript)
        self.assertIn("hello-vt100", transcript)
        self.assertNotIn("not-42", transcript)
        self.assertLess(time.monotonic() - t0, 120)  # Ctrl-C, not the sleep, ended it

    # ---- forwarding ----

    def test_local_forward_to_a_server_in_the_vm(self):
        port = free_port()
        proc = subprocess.Popen(
            self.ssh_args(self.admin, user=VM, options=(
                "-N", "-o", "ExitOnForwardFailure=yes", "-L", "127.0.0.1:%d:localhost:8000" % port)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        deadline = time.monotonic() + 30
        body = None
        while time.monotonic() < deadline and body is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
                    data = b""
                    while True:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    body = data
            except OSError:
                time.sleep(0.2)
        self.assertIsNotNone(body, "the forward never answered")
        self.assertRegex(body, rb"^HTTP/1\.[01] 200")
        self.assertTrue(body.endswith(b"hello-from-vm\n"), body)

    def test_stdio_forward(self):
        r = subprocess.run(self.ssh_args(self.admin, user=VM, options=("-W", "localhost:8000")),
                           input=b"GET /hello.txt HTTP/1.0\r\n\r\n", capture_output=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.endswith(b"hello-from-vm\n"), r.stdout)
        # Only ports inside the VM: any other destination is refused.
        r = subprocess.run(self.ssh_args(self.admin, user=VM, options=("-W", "192.0.2.1:80")),
                           input=b"", capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 255)
        self.assertIn(b"prohibited", r.stderr)

    # ---- files ----

    def test_sftp_up_and_down(self):
        local = self.random_file("up.bin", 6 << 20)
        r = self.sftp("put up.bin up.bin\nget up.bin down.bin\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sha256(os.path.join(self.tmp, "down.bin")), sha256(local))
        self.assertEqual(self.into("sha256sum up.bin").stdout.split()[0], sha256(local))

    def test_scp_both_ways(self):
        local = self.random_file("scp.bin", 3 << 20)
        r = subprocess.run(self.scp_args(local, VM + "@127.0.0.1:scp.bin"),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        back = os.path.join(self.tmp, "scp.back")
        r = subprocess.run(self.scp_args(VM + "@127.0.0.1:scp.bin", back),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sha256(back), sha256(local))
        # Legacy scp (-O) runs `scp -t` in the VM: the tiny image has no scp, so the error
        # comes from the VM's shell, through the exec path, with its exit status.
        r = subprocess.run(self.scp_args("-O", local, VM + "@127.0.0.1:legacy.bin"),
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)

    def test_dropped_connection_mid_sftp(self):
        self.into("head -c 48000000 /dev/zero > drop.bin")
        batch = os.path.join(self.tmp, "drop-batch")
        with open(batch, "w", encoding="ascii") as f:
            f.write("get drop.bin drop.down\n")
        args = ["sftp", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=" + self.known_hosts, "-o", "StrictHostKeyChecking=yes",
                "-i", self.admin.path, "-P", str(self.server.port), "-b", batch,
                VM + "@127.0.0.1"]
        # In its own process group, so the ssh under it is killed too.
        proc = subprocess.Popen(args, cwd=self.tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            down = os.path.join(self.tmp, "drop.down")
            deadline = time.monotonic() + 60
            while not (os.path.exists(down) and os.path.getsize(down) > (1 << 20)):
                self.assertLess(time.monotonic(), deadline, "the download never started")
                self.assertIsNone(proc.poll(), "sftp ended early")
                time.sleep(0.05)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.assertLess(os.path.getsize(down), 48000000)
        # The guest's side of that channel is gone, and the VM serves new sessions.
        deadline = time.monotonic() + 20
        while "sftp-server" in self.guest_processes():
            self.assertLess(time.monotonic(), deadline, "sftp-server left running in the guest")
            time.sleep(0.5)
        self.assert_log("ssh connection closed")
        local = self.random_file("after.bin", 1 << 20)
        r = self.sftp("put after.bin after.bin\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.into("sha256sum after.bin").stdout.split()[0], sha256(local))

    # ---- many channels ----

    def test_fifty_channels_at_once_and_the_limit(self):
        client = self.paramiko_client(self.admin, user=VM)
        self.addCleanup(client.close)
        transport = client.get_transport()
        chans = []
        for i in range(50):
            chan = transport.open_session()
            chan.settimeout(120)
            chan.exec_command("echo n%d; sleep 1" % i)
            chans.append(chan)
        # Another user of the lobby is not held up meanwhile.
        t0 = time.monotonic()
        self.ssh_ok(self.admin, "whoami")
        self.assertLess(time.monotonic() - t0, 20)
        for i, chan in enumerate(chans):
            out = b""
            while True:
                data = chan.recv(4096)
                if not data:
                    break
                out += data
            self.assertEqual((out, chan.recv_exit_status()), (b"n%d\n" % i, 0))
            chan.close()
        # Past the limit (64 open channels per connection into a VM): a clean refusal.
        import paramiko

        held = [transport.open_session() for _ in range(64)]
        with self.assertRaises(paramiko.ChannelException) as refused:
            transport.open_session()
        self.assertIn("prohibited", str(refused.exception))
        for chan in held:
            chan.close()
        # The connection still works once channels are free again.
        deadline = time.monotonic() + 10
        while True:
            try:
                chan = transport.open_session()
                break
            except paramiko.ChannelException:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.1)
        chan.settimeout(60)
        chan.exec_command("echo again")
        self.assertEqual(chan.recv(100), b"again\n")
        self.assertEqual(chan.recv_exit_status(), 0)

    # ---- who may go in ----

    def test_scoped_and_removed_keys(self):
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "tagged", "--tag", "blue",
                    "'%s'" % self.keys["tagged"].public_line)
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "lsonly", "--cmds", "ls",
                    "'%s'" % self.keys["lsonly"].public_line)
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "gone",
                    "'%s'" % self.keys["gone"].public_line)
        # A key limited to tag blue: the untagged VM does not exist for it, word for word.
        hidden = self.into("true", key=self.keys["tagged"], user="vm+" + VM)
        unknown = self.into("true", key=self.keys["tagged"], user="vm+rt-nosuch")
        self.assert_status(hidden, "not_found")
        self.assert_status(unknown, "not_found")
        self.assertEqual(hidden.stderr.replace(VM, "X"), unknown.stderr.replace("rt-nosuch", "X"))
        # Without vm+, that name leads to the lobby (as for any name it cannot see).
        self.assertIn("admin", self.into("whoami", key=self.keys["tagged"]).stdout)
        # A key that may not run "ssh" may not log into a VM either.
        r = self.into("true", key=self.keys["lsonly"])
        self.assert_status(r, "permission_denied")
        self.assertIn('may not run "ssh"', r.stderr)
        # A key removed while its connection is open: the connection is closed at once
        # (test_removed_key_closes_its_shell_sftp_and_forward has what it had open), and the
        # key logs in no more.
        client = self.paramiko_client(self.keys["gone"], user=VM)
        self.addCleanup(client.close)
        chan = client.get_transport().open_session()
        chan.exec_command("echo before")
        self.assertEqual(chan.recv(100), b"before\n")
        self.ssh_ok(self.admin, "ssh-key", "remove", "gone")
        deadline = time.monotonic() + 3
        while client.get_transport().is_active():
            self.assertLess(time.monotonic(), deadline, "the connection stayed open")
            time.sleep(0.05)
        r = self.into("true", key=self.keys["gone"])
        self.assertEqual(r.returncode, 255)
        self.assertIn("Permission denied", r.stderr)

    def await_guest(self, *texts, present=True, timeout=30):
        """Waits until every one of `texts` shows in the guest's ps (or none, present=False)."""
        deadline = time.monotonic() + timeout
        while True:
            ps = self.guest_processes()
            if all((t in ps) == present for t in texts):
                return
            self.assertLess(time.monotonic(), deadline, "guest processes: " + ps)
            time.sleep(0.3)

    def test_removed_key_closes_its_shell_sftp_and_forward(self):
        import paramiko

        key = self.keys["revoked"]
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "revoked", "'%s'" % key.public_line)
        # A shell with a terminal and an sftp session on one connection...
        client = self.paramiko_client(key, user=VM)
        self.addCleanup(client.close)
        shell = client.get_transport().open_session()
        shell.get_pty()
        shell.invoke_shell()
        shell.settimeout(30)
        out = b""
        while b"$ " not in out:
            out += shell.recv(4096)
        sftp = client.open_sftp()
        self.assertIn("www", sftp.listdir("."))
        # ...and a -L forward on another, with a connection through it held open.
        port = free_port()
        fwd = subprocess.Popen(
            self.ssh_args(key, user=VM, options=(
                "-N", "-o", "ExitOnForwardFailure=yes", "-L", "127.0.0.1:%d:localhost:8000" % port)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(fwd.wait)
        self.addCleanup(fwd.kill)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
                    if s.recv(100).startswith(b"HTTP/1."):
                        break
            except OSError:
                pass
            self.assertLess(time.monotonic(), deadline, "the forward never answered")
            time.sleep(0.2)
        held = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.addCleanup(held.close)
        held.sendall(b"GET /hello.txt HTTP/1.0\r\n")  # no blank line: httpd waits for more

        self.ssh_ok(self.admin, "ssh-key", "remove", "revoked")
        removed = time.monotonic()
        # The shell ends with the reason and exit status 3 (unauthenticated)...
        said = b""
        try:
            while True:
                data = shell.recv(4096)
                if not data:
                    break
                said += data
        except socket.timeout:
            self.fail("the shell stayed open: %r" % said)
        self.assertIn(b"this key has been removed", said)
        self.assertEqual(shell.recv_exit_status(), h.EXIT["unauthenticated"])
        self.assertLess(time.monotonic() - removed, 2.5)
        # ...sftp no longer works...
        with self.assertRaises((OSError, EOFError, paramiko.SSHException)):
            sftp.listdir(".")
        # ...and the forward's connection is closed, and so is the forwarding ssh.
        held.settimeout(5)
        try:
            self.assertEqual(held.recv(100), b"")
        except ConnectionResetError:
            pass
        self.assertEqual(fwd.wait(timeout=5), 255)
        self.assertLess(time.monotonic() - removed, 2.5)
        self.assert_log("ssh connection ending")

    def test_removed_label_ends_its_exec_and_mcp_calls(self):
        token = mint_token(self, self.admin, label="doomed")
        ended = {}

        def over_exec():
            conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=60)
            conn.request("POST", "/exec",
                         body=json.dumps({"command": "ssh %s 'sleep 41; echo done'" % VM}),
                         headers={"Authorization": "Bearer " + token,
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            ended["exec"] = (r.status, r.read(), time.monotonic())
            conn.close()

        def over_mcp():
            c = McpClient(self.server.http_port, token)
            c.initialize()
            r = c.request("tools/call", {"name": "exec",
                                         "arguments": {"command": "ssh %s 'sleep 42; echo done'" % VM}})
            ended["mcp"] = (r.status, r.body, time.monotonic())
            c.close()

        threads = [threading.Thread(target=over_exec), threading.Thread(target=over_mcp)]
        for t in threads:
            t.start()
        self.await_guest("sleep 41", "sleep 42")
        self.ssh_ok(self.admin, "ssh-key", "remove", "doomed")
        removed = time.monotonic()
        for t in threads:
            t.join(timeout=30)
        # Ended by the removal, not by the command (41 s). Each call answers once its kill has
        # run in the guest (`warren-run kill`: SIGTERM, up to 2 s for the job's processes to
        # go, then SIGKILL): ~0.15 s here alone, 3.3 s once in a full CI run.
        ended_within = 10
        status, body, at = ended["exec"]
        self.assertEqual(status, 401, body)
        self.assertIn(b"revoked", body)
        self.assertLess(at - removed, ended_within)
        status, body, at = ended["mcp"]
        self.assertEqual(status, 200, body)  # the SSE stream had begun; it just ends
        self.assertNotIn(b"done", body)
        self.assertLess(at - removed, ended_within)
        # Both commands were stopped in the VM, not left running.
        self.await_guest("sleep 41", "sleep 42", present=False, timeout=10)

    def test_repl_ctrl_c_stops_the_running_command(self):
        body = r"""
want "Welcome to warren"
want "\u25b6 "
send "ssh %s sleep 100\r"
sleep 3
send "\003"
want "cancelled"
want "\u25b6 "
send "whoami\r"
want "admin"
want "\u25b6 "
send "exit\r"
finish
""" % VM
        t0 = time.monotonic()
        status, transcript = self.run_expect(self.ssh_args(self.admin, tty=True), body,
                                             LANG="C.UTF-8", LC_ALL="C.UTF-8")
        self.assertEqual(status, 0, transcript)
        self.assertLess(time.monotonic() - t0, 60)  # Ctrl-C, not the sleep, ended it
        self.await_guest("sleep 100", present=False, timeout=10)

    def test_subsystems_other_than_sftp_are_refused(self):
        client = self.paramiko_client(self.admin, user=VM)
        self.addCleanup(client.close)
        chan = client.get_transport().open_session()
        import paramiko

        with self.assertRaises(paramiko.SSHException):
            chan.invoke_subsystem("netconf")

    # ---- last: a stopped VM (alphabetically last) ----

    def test_zz_stopped_vm_says_how_to_start_it(self):
        self.ssh_ok(self.admin, "stop", VM, timeout=120)
        r = self.into("true")
        self.assert_status(r, "conflict")
        self.assertIn("%s is stopped; start it with: ssh -p %d " % (VM, self.server.port),
                      r.stderr)
        self.assertIn(" start " + VM, r.stderr)
        r = self.sftp("ls\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is stopped", r.stderr)


@unittest.skipUnless(os.geteuid() == 0, "needs root for libvirt's system daemon")
@unittest.skipUnless(shutil.which("virsh") and have_image("debian"),
                     "needs libvirt and the debian image in " + IMAGES)
class DebianVmRouteTest(h.LobbyTestCase):
    """The default image: legacy scp (-O runs `scp -t`/`scp -f` in the VM through the exec
    path) both ways, and a forward to python3's http.server."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="warren-it-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        os.makedirs(DATA_PARENT, exist_ok=True)
        cls.data = tempfile.mkdtemp(prefix="route-", dir=DATA_PARENT)
        os.chmod(cls.data, 0o711)
        cls.addClassCleanup(shutil.rmtree, cls.data, ignore_errors=True)
        cls.keys = {"admin": h.Key(cls.tmp, "admin")}
        cls.admin = cls.keys["admin"]
        cls.server = h.Server(cls.data, cls.admin, vms=True,
                              extra_args=["--images-dir", IMAGES, "--vm-egress", "none"])
        cls.addClassCleanup(lambda: cls.server.log_path and os.path.exists(cls.server.log_path)
                            and os.remove(cls.server.log_path))
        cls.addClassCleanup(cls.server.stop)
        cls.server.start(timeout=120)
        cls.pin_host_key(cls.server)
        cls.addClassCleanup(lambda: subprocess.run(
            VmRouteTest.ssh_args_cls.__func__(cls, cls.admin, "rm", "rt-debian"),
            capture_output=True, timeout=120))
        r = subprocess.run(VmRouteTest.ssh_args_cls.__func__(
            cls, cls.admin, "new", "--name", "rt-debian", "--cpu", "1", "--memory", "1G"),
            capture_output=True, text=True, timeout=400)
        if r.returncode != 0:
            raise RuntimeError("new failed: %s\n%s" % (r.stderr, cls.server.log_tail(40)))

    def test_legacy_scp_and_a_python_server(self):
        local = os.path.join(self.tmp, "legacy.bin")
        with open(local, "wb") as f:
            f.write(os.urandom(2 << 20))
        base = ["scp", "-O", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=" + self.known_hosts,
                "-o", "StrictHostKeyChecking=yes", "-i", self.admin.path,
                "-P", str(self.server.port)]
        r = subprocess.run(base + [local, "rt-debian@127.0.0.1:legacy.bin"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        back = os.path.join(self.tmp, "legacy.back")
        r = subprocess.run(base + ["rt-debian@127.0.0.1:legacy.bin", back],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sha256(back), sha256(local))

        # python3's http.server in the VM, reached with -W.
        r = self.ssh(self.admin, "mkdir -p srv && echo from-python > srv/p.txt && "
                     "(cd srv && setsid python3 -m http.server 8001 --bind 127.0.0.1 "
                     ">/dev/null 2>&1 < /dev/null &) ; sleep 3", user="rt-debian", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run(self.ssh_args(self.admin, user="rt-debian",
                                             options=("-W", "localhost:8001")),
                               input=b"GET /p.txt HTTP/1.0\r\n\r\n", capture_output=True,
                               timeout=60)
            if r.stdout.endswith(b"from-python\n") or time.monotonic() > deadline:
                break
            time.sleep(1)
        self.assertTrue(r.stdout.endswith(b"from-python\n"), r.stdout + r.stderr)


if __name__ == "__main__":
    h.main()
