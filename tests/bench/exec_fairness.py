#!/usr/bin/python3
"""Fair shares and bounded threads, in one run against one tiny VM.

1. /exec latency of user B (`whoami`, keep-alive) with no load, then while user A holds
   --hold long commands (`ssh VM sleep 60`, default 64): medians, the ratio against the
   no-load baseline, and how many of B's and A's requests were refused (429).
2. warren's threads while --clients MCP tool calls (default 300, one user, one session)
   wait on a VM whose guest stalled (its control sshd and launcher SIGSTOPped from inside:
   the control link answers nothing, the VM still runs), then how long after those clients
   go away the threads are back.

Starts its own `warren serve` (VMs on, guests without network, the tiny image from
WARREN_TEST_IMAGES); WARREN_BIN= an older build gives the "before" figures. Removes what it
made. Usage: tests/bench/exec_fairness.py [--hold 64] [--clients 300] [--runs 30]
"""
import argparse
import http.client
import json
import os
import shlex
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import mcp_http  # noqa: E402
import vm_bench  # noqa: E402
import warren_harness as h  # noqa: E402

VM = "bench-fair"


def send_raw(port, path, token, body, extra=()):
    """Sends one POST and returns its socket unread, so the client can hang up at will."""
    data = body.encode()
    head = ["POST %s HTTP/1.1" % path, "Host: 127.0.0.1", "Authorization: Bearer " + token,
            "Content-Type: application/json", "Content-Length: %d" % len(data)] + list(extra)
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    return s


def status_if_answered(s, wait):
    """The HTTP status a socket was answered with within `wait` seconds, or None."""
    s.settimeout(wait)
    try:
        line = s.recv(64)
    except (socket.timeout, OSError):
        return None
    parts = line.split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def threads_of(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def exec_latency(port, token, runs):
    """(median seconds, refused count) of `whoami` over /exec on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times, refused = [], 0
    for _ in range(runs):
        t = time.monotonic()
        conn.request("POST", "/exec", body="whoami", headers={"Authorization": "Bearer " + token})
        r = conn.getresponse()
        r.read()
        if r.status == 200:
            times.append(time.monotonic() - t)
        else:
            refused += 1
        if r.will_close:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.close()
    return (statistics.median(times) if times else None), refused


def fairness(bench, server, args, token_a, token_b):
    base, base_refused = exec_latency(server.http_port, token_b, args.runs)
    body = json.dumps({"command": "ssh %s sleep 60" % VM})
    held = [send_raw(server.http_port, "/exec", token_a, body) for _ in range(args.hold)]
    time.sleep(3)  # all admitted (running or waiting) or refused by now
    a_refused = sum(1 for s in held if status_if_answered(s, 0.05) == 429)
    loaded, b_refused = exec_latency(server.http_port, token_b, args.runs)
    for s in held:  # A goes away: its commands are cancelled
        s.close()
    print("1. /exec whoami as user B, %d runs, while user A holds %d x `ssh VM sleep 60`:"
          % (args.runs, args.hold))
    print("   A refused (429):            %d of %d" % (a_refused, args.hold))
    print("   B with no load (median):    %s" % fmt_ms(base))
    print("   B under A's load (median):  %s   refused %d of %d" % (fmt_ms(loaded), b_refused,
                                                                    args.runs))
    if base and loaded:
        print("   ratio loaded/unloaded:      %.2f" % (loaded / base))
    else:
        print("   ratio loaded/unloaded:      - (B was refused)")


def fmt_ms(seconds):
    return "-" if seconds is None else "%.2f ms" % (seconds * 1e3)


def stalled_guest(bench, server, args, token_a, at_start):
    pid = server.proc.pid
    client = mcp_http.McpClient(server.http_port, token_a)
    client.initialize()
    session = client.session
    # A job, so this command does not wait on the link it is about to stall.
    bench.ssh("ssh", "--wait-seconds", "0", VM, shlex.quote(
        "sleep 1; sudo sh -c 'kill -STOP $(pidof warren-launcher) $(pidof sshd)'"))
    time.sleep(3)
    idle = threads_of(pid)
    try:
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "exec", "arguments": {"command": "ssh %s true" % VM}}})
        extra = ["Accept: application/json, text/event-stream", "Mcp-Session-Id: " + session,
                 "MCP-Protocol-Version: " + mcp_http.PROTOCOL]
        socks = [send_raw(server.http_port, "/mcp", token_a, call, extra)
                 for _ in range(args.clients)]
        time.sleep(5)
        waiting = threads_of(pid)
        answers = {}
        for s in socks:
            code = status_if_answered(s, 0.05)
            answers[code] = answers.get(code, 0) + 1
        for s in socks:
            s.close()
        gone = time.monotonic()
        settled = None
        while time.monotonic() - gone < 120:
            if threads_of(pid) <= idle + 2:
                settled = time.monotonic() - gone
                break
            time.sleep(0.1)
        after = threads_of(pid)
        # Cancellation reached the commands that waited: the user's share is free again.
        freed = None
        while time.monotonic() - gone < 120:
            r = client.request("tools/call", {"name": "exec", "arguments": {"command": "whoami"}})
            if r.status == 200:
                freed = time.monotonic() - gone
                break
            time.sleep(0.05)
    finally:
        client.close()
    print("2. %d MCP tools/call (one user) waiting on a VM whose guest is stalled:" % args.clients)
    print("   warren threads at start:         %d" % at_start)
    print("   warren threads before the calls: %d" % idle)
    print("   warren threads while they wait:  %d" % waiting)
    print("   answers after 5 s:               %s" % ", ".join(
        "%s: %d" % ("none yet" if k is None else k, v) for k, v in sorted(
            answers.items(), key=lambda kv: -1 if kv[0] is None else kv[0])))
    print("   after the clients went away:     %d, back to %d in %s" % (
        after, idle, "%.1f s" % settled if settled is not None else "more than 120 s"))
    print("   the user's next call answered:   %s after they went" % (
        "%.2f s" % freed if freed is not None else "not within 120 s"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hold", type=int, default=64)
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()

    bench = vm_bench.VmBench()
    server = None
    made_vm = False
    try:
        # A's burst must reach the runner, not the per-label rate limit.
        # A's burst must reach the runner, not the per-label rate limit, and 300 clients from
        # one address must get past the HTTP per-source cap.
        server = bench.start(extra_args=["--exec-burst", "1000", "--exec-rate", "1000",
                                         "--http-max-connections-per-source", "4000"])
        bench.ssh("new", "--image", "tiny", "--name", VM, "--cpu", "1", "--memory", "512M")
        made_vm = True
        bob = h.Key(bench.tmp, "bob")
        bench.ssh("user", "add", "bob", "--key", "'%s'" % bob.public_line)
        token_a = bench.ssh("ssh-key", "generate-api-key", "--label", "a")[1].strip()
        token_b = bench.ssh_as(bob, "ssh-key", "generate-api-key", "--label", "b")[1].strip()
        bench.ssh("ssh", VM, "true")  # connected, runner installed
        at_start = threads_of(server.proc.pid)
        print("warren %s, load %.1f" % (os.environ.get("WARREN_BIN", "(this build)"),
                                        os.getloadavg()[0]))
        fairness(bench, server, args, token_a, token_b)
        time.sleep(3)
        stalled_guest(bench, server, args, token_a, at_start)
        return 0
    finally:
        if server is not None and made_vm:
            try:
                bench.ssh("rm", VM)
            except Exception as e:  # noqa: BLE001 - report, keep cleaning up
                print("cleanup: rm failed:", e)
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
