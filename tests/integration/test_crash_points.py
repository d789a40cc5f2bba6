#!/usr/bin/python3
"""Crash points on real libvirt + QEMU (TCG), the tiny image (issue 16): the real `warren
serve` (templates on, so `new` restores; no pool) is SIGKILLed at seeded random moments
while it runs new, cp, cp --live, rm, stop, start, restart, resize, rename and egress,
started again over the same data dir, and checked after each:

  - nothing orphaned: this data dir's domains (virsh) are exactly the records `ls --json`
    lists, each VM directory in DATA/vms is a domain's, every disk layer in DATA/disks is in a
    domain's chain or is a template's base, DATA/tmp holds nothing (no restore FIFO, live
    copy's memory, seed scratch or host key), DATA/templates no half-made template;
  - store and host agree: each record is ready, in its desired state, with the name, vCPUs,
    memory, disk size and network device its domain has;
  - every acknowledged change is there (the command's answer was read before the kill), and
    the cut one is either wholly there or not at all: `ls --json` is the state before it or
    the state after it.

The moment is a seeded random delay after the command was sent, within about how long such a
command takes here, so some land before warren acts, most inside, some after the answer. This
is the real-libvirt sample; the fake host's 100 points are tests/crash/crash_points.py.

Seed: WARREN_CRASH_SEED (else random), printed with every point; WARREN_CRASH_ROUNDS=N runs
each kind N times (default once: 10 points, about a minute). Serial (guests share 2 cores);
skips when root, libvirt or the tiny image are missing (fails under CI).
"""
import copy
import glob
import json
import os
import random
import re
import signal
import subprocess
import time
import unittest
import xml.etree.ElementTree as ET

import warren_harness as h
from test_vm_e2e import IMAGES, VmTestCase, domains, have_image

VIRSH = ["virsh", "-c", "qemu:///system"]
# (kind, the longest delay before the kill, s): about what each takes on tiny under TCG, plus
# the ssh connection, so the kill mostly lands inside.
POINTS = [("new", 4.0), ("cp", 6.0), ("cp --live", 5.0), ("rm", 1.5), ("stop", 2.5),
          ("start", 1.5), ("restart", 3.0), ("resize", 2.0), ("rename", 0.8), ("egress", 1.5)]
# A guest told to shut down before the kill may power off a little after the restart: the
# check waits this long after a stop or restart (the next point's check would see it too).
SETTLE_S = 4.0


def virsh(*args, check=True):
    r = subprocess.run(VIRSH + list(args), capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("virsh %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


@unittest.skipUnless(have_image("tiny"), "no tiny image in " + IMAGES)
class CrashPointsTest(VmTestCase):

    @classmethod
    def start_vm_server(cls):
        server = h.Server(cls.data, cls.admin, vms=True,
                          extra_args=["--images-dir", IMAGES, "--vm-egress", cls.EGRESS,
                                      "--vm-image", "tiny", "--vm-templates", "default",
                                      "--pool", "none", "--guest-reach-timeout", "15"])
        cls.addClassCleanup(server.stop)
        server.start(timeout=120)
        cls.pin_host_key(server)
        return server

    # ---- What there is.

    def wait_for_template(self, timeout=300):
        deadline = time.time() + timeout
        while not glob.glob(os.path.join(self.data, "templates", "*", "template.json")):
            self.assertLess(time.time(), deadline, "no template after %d s:\n%s" %
                            (timeout, self.server.log()[-3000:]))
            time.sleep(1)

    def ours(self):
        """This data dir's domains: id -> inactive XML (other tests' domains are not ours)."""
        out = {}
        for name in domains():
            if not name.startswith("warren-"):
                continue
            xml = virsh("dumpxml", "--inactive", name, check=False)
            if self.data + "/" in xml:
                out[name[len("warren-"):]] = xml
        return out

    def records(self):
        return {vm["id"]: vm for vm in self.ssh_json(self.admin, "ls", "--json")["vms"]}

    def state(self):
        """What users see, by name: the state compared with before and after a command."""
        return {vm["name"]: {k: vm[k] for k in ("state", "cpus", "memory_mib", "disk_gib",
                                                 "egress")}
                for vm in self.records().values()}

    def problems(self):
        """Every broken invariant between the store, libvirt and the data dir."""
        p = []
        ours = self.ours()
        records = self.records()
        for vm_id in set(ours) - set(records):
            p.append("domain warren-%s has no record" % vm_id)
        for vm_id, vm in records.items():
            who = "VM %s (%s)" % (vm["name"], vm_id)
            if vm["state"] != vm["desired_state"]:
                p.append("%s is %s, wanted %s (libvirt: %s); its console ends:\n%s" %
                         (who, vm["state"], vm["desired_state"],
                          virsh("domstate", "--reason", "warren-" + vm_id, check=False).strip(),
                          self.console_tail(vm_id)))
            if vm_id not in ours:
                p.append(who + " has no domain")
                continue
            dom = ET.fromstring(ours[vm_id])
            title = dom.findtext("title") or ""
            vcpus = int(dom.findtext("vcpu"))
            mem = dom.find("memory")
            mem_mib = int(mem.text) // (1024 if mem.get("unit", "KiB") == "KiB" else 1)
            nic = any(i.get("type") == "user" for i in dom.iter("interface"))
            blk = virsh("domblkinfo", "warren-" + vm_id, "vda")
            cap = int(re.search(r"Capacity:\s+(\d+)", blk).group(1)) // (1 << 30)
            want_nic = vm["egress"] == "all"
            for what, store, host in (("name", vm["name"], title), ("cpus", vm["cpus"], vcpus),
                                      ("memory", vm["memory_mib"], mem_mib),
                                      ("disk", vm["disk_gib"], cap), ("nic", want_nic, nic)):
                if store != host:
                    p.append("%s: the store says %s %s, the host %s" % (who, what, store, host))
        vms_dir = os.path.join(self.data, "vms")
        for d in sorted(set(os.listdir(vms_dir)) - set(ours)):
            p.append("orphaned VM directory vms/" + d)
        tmp = os.path.join(self.data, "tmp")
        for f in sorted(os.listdir(tmp)) if os.path.isdir(tmp) else []:
            p.append("leftover tmp/" + f)
        templates = os.path.join(self.data, "templates")
        for t in sorted(os.listdir(templates)) if os.path.isdir(templates) else []:
            files = set(os.listdir(os.path.join(templates, t)))
            if t.startswith(".") or not {"template.json", "memory.save"} <= files:
                p.append("half-made template templates/%s: %s" % (t, sorted(files)))
        p += self.unused_layers(ours)
        return p

    def console_tail(self, vm_id, lines=15):
        try:
            with open(os.path.join(self.data, "vms", vm_id, "console.log"), "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError as e:
            return str(e)
        return "\n".join("      | " + line for line in text.splitlines()[-lines:])

    def unused_layers(self, ours):
        """Disk layers in DATA/disks that no domain's chain and no template's base uses."""
        disks = set(os.listdir(os.path.join(self.data, "disks")))
        in_use = set()
        for vm_id in ours:
            out = virsh("domblklist", "warren-" + vm_id, "--details")
            for path in re.findall(r"(/\S+\.qcow2)", out):
                info = subprocess.run(["qemu-img", "info", "-U", "--backing-chain", path],
                                      capture_output=True, text=True, timeout=30).stdout
                in_use |= {os.path.basename(p)
                           for p in re.findall(r"^image: (\S+)", info, re.MULTILINE)}
        for meta in glob.glob(os.path.join(self.data, "templates", "*", "template.json")):
            with open(meta, encoding="utf-8") as f:
                in_use |= {os.path.basename(p)
                           for p in re.findall(r'"(/[^"]+\.qcow2)"', f.read())}
        return ["orphaned disk layer disks/" + d for d in sorted(disks - in_use)]

    # ---- The points.

    def command_for(self, kind, rng, model, n):
        """The argv of a `kind` command on the model's VMs and the model it leaves; makes (or
        stops) a VM first, uninterrupted, when the command needs one."""
        running = sorted(k for k, v in model.items() if v["state"] == "running")
        stopped_any = any(v["state"] == "stopped" for v in model.values())
        # (`start` needs a VM too: a stopped one, or a running one it stops first.)
        if kind != "new" and not running and not (kind == "start" and stopped_any):
            self.make(model, "crash-base-%d" % n)
            running = sorted(k for k, v in model.items() if v["state"] == "running")
        after = copy.deepcopy(model)
        if kind == "new":
            name = "crash-new-%d" % n
            after[name] = dict(self.default_vm)
            return ["new", "--name", name], after
        if kind in ("cp", "cp --live"):
            src, name = rng.choice(running), "crash-cp-%d" % n
            after[name] = dict(model[src], state="running")
            return ["cp", src, name] + (["--live"] if kind == "cp --live" else []), after
        if kind == "start":
            stopped = sorted(k for k, v in model.items() if v["state"] == "stopped")
            if not stopped:
                name = rng.choice(running)
                self.vm_ok("stop", name)
                model[name]["state"] = after[name]["state"] = "stopped"
                stopped = [name]
            name = rng.choice(stopped)
            after[name]["state"] = "running"
            return ["start", name], after
        name = rng.choice(running)
        if kind == "rm":
            del after[name]
            return ["rm", name], after
        if kind == "stop":
            after[name]["state"] = "stopped"
            return ["stop", name], after
        if kind == "restart":
            return ["restart", name], after
        if kind == "resize":
            disk = model[name]["disk_gib"] + rng.choice([1, 2])
            cpus = 1 if model[name]["cpus"] == 2 else 2
            after[name].update(disk_gib=disk, cpus=cpus)
            return ["resize", name, "--disk", str(disk), "--cpu", str(cpus)], after
        if kind == "rename":
            new = "crash-renamed-%d" % n
            after[new] = after.pop(name)
            return ["rename", name, new], after
        assert kind == "egress", kind
        egress = "all" if model[name]["egress"] == "none" else "none"
        after[name]["egress"] = egress
        return ["egress", name, egress], after

    def make(self, model, name):
        self.ssh_json(self.admin, "new", "--name", name, timeout=300)
        model[name] = dict(self.default_vm)

    def test_crash_points(self):
        seed = os.environ.get("WARREN_CRASH_SEED") or str(random.SystemRandom().randrange(10**9))
        rng = random.Random(seed)
        print("\ncrash points on real libvirt: seed %s (replay: WARREN_CRASH_SEED=%s)" %
              (seed, seed), flush=True)
        started = time.monotonic()
        self.wait_for_template()
        print("[timing] template ready after %.1f s" % (time.monotonic() - started), flush=True)
        self.ssh_json(self.admin, "new", "--name", "crash-first", timeout=300)
        first = self.state()["crash-first"]
        self.default_vm = dict(first)
        model = {"crash-first": dict(first)}
        self.assertEqual(self.problems(), [])

        points = list(POINTS) * int(os.environ.get("WARREN_CRASH_ROUNDS", "1"))
        rng.shuffle(points)
        failures = []
        outcomes = {}
        for n, (kind, longest) in enumerate(points):
            t0 = time.monotonic()
            argv, after = self.command_for(kind, rng, model, n)
            before = copy.deepcopy(model)
            delay = rng.uniform(0.0, longest)
            client = subprocess.Popen(self.ssh_args(self.admin, *argv), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(delay)
            done = client.poll()  # answered before the kill: acknowledged
            self.server.proc.send_signal(signal.SIGKILL)
            self.server.proc.wait(timeout=30)
            out, err = client.communicate(timeout=60)
            acked = done is not None and done == 0
            refused = done is not None and done != 0
            killed_at = time.monotonic()
            type(self).server = self.start_vm_server()
            restart_s = time.monotonic() - killed_at
            self.wait_for_template()
            if kind in ("stop", "restart"):
                time.sleep(SETTLE_S)

            problems = self.problems()
            now = self.state()
            if now == after:
                outcome = "present"
            elif now == before:
                outcome = "absent"
            else:
                outcome = "PARTIAL"
                problems.append("ls is neither the state before `%s` nor after it: %s\n"
                                "  before: %s\n  after: %s" %
                                (" ".join(argv), json.dumps(now, sort_keys=True),
                                 json.dumps(before, sort_keys=True),
                                 json.dumps(after, sort_keys=True)))
            if acked and outcome != "present":
                problems.append("`%s` was acknowledged (%s) but is not there" %
                                (" ".join(argv), out.strip()))
            if refused and outcome != "absent":
                problems.append("`%s` was refused (%s) but happened" % (" ".join(argv), err))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            print("point %d: `%s` killed %.2f s after it was sent (%s) -> %s; restart %.1f s, "
                  "point %.1f s" % (n, " ".join(argv), delay,
                                    "answered" if acked else "refused" if refused else
                                    "no answer", outcome, restart_s, time.monotonic() - t0),
                  flush=True)
            for p in problems:
                print("    FAIL " + p, flush=True)
            if problems:
                failures.append("point %d (`%s`, %.2f s): %s" % (n, " ".join(argv), delay,
                                                                 "; ".join(problems)))
                break  # the world is no longer what the model says
            model = now
        print("%d points in %.1f s, seed %s: %s" %
              (sum(outcomes.values()), time.monotonic() - started, seed,
               json.dumps(outcomes, sort_keys=True)), flush=True)
        self.assertEqual(failures, [], "seed %s\n%s" % (seed, self.server.log_tail(40)))

        for name in list(model):
            self.vm_ok("rm", name)
        self.assertEqual(self.problems(), [])
        self.assertEqual(self.ours(), {})


if __name__ == "__main__":
    h.main()
