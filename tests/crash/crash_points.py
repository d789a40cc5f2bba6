#!/usr/bin/python3
"""Crash points (issue 16) over the fake host: warren's command side (crash_world: the real
interpreter, LMDB store and start-up with reconcile, over FakeVmHost persisted in a data dir)
is SIGKILLed at seeded random points while it runs new, cp, cp --live, rm, resize, rename,
stop/start/pause/resume/restart, egress, tag and comment, key and token changes and share
changes; then started again
over the same data dir and checked:

  - no orphans: no domain without its record, no record without its domain (nor one left
    "creating"), no VM directory, disk, control socket, save file or temp file that no live
    VM or template owns, no store record naming a VM that is gone; the store and the host
    agree on each VM's name, size, egress and state;
  - every acknowledged change is present, and the unacknowledged one (the command the kill
    cut short) is either fully present or absent: the state after the restart (users, keys,
    token labels, VMs with their shares, as the store and the host have them, by name) must
    equal the state an uninterrupted run of the same script had before that command, or the
    one it had after it.

Each point is its own script: a few VMs made, a few random commands, then the target
command, in a fresh data dir. A first run without a kill counts the events and records the
state after every command; the killed run stops at a random event of the target command: a
step of the host's change (before it, between its files and its record, after it), a store
commit (the kill lands before the transaction reaches the file, so it is lost), or the
moment before the answer is written (done but unacknowledged). One point in five kills the
restart too, at a random event of its reconcile, and starts once more. A third of the points
keep a saved template, so `new` restores rather than boots.

Seeded: WARREN_CRASH_SEED or --seed (else random); the seed and every point are printed, and
--seed S --point N replays one point. Real libvirt: tests/integration/test_crash_points.py.
"""
import argparse
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

KINDS = ["new", "cp", "rm", "resize", "rename", "state", "key", "token", "share", "egress",
         "meta"]


class Model:
    """What the script generator believes about the world, to write mostly valid commands
    (a refused command is fine: its answer is acknowledged all the same)."""

    def __init__(self, rng):
        self.rng = rng
        self.vms = {}  # name -> {"owner", "state", "disk"}
        self.keys = []  # alice's added key names
        self.labels = []  # alice's token labels
        self.shared = set()  # VM names shared with bob
        self.counter = 0

    def fresh(self, prefix):
        self.counter += 1
        return "%s-%d" % (prefix, self.counter)

    def alice_vms(self, state=None):
        return sorted(n for n, v in self.vms.items()
                      if v["owner"] == "alice" and (state is None or v["state"] == state))


def op(user, *argv, stdin=""):
    return {"as": user, "argv": list(argv), "stdin": stdin}


def key_line(rng):
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(rng.randrange(256)
                                                                     for _ in range(32))
    return "ssh-ed25519 " + base64.b64encode(blob).decode() + " crash@test\n"


def gen_new(m):
    name = m.fresh("vm")
    flags = []
    if m.rng.random() < 0.4:  # another shape than the template's
        flags += ["--cpu", "2", "--memory", "512M"]
    if m.rng.random() < 0.3:
        flags += ["--egress", "all"]
    if m.rng.random() < 0.3:
        flags += ["--tag", "ci"]
    m.vms[name] = {"owner": "alice", "state": "running", "disk": 1}
    return op("alice", "new", "--name", name, *flags)


def gen_cp(m):
    srcs = m.alice_vms()
    if not srcs:
        return gen_new(m)
    src = m.rng.choice(srcs)
    name = m.fresh("copy")
    flags = []
    if m.vms[src]["state"] == "running" and m.rng.random() < 0.5:
        flags.append("--live")
    m.vms[name] = {"owner": "alice", "state": "running", "disk": m.vms[src]["disk"]}
    return op("alice", "cp", src, name, *flags)


def gen_rm(m):
    vms = m.alice_vms()
    if not vms:
        return gen_new(m)
    name = m.rng.choice(vms)
    del m.vms[name]
    m.shared.discard(name)
    return op("alice", "rm", name)


def gen_resize(m):
    vms = m.alice_vms()
    if not vms:
        return gen_new(m)
    name = m.rng.choice(vms)
    flags = []
    if m.rng.random() < 0.6:
        m.vms[name]["disk"] += m.rng.choice([1, 2])
        flags += ["--disk", str(m.vms[name]["disk"])]
    if m.rng.random() < 0.6 or not flags:
        flags += ["--cpu", str(m.rng.choice([1, 2])), "--memory", m.rng.choice(["256M", "512M"])]
    return op("alice", "resize", name, *flags)


def gen_rename(m):
    vms = m.alice_vms()
    if not vms:
        return gen_new(m)
    old = m.rng.choice(vms)
    new = m.fresh("renamed")
    m.vms[new] = m.vms.pop(old)
    if old in m.shared:
        m.shared.discard(old)
        m.shared.add(new)
    return op("alice", "rename", old, new)


def gen_state(m):
    running, stopped, paused = (m.alice_vms("running"), m.alice_vms("stopped"),
                                m.alice_vms("paused"))
    choices = ([("stop", n, "stopped") for n in running] +
               [("pause", n, "paused") for n in running] +
               [("restart", n, "running") for n in running] +
               [("start", n, "running") for n in stopped] * 2 +
               [("resume", n, "running") for n in paused] * 2 +
               [("stop", n, "stopped") for n in paused])
    if not choices:
        return gen_new(m)
    verb, name, after = m.rng.choice(choices)
    m.vms[name]["state"] = after
    return op("alice", verb, name)


def gen_key(m):
    r = m.rng.random()
    if m.keys and r < 0.35:
        name = m.keys.pop(m.rng.randrange(len(m.keys)))
        return op("alice", "ssh-key", "remove", name)
    if m.keys and r < 0.5:
        old = m.keys.pop(m.rng.randrange(len(m.keys)))
        new = m.fresh("key")
        m.keys.append(new)
        return op("alice", "ssh-key", "rename", old, new)
    name = m.fresh("key")
    m.keys.append(name)
    flags = ["--cmds", "ls,stat"] if m.rng.random() < 0.3 else []
    return op("alice", "ssh-key", "add", "--name", name, *flags, stdin=key_line(m.rng))


def gen_token(m):
    r = m.rng.random()
    if m.labels and r < 0.35:
        name = m.labels.pop(m.rng.randrange(len(m.labels)))
        return op("alice", "ssh-key", "remove", name)
    if m.labels and r < 0.5:  # one more token under a label
        return op("alice", "ssh-key", "generate-api-key", "--label", m.rng.choice(m.labels))
    name = m.fresh("label")
    m.labels.append(name)
    flags = ["--cmds", "ls,new,rm"] if m.rng.random() < 0.4 else []
    return op("alice", "ssh-key", "generate-api-key", "--label", name, *flags)


def gen_share(m):
    vms = m.alice_vms()
    if not vms:
        return gen_new(m)
    name = m.rng.choice(vms)
    r = m.rng.random()
    if name in m.shared and r < 0.3:
        m.shared.discard(name)
        return op("alice", "share", "remove", name, "bob")
    if r < 0.45:
        m.shared.add(name)
        return op("alice", "share", "add", name, "bob")
    if r < 0.6:
        return op("alice", "share", "set-public", name)
    if r < 0.7:
        return op("alice", "share", "set-private", name)
    if r < 0.85:
        return op("alice", "share", "add-link", name)
    return op("alice", "share", "port", name, str(m.rng.choice([3000, 8080, 9999])))


def gen_egress(m):
    vms = m.alice_vms()
    if not vms:
        return gen_new(m)
    return op("alice", "egress", m.rng.choice(vms), m.rng.choice(["all", "integrations", "none"]))


def gen_meta(m):
    vms = m.alice_vms()
    if not vms:
        return gen_new(m)
    name = m.rng.choice(vms)
    r = m.rng.random()
    if r < 0.4:
        return op("alice", "tag", name, m.rng.choice(["web", "db", "ci"]))
    if r < 0.6:
        return op("alice", "tag", "-d", name, m.rng.choice(["web", "db", "ci"]))
    return op("alice", "comment", name, m.rng.choice(["one", "two words", ""]))


GENERATORS = {"new": gen_new, "cp": gen_cp, "rm": gen_rm, "resize": gen_resize,
              "rename": gen_rename, "state": gen_state, "key": gen_key, "token": gen_token,
              "share": gen_share, "egress": gen_egress, "meta": gen_meta}


def make_script(rng, kind):
    """A few VMs, a few random commands, then the target command of `kind` (last)."""
    m = Model(rng)
    ops = [gen_new(m) for _ in range(rng.randint(1, 3))]
    for _ in range(rng.randint(0, 5)):
        ops.append(GENERATORS[rng.choice(KINDS)](m))
    ops.append(GENERATORS[kind](m))
    return ops


class Run:
    """One crash_world process's output: events, answers, states."""

    def __init__(self, out):
        self.events = []  # (n, op, text)
        self.answers = {}  # op -> answer
        self.states = {}  # op -> state
        for line in out.splitlines():
            tag, _, rest = line.partition(" ")
            if tag == "E":
                n, o, text = rest.split(" ", 2)
                self.events.append((int(n), int(o), text))
            elif tag == "A":
                o, _, answer = rest.partition(" ")
                self.answers[int(o)] = json.loads(answer)
            elif tag == "S":
                o, _, state = rest.partition(" ")
                self.states[int(o)] = json.loads(state)

    def ids(self):
        ids = set()
        for _, _, text in self.events:
            words = text.split()
            if words[0] == "host" and len(words) == 3 and words[2].isalnum():
                ids.add(words[2])
        return ids


class World:
    def __init__(self, path):
        self.path = path

    def run(self, data, script, kill_at=None, templates=False, states=False):
        args = [self.path, "run", data, script]
        if kill_at is not None:
            args += ["--kill-at", str(kill_at)]
        if templates:
            args.append("--templates")
        if states:
            args.append("--states")
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        killed = p.returncode == -9
        if p.returncode != 0 and not killed:
            raise AssertionError("crash_world run exited %d: %s" % (p.returncode, p.stderr))
        if kill_at is not None and not killed:
            raise AssertionError("crash_world was not killed at event %d" % kill_at)
        return Run(p.stdout)

    def dump(self, data, known_ids, templates=False):
        args = [self.path, "dump", data, "--known-ids", known_ids]
        if templates:
            args.append("--templates")
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError("crash_world dump exited %d: %s" % (p.returncode, p.stderr))
        return json.loads(p.stdout.splitlines()[-1])  # after the start-up's events


def diff(a, b, path=""):
    """The first few places two states differ, for a failure's message."""
    if type(a) is not type(b) or not isinstance(a, (dict, list)):
        return [] if a == b else ["%s: %s != %s" % (path or "/", json.dumps(a), json.dumps(b))]
    if isinstance(a, list):
        return [] if a == b else ["%s: %s != %s" % (path, json.dumps(a), json.dumps(b))]
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            out.append("%s/%s only %s" % (path, k, "after the restart" if k in a else
                                            "in the uninterrupted run"))
        else:
            out += diff(a[k], b[k], path + "/" + k)
    return out


def argv_text(o):
    return " ".join(o["argv"])


def run_point(world, base, seed, index, verbose):
    """One crash point; returns (summary, problems)."""
    rng = random.Random("%s/%d" % (seed, index))
    kind = KINDS[index % len(KINDS)]
    templates = rng.random() < 1 / 3
    ops = make_script(rng, kind)
    target = len(ops)
    point_dir = tempfile.mkdtemp(prefix="point-%d-" % index, dir=base)
    script = os.path.join(point_dir, "script.jsonl")
    with open(script, "w") as f:
        for o in ops:
            f.write(json.dumps(o) + "\n")
    known = os.path.join(point_dir, "known-ids")

    # The uninterrupted run: events to choose from, and the state after every command.
    clean = os.path.join(point_dir, "clean")
    dry = world.run(clean, script, templates=templates, states=True)
    ids = dry.ids()
    candidates = [n for n, o, _ in dry.events if o == target]
    if not candidates or set(dry.states) != set(range(0, target + 1)):
        return None, ["the uninterrupted run did not finish its script: %s" %
                      sorted(dry.answers)]
    problems = []
    # Reconcile on an uninterrupted world changes nothing.
    with open(known, "w") as f:
        f.write("\n".join(sorted(ids)) + "\n")
    clean_dump = world.dump(clean, known, templates)
    problems += ["uninterrupted run: " + p for p in clean_dump["problems"]]
    problems += ["uninterrupted run, after a restart: " + d
                 for d in diff(clean_dump["state"], dry.states[target])]

    # The killed run.
    kill_at = rng.choice(candidates)
    data = os.path.join(point_dir, "data")
    killed = world.run(data, script, kill_at=kill_at, templates=templates)
    landed = [t for n, _, t in killed.events if n == kill_at]
    ids |= killed.ids()
    where = landed[0] if landed else "?"
    for o in range(1, target):
        if killed.answers.get(o, {}).get("code") != dry.answers[o]["code"]:
            problems.append("command %d (%s) answered %s, uninterrupted %s" %
                            (o, argv_text(ops[o - 1]), killed.answers.get(o, {}).get("code"),
                             dry.answers[o]["code"]))
    summary = "%-6s `%s` (after %d commands%s) killed at event %d/%d: %s" % (
        kind, argv_text(ops[-1]), target - 1, ", template" if templates else "", kill_at,
        len(dry.events), where)

    # One point in five: the restart is killed too, somewhere in its reconcile.
    if rng.random() < 0.2:
        probe = os.path.join(point_dir, "probe")
        shutil.copytree(data, probe, symlinks=True)
        empty = os.path.join(point_dir, "empty.jsonl")
        open(empty, "w").close()
        start_events = [n for n, _, _ in world.run(probe, empty, templates=templates).events]
        if start_events:
            again = rng.choice(start_events)
            restart = world.run(data, empty, kill_at=again, templates=templates)
            ids |= restart.ids()
            landed = [t for n, _, t in restart.events if n == again]
            summary += "; restart killed at event %d/%d: %s" % (
                again, len(start_events), landed[0] if landed else "?")

    with open(known, "w") as f:
        f.write("\n".join(sorted(ids)) + "\n")
    after = world.dump(data, known, templates)
    problems += after["problems"]
    before_state, after_state = dry.states[target - 1], dry.states[target]
    if after["state"] == after_state:
        outcome = "present"
    elif after["state"] == before_state:
        outcome = "absent"
    else:
        outcome = "PARTIAL"
        problems.append("the state after the restart is neither the one before `%s` nor the "
                        "one after it" % argv_text(ops[-1]))
        problems += ["  vs before: " + d for d in diff(after["state"], before_state)]
        problems += ["  vs after:  " + d for d in diff(after["state"], after_state)]
    summary += " -> %s (uninterrupted: %s)" % (outcome, dry.answers[target]["code"])
    if verbose:
        summary += "\n      reconcile: " + json.dumps(after["reconcile"])
    if not problems:
        shutil.rmtree(point_dir, ignore_errors=True)
    else:
        problems.append("kept for a look: " + point_dir)
    return (summary, outcome, where), problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", required=True, help="the crash_world binary")
    parser.add_argument("--seed", default=os.environ.get("WARREN_CRASH_SEED"))
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--point", type=int, help="only this point (with --seed)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    seed = args.seed or str(random.SystemRandom().randrange(10**9))
    print("crash points over the fake host: seed %s (replay: WARREN_CRASH_SEED=%s)" %
          (seed, seed), flush=True)
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # LMDB syncs each commit
    base = tempfile.mkdtemp(prefix="warren-crash-", dir=shm)
    world = World(args.world)
    points = [args.point] if args.point is not None else range(args.points)
    started = time.monotonic()
    failed = 0
    outcomes = {}
    kinds_of_event = {}
    kinds = {}
    for i in points:
        t = time.monotonic()
        try:
            result, problems = run_point(world, base, seed, i, args.verbose)
        except (AssertionError, subprocess.TimeoutExpired) as e:
            result, problems = None, [str(e)]
        if result is not None:
            summary, outcome, where = result
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            kinds[KINDS[i % len(KINDS)]] = kinds.get(KINDS[i % len(KINDS)], 0) + 1
            ev = where.split()[0] + (" " + where.split()[1].split(":")[1]
                                     if where.startswith("host") else "")
            kinds_of_event[ev] = kinds_of_event.get(ev, 0) + 1
        else:
            summary = "(no point)"
        print("point %3d %s (%.2f s)" % (i, summary, time.monotonic() - t), flush=True)
        if problems:
            failed += 1
            for p in problems:
                print("    FAIL " + p, flush=True)
            print("    replay: WARREN_CRASH_SEED=%s %s --world %s --point %d" %
                  (seed, sys.argv[0], args.world, i), flush=True)
    if failed == 0:
        shutil.rmtree(base, ignore_errors=True)
    print("%d points in %.1f s, seed %s: commands %s; outcomes %s; killed at %s; %d failed" %
          (len(points), time.monotonic() - started, seed, json.dumps(kinds),
           json.dumps(outcomes, sort_keys=True), json.dumps(kinds_of_event, sort_keys=True),
           failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
