"""An "outside" network for VM egress tests: a network namespace the test creates, joined to
the host by a veth pair and routed, holding listeners on a TEST-NET-2 address (198.51.100.2,
the public side a guest with egress `all` may reach) and on a private one (10.213.0.2,
closed by the host's isolation rules unless `serve --vm-egress-allow` opens it).

Not TEST-NET-3 (203.0.113.0/24): on the project's machines the package registries resolve
there, and a veth over it cut them off. Before it makes anything, the class refuses (with
the reason) when either range is already an address or a route of the host, and it sweeps
what runs of the test that died left behind (names carry the test's pid).

Each listener answers a random token over TCP (a line, then close) and echoes it over UDP,
so a guest proves it reached *that* listener. Needs root and iproute2; everything made is
removed by close(), also after a failure half-way.
"""
import ctypes
import os
import socket
import subprocess
import threading

OUTSIDE_NET = "198.51.100.0/24"
OUTSIDE_ADDR = "198.51.100.2"   # TEST-NET-2: the public side
HOST_SIDE_ADDR = "198.51.100.1"  # the host's end of the veth: a host interface address
PRIVATE_NET = "10.213.0.0/24"
PRIVATE_ADDR = "10.213.0.2"
PORT = 8080
CLONE_NEWNET = 0x40000000


def run(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=check)


def bound_pair(addr, port, family=socket.AF_INET):
    """A listening TCP socket and a UDP socket on (addr, port); port 0 picks one for both."""
    tcp = socket.socket(family, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((addr, port))
    tcp.listen(16)
    udp = socket.socket(family, socket.SOCK_DGRAM)
    udp.bind((addr, tcp.getsockname()[1]))
    return tcp, udp


class Listener:
    """Answers `token` on a TCP socket (after reading the request) and a UDP socket."""

    def __init__(self, tcp, udp, token):
        self.token = token
        self.tcp = tcp
        self.udp = udp
        self.port = tcp.getsockname()[1]
        self.hits = 0
        self._stop = False
        threading.Thread(target=self._serve_tcp, daemon=True).start()
        threading.Thread(target=self._serve_udp, daemon=True).start()

    def _serve_tcp(self):
        while not self._stop:
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                return
            self.hits += 1
            try:
                conn.settimeout(2)
                try:
                    conn.recv(4096)  # whatever the client sends first (an HTTP request)
                except OSError:
                    pass
                conn.sendall(("HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s\n" %
                              (len(self.token) + 1, self.token)).encode())
            except OSError:
                pass
            finally:
                conn.close()

    def _serve_udp(self):
        while not self._stop:
            try:
                _, peer = self.udp.recvfrom(2048)
            except OSError:
                return
            if self._stop or peer is None:  # shut down
                return
            self.hits += 1
            try:
                self.udp.sendto((self.token + "\n").encode(), peer)
            except OSError:
                pass

    def close(self):
        self._stop = True
        for s in (self.tcp, self.udp):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


NS_PREFIX = "wrn-out-"
HOST_IF_PREFIX = "wrnh"


def sweep_leftovers():
    """Removes namespaces and veths of earlier runs whose process is gone."""
    for line in run("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        pid = name[len(NS_PREFIX):]
        if name.startswith(NS_PREFIX) and pid.isdigit() and not os.path.exists("/proc/" + pid):
            run("ip", "netns", "del", name, check=False)
    for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        pid = name[len(HOST_IF_PREFIX):]
        if name.startswith(HOST_IF_PREFIX) and pid.isdigit() and not os.path.exists("/proc/" + pid):
            run("ip", "link", "del", name, check=False)


def refuse_if_in_use():
    """Raises when the host already has an address in, or a route to, either test range: the
    test must never take over addresses something real uses."""
    addrs = run("ip", "-o", "addr", "show").stdout
    for net, probe in ((OUTSIDE_NET, OUTSIDE_ADDR), (PRIVATE_NET, PRIVATE_ADDR)):
        prefix = net.rsplit(".", 1)[0] + "."
        if " " + prefix in addrs:
            raise RuntimeError("the host already has an address in %s:\n%s" % (net, addrs))
        routes = run("ip", "route", "show", "table", "all", "to", "match", probe).stdout
        specific = [r for r in routes.splitlines()
                    if r.strip() and not r.startswith(("default", "broadcast", "local"))]
        if specific:
            raise RuntimeError("the host already routes %s: %s" % (net, "; ".join(specific)))


class OutsideNetwork:
    """The namespace, its veth and route, and one Listener on each of its two addresses."""

    def __init__(self):
        tag = str(os.getpid())  # interface names stay within 15 characters
        self.ns = NS_PREFIX + tag
        self.host_if = HOST_IF_PREFIX + tag
        self.ns_if = "wrnn" + tag
        self.tokens = {"outside": "outside-" + os.urandom(6).hex(),
                       "private": "private-" + os.urandom(6).hex()}
        self.listeners = []
        self._made = []
        try:
            self._setup()
        except Exception:
            self.close()
            raise

    def _setup(self):
        sweep_leftovers()
        refuse_if_in_use()
        run("ip", "netns", "add", self.ns)
        self._made.append(("netns", self.ns))
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        self._made.append(("link", self.host_if))
        run("ip", "link", "set", self.ns_if, "netns", self.ns)
        run("ip", "addr", "add", HOST_SIDE_ADDR + "/24", "dev", self.host_if)
        run("ip", "link", "set", self.host_if, "up")
        ns = ("ip", "netns", "exec", self.ns)
        run(*ns, "ip", "addr", "add", OUTSIDE_ADDR + "/24", "dev", self.ns_if)
        run(*ns, "ip", "addr", "add", PRIVATE_ADDR + "/24", "dev", self.ns_if)
        run(*ns, "ip", "link", "set", self.ns_if, "up")
        run(*ns, "ip", "link", "set", "lo", "up")
        run(*ns, "ip", "route", "add", "default", "via", HOST_SIDE_ADDR)
        run("ip", "route", "add", PRIVATE_NET, "via", OUTSIDE_ADDR, "dev", self.host_if)
        self._made.append(("route", PRIVATE_NET))
        # Sockets bound inside the namespace: a thread's setns would move the whole test,
        # so open them from a short-lived child that passes them back.
        for name, addr in (("outside", OUTSIDE_ADDR), ("private", PRIVATE_ADDR)):
            self.listeners.append(self._listener_in_ns(addr, self.tokens[name]))

    def _listener_in_ns(self, addr, token):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        pid = os.fork()
        if pid == 0:
            try:
                fd = os.open("/run/netns/" + self.ns, os.O_RDONLY)
                # os.setns is Python 3.12; Debian 12 has 3.11.
                if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                    os._exit(1)
                tcp, udp = bound_pair(addr, PORT)
                socket.send_fds(child, [b"x"], [tcp.fileno(), udp.fileno()])
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError("could not open a listener in namespace " + self.ns)
        _, fds, _, _ = socket.recv_fds(parent, 16, 2)
        parent.close()
        child.close()
        return Listener(socket.socket(fileno=fds[0]), socket.socket(fileno=fds[1]), token)

    def close(self):
        for listener in self.listeners:
            listener.close()
        self.listeners = []
        for kind, name in reversed(self._made):
            if kind == "route":
                run("ip", "route", "del", name, check=False)
            elif kind == "link":
                run("ip", "link", "del", name, check=False)
            elif kind == "netns":
                run("ip", "netns", "del", name, check=False)
        self._made = []


def warren_chains():
    """{chain name: rule count} of `nft -j list table inet warren` (empty: no table)."""
    import json
    r = run("nft", "-j", "list", "table", "inet", "warren", check=False)
    if r.returncode != 0:
        return {}
    chains = {}
    for item in json.loads(r.stdout)["nftables"]:
        if "chain" in item:
            chains.setdefault(item["chain"]["name"], 0)
        elif "rule" in item:
            chains[item["rule"]["chain"]] = chains.get(item["rule"]["chain"], 0) + 1
    return chains


def chain_of(data_dir):
    """The chain name warren gives `data_dir` (vmhost/egress_firewall.cc EgressChainName)."""
    h = 14695981039346656037
    for c in os.path.abspath(data_dir).encode():
        h = ((h ^ c) * 1099511628211) & 0xffffffffffffffff
    return "vms_%016x" % h


def remove_chain(data_dir):
    """Deletes a test server's chain, which warren keeps while any domain of the host runs
    (other tests' VMs may), so tests leave the host as they found it."""
    name = chain_of(data_dir)
    if name in warren_chains():
        run("nft", "delete", "chain", "inet", "warren", name, check=False)
