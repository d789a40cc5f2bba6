#!/usr/bin/env python3
"""What warren.service (Type=notify) relies on, checked on an installed warren without
systemd: run `/usr/bin/warren serve --config CONF` with $NOTIFY_SOCKET naming a datagram
socket of ours, expect READY=1 once its listeners are up (the SSH one then answers), and
STOPPING=1 and a clean exit on SIGTERM.

usage: notify_check.py CONF ADMIN_KEY.pub SCRATCH_DIR   (deb_test.sh runs it, as root)"""
import os
import re
import signal
import socket
import subprocess
import sys
import time


def main() -> int:
    conf, admin_key, scratch = sys.argv[1:4]
    sock_path = os.path.join(scratch, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    log_path = os.path.join(scratch, "serve.log")
    env = dict(os.environ, NOTIFY_SOCKET=sock_path)
    argv = ["/usr/bin/warren", "serve", "--config", conf, "--admin-key", admin_key,
            "--vms", "off", "--ssh", "127.0.0.1:0", "--http", "127.0.0.1:0",
            "--web", "off", "--metrics", "off"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    def fail(why: str) -> int:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with open(log_path, encoding="utf-8", errors="replace") as f:
            sys.stderr.write(f.read()[-3000:])
        print("notify_check: FAIL: " + why, file=sys.stderr)
        return 1

    def wait_for(field: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                msg = sock.recv(4096).decode()
            except socket.timeout:
                return False
            if field in msg.split("\n"):
                return True
        return False

    started = time.monotonic()
    if not wait_for("READY=1", 60):
        return fail("no READY=1 within 60 s")
    ready_s = time.monotonic() - started
    # READY=1 promises listening sockets: the SSH listener answers with its banner now.
    with open(log_path, encoding="utf-8", errors="replace") as f:
        m = re.search(r"ssh listening on [^\s:]+:(\d+)", f.read())
    if not m:
        return fail("READY=1 before the log says where SSH listens")
    with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=10) as c:
        if not c.recv(64).startswith(b"SSH-2.0-"):
            return fail("the SSH listener does not answer with a banner after READY=1")
    proc.send_signal(signal.SIGTERM)
    if not wait_for("STOPPING=1", 30):
        return fail("no STOPPING=1 after SIGTERM")
    try:
        code = proc.wait(60)
    except subprocess.TimeoutExpired:
        return fail("did not exit within 60 s of SIGTERM")
    if code != 0:
        return fail(f"exited {code} after SIGTERM")
    print(f"notify_check: READY=1 after {ready_s:.1f} s, STOPPING=1 and exit 0 on SIGTERM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
