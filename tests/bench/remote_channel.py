#!/usr/bin/python3
"""How warren could reach a VM's control port on a remote libvirt host (issue 18): the
transports side by side against today's local unix-socket connect, in one run.

On a second libvirt host (tests/integration/second_host.py: its own libvirtd in network and
mount namespaces, reached over qemu+ssh and qemu+tls) it boots a tiny VM (TCG) from volumes
uploaded there, whose control port (`<channel type='unix'>`, target warren.control) runs the
guest's control sshd. Then, through each transport, it opens an SSH session to that sshd
(paramiko, the guest's host key pinned) and measures what warren's control session does:

  local         connect() to the channel's unix socket on the same machine (the baseline:
                what vmhost/guest/control_session.cc does today)
  chan+ssh      virDomainOpenChannel (libvirt's stream API, libvirt-python) over qemu+ssh
  chan+tls      virDomainOpenChannel over qemu+tls
  ssh+socat     one `ssh host socat - UNIX-CONNECT:SOCK` per connection (a new SSH
                connection to the host each time)
  ssh -W (mux)  `ssh -W SOCK` through a ControlMaster kept open: an OpenSSH streamlocal
                channel (direct-streamlocal@openssh.com) on one SSH connection to the host

A. through the guest, per transport: connect (transport + SSH handshake + auth), echo RTT
(64 bytes through `cat` on an open channel, median and p90 of --rounds), `true` (a new exec
channel on the open session, as `ssh VM true` over warren's kept session), upload and
download of --mib MiB (to `cat >/dev/null`, from `head -c`).
B. the transport alone: the domain has a second channel (mode='connect', name bench.echo) to
a socat echo in the host's namespaces; virDomainOpenChannel then connects libvirtd to that
echo itself, so no guest and no QEMU are in the path: connect, 64-byte RTT, and the
throughput of --raw-mib MiB echoed.
C. libvirt's own stream throughput: vol-upload of the tiny image's base disk over each URI.
The chan rows open the host's libvirt connection once (its time is printed apart) and a
channel per connect, as warren would with one kept connection per host. --passes runs
everything again in reverse order; figures are medians over the passes. Prints ratios
against local.

Needs root, python3-paramiko, python3-libvirt (for the chan rows) and what
second_host.missing() lists. Usage: tests/bench/remote_channel.py [--mib 16] [--rounds 200]
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import second_host  # noqa: E402
import vm_bench  # noqa: E402

import paramiko  # noqa: E402

try:
    import libvirt  # noqa: E402
except ImportError:
    libvirt = None


_event_loop = None
_connections = {}  # uri -> virConnect, opened once


def _ensure_event_loop():
    """libvirt's default event loop in one thread: streams are driven as virsh console
    drives them (non-blocking, callbacks), all in that thread."""
    global _event_loop
    if _event_loop is None:
        libvirt.virEventRegisterDefaultImpl()

        def run():
            while True:
                libvirt.virEventRunDefaultImpl()
        _event_loop = threading.Thread(target=run, daemon=True)
        _event_loop.start()


class StreamSocket:
    """A socketpair end for paramiko, its other end pumped to and from a non-blocking libvirt
    stream (virDomainOpenChannel) by callbacks in libvirt's event loop. (Blocking stream
    calls from two threads deadlocked here under a bulk upload: virsh's console pattern,
    one event loop thread, is the one that works.)"""

    def __init__(self, uri, domain, channel):
        _ensure_event_loop()
        if uri not in _connections:  # one kept connection per host, as warren would keep
            _connections[uri] = libvirt.open(uri)
        self.conn = _connections[uri]
        self.dom = self.conn.lookupByName(domain)
        self.stream = self.conn.newStream(libvirt.VIR_STREAM_NONBLOCK)
        self.dom.openChannel(channel, self.stream, 0)
        self.mine, self.theirs = socket.socketpair()
        self.theirs.setblocking(False)
        self.pending = b""   # from paramiko, not yet taken by the stream
        self.closed = False
        self.lock = threading.Lock()
        self.stream.eventAddCallback(libvirt.VIR_STREAM_EVENT_READABLE |
                                     libvirt.VIR_STREAM_EVENT_ERROR |
                                     libvirt.VIR_STREAM_EVENT_HANGUP, self._on_stream, None)
        self.watch = libvirt.virEventAddHandle(self.theirs.fileno(),
                                               libvirt.VIR_EVENT_HANDLE_READABLE,
                                               self._on_socket, None)

    def _update(self):
        stream_events = (libvirt.VIR_STREAM_EVENT_READABLE | libvirt.VIR_STREAM_EVENT_ERROR |
                         libvirt.VIR_STREAM_EVENT_HANGUP)
        if self.pending:
            stream_events |= libvirt.VIR_STREAM_EVENT_WRITABLE
        self.stream.eventUpdateCallback(stream_events)
        # Stop reading paramiko's side while the stream has not taken what we hold.
        libvirt.virEventUpdateHandle(self.watch, 0 if self.pending else
                                     libvirt.VIR_EVENT_HANDLE_READABLE)

    def _on_socket(self, watch, fd, events, opaque):
        if self.closed:
            return
        try:
            data = self.theirs.recv(256 * 1024)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._shutdown()
            return
        self.pending += data
        self._flush()

    def _flush(self):
        while self.pending:
            n = self.stream.send(self.pending)
            if n == -2:
                break
            if n < 0:
                self._shutdown()
                return
            self.pending = self.pending[n:]
        self._update()

    def _on_stream(self, stream, events, opaque):
        if self.closed:
            return
        if events & libvirt.VIR_STREAM_EVENT_WRITABLE:
            self._flush()
        if events & libvirt.VIR_STREAM_EVENT_READABLE:
            while True:
                try:
                    data = self.stream.recv(256 * 1024)
                except libvirt.libvirtError:
                    data = b""
                if data == -2:
                    break
                if not data or isinstance(data, int):
                    self._shutdown()
                    return
                self.theirs.setblocking(True)  # paramiko's reader thread drains it
                self.theirs.sendall(data)
                self.theirs.setblocking(False)
        if events & (libvirt.VIR_STREAM_EVENT_ERROR | libvirt.VIR_STREAM_EVENT_HANGUP):
            self._shutdown()

    def _shutdown(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.stream.eventRemoveCallback()
            libvirt.virEventRemoveHandle(self.watch)
            self.stream.abort()
        except libvirt.libvirtError:
            pass
        try:
            self.theirs.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def socket(self):
        return self.mine

    def close(self):
        done = threading.Event()

        def in_loop(timer, opaque):
            libvirt.virEventRemoveTimeout(timer)
            self._shutdown()
            done.set()
        libvirt.virEventAddTimeout(0, in_loop, None)
        done.wait(10)
        self.mine.close()
        self.theirs.close()


class Opened:
    """A connected socket and what closes the transport behind it."""

    def __init__(self, sock, closer=None):
        self.sock, self.closer = sock, closer

    def close(self):
        try:
            self.sock.close()
        finally:
            if self.closer:
                self.closer()


def through_process(argv):
    """A socket whose peer is a process's stdin/stdout (as an ssh ProxyCommand is)."""
    mine, theirs = socket.socketpair()
    proc = subprocess.Popen(argv, stdin=theirs, stdout=theirs, stderr=subprocess.DEVNULL)
    theirs.close()

    def closer():
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return Opened(mine, closer)


def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return Opened(s)


def through_channel(uri, domain, channel):
    st = StreamSocket(uri, domain, channel)
    return Opened(st.socket(), st.close)


def ssh_session(sock, key, known_hosts_key, alias):
    """A paramiko client session on `sock` as dev, the guest's host key pinned."""
    t = paramiko.Transport(sock)
    t.start_client(timeout=60)
    got = t.get_remote_server_key()
    if "%s %s" % (got.get_name(), got.get_base64()) != known_hosts_key:
        t.close()
        raise RuntimeError("%s: the guest's host key is not the pinned one" % alias)
    t.auth_publickey("dev", key)
    return t


def exec_cmd(t, cmd, stdin=b""):
    ch = t.open_session(timeout=60)
    ch.exec_command(cmd)
    if stdin:
        ch.sendall(stdin)
    ch.shutdown_write()
    out = b""
    while True:
        data = ch.recv(1 << 20)
        if not data:
            break
        out += data
    status = ch.recv_exit_status()
    ch.close()
    return status, out


def echo_rtts(send, recv, rounds):
    msg = b"x" * 63 + b"\n"
    rtts = []
    for _ in range(rounds):
        t0 = time.monotonic()
        send(msg)
        got = b""
        while len(got) < len(msg):
            data = recv(len(msg) - len(got))
            if not data:
                raise RuntimeError("echo closed")
            got += data
        rtts.append(time.monotonic() - t0)
    return rtts


def guest_pass(opener, key, host_key, args, row):
    """One pass through the guest's control sshd; appends samples to row."""
    t0 = time.monotonic()
    opened = opener()
    t = ssh_session(opened.sock, key, host_key, row["name"])
    row["connect"].append(time.monotonic() - t0)
    try:
        ch = t.open_session(timeout=60)
        ch.exec_command("cat")
        row["rtt"] += echo_rtts(ch.sendall, ch.recv, args.rounds)
        ch.shutdown_write()
        ch.recv_exit_status()
        ch.close()
        for _ in range(args.execs):
            t0 = time.monotonic()
            status, _ = exec_cmd(t, "true")
            row["true"].append(time.monotonic() - t0)
            assert status == 0
        size = args.mib << 20
        t0 = time.monotonic()
        status, out = exec_cmd(t, "cat >/dev/null; echo done", os.urandom(size))
        row["up"].append(size / (time.monotonic() - t0) / 2**20)
        assert status == 0 and out == b"done\n", (status, out)
        t0 = time.monotonic()
        status, out = exec_cmd(t, "head -c %d /dev/zero" % size)
        row["down"].append(size / (time.monotonic() - t0) / 2**20)
        assert status == 0 and len(out) == size, (status, len(out))
    finally:
        t.close()
        opened.close()
        time.sleep(0.3)  # the guest's launcher: no back-to-back reconnects


def raw_pass(opener, args, row):
    """One pass against the echo server on the host's side of the socket (no guest)."""
    t0 = time.monotonic()
    opened = opener()
    s = opened.sock
    try:
        row["rtt"] += echo_rtts(s.sendall, s.recv, 1)  # the first answer ends the connect
        row["connect"].append(time.monotonic() - t0)
        row["rtt"] += echo_rtts(s.sendall, s.recv, args.rounds)
        size = args.raw_mib << 20
        block = os.urandom(1 << 16)
        got = [0]

        def reader():
            while got[0] < size:
                data = s.recv(1 << 20)
                if not data:
                    break
                got[0] += len(data)
        th = threading.Thread(target=reader)
        t0 = time.monotonic()
        th.start()
        for _ in range(size // len(block)):
            s.sendall(block)
        th.join(timeout=300)
        took = time.monotonic() - t0
        assert got[0] == size, (got[0], size)
        row["echo"].append(size / took / 2**20)
    finally:
        opened.close()


def new_row(name):
    return {"name": name, "connect": [], "rtt": [], "true": [], "up": [], "down": [],
            "echo": []}


def med(v):
    return statistics.median(v) if v else float("nan")


ECHO_SOCKET = "/run/warren-bench-echo.sock"  # in the host's namespaces
ECHO_CHANNEL = """    <channel type='unix'>
      <source mode='connect' path='%s'/>
      <target type='virtio' name='bench.echo'/>
    </channel>
    <channel type='pty'>
      <target type='virtio' name='bench.pty'/>
    </channel>
""" % ECHO_SOCKET


def transports(host, guest, name, ctl, forwards):
    """[(label, {target: opener})] for the two targets, "guest" and "echo"."""
    root = "/proc/%d/root" % host.holder.pid  # the host's mount namespace, from here
    paths = {"guest": guest.control_socket, "echo": ECHO_SOCKET}
    channels = {"guest": "warren.control", "echo": "bench.echo"}
    ssh = host.ssh_argv()
    out = [
        ("local", {k: (lambda p=p: unix(root + p)) for k, p in paths.items()}),
        ("ssh+socat", {k: (lambda p=p: through_process(
            ssh + ["socat", "-", "UNIX-CONNECT:" + p])) for k, p in paths.items()}),
        ("ssh -L mux", {k: (lambda k=k: unix(forwards[k])) for k in paths}),
    ]
    if libvirt is not None:
        for label, uri in (("chan+ssh", host.ssh_uri), ("chan+tls", host.tls_uri)):
            out.append((label, {k: (lambda c=c, uri=uri: through_channel(uri, name, c))
                                for k, c in channels.items()}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=8, help="guest upload/download size")
    ap.add_argument("--raw-mib", type=int, default=64, help="echo server stream size")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--execs", type=int, default=10)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--pass-timeout", type=int, default=300, help="seconds per pass")
    args = ap.parse_args()
    why = second_host.missing() or (None if second_host.tiny_image() else "no tiny image")
    if why:
        sys.exit("remote_channel: " + why)
    def timed_out(*_):
        raise TimeoutError("the pass took longer than %d s" % args.pass_timeout)
    signal.signal(signal.SIGALRM, timed_out)
    if libvirt is not None:
        libvirt.registerErrorHandler(lambda *_: None, None)  # errors raise; no stderr noise
    with second_host.SecondHost() as host:
        print("second host at %s" % host.addr, flush=True)
        key = paramiko.Ed25519Key.from_private_key_file(host.path("etc", "id_ed25519"))
        name = "w2h-bench-%d" % os.getpid()
        echo = host.popen("socat", "UNIX-LISTEN:%s,fork,mode=0777" % ECHO_SOCKET, "EXEC:cat",
                          stdin=subprocess.DEVNULL)
        guest = second_host.TinyGuest(host, host.ssh_uri, name, host.client_public_key(),
                                      extra_devices=ECHO_CHANNEL)
        master = None
        uploads = []
        opens = {}
        refusals = []
        try:
            guest.start()
            host_key = guest.host_key(timeout=300)
            root = "/proc/%d/root" % host.holder.pid
            deadline = time.monotonic() + 120
            while True:  # the guest's sshd answers once it is up
                try:
                    o = unix(root + guest.control_socket)
                    ssh_session(o.sock, key, host_key, "local").close()
                    o.close()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(1)
            time.sleep(5)  # first boot's background work (setup script, resize) settles
            # One SSH connection to the host carrying a streamlocal forward per target.
            ctl = host.path("ssh-master.ctl")
            forwards = {"guest": host.path("fwd-guest.sock"), "echo": host.path("fwd-echo.sock")}
            master = subprocess.Popen(
                host.ssh_argv()[:3] + ["-M", "-S", ctl, "-N",
                                       "-L", "%s:%s" % (forwards["guest"], guest.control_socket),
                                       "-L", "%s:%s" % (forwards["echo"], ECHO_SOCKET),
                                       "root@" + host.addr], stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 20
            while not all(os.path.exists(f) for f in forwards.values()):
                assert time.monotonic() < deadline, "no ssh ControlMaster forwards"
                time.sleep(0.05)
            if libvirt is not None:  # the host's connection, opened once (not per channel)
                _ensure_event_loop()
                for label, uri in (("qemu+ssh", host.ssh_uri), ("qemu+tls", host.tls_uri)):
                    t0 = time.monotonic()
                    _connections[uri] = libvirt.open(uri)
                    opens[label] = time.monotonic() - t0
            table = transports(host, guest, name, ctl, forwards)
            rows = {t: {label: new_row(label) for label, _ in table} for t in ("guest", "echo")}
            failed = {}
            for n in range(args.passes):
                order = table if n % 2 == 0 else list(reversed(table))
                for label, openers in order:
                    for target in ("echo", "guest"):
                        if (label, target) in failed:
                            continue
                        signal.alarm(args.pass_timeout)
                        try:
                            if target == "guest":
                                guest_pass(openers[target], key, host_key, args,
                                           rows[target][label])
                            else:
                                raw_pass(openers[target], args, rows[target][label])
                        except Exception as e:  # a transport that fails is a result too
                            failed[(label, target)] = repr(e)
                            print("%s to %s FAILED: %r" % (label, target, e), flush=True)
                        finally:
                            signal.alarm(0)
                        r = rows[target][label]
                        print("  %s, %s: connect %.0f ms, echo p50 %.2f ms%s" % (
                            label, target, med(r["connect"]) * 1e3, med(r["rtt"]) * 1e3,
                            "" if target == "echo" or not r["up"] else
                            ", up %.2f MiB/s, down %.2f MiB/s" % (med(r["up"]),
                                                                  med(r["down"]))),
                            flush=True)
                print("pass %d done" % (n + 1), flush=True)
            if libvirt is not None:  # what virDomainOpenChannel refuses: a pty channel
                conn = _connections[host.tls_uri]
                try:
                    conn.lookupByName(name).openChannel("bench.pty", conn.newStream(0), 0)
                    refusals.append("a pty channel: accepted")
                except libvirt.libvirtError as e:
                    refusals.append("a pty channel: " + str(e))
            # libvirt's stream throughput on its own: vol-upload of the base image.
            local = os.path.join(guest.image, "rootfs.qcow2")
            size = os.path.getsize(local)
            for label, uri in (("qemu+ssh", host.ssh_uri), ("qemu+tls", host.tls_uri),
                               ("qemu:///system inside the host", None)):
                vol = "bench-upload-%d" % len(uploads)
                t0 = time.monotonic()
                if uri:
                    second_host.upload(uri, local, vol)
                else:
                    virsh = ("virsh", "-c", "qemu:///system")
                    host.run(*virsh, "vol-create-as", second_host.POOL, vol, str(size),
                             "--format", "raw")
                    host.run(*virsh, "vol-upload", "--pool", second_host.POOL, vol, local,
                             timeout=600)
                uploads.append((label, size / (time.monotonic() - t0) / 2**20))
                second_host.virsh(host.ssh_uri, "vol-delete", "--pool", second_host.POOL, vol,
                                  check=False)
        finally:
            for conn in _connections.values():
                conn.close()
            _connections.clear()
            if master is not None:
                master.terminate()
                master.wait(timeout=10)
            guest.remove()
            echo.kill()
            echo.wait()
    report(rows, failed, uploads, size, args)
    for line in refusals:
        print("virDomainOpenChannel on " + line)
    for label, took in opens.items():
        print("  virConnectOpen %s (once per host, not in the chan rows): %.0f ms" % (
            label, took * 1e3))


def report(rows, failed, uploads, size, args):
    print()
    print("A. through the guest: a tiny TCG VM's control sshd (paramiko as dev); "
          "%d MiB up/down, %d echo rounds, %d passes" % (args.mib, args.rounds, args.passes))
    print("%-12s %8s %9s %9s %8s %9s %9s" % ("transport", "connect", "echo p50", "echo p90",
                                            "true", "up MiB/s", "down MiB/s"))
    g = rows["guest"]
    for label, r in g.items():
        if (label, "guest") in failed:
            print("%-12s FAILED %s" % (label, failed[(label, "guest")]))
            continue
        print("%-12s %6.0fms %7.2fms %7.2fms %6.0fms %9.2f %9.2f" % (
            label, med(r["connect"]) * 1e3, med(r["rtt"]) * 1e3, vm_bench.pct(r["rtt"], 90) * 1e3,
            med(r["true"]) * 1e3, med(r["up"]), med(r["down"])))
    print()
    print("B. transport only: a socat echo on the host's side of the socket (no guest); "
          "%d MiB echoed" % args.raw_mib)
    print("%-12s %8s %9s %9s %11s" % ("transport", "connect", "echo p50", "echo p90",
                                      "echo MiB/s"))
    e = rows["echo"]
    for label, r in e.items():
        if (label, "echo") in failed:
            print("%-12s FAILED %s" % (label, failed[(label, "echo")]))
            continue
        print("%-12s %6.1fms %7.3fms %7.3fms %11.1f" % (
            label, med(r["connect"]) * 1e3, med(r["rtt"]) * 1e3, vm_bench.pct(r["rtt"], 90) * 1e3,
            med(r["echo"])))
    print()
    print("ratios against local (times: x>1 is slower; throughputs: x<1 is slower)")
    for target, keys in (("guest", ("connect", "rtt", "true", "up", "down")),
                         ("echo", ("connect", "rtt", "echo"))):
        base = rows[target]["local"]
        if ("local", target) in failed:
            continue
        for label, r in rows[target].items():
            if label == "local" or (label, target) in failed:
                continue
            print("%-5s %-12s %s" % (target, label, "  ".join(
                "%s x%.2f" % (k, med(r[k]) / med(base[k])) for k in keys)))
    print()
    print("C. libvirt's own stream: vol-upload of rootfs.qcow2 (%.1f MiB)" % (size / 2**20))
    for label, mibs in uploads:
        print("  %-34s %7.1f MiB/s" % (label, mibs))


if __name__ == "__main__":
    main()
