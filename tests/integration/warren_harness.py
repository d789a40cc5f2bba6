"""Loopback harness for warren's integration tests.

Starts the real `warren serve` on 127.0.0.1 port 0 in a temporary data directory, makes
SSH keys with ssh-keygen, pins the server's host key in a known_hosts file (never trust on
first use), and drives the server with OpenSSH's `ssh`, paramiko and expect. Every process
and file it creates is removed again, also when a test fails: servers die with the test
process (PR_SET_PDEATHSIG) and temp dirs go in class cleanups.

Run tests with Debian's /usr/bin/python3 (it has paramiko). WARREN_BIN names the binary;
by default build/warren in the source tree.
"""

import atexit
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WARREN_BIN = os.environ.get("WARREN_BIN") or os.path.join(SOURCE_DIR, "build", "warren")

# A CTest timeout or Ctrl-C sends SIGTERM/SIGINT: turn both into exceptions so that the
# cleanups below still run.
def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _raise_exit)


class _ExitStatuses(dict):
    """Code name -> SSH exit status, as the binary under test reports it: the "errors" of
    `help --json` (from the one mapping in lobby/base/error_map.cc), asked over SSH of the
    first server whose host key a test class pins with an admin key (pin_host_key)."""

    def learn(self, help_json):
        for e in help_json.get("errors", []):
            self[e["code"]] = int(e["exit_status"])
        if "not_found" not in self:
            raise RuntimeError("help --json gave no error model: %r" % help_json)

    def __missing__(self, name):
        raise KeyError("no exit status for %r (known: %s); the harness learns them from the "
                       "first lobby server started" % (name, ", ".join(sorted(self)) or "none"))


EXIT = _ExitStatuses()


def _remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # In the child, before exec: if the test process dies (even by SIGKILL), so does this.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Key:
    """An ed25519 key pair made with ssh-keygen."""

    def __init__(self, directory, name):
        self.name = name
        self.path = os.path.join(directory, name)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name + "@test", "-f", self.path],
            check=True,
            stdin=subprocess.DEVNULL,
        )
        with open(self.path + ".pub", encoding="ascii") as f:
            self.public_line = f.read().strip()
        out = subprocess.run(
            ["ssh-keygen", "-lf", self.path + ".pub"], check=True, capture_output=True, text=True
        ).stdout
        # "256 SHA256:... name@test (ED25519)"
        self.fingerprint = out.split()[1]


_READS_CONFIG = {}


def _reads_config(binary):
    """True when `binary serve` takes --config (every build since issue 17)."""
    if binary not in _READS_CONFIG:
        r = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=30, check=False)
        _READS_CONFIG[binary] = "--config" in r.stdout
    return _READS_CONFIG[binary]


class Server:
    """One `warren serve` process on 127.0.0.1, port 0."""

    def __init__(self, data_dir, admin_key=None, extra_args=(), vms=False):
        self.data_dir = data_dir
        self.admin_key = admin_key
        # Lobby tests run without VMs (no libvirt needed, nothing to probe); VM tests ask.
        self.extra_args = list(extra_args) + ([] if vms else ["--vms", "off"])
        self.proc = None
        self.port = None
        self.http_port = None
        self.metrics_port = None
        self.web_port = None
        self.log_path = None
        self._log = None

    def start(self, timeout=10):
        os.makedirs(self.data_dir, exist_ok=True)
        # Beside no data dir: VM tests keep theirs under /var/lib/warren-test, which outlives
        # the test. The file stays readable after stop() and goes when the test process ends.
        fd, self.log_path = tempfile.mkstemp(prefix="warren-", suffix=".log")
        os.close(fd)
        atexit.register(_remove_quietly, self.log_path)
        self._log = open(self.log_path, "wb")
        args = [
            WARREN_BIN, "serve",
            "--ssh", "127.0.0.1:0",
            "--http", "127.0.0.1:0",
            "--data-dir", self.data_dir,
        ]
        # The metrics listener on a free port too (a test may pass its own --metrics).
        own_metrics = "--metrics" in self.extra_args
        if not own_metrics:
            args += ["--metrics", "127.0.0.1:0"]
        # VMs boot unless the test asks for templates (test_vm_templates.py): a template costs
        # a boot and a save at every server start, which most tests would pay for nothing.
        if "--vms" not in self.extra_args and "--vm-templates" not in self.extra_args:
            args += ["--vm-templates", "none"]
        # And the web listener (VMs' pages), unless the test says (e.g. `--web off`).
        own_web = "--web" in self.extra_args
        if not own_web:
            args += ["--web", "127.0.0.1:0"]
        if self.admin_key is not None:
            args += ["--admin-key", self.admin_key.path + ".pub"]
        # Never the machine's /etc/warren/warren.conf (the package's), unless the test says
        # (or the binary is a release from before the config file).
        if "--config" not in self.extra_args and _reads_config(args[0]):
            args += ["--config", "/dev/null"]
        args += self.extra_args
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.log()
            m = re.search(r"ssh listening on 127\.0\.0\.1:(\d+)", log)
            h = re.search(r"http listening on 127\.0\.0\.1:(\d+)", log)
            p = re.search(r"metrics listening on 127\.0\.0\.1:(\d+)", log)
            w = re.search(r"web listening on 127\.0\.0\.1:(\d+)", log)
            if m and h and (p or own_metrics) and (w or own_web):
                self.port = int(m.group(1))
                self.http_port = int(h.group(1))
                self.metrics_port = int(p.group(1)) if p else None
                self.web_port = int(w.group(1)) if w else None
                return self
            if self.proc.poll() is not None:
                raise RuntimeError("warren exited with %d:\n%s" % (self.proc.returncode, self.log()))
            time.sleep(0.02)
        raise RuntimeError("warren did not start listening:\n" + self.log())

    def log(self):
        if self.log_path is None:
            return ""
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_tail(self, lines=25):
        return "\n".join(self.log().splitlines()[-lines:])

    def wait_for_log(self, text, timeout=5):
        """True once `text` appears in the server's log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            time.sleep(0.02)
        return text in self.log()

    def host_public_key(self):
        with open(os.path.join(self.data_dir, "ssh_host_ed25519_key.pub"), encoding="ascii") as f:
            return f.read().strip()

    def stop(self, timeout=5):
        """SIGTERM, then SIGKILL if it lingers. Returns the exit status (None if not started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        # Under a sanitizer build (cmake -DWARREN_SANITIZE=ON) any report fails the test.
        log = self.log()
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                       "WARNING: ThreadSanitizer"):
            if marker in log:
                start = log.index(marker)
                raise AssertionError("sanitizer report from warren:\n" + log[start:start + 4000])
        return self.proc.returncode


class LobbyTestCase(unittest.TestCase):
    """A test class with its own temp dir, keys and server. Subclasses may list extra key
    names in KEYS; the admin key is always `admin`."""

    KEYS = ()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="warren-it-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.keys = {}
        for name in ("admin",) + tuple(cls.KEYS):
            cls.keys[name] = Key(cls.tmp, name)
        cls.admin = cls.keys["admin"]
        cls.server = cls.start_server()

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        """Starts a server (stopped again in the class cleanup) and pins its host key."""
        if admin_key == "default":
            admin_key = cls.admin
        server = Server(data_dir or os.path.join(cls.tmp, "data"), admin_key, extra_args)
        cls.addClassCleanup(server.stop)
        server.start()
        cls.pin_host_key(server)
        return server

    @classmethod
    def _learn_exit_statuses(cls, server, key):
        args = [
            "ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "UserKnownHostsFile=" + cls.known_hosts,
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
            "-o", "ConnectTimeout=10", "-p", str(server.port), "-i", key.path,
            "lobby@127.0.0.1", "help", "--json",
        ]
        r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=30, check=False)
        if r.returncode != 0:
            raise RuntimeError("help --json failed (%d): %s" % (r.returncode, r.stderr))
        EXIT.learn(json.loads(r.stdout))

    @classmethod
    def pin_host_key(cls, server):
        cls.known_hosts = os.path.join(cls.tmp, "known_hosts")
        with open(cls.known_hosts, "w", encoding="ascii") as f:
            f.write("[127.0.0.1]:%d %s\n" % (server.port, server.host_public_key()))
        if not EXIT and server.admin_key is not None:
            cls._learn_exit_statuses(server, server.admin_key)

    # ---- OpenSSH ----

    def ssh_args(self, key, *command, user="lobby", port=None, options=(), tty=False):
        args = [
            "ssh", "-F", "none",
            "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes",
            "-o", "UserKnownHostsFile=" + self.known_hosts,
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "ConnectTimeout=10",
            "-p", str(port or self.server.port),
        ]
        if key is not None:
            args += ["-i", key.path]
        else:
            args += ["-o", "IdentityFile=none"]
        args += ["-tt"] if tty else []
        args += list(options)
        args.append(user + "@127.0.0.1")
        args += list(command)
        return args

    def ssh(self, key, *command, input=None, user="lobby", port=None, options=(), timeout=30):
        """Runs `ssh ... user@127.0.0.1 COMMAND...`; returns CompletedProcess (text)."""
        return subprocess.run(
            self.ssh_args(key, *command, user=user, port=port, options=options),
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ssh_ok(self, key, *command, **kwargs):
        r = self.ssh(key, *command, **kwargs)
        self.assertEqual(
            r.returncode, 0, "ssh %s failed: %d\nstdout: %s\nstderr: %s"
            % (" ".join(command), r.returncode, r.stdout, r.stderr)
        )
        return r

    def ssh_json(self, key, *command, **kwargs):
        r = self.ssh_ok(key, *command, "--json", **kwargs)
        return json.loads(r.stdout)

    def assert_log(self, text, timeout=5, server=None):
        server = server or self.server
        if not server.wait_for_log(text, timeout):
            self.fail("%r not in the server log; its end:\n%s" % (text, server.log_tail()))

    def assert_status(self, result, code_name, msg=None):
        self.assertEqual(
            result.returncode, EXIT[code_name],
            (msg or "") + "\nexpected %s (%d), got %d\nstdout: %s\nstderr: %s"
            % (code_name, EXIT[code_name], result.returncode, result.stdout, result.stderr),
        )

    # ---- paramiko ----

    def paramiko_client(self, key, user="lobby", port=None):
        import paramiko

        client = paramiko.SSHClient()
        client.load_host_keys(self.known_hosts)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            "127.0.0.1",
            port=port or self.server.port,
            username=user,
            key_filename=key.path if key else None,
            look_for_keys=False,
            allow_agent=False,
            timeout=10,
            banner_timeout=10,
            auth_timeout=10,
        )
        return client

    def make_user(self, name, key, admin=False):
        """Creates a user with its first key, as the admin."""
        args = ["user", "add", name, "--key", "'%s'" % key.public_line]
        if admin:
            args.append("--admin")
        self.ssh_ok(self.admin, *args)


def file_sha256(path):
    """The SHA-256 of a file's bytes, as hex, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def in_ci():
    """True under CI (the environment variable CI set, as .ci/run has it)."""
    return bool(os.environ.get("CI"))


class _Result(unittest.TextTestResult):
    """Under CI a skip is a failure: a test whose peer, tool, image or libvirt is missing
    did not run. Elsewhere it stays a skip that says why."""

    def addSkip(self, test, reason):
        if not in_ci():
            super().addSkip(test, reason)
            return
        try:
            raise AssertionError(
                "CI is set, so what this test needs must be here: " + reason) from None
        except AssertionError:
            self.addFailure(test, sys.exc_info())


class _Runner(unittest.TextTestRunner):
    resultclass = _Result


def main():
    unittest.main(verbosity=2, testRunner=_Runner)
