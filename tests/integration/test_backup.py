"""Backups under load, and restores (issue 17), on the real `warren serve` (no libvirt).

The data dir first gets VM records the fake-free way warren's own start-up reads them:
crash_world (tests/crash) runs the real interpreter and store over the fake host persisted in
DATA, making VMs, tags, a comment and a stopped VM. Then `warren serve --vms off` runs on that
DATA and, while 8 threads run 200 `ssh-key add` (each acknowledged add timed), takes
`warren backup --data-dir DATA FILE` (the CLI, a second process beside serve) and
`ssh admin@HOST backup > FILE` (the admin command). Each backup is restored with
`warren restore` into a fresh data dir and checked:
  - keys: every key acknowledged before the backup started is there; every key there is one of
    ours, whole (its fingerprint is its blob's, and a sample logs in on the restored server);
  - users, the admin, and a token minted before the load still authenticates /exec;
  - the SSH host key is the same (the pinned known_hosts line still verifies it);
  - VM records: crash_world dump of the restored DATA (with the fake host's files copied, as an
    operator copies VM disks) shows the same VMs, owners, tags, states and no problem.
Also: restore refuses a non-empty DATA, and --force while warren runs there.

Needs: WARREN_BIN, CRASH_WORLD (build/tests/crash_world), ssh, ssh-keygen, curl, tar.
"""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warren_harness  # noqa: E402

CRASH_WORLD = os.environ.get("CRASH_WORLD") or os.path.join(
    warren_harness.SOURCE_DIR, "build", "tests", "crash_world")

ADDS = 200
THREADS = 8

# The VMs crash_world makes before warren serves: (user, argv).
SCRIPT = [
    ("alice", ["new", "--name", "alpha"]),
    ("bob", ["new", "--name", "beta", "--tag", "ci"]),
    ("bob", ["new", "--name", "gamma"]),
    ("bob", ["stop", "gamma"]),
    ("alice", ["comment", "alpha", "kept by the backup"]),
]


def run(args, **kwargs):
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("timeout", 120)
    return subprocess.run(args, check=False, **kwargs)


class BackupTest(warren_harness.LobbyTestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="warren-backup-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        if not os.path.exists(CRASH_WORLD):
            raise RuntimeError("crash_world not built at %s (set CRASH_WORLD)" % CRASH_WORLD)
        cls.keys = {"admin": warren_harness.Key(cls.tmp, "admin"),
                    "carol": warren_harness.Key(cls.tmp, "carol")}
        cls.admin = cls.keys["admin"]
        cls.data = os.path.join(cls.tmp, "data")
        script = os.path.join(cls.tmp, "script.jsonl")
        with open(script, "w", encoding="utf-8") as f:
            for user, argv in SCRIPT:
                f.write(json.dumps({"as": user, "argv": argv}) + "\n")
        r = run([CRASH_WORLD, "run", cls.data, script])
        if r.returncode != 0:
            raise RuntimeError("crash_world run failed: %s" % r.stderr.decode())
        for line in r.stdout.decode().splitlines():
            if line.startswith("A "):
                answer = json.loads(line.split(" ", 2)[2])
                if answer["code"] != "ok":
                    raise RuntimeError("crash_world: %s" % line)
        cls.server = cls.start_server(data_dir=cls.data,
                                      extra_args=("--admin-name", "boss"))

    def dump(self, data_dir):
        r = run([CRASH_WORLD, "dump", data_dir])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        # Its last line is the state; the lines before are the fake host's events ("E ...").
        return json.loads(r.stdout.decode().splitlines()[-1])

    def curl_exec(self, server, token, body):
        r = run(["curl", "-sS", "--max-time", "30", "-H", "Authorization: Bearer " + token,
                 "--data-binary", body, "-w", "\n%{http_code}",
                 "http://127.0.0.1:%d/exec" % server.http_port], text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        text, _, code = r.stdout.rpartition("\n")
        return int(code), text

    def test_backup_under_load_and_restore(self):
        self.make_user("carol", self.keys["carol"])
        carol = self.keys["carol"]
        token = self.ssh_ok(carol, "ssh-key", "generate-api-key", "--label", "agent").stdout.strip()
        self.assertTrue(token.startswith("wr1."))
        code, body = self.curl_exec(self.server, token, "whoami")
        self.assertEqual(code, 200, body)

        # 200 fresh keys, made before the clock starts.
        keydir = os.path.join(self.tmp, "load")
        os.makedirs(keydir)
        load = [warren_harness.Key(keydir, "k%03d" % i) for i in range(ADDS)]
        by_fp = {k.fingerprint: k for k in load}
        acked = {}  # fingerprint -> monotonic time the add was answered
        lock = threading.Lock()
        failures = []

        def add(k):
            r = self.ssh(carol, "ssh-key", "add", "--name", k.name, k.public_line, timeout=120)
            with lock:
                if r.returncode == 0:
                    acked[k.fingerprint] = time.monotonic()
                else:
                    failures.append((k.name, r.returncode, r.stderr))

        backups = {}  # name -> (started, finished, path)

        def take_backups():
            # Mid-load: once a quarter of the adds are in.
            while len(acked) < ADDS // 4 and not failures:
                time.sleep(0.01)
            path = os.path.join(self.tmp, "cli.backup")
            started = time.monotonic()
            r = run([warren_harness.WARREN_BIN, "backup", "--data-dir", self.data, path])
            backups["cli"] = (started, time.monotonic(), path)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertIn(b"store schema version", r.stderr)
            while len(acked) < ADDS // 2 and not failures:
                time.sleep(0.01)
            path = os.path.join(self.tmp, "ssh.backup")
            started = time.monotonic()
            with open(path, "wb") as out:
                r = subprocess.run(self.ssh_args(self.admin, "backup"), stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.PIPE, timeout=120, check=False)
            backups["ssh"] = (started, time.monotonic(), path)
            self.assertEqual(r.returncode, 0, r.stderr.decode())

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(THREADS + 1) as pool:
            taker = pool.submit(take_backups)
            list(pool.map(add, load))
            taker.result()
        load_s = time.monotonic() - t0
        self.assertEqual(failures, [])
        self.assertEqual(len(acked), ADDS)
        print("\n%d ssh-key adds in %.1f s on %d threads; backups: %s" % (
            ADDS, load_s, THREADS, ", ".join(
                "%s %.2f s, %d bytes" % (n, b[1] - b[0], os.path.getsize(b[2]))
                for n, b in sorted(backups.items()))), file=sys.stderr)

        # Both are tar streams with the manifest first.
        for name, (_, _, path) in backups.items():
            listing = run(["tar", "-tf", path], text=True)
            self.assertEqual(listing.returncode, 0, listing.stderr)
            names = listing.stdout.split()
            self.assertEqual(names[:2], ["warren-backup.json", "store/data.mdb"], name)
            # What warren serve --vms off makes (the guest control key comes with VMs).
            for f in ("token-signing.key", "integration.key", "ssh_host_ed25519_key",
                      "ssh_host_ed25519_key.pub"):
                self.assertIn(f, names, name)

        # Restore refusals on the live DATA.
        r = run([warren_harness.WARREN_BIN, "restore", "--data-dir", self.data,
                 backups["cli"][2]], text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not empty", r.stderr)
        r = run([warren_harness.WARREN_BIN, "restore", "--force", "--data-dir", self.data,
                 backups["cli"][2]], text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("stop it", r.stderr)

        # The original's VM view, to compare the restored ones with (warren keeps running:
        # crash_world opens the store beside it, as a second process may).
        original = self.dump(self.data)
        self.assertEqual(original["problems"], [])
        self.assertEqual(sorted(original["state"]["vms"]), ["alpha", "beta", "gamma"])
        self.assertEqual(original["state"]["vms"]["gamma"]["desired"], "stopped")
        self.assertEqual(original["state"]["vms"]["beta"]["tags"], ["ci"])

        for name, (started, finished, path) in sorted(backups.items()):
            with self.subTest(backup=name):
                self.check_restore(name, path, started, finished, acked, by_fp, token, original)

    def check_restore(self, name, path, started, finished, acked, by_fp, token, original):
        restored = os.path.join(self.tmp, "restored-" + name)
        t = time.monotonic()
        r = run([warren_harness.WARREN_BIN, "restore", "--data-dir", restored, path], text=True)
        restore_s = time.monotonic() - t
        self.assertEqual(r.returncode, 0, r.stderr)
        print("restore of the %s backup: %.2f s" % (name, restore_s), file=sys.stderr)
        for f in ("token-signing.key", "integration.key", "ssh_host_ed25519_key"):
            st = os.stat(os.path.join(restored, f))
            self.assertEqual(st.st_mode & 0o777, 0o600, f)
            with open(os.path.join(restored, f), "rb") as a, \
                    open(os.path.join(self.data, f), "rb") as b:
                self.assertEqual(a.read(), b.read(), f)

        # VM records: the fake host's files copied as an operator copies VM disks, then the
        # real start-up (reconcile) over them.
        for entry in ("fake-host.json", "vms", "disks", "templates"):
            src = os.path.join(self.data, entry)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(restored, entry))
            elif os.path.exists(src):
                shutil.copy2(src, os.path.join(restored, entry))
        dumped = self.dump(restored)
        self.assertEqual(dumped["problems"], [], name)
        self.assertEqual(dumped["state"]["vms"], original["state"]["vms"], name)
        self.assertEqual(dumped["state"]["templates"], original["state"]["templates"], name)
        # Every user as it was, but carol, whose keys were still being added.
        for user in ("alice", "bob", "boss", "root"):
            self.assertEqual(dumped["state"]["users"][user], original["state"]["users"][user])

        server = warren_harness.Server(restored, None)
        self.addCleanup(server.stop)
        server.start()
        # The same host key: the original's, pinned for the new port, verifies it.
        self.assertEqual(server.host_public_key(), self.server.host_public_key())
        with open(self.known_hosts, "a", encoding="ascii") as f:
            f.write("[127.0.0.1]:%d %s\n" % (server.port, self.server.host_public_key()))
        listed = json.loads(self.ssh_ok(self.keys["carol"], "ssh-key", "list", "--json",
                                        port=server.port).stdout)
        present = {k["fingerprint"]: k for k in listed["keys"]}
        before = {fp for fp, at in acked.items() if at < started}
        missing = before - set(present)
        self.assertEqual(missing, set(), "keys acknowledged before the %s backup started" % name)
        ours = set(by_fp) | {self.keys["carol"].fingerprint}
        self.assertEqual(set(present) - ours, set())
        for fp, k in present.items():
            if fp in by_fp:
                self.assertEqual(k["name"], by_fp[fp].name)
        in_backup = sorted(set(present) & set(by_fp))
        print("%s backup: %d keys acknowledged before it began, %d in it, %d added in all" % (
            name, len(before), len(in_backup), len(by_fp)), file=sys.stderr)
        self.assertLess(len(in_backup), len(by_fp) + 1)
        # Whole: a sample of the keys in it log in.
        for fp in in_backup[:: max(1, len(in_backup) // 5)]:
            who = json.loads(self.ssh_ok(by_fp[fp], "whoami", "--json",
                                         port=server.port).stdout)
            self.assertEqual(who["user"], "carol")
        # Users, the admin.
        users = json.loads(self.ssh_ok(self.admin, "user", "ls", "--json",
                                       port=server.port).stdout)
        names = sorted(u["name"] for u in (users["users"] if isinstance(users, dict) else users))
        self.assertEqual(names, ["alice", "bob", "boss", "carol", "root"])
        # The token minted before the backup authenticates /exec.
        code, body = self.curl_exec(server, token, "whoami")
        self.assertEqual(code, 200, body)
        self.assertIn("carol", body)
        server.stop()


if __name__ == "__main__":
    warren_harness.main()
