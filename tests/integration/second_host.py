"""A second libvirt host on this one machine, for the multi-host tests (issue 18).

SecondHost() starts, and close() removes again:

  - a network namespace of its own (`ip netns`, named wrn2h-PID-N), joined to the root
    namespace by a veth pair on a private /30 in 10.251.0.0/16 (the host side .1, the
    namespace side .2; the first free /30 is taken under a lock, and the class refuses to
    start when the host already routes that range);
  - a mount namespace of its own, held by one idle process, with a private /run (a tmpfs),
    /etc/libvirt (a copy without the shared daemon's domains, networks, pools, secrets or
    autostart links), /var/lib/libvirt, /var/cache/libvirt (a copy: QEMU's capabilities are
    not probed again), /var/log/libvirt and /var/lib/warren (empty: warren's data directory
    on that host; warren_files() is where this side sees it, for checks), the local image
    catalog (WARREN_TEST_IMAGES) hidden under an empty directory, and /dev/kvm masked by a
    mode-0 device node (libvirt's capability probe stalls on this machine's KVM, and guests
    must run TCG);
  - virtlogd and libvirtd there, never the machine's shared daemon: that one's sockets are
    in the root namespace's /run, which the private /run hides;
  - the remote transports, both real, both pinned both ways:
      * ssh: an OpenSSH sshd on the namespace's address (port 22: the namespace has its own
        ports), its own host key, root by public key only, the key made per fixture. The
        client is `ssh -F <the fixture's ssh_config>` (host key pinned, no agent, no
        ~/.ssh), handed to libvirt through the URI's `command=`. libvirt 9.0 runs
        `sh -c 'which virt-ssh-helper ... exec virt-ssh-helper URI ... else nc -U SOCK'`
        on the far side; Debian's libvirt-daemon ships virt-ssh-helper, so nc is unused.
        Unix-socket forwards (direct-streamlocal) are allowed, for ssh_argv() users
        (tests/bench/remote_channel.py); sshd 9.2 refuses them with AllowTcpForwarding no.
      * tls: libvirtd --listen with listen_tls on the namespace's address, a CA, server and
        client certificates made per fixture with openssl (the server's carries the address
        as an IP subjectAltName, which libvirt checks); the client's through `pkipath=`.

    uri (= ssh_uri), tls_uri, run(), popen(), ssh_argv(), stop_libvirtd(), start_libvirtd(),
    warren_files(), admin_prefix(), reach_back() (a URI by which that libvirtd reaches this
    machine's, through an sshd of the fixture's on the veth's host side: live moves to here)

for_class(cls) and lobby_args(host, warren_bin) start it for a test class that serves warren
with it as host `second`.

TinyGuest(host, uri, name, authorized_keys) uploads the tiny image and a seed into a pool
there (virsh vol-upload over `uri`) and boots it under TCG (docs/multi_host_transport.md).

Teardown kills every process in the namespace (libvirtd, virtlogd, sshd and its sessions,
QEMU: all of them share its network namespace), then the holder, deletes the namespace and
the veth and the directory. A run that died without its teardown is swept by the next one
(names and directories carry the pid). Needs root and util-linux, iproute2, libvirt,
openssh-server/-client and openssl; missing() says what is missing. Standard library only.
"""
import fcntl
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

NET = "10.251.0.0/16"
NS_PREFIX = "wrn2h-"        # wrn2h-PID-N
HOST_IF_PREFIX = "w2h"      # w2hPIDxN (<= 15 characters)
DIR_PREFIX = "warren-second-host-"  # warren-second-host-PID-N-XXXX
LOCK_FILE = "/run/lock/warren-second-host.lock"
PARENT = os.environ.get("WARREN_TEST_DATA_DIR", "/var/lib/warren-test")
# /var/lib/warren: warren's data directory on that host (LibvirtHost's remote default) is its
# own, empty at the start, so a test of warren driving this host can never pass because the
# "remote" host happens to see this machine's files (the mount point is made when missing).
PRIVATE = ("/etc/libvirt", "/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt",
           "/var/lib/warren")
WARREN_DATA = "/var/lib/warren"
TOOLS = ("unshare", "nsenter", "ip", "mount", "libvirtd", "virtlogd", "virsh", "sshd", "ssh",
         "ssh-keygen", "openssl", "virt-ssh-helper")
SBIN = ("/usr/sbin", "/sbin")

_instances = 0


def missing():
    """Why a SecondHost cannot start here (root, tools), or None."""
    if os.geteuid() != 0:
        return "needs root (namespaces, a second libvirtd)"
    path = os.environ.get("PATH", "") + ":" + ":".join(SBIN)
    absent = [t for t in TOOLS if not shutil.which(t, path=path)]
    if absent:
        return "missing tools: %s (packaging/install-deps.sh installs them)" % " ".join(absent)
    return None


def _which(tool):
    return shutil.which(tool, path=os.environ.get("PATH", "") + ":" + ":".join(SBIN))


def _run(*argv, check=True, timeout=60, input=None):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                       timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s%s" % (" ".join(map(str, argv)), r.returncode,
                                                   r.stdout, r.stderr))
    return r


def _alive(pid):
    return os.path.exists("/proc/%d" % pid)


def _ns_inode(path):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _pids_in_netns(inode):
    """Every process whose network namespace is `inode`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat("/proc/%s/ns/net" % pid).st_ino == inode:
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def _kill_all(pids, grace=3.0):
    """SIGTERM, then SIGKILL what is left after `grace` seconds; waits until all are gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            for p in pids:  # reap our own children so they do not stay as zombies
                try:
                    os.waitpid(p, os.WNOHANG)
                except ChildProcessError:
                    pass
            time.sleep(0.05)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return []
    return pids


def _kill_netns_processes(ns_path):
    inode = _ns_inode(ns_path)
    if inode is not None:
        _kill_all(_pids_in_netns(inode))


def sweep_leftovers():
    """Removes what fixtures of dead processes left: their namespaces' processes, the
    namespaces, the veths and the directories."""
    r = _run("ip", "netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(re.escape(NS_PREFIX) + r"(\d+)-\d+", name)
        if m and not _alive(int(m.group(1))):
            _kill_netns_processes("/run/netns/" + name)
            _run("ip", "netns", "del", name, check=False)
    for line in _run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        m = re.fullmatch(HOST_IF_PREFIX + r"(\d+)x\d+", name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "link", "del", name, check=False)
    for path in glob.glob(os.path.join(PARENT, DIR_PREFIX + "*")) + glob.glob(
            os.path.join(tempfile.gettempdir(), DIR_PREFIX + "*")):
        m = re.match(re.escape(DIR_PREFIX) + r"(\d+)-", os.path.basename(path))
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _ssh_client(etc, wrapper, config, identity, known_hosts, more):
    """An ssh client pinned to one host key (`known_hosts`), root by key `identity` only, its
    config in etc/`config` (plus `more` lines), run through the script etc/`wrapper` (what
    libvirt's URI parameter `command` names). Returns the script's path."""
    with open(os.path.join(etc, config), "w") as f:
        f.write("\n".join(
            ["Host *", "  User root", "  IdentityFile " + os.path.join(etc, identity),
             "  IdentitiesOnly yes", "  IdentityAgent none", "  BatchMode yes",
             "  UserKnownHostsFile " + os.path.join(etc, known_hosts),
             "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes",
             "  UpdateHostKeys no", "  ConnectTimeout 10"] +
            ["  " + line for line in more] + ["  LogLevel ERROR", ""]))
    path = os.path.join(etc, wrapper)
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec %s -F %s "$@"\n' % (_which("ssh"), os.path.join(etc, config)))
    os.chmod(path, 0o755)
    return path


def _free_port(addr):
    """A TCP port nothing listens on at `addr` (the kernel's choice, released at once)."""
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _copy_dirs_only(src, dst):
    """The directory tree of `src` (owners, modes), no files: libvirt's state starts empty."""
    for top, _, _ in os.walk(src):
        target = os.path.normpath(os.path.join(dst, os.path.relpath(top, src)))
        os.makedirs(target, exist_ok=True)
        st = os.stat(top)
        os.chown(target, st.st_uid, st.st_gid)
        os.chmod(target, st.st_mode & 0o7777)


def _ignore_shared_definitions(directory, names):
    """What a copy of /etc/libvirt leaves out: the shared daemon's domains, networks, pools,
    secrets and autostart links (ours must not start them twice)."""
    rel = os.path.relpath(directory, "/etc/libvirt")
    skip = {n for n in names if n == "autostart"}
    if rel in ("qemu", "qemu/networks"):
        skip |= {n for n in names if n.endswith(".xml")}
    if rel == ".":
        skip |= {n for n in names if n in ("storage", "secrets")}
    return skip


class SecondHost:
    """A second libvirt host in namespaces of its own; see the module's docstring.

    with SecondHost() as host:
        subprocess.run(["virsh", "-c", host.uri, "list", "--all"])
    """

    def __init__(self, tls=True):
        global _instances
        _instances += 1
        why = missing()
        if why:
            raise RuntimeError(why)
        self.tls = tls
        tag = "%d-%d" % (os.getpid(), _instances)
        self.netns = NS_PREFIX + tag
        self.host_if = "%s%dx%d" % (HOST_IF_PREFIX, os.getpid(), _instances)
        self.ns_if = "eth0"  # inside the namespace: no clash with anything
        self.holder = None   # the process that keeps the mount namespace
        self.host_addr = self.addr = None
        self.dir = None
        self._made = []
        try:
            self._setup(tag)
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    # --- setup -------------------------------------------------------------------------

    def _setup(self, tag):
        sweep_leftovers()
        parent = PARENT if os.path.isdir(PARENT) else tempfile.gettempdir()
        self.dir = tempfile.mkdtemp(prefix=DIR_PREFIX + tag + "-", dir=parent)
        os.chmod(self.dir, 0o755)  # QEMU runs as libvirt-qemu: disks below must be reachable
        self._made.append(("dir", self.dir))
        for sub in ("etc", "run", "log", "pki-client", "pki-server", "images"):
            os.makedirs(self.path(sub), exist_ok=True)
        os.chmod(self.path("etc"), 0o700)
        os.chmod(self.path("pki-client"), 0o700)
        self._network()
        self._mount_namespace()
        self._keys()
        if self.tls:
            self._certificates()
        self._libvirt_config()
        self.start_virtlogd()
        self.start_libvirtd()
        self._sshd()

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _network(self):
        run = _run
        with open(LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            routes = run("ip", "route", "show", "table", "all").stdout
            addrs = run("ip", "-o", "addr", "show").stdout
            ours = re.compile(r"\b%s\d+x\d+\b" % HOST_IF_PREFIX)
            for line in routes.splitlines():
                if line.startswith("10.251.") and not ours.search(line):
                    raise RuntimeError("the host already routes into %s: %s" % (NET, line))
            taken = set(re.findall(r"inet 10\.251\.(\d+)\.(\d+)/", addrs))
            start = os.getpid() % 16384
            for i in range(16384):
                n = (start + i) % 16384
                third, fourth = n >> 6, (n & 63) * 4
                if (str(third), str(fourth + 1)) not in taken:
                    break
            else:
                raise RuntimeError("no free /30 in " + NET)
            self.host_addr = "10.251.%d.%d" % (third, fourth + 1)
            self.addr = "10.251.%d.%d" % (third, fourth + 2)
            run("ip", "netns", "add", self.netns)
            self._made.append(("netns", self.netns))
            peer = "w2p" + self.host_if[len(HOST_IF_PREFIX):]
            run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", peer)
            self._made.append(("link", self.host_if))
            run("ip", "link", "set", peer, "netns", self.netns)
            run("ip", "addr", "add", self.host_addr + "/30", "dev", self.host_if)
            run("ip", "link", "set", self.host_if, "up")
        ns = ("ip", "netns", "exec", self.netns)
        run(*ns, "ip", "link", "set", peer, "name", self.ns_if)
        run(*ns, "ip", "addr", "add", self.addr + "/30", "dev", self.ns_if)
        run(*ns, "ip", "link", "set", self.ns_if, "up")
        run(*ns, "ip", "link", "set", "lo", "up")

    def _mount_namespace(self):
        """The holder: a process in the network namespace that unshares a mount namespace,
        mounts the private directories and sleeps; every daemon enters both namespaces."""
        mounts = []
        if os.path.exists("/dev/kvm"):
            # warren's own mask when there is one: libvirt's capability cache is keyed on
            # /dev/kvm's ctime, so the copied cache stays valid; else a node of our own.
            # (Before /run is replaced, which hides warren's.)
            mask = "/run/warren/kvm-masked"
            if not os.path.exists(mask):
                mask = self.path("kvm-masked")
                os.mknod(mask, 0o000 | 0o020000, os.makedev(1, 3))
            mounts.append("mount --bind %s /dev/kvm" % mask)
        mounts += ["mount -t tmpfs -o mode=0755 tmpfs /run",
                   "mkdir -p /run/lock /run/sshd /run/libvirt",
                   "chmod 0755 /run/sshd"]
        # The local image catalog is hidden there too (an empty directory over it): images
        # reach that host only by upload.
        if os.path.isdir(IMAGES):
            os.makedirs(self.path("images-hidden"), exist_ok=True)
            mounts.append("mount --bind %s %s" % (self.path("images-hidden"), IMAGES))
        for path in PRIVATE:
            mine = self.path("state", path.strip("/").replace("/", "_"))
            if not os.path.exists(path):
                os.makedirs(path, mode=0o755)
                # A mount point this machine did not have: gone again with the fixture.
                self._made.append(("mountpoint", path))
            if path == "/etc/libvirt":
                shutil.copytree(path, mine, symlinks=True, ignore=_ignore_shared_definitions)
            elif path == "/var/cache/libvirt" and os.path.isdir(path):
                shutil.copytree(path, mine, symlinks=True)
            elif os.path.isdir(path) and path != WARREN_DATA:
                _copy_dirs_only(path, mine)
            else:
                os.makedirs(mine)
            mounts.append("mount --bind %s %s" % (mine, path))
        script = " && ".join(mounts) + " && echo ready && exec sleep infinity"
        self.holder = subprocess.Popen(
            ["nsenter", "--net=/run/netns/" + self.netns, "unshare", "--mount",
             "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            self.holder.wait(timeout=10)
            raise RuntimeError("the mount namespace failed: " + self.holder.stderr.read())
        self._made.append(("holder", self.holder.pid))

    def _nsenter(self):
        return ["nsenter", "-t", str(self.holder.pid), "-m", "-n"]

    def run(self, *argv, check=True, timeout=60, input=None, env=None):
        """Runs argv inside the host's namespaces; returns the CompletedProcess (text)."""
        r = subprocess.run(self._nsenter() + [str(a) for a in argv], capture_output=True,
                           text=True, timeout=timeout, input=input,
                           env=dict(os.environ, **(env or {})))
        if check and r.returncode != 0:
            raise RuntimeError("[second host] %s: exit %d: %s%s" % (
                " ".join(map(str, argv)), r.returncode, r.stdout, r.stderr))
        return r

    def popen(self, *argv, **kwargs):
        """subprocess.Popen of argv inside the host's namespaces."""
        return subprocess.Popen(self._nsenter() + [str(a) for a in argv], **kwargs)

    def _keys(self):
        etc = self.path("etc")
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "second-host",
             "-f", os.path.join(etc, "ssh_host_ed25519_key"))
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "warren-test-client",
             "-f", os.path.join(etc, "id_ed25519"))
        shutil.copy(os.path.join(etc, "id_ed25519.pub"), os.path.join(etc, "authorized_keys"))
        with open(os.path.join(etc, "ssh_host_ed25519_key.pub")) as f:
            host_key = " ".join(f.read().split()[:2])
        with open(os.path.join(etc, "known_hosts"), "w") as f:
            f.write("%s %s\n" % (self.addr, host_key))
        # The client libvirt runs: ssh with this config (URI parameter `command`).
        _ssh_client(etc, "ssh", "ssh_config", "id_ed25519", "known_hosts",
                    ["ServerAliveInterval 5", "ServerAliveCountMax 3"])
        with open(os.path.join(etc, "sshd_config"), "w") as f:
            f.write("\n".join([
                "ListenAddress " + self.addr,
                "Port 22",
                "HostKey " + os.path.join(etc, "ssh_host_ed25519_key"),
                "PidFile /run/sshd.pid",
                "AuthorizedKeysFile " + os.path.join(etc, "authorized_keys"),
                "AuthenticationMethods publickey",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "AllowUsers root",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "PrintMotd no",
                "PrintLastLog no",
                "AllowStreamLocalForwarding yes",
                "AllowTcpForwarding local",  # sshd 9.2 denies streamlocal opens without it
                "X11Forwarding no",
                "MaxSessions 64",
                "MaxStartups 64",
                "LogLevel VERBOSE",
                ""]))

    def _certificates(self):
        pki, srv = self.path("pki-client"), self.path("pki-server")
        ossl = lambda *a: _run("openssl", *a)  # noqa: E731
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "2", "-subj", "/CN=warren test CA " + self.netns,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-keyout", os.path.join(srv, "cakey.pem"), "-out", os.path.join(srv, "cacert.pem"))
        for who, ext in (("server", "subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n"
                          "keyUsage=critical,digitalSignature,keyEncipherment\n" % self.addr),
                         ("client", "extendedKeyUsage=clientAuth\n"
                          "keyUsage=critical,digitalSignature,keyEncipherment\n")):
            key = os.path.join(srv, who + "key.pem")
            csr = os.path.join(srv, who + ".csr")
            extfile = os.path.join(srv, who + ".ext")
            with open(extfile, "w") as f:
                f.write(ext)
            ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-subj", "/O=warren test/CN=%s" % (self.addr if who == "server" else who),
                 "-keyout", key, "-out", csr)
            ossl("x509", "-req", "-in", csr, "-CA", os.path.join(srv, "cacert.pem"),
                 "-CAkey", os.path.join(srv, "cakey.pem"), "-CAcreateserial", "-days", "2",
                 "-extfile", extfile, "-out", os.path.join(srv, who + "cert.pem"))
        # The client's directory as libvirt's pkipath= wants it.
        shutil.copy(os.path.join(srv, "cacert.pem"), os.path.join(pki, "cacert.pem"))
        shutil.copy(os.path.join(srv, "clientcert.pem"), os.path.join(pki, "clientcert.pem"))
        shutil.copy(os.path.join(srv, "clientkey.pem"), os.path.join(pki, "clientkey.pem"))

    def _libvirt_config(self):
        conf = self.path("state", "etc_libvirt", "libvirtd.conf")
        lines = ["", "# warren second host (tests/integration/second_host.py)"]
        if self.tls:
            srv = self.path("pki-server")
            lines += ['listen_tls = 1', 'listen_tcp = 0', 'listen_addr = "%s"' % self.addr,
                      'auth_tls = "none"',
                      'key_file = "%s"' % os.path.join(srv, "serverkey.pem"),
                      'cert_file = "%s"' % os.path.join(srv, "servercert.pem"),
                      'ca_file = "%s"' % os.path.join(srv, "cacert.pem"),
                      'tls_allowed_dn_list = ["O=warren test,CN=client"]']
        with open(conf, "a") as f:
            f.write("\n".join(lines) + "\n")

    def _sshd(self):
        self.run(_which("sshd"), "-f", self.path("etc", "sshd_config"),
                 "-E", self.path("log", "sshd.log"))
        self._wait(lambda: self._ssh_answers(), "sshd did not answer on %s:22" % self.addr)

    def _ssh_answers(self):
        return _run(*self.ssh_argv(), "true", check=False, timeout=20).returncode == 0

    def reach_back(self):
        """The libvirt URI by which this host's libvirtd reaches the machine's own (the
        lobby's `local` host), for live moves from here to there (peer-to-peer migration:
        the source's daemon opens the target's URI). An OpenSSH sshd in the root namespace on
        the veth's host side, on a free port, root by a key of this fixture's only; the
        client is ssh with a config of its own (the machine's host key of this sshd pinned),
        run by libvirt through the URI's `command=`. Started once; close() stops it."""
        if getattr(self, "_back_uri", None):
            return self._back_uri
        etc = self.path("etc")
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lobby-host",
             "-f", os.path.join(etc, "back_host_key"))
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "second-host-client",
             "-f", os.path.join(etc, "id_back"))
        shutil.copy(os.path.join(etc, "id_back.pub"), os.path.join(etc, "back_authorized_keys"))
        port = _free_port(self.host_addr)
        with open(os.path.join(etc, "back_host_key.pub")) as f:
            host_key = " ".join(f.read().split()[:2])
        with open(os.path.join(etc, "back_known_hosts"), "w") as f:
            f.write("[%s]:%d %s\n" % (self.host_addr, port, host_key))
        wrapper = _ssh_client(etc, "ssh-back", "back_ssh_config", "id_back", "back_known_hosts",
                              ["Port %d" % port])
        pidfile = self.path("run", "back-sshd.pid")
        with open(os.path.join(etc, "back_sshd_config"), "w") as f:
            f.write("\n".join([
                "ListenAddress %s:%d" % (self.host_addr, port),
                "HostKey " + os.path.join(etc, "back_host_key"),
                "PidFile " + pidfile,
                "AuthorizedKeysFile " + os.path.join(etc, "back_authorized_keys"),
                "AuthenticationMethods publickey", "PermitRootLogin prohibit-password",
                "AllowUsers root", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "PrintMotd no",
                "AllowTcpForwarding no", "X11Forwarding no", "LogLevel VERBOSE", ""]))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
        self._made.append(("pidfile", pidfile))
        _run(_which("sshd"), "-f", os.path.join(etc, "back_sshd_config"),
             "-E", self.path("log", "back-sshd.log"))
        back = [wrapper, "root@" + self.host_addr]
        self._wait(lambda: self.run(*back, "true", check=False, timeout=20).returncode == 0,
                   "the machine's sshd on %s:%d did not answer from the second host" %
                   (self.host_addr, port))
        self._back_uri = "qemu+ssh://root@%s/system?command=%s" % (self.host_addr, wrapper)
        return self._back_uri

    # --- what tests use ----------------------------------------------------------------

    @property
    def ssh_uri(self):
        return "qemu+ssh://root@%s/system?command=%s" % (self.addr, self.path("etc", "ssh"))

    @property
    def tls_uri(self):
        if not self.tls:
            return None
        return "qemu+tls://%s/system?pkipath=%s" % (self.addr, self.path("pki-client"))

    @property
    def uri(self):
        return self.ssh_uri

    def warren_files(self):
        """Where this machine sees the host's private /var/lib/warren (for checks only)."""
        return self.path("state", WARREN_DATA.strip("/").replace("/", "_"))

    def admin_prefix(self):
        """The command prefix that runs a command inside the host's namespaces."""
        return self._nsenter()

    def client_public_key(self):
        """The client's public key line (the one root on the host accepts)."""
        with open(self.path("etc", "id_ed25519.pub")) as f:
            return f.read()

    def ssh_argv(self):
        """`ssh` to root on the host, pinned; append a command (or -W PATH for a stream)."""
        return [_which("ssh"), "-F", self.path("etc", "ssh_config"), "root@" + self.addr]

    def _pid(self, name):
        r = self.run("cat", "/run/%s.pid" % name, check=False)
        pid = r.stdout.strip()
        return int(pid) if pid.isdigit() and _alive(int(pid)) else None

    def libvirtd_pid(self):
        return self._pid("libvirtd")

    def daemon_answers(self):
        """virsh over the local socket inside the namespace."""
        return self.run("virsh", "-c", "qemu:///system", "version", check=False,
                        timeout=30).returncode == 0

    @staticmethod
    def _wait(cond, what, timeout=60):
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise RuntimeError(what)
            time.sleep(0.1)

    def start_virtlogd(self):
        if self._pid("virtlogd") is None:
            self.run(_which("virtlogd"), "--daemon")
            self._wait(lambda: self._pid("virtlogd") is not None, "virtlogd did not start")

    def start_libvirtd(self, timeout=90):
        """Starts libvirtd (--listen for TLS) and waits until it answers."""
        env = {"LIBVIRT_LOG_OUTPUTS": "3:file:/var/log/libvirt/libvirtd.log"}
        argv = [_which("libvirtd"), "--daemon"] + (["--listen"] if self.tls else [])
        self.run(*argv, env=env, timeout=60)
        self._wait(self.daemon_answers, "libvirtd did not answer:\n" + self.libvirtd_log(),
                   timeout)

    def stop_libvirtd(self, sig=signal.SIGTERM, timeout=30):
        """Stops libvirtd (SIGTERM: as `systemctl stop`; SIGKILL: a crash). QEMU goes on."""
        pid = self.libvirtd_pid()
        if pid is None:
            return
        os.kill(pid, sig)
        self._wait(lambda: not _alive(pid), "libvirtd %d did not stop" % pid, timeout)

    def libvirtd_log(self, lines=30):
        try:
            with open(self.path("state", "var_log_libvirt", "libvirtd.log"),
                      errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def sshd_log(self):
        try:
            with open(self.path("log", "sshd.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # --- teardown ----------------------------------------------------------------------

    def close(self):
        """Removes everything: processes in the namespace, holder, netns, veth, directory."""
        for kind, what in reversed(self._made):
            if kind == "holder":
                _kill_netns_processes("/run/netns/" + self.netns)
                _kill_all([what])
                if self.holder:
                    try:
                        self.holder.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
                    for stream in (self.holder.stdout, self.holder.stderr):
                        stream.close()
            elif kind == "netns":
                _kill_netns_processes("/run/netns/" + what)
                _run("ip", "netns", "del", what, check=False)
            elif kind == "link":
                _run("ip", "link", "del", what, check=False)
            elif kind == "pidfile":
                try:
                    with open(what) as f:
                        pid = int(f.read().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and _alive(pid):
                    _kill_all([pid])
            elif kind == "dir":
                shutil.rmtree(what, ignore_errors=True)
            elif kind == "mountpoint":
                try:
                    os.rmdir(what)  # only while empty: never anything of this machine's
                except OSError:
                    pass
        self._made = []

    def leftovers(self):
        """What of this fixture is still there (after close(): nothing)."""
        left = []
        if os.path.exists("/run/netns/" + self.netns):
            left.append("netns " + self.netns)
        if _run("ip", "link", "show", self.host_if, check=False).returncode == 0:
            left.append("link " + self.host_if)
        if self.dir and os.path.exists(self.dir):
            left.append("directory " + self.dir)
        if self.holder and _alive(self.holder.pid):
            left.append("holder process %d" % self.holder.pid)
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if self.dir and self.dir in cmd:
                left.append("process %s: %s" % (pid, cmd))
        return left


# --- for test classes that serve warren over this fixture -----------------------------------

def for_class(cls):
    """For a test class's setUpClass: the fixture, started (skipping, or failing under CI,
    when this machine cannot run one) and kept as cls.far; closed at the class's cleanup,
    which fails if it left anything."""
    why = missing_for_a_guest()
    if why:
        skip_or_fail(why)
    t0 = time.monotonic()
    host = SecondHost()

    def close():
        host.close()
        left = host.leftovers()
        assert not left, "the second host fixture left: %s" % left

    cls.addClassCleanup(close)
    cls.far = host
    print("[timing] second host up in %.2f s at %s" % (time.monotonic() - t0, host.addr),
          flush=True)
    return host


def lobby_args(host, warren_bin):
    """The serve flags of a warren with this machine's host as `local` (the default) and the
    fixture as `second`, declared isolated after what its operator does there first
    (docs/multi_host.md: `warren isolate`)."""
    host.run(warren_bin, "isolate", "--data-dir", WARREN_DATA)
    return ["--host", "local=qemu:///system", "--host", "second=" + host.uri,
            "--host-isolated", "second"]


# --- a tiny guest on the second host, its files brought there by libvirt's volume upload ---

IMAGES = os.environ.get("WARREN_TEST_IMAGES", "/var/lib/warren-test/images")
POOL = "warren-second"
POOL_DIR = "/var/lib/libvirt/images/warren-second"  # inside the host's mount namespace


def missing_for_a_guest():
    """Why a SecondHost cannot boot a tiny guest here (missing(), the image, its tools), or
    None."""
    why = missing()
    if not why and not tiny_image():
        why = "no tiny image in %s (packaging/images/build-tiny.sh)" % IMAGES
    for tool in ("mke2fs", "qemu-system-x86_64"):
        if not why and not _which(tool):
            why = "missing tool " + tool
    return why


def skip_or_fail(why):
    """A missing peer or tool: a failure under CI (packaging/ installs them all there), a
    skip saying why elsewhere."""
    if os.environ.get("CI"):
        raise RuntimeError("missing under CI: " + why)
    raise unittest.SkipTest(why)


def tiny_image():
    """The newest tiny image directory, or None."""
    found = sorted(glob.glob(os.path.join(IMAGES, "tiny@*", "image.json")))
    return os.path.dirname(found[-1]) if found else None


def virsh(uri, *args, check=True, timeout=120):
    return _run("virsh", "-c", uri, *args, check=check, timeout=timeout)


def volumes(uri):
    """The names of the pool's volumes (virsh 9.0's vol-list has no --name)."""
    lines = virsh(uri, "vol-list", "--pool", POOL).stdout.splitlines()[2:]
    return [line.split()[0] for line in lines if line.strip()]


def make_seed(directory, out, authorized_keys):
    """The guest's seed disk (packaging/images/README.md): authorized_keys for dev."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "authorized_keys"), "w") as f:
        f.write(authorized_keys)
    _run("mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-L", "warren-seed",
         "-d", directory, "-E", "root_owner=0:0", out, "4M")


def ensure_pool(uri):
    """A dir pool on the host (made through `uri`); returns its target path."""
    names = virsh(uri, "pool-list", "--all", "--name").stdout.split()
    if POOL not in names:
        virsh(uri, "pool-define-as", POOL, "dir", "--target", POOL_DIR)
        virsh(uri, "pool-build", POOL)
    state = virsh(uri, "pool-info", POOL).stdout.split("State:")[1].split()[0]
    if state != "running":
        virsh(uri, "pool-start", POOL)
    return POOL_DIR


def upload(uri, local, volume, fmt="raw"):
    """Copies a local file into a volume of the host's pool through virStorageVolUpload
    (`virsh vol-upload`, the stream rides the libvirt connection); returns the volume's path
    on that host."""
    size = os.path.getsize(local)
    virsh(uri, "vol-create-as", POOL, volume, str(size), "--format", fmt)
    virsh(uri, "vol-upload", "--pool", POOL, volume, local, timeout=600)
    return virsh(uri, "vol-path", "--pool", POOL, volume).stdout.strip()


def tiny_domain_xml(name, kernel, initrd, cmdline, disk, seed, control_socket, console_log,
                    memory_mib=256, extra_devices=""):
    """A domain as vmhost/domain_xml.cc makes one, reduced: TCG, direct kernel boot, the
    overlay and the read-only seed, a pty serial logged by virtlogd, the control port."""
    return """<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{memory}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='{disk}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='{seed}'/>
      <target dev='vdb' bus='virtio'/>
      <readonly/>
    </disk>
    <serial type='pty'>
      <log file='{console_log}' append='on'/>
      <target port='0'/>
    </serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <channel type='unix'>
      <source mode='bind' path='{control_socket}'/>
      <target type='virtio' name='warren.control'/>
    </channel>
    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
    <video><model type='none'/></video>
    <memballoon model='none'/>
{extra}  </devices>
</domain>
""".format(name=name, memory=memory_mib, kernel=kernel, initrd=initrd, cmdline=cmdline,
           disk=disk, seed=seed, control_socket=control_socket, console_log=console_log,
           extra=extra_devices)


class TinyGuest:
    """A tiny VM on `host`, everything it needs uploaded through `uri`: kernel, initrd, base
    image and seed as volumes of one pool, the overlay a volume backed by the base. start()
    defines and starts it; host_key() waits for the key the guest announces on its console."""

    def __init__(self, host, uri, name, authorized_keys, image=None, extra_devices=""):
        self.host, self.uri, self.name = host, uri, name
        self.extra_devices = extra_devices
        self.image = image or tiny_image()
        with open(os.path.join(self.image, "image.json")) as f:
            meta = json.load(f)
        self.cmdline = meta["kernel_cmdline"] + " warren.hostname=" + name
        ensure_pool(uri)
        self.uploaded = {}
        for file, fmt in (("vmlinuz", "raw"), ("initrd.img", "raw"), ("rootfs.qcow2", "raw")):
            vol = "%s-%s" % (os.path.basename(self.image), file)
            if vol in volumes(uri):
                self.uploaded[file] = virsh(uri, "vol-path", "--pool", POOL, vol).stdout.strip()
            else:
                self.uploaded[file] = upload(uri, os.path.join(self.image, file), vol, fmt)
        virsh(uri, "pool-refresh", POOL)  # the uploaded base is now known as qcow2
        seed_dir = host.path("seed-" + name)
        make_seed(seed_dir, seed_dir + ".img", authorized_keys)
        self.seed = upload(uri, seed_dir + ".img", name + "-seed.img")
        base = os.path.basename(self.uploaded["rootfs.qcow2"])
        virsh(uri, "vol-create-as", POOL, name + ".qcow2", "1G", "--format", "qcow2",
              "--backing-vol", base, "--backing-vol-format", "qcow2")
        self.disk = virsh(uri, "vol-path", "--pool", POOL, name + ".qcow2").stdout.strip()
        self.control_socket = "%s/%s.control" % (POOL_DIR, name)
        self.console_log = "/var/log/libvirt/qemu/%s-console.log" % name

    def xml(self):
        return tiny_domain_xml(self.name, self.uploaded["vmlinuz"], self.uploaded["initrd.img"],
                               self.cmdline, self.disk, self.seed, self.control_socket,
                               self.console_log, extra_devices=self.extra_devices)

    def start(self):
        xml_file = self.host.path(self.name + ".xml")
        with open(xml_file, "w") as f:
            f.write(self.xml())
        virsh(self.uri, "define", xml_file)
        virsh(self.uri, "start", self.name)

    def console(self):
        """The console log so far (read on this side: the host's /var/log/libvirt is ours)."""
        local = self.host.path("state", "var_log_libvirt", "qemu",
                               os.path.basename(self.console_log))
        try:
            with open(local, errors="replace") as f:
                return f.read().replace("\r", "")
        except OSError:
            return ""

    def host_key(self, timeout=180):
        """The guest's SSH host key from its console (`warren-hostkey: ssh-ed25519 ...`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"warren-hostkey: (ssh-ed25519 [A-Za-z0-9+/=]+)", self.console())
            if m:
                return m.group(1)
            time.sleep(0.2)
        raise RuntimeError("%s announced no host key in %d s; console:\n%s" % (
            self.name, timeout, self.console()[-2000:]))

    def remove(self):
        """Destroys and undefines the domain and deletes its own volumes (not the image's)."""
        virsh(self.uri, "destroy", self.name, check=False)
        virsh(self.uri, "undefine", self.name, check=False)
        for vol in (self.name + ".qcow2", self.name + "-seed.img"):
            virsh(self.uri, "vol-delete", "--pool", POOL, vol, check=False)
