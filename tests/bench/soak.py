#!/usr/bin/python3
"""Soak: N SSH sessions and M MCP clients doing a realistic mix against real tiny VMs for
a while, with no errors allowed and warren's RSS, threads and fds watched for growth.

It starts its own `warren serve` (VMs on, guests without network, the tiny image from
WARREN_TEST_IMAGES) with its admission limits opened for the clients (SSH startups,
handshakes and connections per source, HTTP connections per source, MCP sessions per user,
command threads), makes --users users, each with its own key, API token and --vms tiny VMs
(1 vCPU, 256 MiB, 1 GiB disk), and spreads the clients evenly over them (20 users x 10 SSH + 10 MCP by
default). Every client loops until --duration is up, pausing a random 0..2x --think seconds
between commands:

  SSH (paramiko, one connection kept open, a new channel per command): ls, stat VM,
    ssh VM CMD, a job (ssh --wait-seconds 0 VM 'sleep 1; ...' then wait JOB), jobs,
    `ssh VM@HOST CMD` (the VM route, a connection of its own), a fresh lobby connection,
    and now and then cp VM + ssh COPY + rm COPY;
  MCP (Streamable HTTP, its own session on a keep-alive connection): the same commands
    through the exec and wait tools, a fresh session now and then (initialize, ..., DELETE).

A copy is taken by at most --copies clients at once (the host: 2 cores, TCG). Every answer
is checked (exit status, the output a command must print); anything else is an error,
counted by surface, command and kind. The server's RSS (/proc/PID/status VmRSS), threads
(/proc/PID/task) and fds (/proc/PID/fd) are sampled every --sample seconds: printed at the
start (before any client), after the warm-up (--warmup s), in the middle and at the end of
the run, after the clients have gone and after 40 s idle, with a small curve. At the end no
copy may be left and every user has exactly its VMs. Exits 1 on any error.

Not in CI. Usage (a smoke check, then the full soak, under the VM lock):
  tests/bench/soak.py --duration 60 --ssh 20 --mcp 20
  flock /tmp/warren-vm.lock tests/bench/soak.py            # 600 s, 200 + 200
"""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import mcp_http  # noqa: E402
import vm_bench  # noqa: E402
import warren_harness as h  # noqa: E402

import paramiko  # noqa: E402

# What each client does per step, by weight; "fresh" is a new connection (SSH) or session (MCP).
SSH_MIX = {"ls": 18, "stat": 18, "ssh": 30, "job": 10, "jobs": 8, "route": 6, "fresh": 6,
           "cp": 4}
MCP_MIX = {"ls": 20, "stat": 20, "ssh": 32, "job": 10, "jobs": 8, "fresh": 6, "cp": 4}


class Stats:
    """Latencies by (surface, command) and errors by (surface, command, kind)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.lat = collections.defaultdict(list)
        self.errors = collections.Counter()
        self.examples = {}

    def ok(self, key, seconds):
        with self.lock:
            self.lat[key].append(seconds)

    def error(self, key, kind, detail):
        kind = " ".join(str(kind).split())[:80]
        with self.lock:
            self.errors[key + (kind,)] += 1
            self.examples.setdefault(key + (kind,), " ".join(str(detail).split())[:400])


class Failed(Exception):
    """An answer that is not the one expected: `kind` names it for the error table."""

    def __init__(self, kind, detail=""):
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


class Sampler(threading.Thread):
    """RSS (MiB), threads and fds of one process every `every` seconds."""

    def __init__(self, pid, every):
        super().__init__(daemon=True)
        self.pid = pid
        self.every = every
        self.samples = []  # (seconds since t0, rss MiB, threads, fds)
        self.t0 = time.monotonic()
        self.stop = threading.Event()

    def take(self):
        rss = None
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024.0
        threads = len(os.listdir("/proc/%d/task" % self.pid))
        fds = len(os.listdir("/proc/%d/fd" % self.pid))
        s = (time.monotonic() - self.t0, rss, threads, fds)
        self.samples.append(s)
        return s

    def run(self):
        while not self.stop.wait(self.every):
            try:
                self.take()
            except OSError:
                return

    def at(self, t):
        """The sample nearest to `t` seconds after t0."""
        return min(self.samples, key=lambda s: abs(s[0] - t))


class World:
    """The server, its users (keys, tokens, VMs) and what the clients share."""

    def __init__(self, args):
        self.args = args
        self.bench = vm_bench.VmBench()
        self.stats = Stats()
        self.stop = threading.Event()
        self.copies = threading.BoundedSemaphore(args.copies)
        self.copy_seq = collections.Counter()
        self.seq_lock = threading.Lock()
        self.users = []  # dicts: name, key, token, vms
        self.exit_names = {}

    def start(self):
        a = self.args
        n = a.ssh + a.mcp
        limits = [
            "--ssh-max-startups", "%d:30:%d" % (4 * n + 100, 8 * n + 200),
            "--ssh-max-startups-per-source", str(4 * n + 100),
            "--ssh-max-handshakes-per-source", "64",
            "--ssh-max-connections-per-source", str(4 * n + 100),
            "--ssh-max-logins", str(4 * n + 100),
            "--ssh-max-logins-per-user", str(4 * n // a.users + 50),
            "--http-max-connections-per-source", str(4 * n + 100),
            "--mcp-max-sessions-per-user", str(4 * n // a.users + 50),
            "--command-threads", str(max(64, a.mcp)),
            "--command-threads-per-user", str(max(16, 2 * a.mcp // a.users)),
        ]
        self.bench.start(["--vm-image", "tiny"] + limits)
        self.server = self.bench.server
        help_json = json.loads(self.bench.ssh("help", "--json")[1])
        self.exit_names = {int(e["exit_status"]): e["code"] for e in help_json["errors"]}

    def admin(self, *cmd):
        return self.bench.ssh(*cmd)[1]

    def make_users(self):
        a = self.args
        for i in range(a.users):
            name = "soak%02d" % i
            key = h.Key(self.bench.tmp, name)
            self.admin("user", "add", name, "--key", "'%s'" % key.public_line)
            token = self.bench.ssh_as(key, "ssh-key", "generate-api-key", "--label",
                                      "soak")[1].strip()
            if not token.startswith("wr1."):
                raise RuntimeError("no token for %s: %r" % (name, token))
            vms = ["%s-vm%d" % (name, v) for v in range(a.vms)]
            self.users.append({"name": name, "key": key, "token": token, "vms": vms})

    def make_vms(self):
        """Every user's VMs, a few at a time; each answers `ssh VM true` before the run."""
        todo = [(u, vm) for u in self.users for vm in u["vms"]]
        errors = []

        def worker():
            while True:
                with self.seq_lock:
                    if not todo or errors:
                        return
                    u, vm = todo.pop()
                try:
                    self.bench.ssh_as(u["key"], "new", "--name", vm, "--image", "tiny",
                                      "--cpu", "1", "--memory", "256M", "--disk", "1")
                    self.bench.ssh_as(u["key"], "ssh", vm, "true")
                except Exception as e:  # noqa: BLE001 - stops the run below
                    errors.append("%s: %s" % (vm, e))

        threads = [threading.Thread(target=worker) for _ in range(self.args.make_parallel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("making the VMs: " + "; ".join(errors[:3]))

    def copy_name(self, vm):
        with self.seq_lock:
            self.copy_seq[vm] += 1
            return "%s-c%d" % (vm, self.copy_seq[vm])

    def exit_kind(self, status):
        return "exit %d (%s)" % (status, self.exit_names.get(status, "command's own"))


# ---- SSH clients ----------------------------------------------------------------------


class SshAgent:
    def __init__(self, world, user, index):
        self.w = world
        self.user = user
        self.index = index
        self.rng = random.Random(index * 7919 + 1)
        self.client = None

    def connect(self, username="lobby"):
        c = paramiko.SSHClient()
        c.load_host_keys(self.w.bench.known_hosts)
        c.set_missing_host_key_policy(paramiko.RejectPolicy())
        c.connect("127.0.0.1", port=self.w.server.port, username=username,
                  key_filename=self.user["key"].path, look_for_keys=False, allow_agent=False,
                  timeout=60, banner_timeout=120, auth_timeout=120)
        return c

    def close(self):
        if self.client is not None:
            self.client.close()
            self.client = None

    def run_on(self, client, command, timeout=300):
        """(exit status, stdout, stderr) of one command on a new channel of `client`."""
        chan = client.get_transport().open_session(timeout=60)
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            chan.shutdown_write()
            # The outputs here are small: stderr waits in paramiko's buffer meanwhile.
            out, err = bytearray(), bytearray()
            for recv, buf in ((chan.recv, out), (chan.recv_stderr, err)):
                while True:
                    data = recv(65536)
                    if not data:
                        break
                    buf += data
            status = chan.recv_exit_status()
            return status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        finally:
            chan.close()

    def lobby(self, command, timeout=300):
        if self.client is None or not self.client.get_transport().is_active():
            self.close()
            self.client = self.connect()
        return self.run_on(self.client, command, timeout)

    def ok(self, command, timeout=300):
        status, out, err = self.lobby(command, timeout)
        if status != 0:
            raise Failed(self.w.exit_kind(status), err.strip() or out.strip())
        return out

    def vm(self):
        return self.rng.choice(self.user["vms"])

    def step(self, op):
        vm = self.vm()
        if op == "ls":
            out = self.ok("ls --json")
            names = {v["name"] for v in json.loads(out)["vms"]}
            if not set(self.user["vms"]) <= names:
                raise Failed("ls lacks a VM", out[:300])
        elif op == "stat":
            st = json.loads(self.ok("stat %s --json" % vm))
            if st.get("name") != vm or st.get("state") != "running":
                raise Failed("stat: not running", json.dumps(st)[:300])
        elif op == "ssh":
            tag = "%08x" % self.rng.getrandbits(32)
            out = self.ok("ssh %s 'echo %s; cat /proc/loadavg'" % (vm, tag))
            if not out.startswith(tag + "\n"):
                raise Failed("ssh: wrong output", out[:200])
        elif op == "job":
            self.job(vm)
            return "job (start+wait)"
        elif op == "jobs":
            json.loads(self.ok("jobs %s --json" % vm))
        elif op == "route":
            self.route(vm)
            return "VM@HOST cmd"
        elif op == "fresh":
            self.close()
            t = time.monotonic()
            self.client = self.connect()
            self.w.stats.ok(("ssh", "new connection"), time.monotonic() - t)
            return None
        elif op == "cp":
            return self.copy(vm)
        return op

    def job(self, vm):
        tag = "%08x" % self.rng.getrandbits(32)
        t = time.monotonic()
        r = json.loads(self.ok("ssh --json --wait-seconds 0 %s 'sleep 1; echo %s'" % (vm, tag)))
        self.w.stats.ok(("ssh", "job start"), time.monotonic() - t)
        out = r.get("stdout", "")
        job = r.get("job")
        if r.get("finished"):
            # Handed back once started, and a guest slow to report the start had ended it by
            # then: what is there now is its end (a wait of no time says so, never "running").
            if r.get("exit_code") != 0 or out.strip() != tag:
                raise Failed("job: wrong end at once", json.dumps(r)[:300])
            return
        if not job:
            raise Failed("job: neither finished nor a job", json.dumps(r)[:300])
        for _ in range(10):
            t = time.monotonic()
            status, o, err = self.lobby("wait --json --wait-seconds 20 %s" % job)
            self.w.stats.ok(("ssh", "wait"), time.monotonic() - t)
            w = json.loads(o) if o.startswith("{") else {}
            if status != 0 or not w:
                raise Failed("wait: " + self.w.exit_kind(status), err.strip() or o[:300])
            out += w.get("stdout", "")
            if w.get("finished"):
                break
        else:
            raise Failed("job: not finished after 10 waits", out[:200])
        if w.get("exit_code") != 0 or out.strip() != tag:
            raise Failed("job: wrong end", json.dumps(w)[:300])

    def route(self, vm):
        tag = "%08x" % self.rng.getrandbits(32)
        c = self.connect(username=vm)
        try:
            status, out, err = self.run_on(c, "echo %s" % tag)
        finally:
            c.close()
        if status != 0 or out.strip() != tag:
            raise Failed("route: " + self.w.exit_kind(status), err[:200] or out[:200])

    def copy(self, vm):
        if not self.w.copies.acquire(blocking=False):
            return self.step("ls")
        try:
            name = self.w.copy_name(vm)
            t = time.monotonic()
            self.ok("cp %s %s" % (vm, name), timeout=600)
            self.w.stats.ok(("ssh", "cp"), time.monotonic() - t)
            try:
                out = self.ok("ssh %s 'echo copied'" % name)
                if out.strip() != "copied":
                    raise Failed("copy: wrong output", out[:200])
            finally:
                t = time.monotonic()
                self.ok("rm %s" % name, timeout=600)
                self.w.stats.ok(("ssh", "rm"), time.monotonic() - t)
        finally:
            self.w.copies.release()
        return None


# ---- MCP clients ----------------------------------------------------------------------


class McpAgent:
    def __init__(self, world, user, index):
        self.w = world
        self.user = user
        self.rng = random.Random(index * 104729 + 3)
        self.client = None

    def open(self):
        c = mcp_http.McpClient(self.w.server.http_port, self.user["token"], timeout=300)
        c.initialize()
        return c

    def close(self, end=True):
        if self.client is not None:
            if end:
                r = self.client.end()
                if r.status not in (200, 202, 204):
                    raise Failed("DELETE session: HTTP %d" % r.status, r.body[:200])
            self.client.close()
            self.client = None

    def exec(self, command, **kw):
        if self.client is None:
            self.client = self.open()
        r = self.client.request("tools/call", {"name": "exec",
                                               "arguments": dict(command=command, **kw)})
        if r.status != 200:
            raise Failed("HTTP %d" % r.status, r.body[:300])
        msgs = r.messages()
        if not msgs or "result" not in msgs[-1]:
            err = msgs[-1].get("error", {}) if msgs else {}
            raise Failed("JSON-RPC error %s" % err.get("code"), json.dumps(msgs)[:300])
        return msgs[-1]["result"]

    def ok(self, command, **kw):
        res = self.exec(command, **kw)
        if res.get("isError"):
            sc = res.get("structuredContent") or {}
            kind = sc.get("error", {}).get("code") if isinstance(sc.get("error"), dict) else None
            raise Failed("isError" + (" " + kind if kind else ""),
                         mcp_http.text_of(res)[:300])
        return res

    def step(self, op):
        vm = self.rng.choice(self.user["vms"])
        if op == "ls":
            text = mcp_http.text_of(self.ok("ls"))
            if any(v not in text for v in self.user["vms"]):
                raise Failed("ls lacks a VM", text[:300])
        elif op == "stat":
            text = mcp_http.text_of(self.ok("stat " + vm))
            if vm not in text or "running" not in text:
                raise Failed("stat: not running", text[:300])
        elif op == "ssh":
            tag = "%08x" % self.rng.getrandbits(32)
            sc = self.ok("ssh %s 'echo %s; cat /proc/loadavg'" % (vm, tag))["structuredContent"]
            if not sc.get("finished") and sc.get("job"):
                # Outlived MCP's wait (a busy guest): followed to its end, as an agent would.
                sc = self.follow(sc)
            if not sc.get("finished") or not sc.get("stdout", "").startswith(tag + "\n"):
                raise Failed("ssh: wrong output", json.dumps(sc)[:300])
        elif op == "job":
            self.job(vm)
            return "job (start+wait)"
        elif op == "jobs":
            self.ok("jobs " + vm)
        elif op == "fresh":
            self.close()
            t = time.monotonic()
            self.client = self.open()
            self.w.stats.ok(("mcp", "new session"), time.monotonic() - t)
            return None
        elif op == "cp":
            return self.copy(vm)
        return op

    def follow(self, sc):
        """A handed-back command's structured result, completed with waits: its whole stdout
        and its end."""
        sc = dict(sc)
        for _ in range(10):
            if sc.get("finished"):
                break
            t = time.monotonic()
            r = self.client.request("tools/call", {"name": "wait", "arguments": {
                "job": sc["job"], "wait_seconds": 20}})
            self.w.stats.ok(("mcp", "wait"), time.monotonic() - t)
            if r.status != 200:
                raise Failed("wait: HTTP %d" % r.status, r.body[:300])
            w = r.result()
            if w.get("isError"):
                raise Failed("wait: isError", json.dumps(w)[:300])
            ws = w.get("structuredContent") or {}
            sc["stdout"] = sc.get("stdout", "") + ws.get("stdout", "")
            sc["finished"] = ws.get("finished")
            sc["exit_code"] = ws.get("exit_code")
        return sc

    def job(self, vm):
        tag = "%08x" % self.rng.getrandbits(32)
        t = time.monotonic()
        sc = self.ok("ssh %s 'sleep 1; echo %s'" % (vm, tag), wait_seconds=0)["structuredContent"]
        self.w.stats.ok(("mcp", "job start"), time.monotonic() - t)
        if sc.get("finished"):
            # Ended before a slow guest's start report was read: its end, at once (see SSH).
            if sc.get("exit_code") != 0 or sc.get("stdout", "").strip() != tag:
                raise Failed("job: wrong end at once", json.dumps(sc)[:300])
            return
        if not sc.get("job"):
            raise Failed("job: neither finished nor a job", json.dumps(sc)[:300])
        sc = self.follow(sc)
        if not sc.get("finished"):
            raise Failed("job: not finished after 10 waits", sc.get("stdout", "")[:200])
        if sc.get("exit_code") != 0 or sc.get("stdout", "").strip() != tag:
            raise Failed("job: wrong end", json.dumps(sc)[:300])

    def copy(self, vm):
        if not self.w.copies.acquire(blocking=False):
            return self.step("ls")
        try:
            name = self.w.copy_name(vm)
            t = time.monotonic()
            self.ok("cp %s %s" % (vm, name))
            self.w.stats.ok(("mcp", "cp"), time.monotonic() - t)
            try:
                sc = self.ok("ssh %s 'echo copied'" % name)["structuredContent"]
                if sc.get("stdout", "").strip() != "copied":
                    raise Failed("copy: wrong output", json.dumps(sc)[:200])
            finally:
                t = time.monotonic()
                self.ok("rm " + name)
                self.w.stats.ok(("mcp", "rm"), time.monotonic() - t)
        finally:
            self.w.copies.release()
        return None


# ---- the run --------------------------------------------------------------------------


def client_loop(world, surface, client, mix, start_delay):
    ops, weights = zip(*mix.items())
    rng = client.rng
    if world.stop.wait(start_delay):
        return
    while not world.stop.is_set():
        op = rng.choices(ops, weights)[0]
        t = time.monotonic()
        try:
            name = client.step(op)
            if name:
                world.stats.ok((surface, name), time.monotonic() - t)
        except Failed as e:
            world.stats.error((surface, op), e.kind, e.detail)
        except Exception as e:  # noqa: BLE001 - every failure counts, by kind
            world.stats.error((surface, op), type(e).__name__ + ": " + str(e)[:60],
                              traceback.format_exc(limit=3))
            try:
                client.close() if surface == "ssh" else client.close(end=False)
            except Exception:  # noqa: BLE001
                pass
        world.stop.wait(rng.uniform(0, 2 * world.args.think))
    try:
        client.close()
    except Exception as e:  # noqa: BLE001
        world.stats.error((surface, "close"), type(e).__name__, str(e))


def curve(samples, index, width=60):
    """One line of digits 0-9 for one column of the samples (min..max of that column)."""
    vals = [s[index] for s in samples]
    if not vals:
        return ""
    step = max(1, len(vals) // width)
    vals = [max(vals[i:i + step]) for i in range(0, len(vals), step)]
    lo, hi = min(vals), max(vals)
    span = hi - lo or 1
    return "".join(str(int((v - lo) * 9 / span)) for v in vals) + "  (%s .. %s)" % (
        ("%.0f" % lo), ("%.0f" % hi))


def check_leftovers(world):
    """Every user has exactly its VMs (no copy left), all running."""
    problems = []
    for u in world.users:
        out = world.bench.ssh_as(u["key"], "ls", "--json")[1]
        names = sorted(v["name"] for v in json.loads(out)["vms"])
        if names != sorted(u["vms"]):
            problems.append("%s has %s" % (u["name"], names))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600, help="seconds of load")
    ap.add_argument("--ssh", type=int, default=200, help="SSH clients")
    ap.add_argument("--mcp", type=int, default=200, help="MCP clients")
    ap.add_argument("--users", type=int, default=20, help="users the clients are spread over")
    ap.add_argument("--vms", type=int, default=2, help="tiny VMs per user")
    ap.add_argument("--copies", type=int, default=2, help="cp + rm running at once, at most")
    ap.add_argument("--think", type=float, default=3.0,
                    help="mean seconds a client pauses between commands (uniform 0..2x)")
    ap.add_argument("--ramp", type=float, default=30, help="seconds over which clients start")
    ap.add_argument("--warmup", type=float, default=60, help="seconds before the start figures")
    ap.add_argument("--sample", type=float, default=5, help="seconds between samples")
    ap.add_argument("--make-parallel", type=int, default=3, help="VMs made at once before the run")
    args = ap.parse_args()
    if args.users < 1 or args.vms < 1 or args.ssh < 0 or args.mcp < 0:
        ap.error("--users and --vms must be at least 1")

    world = World(args)
    sampler = None
    failed_setup = None
    try:
        t = time.monotonic()
        world.start()
        world.make_users()
        world.make_vms()
        print("set up: %d users, %d tiny VMs (1 vCPU, 256 MiB, 1 GiB disk) in %.0f s" % (
            args.users, args.users * args.vms, time.monotonic() - t), flush=True)
        time.sleep(5)
        sampler = Sampler(world.server.proc.pid, args.sample)
        before = sampler.take()
        sampler.start()

        threads = []
        n = args.ssh + args.mcp
        # SSH and MCP clients interleaved in the ramp; each surface's spread over the users.
        order = sorted([(k / args.ssh, "ssh", k) for k in range(args.ssh)] +
                       [(k / args.mcp, "mcp", k) for k in range(args.mcp)])
        for i, (_, surface, k) in enumerate(order):
            user = world.users[k % args.users]
            if surface == "ssh":
                client, mix = SshAgent(world, user, i), SSH_MIX
            else:
                client, mix = McpAgent(world, user, i), MCP_MIX
            delay = args.ramp * i / max(1, n)
            th = threading.Thread(target=client_loop, args=(world, surface, client, mix, delay),
                                  daemon=True)
            threads.append(th)
        t_load = time.monotonic() - sampler.t0
        for th in threads:
            th.start()
        next_report = time.monotonic() + 60
        end = time.monotonic() + args.duration
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0, end - time.monotonic())))
            if time.monotonic() >= next_report:
                s = sampler.samples[-1]
                with world.stats.lock:
                    done = sum(len(v) for v in world.stats.lat.values())
                    errs = sum(world.stats.errors.values())
                print("  %4.0f s: %d commands, %d errors; RSS %.0f MiB, %d threads, %d fds"
                      % (s[0] - t_load, done, errs, s[1], s[2], s[3]), flush=True)
                next_report += 60
        t_end = time.monotonic() - sampler.t0
        world.stop.set()
        for th in threads:
            th.join(timeout=900)
        stuck = sum(1 for th in threads if th.is_alive())
        if stuck:
            world.stats.error(("run", "stop"), "client still busy 900 s after the end", stuck)
        after = sampler.take()
        time.sleep(40)  # the command runner's idle workers leave after 30 s
        idle = sampler.take()
        sampler.stop.set()
        for p in check_leftovers(world):
            world.stats.error(("run", "leftovers"), "VMs left after the run", p)
    except Exception:  # noqa: BLE001 - reported below, then the world is removed
        failed_setup = traceback.format_exc()
        world.stop.set()
    finally:
        log_tail = world.server.log_tail(40) if getattr(world, "server", None) else ""
        world.bench.close()

    if failed_setup:
        print("the soak could not run:\n" + failed_setup + "\nserver log:\n" + log_tail)
        return 1

    st = world.stats
    total = sum(len(v) for v in st.lat.values())
    errs = sum(st.errors.values())
    print("\nsoak: %d SSH + %d MCP clients over %d users, %d tiny VMs, %.0f s, think %.1f s "
          "mean, %d cores (TCG)" % (args.ssh, args.mcp, args.users, args.users * args.vms,
                                    args.duration, args.think, os.cpu_count()))
    print("commands: %d ok (%.1f/s), errors: %d" % (total, total / args.duration, errs))
    print("\n%-6s %-14s %7s %9s %9s %9s" % ("surface", "command", "count", "p50 ms", "p99 ms",
                                            "max ms"))
    for key in sorted(st.lat):
        v = st.lat[key]
        print("%-7s %-16s %7d %9.1f %9.1f %9.1f" % (key[0], key[1], len(v), vm_bench.pct(v, 50) * 1e3,
                                                    vm_bench.pct(v, 99) * 1e3, max(v) * 1e3))
    if errs:
        print("\nerrors by kind:")
        for key, count in st.errors.most_common():
            print("  %5d  %s %s: %s" % (count, key[0], key[1], key[2]))
            print("         e.g. %s" % st.examples[key])

    mid = t_load + args.duration / 2
    warm = sampler.at(t_load + args.warmup)
    middle = sampler.at(mid)
    last = sampler.at(t_end)
    print("\nwarren %12s %9s %8s %6s" % ("", "RSS MiB", "threads", "fds"))
    for label, s in (("before load", before), ("after warm-up", warm), ("middle", middle),
                     ("end", last), ("clients gone", after), ("idle 40 s", idle)):
        print("  %-16s %9.1f %8d %6d   (t=%.0f s)" % (label, s[1], s[2], s[3], s[0] - t_load))
    during = [s for s in sampler.samples if t_load + args.warmup <= s[0] <= t_end]
    for name, index in (("RSS", 1), ("threads", 2), ("fds", 3)):
        print("  %-8s %s" % (name, curve(during, index)))
    growth = last[1] - warm[1]
    print("  RSS end - after warm-up: %+.1f MiB (%+.1f%%)" % (growth, 100.0 * growth / warm[1]))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
