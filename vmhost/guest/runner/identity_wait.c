// A root `identity` made ready ahead of time, so that a VM handed out from the warm pool, a
// template's clone, or a live copy of either takes its identity without sudo (about 0.2 s of
// PAM and sudoers under TCG, on the path of every such `new` and `cp --live`).
//
// `warren-run identity-wait`, as root through sudo, is the template keeper's last command in
// a VM before it saves it as a template (so every clone restored from it has one waiting),
// and the warm pool's before it pauses a VM. It binds the socket /run/warren/identity.sock
// (0600, owned by the user sudo ran it for: SUDO_UID), starts a detached root process that
// waits on it (its pid in /run/warren/identity.pid), prints `identity waits` and exits 0;
// when one already waits it only says so.
//
// `warren-run identity` run without root (the host's command for a pooled VM) connects to
// that socket and hands its stdin, stdout and stderr over (SCM_RIGHTS); the waiting process
// checks the caller's uid (SO_PEERCRED: that user or root), runs the whole `identity` on those
// descriptors in a child (identity.c: the protocol is unchanged), which sends its exit status
// back as one byte. The caller exits with that status. The waiter stays for the next caller,
// one at a time: a VM made from a template keeps one for as long as it runs, and a live copy
// of it (whose memory holds the waiter too) takes its identity there. `identity` finds no
// socket in a VM that never had one (booted, or from an older runner) and is refused as not
// root (exit 5), after which the host runs it through sudo.
//
// The host may also reach the socket directly, over its control connection (a
// direct-streamlocal channel, which the guest's sshd connects as that user): it sends the
// byte 'D' and no descriptors, then speaks the identity protocol on the connection itself,
// which after `identity` ends carries one more line, `exit N`. That skips an sshd session,
// the user's shell and the runner's start on every hand-out.
//
// Only root and the VM user can reach the socket, and that user has sudo: the waiter gives
// no one a power they lack; it saves the time sudo takes.
//
// The host may also reach the waiter without any connection to the guest's sshd: through the
// virtio-serial port `warren.identity` (its host end a socket only warren opens; in the guest
// a root-only device), which the waiter holds open when the VM has one. A VM just restored
// (a template's clone, a live copy) takes its identity there while the host's SSH handshake
// (0.4-0.6 s under TCG, a fresh QEMU translating every code path) runs beside it. The host
// sends the line `warren identity`; the waiter answers `identity here` (so the host sends
// nothing more to a VM where no waiter reads the port: it then takes the SSH routes above),
// and a child runs the protocol of a direct connection on the port, ended by `exit N` (a
// child the waiter forked ahead, so no fork is on the path: it runs when told to). Bytes
// before that line are dropped (a port has no connection boundaries). The waiter's own writes
// to the port never block (a host that went away): its answer is retried for up to 2 s, since
// the driver may hand it the hello before it has taken the host's connect notice (the port
// then still counts as closed); the child's wait in poll, which a host that went away ends,
// and it dies by SIGALRM after kPortChildSeconds anyway. With the host end closed, poll() on a
// port reports POLLHUP at once: the waiter then waits for SIGIO (the driver raises it on data
// and on the host's connect), through a signalfd, as the image's launcher does.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static const char kWaitDir[] = "/run/warren";
static const char kWaitSocket[] = "/run/warren/identity.sock";
static const char kWaitPid[] = "/run/warren/identity.pid";
static const char kPortName[] = "warren.identity";
static const char kPortHello[] = "warren identity";
static const char kPortAck[] = "identity here\n";
// How long a child serving the port may take, whatever its polls wait for; the longest line
// the waiter keeps of what the port holds; how often and how long it retries its answer.
enum { kPortChildSeconds = 60, kPortLineMax = 64, kAckRetryMs = 5, kAckWaitMs = 2000 };

static int wait_fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int wait_fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verb_failure("identity-wait", code, fmt, ap);
  va_end(ap);
  return rc;
}

// A decimal uid/gid from sudo's environment; -1 when absent or malformed.
static long env_id(const char* name) {
  const char* s = getenv(name);
  if (s == NULL || *s == '\0' || strlen(s) > 9) return -1;
  long v = 0;
  for (const char* p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

static void socket_address(struct sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  snprintf(addr->sun_path, sizeof addr->sun_path, "%s", kWaitSocket);
}

// What a caller asked for: its three descriptors handed over, or the protocol on the
// connection itself.
enum hand_over { kRefused, kDescriptors, kDirect };

// Receives the caller's first byte: 'D' with no descriptors (direct), or any byte with
// exactly three descriptors (into `fds`); kRefused otherwise.
static enum hand_over receive_hand_over(int conn, int fds[3]) {
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(3 * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  ssize_t n;
  do {
    n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (n == 1 && byte == 'D' && c == NULL) return kDirect;
  if (n != 1 || c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
    return kRefused;
  }
  size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  int got[3];
  if (count != 3 || (msg.msg_flags & MSG_CTRUNC) != 0) {
    for (size_t i = 0; i < count && i < 3; i++) {
      memcpy(&got[0], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      close(got[0]);
    }
    return kRefused;
  }
  memcpy(got, CMSG_DATA(c), sizeof got);
  for (int i = 0; i < 3; i++) fds[i] = got[i];
  return kDescriptors;
}

// True when a waiter is alive: its pid file names a live warren-run and its socket is there
// (a VM restored from a template saved with one waiting, or readied twice).
static bool already_waiting(void) {
  char buf[32];
  int fd = open(kWaitPid, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* end;
  long pid = strtol(buf, &end, 10);
  if (end == buf || (*end != '\n' && *end != '\0') || pid <= 1 || kill((pid_t)pid, 0) != 0) {
    return false;
  }
  char path[64], comm[32];
  snprintf(path, sizeof path, "/proc/%ld/comm", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  n = read(fd, comm, sizeof comm - 1);
  close(fd);
  if (n <= 0) return false;
  comm[n] = '\0';
  struct stat st;
  return strcmp(comm, "warren-run\n") == 0 && lstat(kWaitSocket, &st) == 0 && S_ISSOCK(st.st_mode);
}

// Tells the caller how its `identity` ended: a last line `exit N` on a direct connection (the
// channel ends when the connection closes), else one byte its `identity` exits with (the
// channel ends once both of us closed its descriptors).
static void tell_status(int conn, enum hand_over how, int status) {
  if (how == kDirect) {
    dprintf(conn, "exit %d\n", status);
    return;
  }
  unsigned char byte = (unsigned char)status;
  ssize_t w;
  do {
    w = write(conn, &byte, 1);
  } while (w < 0 && errno == EINTR);
}

// One caller's `identity`, in the child the waiter forked for it: on its descriptors (or the
// connection itself), then its status to the caller. Never returns.
static void run_identity_for(int conn, const int fds[3], enum hand_over how) {
  for (int i = 0; i < 3; i++) {
    if (dup2(fds[i], i) < 0) _exit(kExitInternal);
  }
  for (int i = 0; i < 3 && how == kDescriptors; i++) {
    if (fds[i] > 2) close(fds[i]);
  }
  int status = cmd_identity();
  close(STDIN_FILENO);
  close(STDOUT_FILENO);
  close(STDERR_FILENO);
  tell_status(conn, how, status);
  _exit(status);
}

// The port's device node: /dev/virtio-ports/NAME from udev, else the vportNpM node whose
// sysfs name it is (the tiny image has no udev). -1 when the VM has no such port.
static int open_port(void) {
  char path[300];
  snprintf(path, sizeof path, "/dev/virtio-ports/%s", kPortName);
  int fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) return fd;
  DIR* d = opendir("/sys/class/virtio-ports");
  if (d == NULL) return -1;
  struct dirent* e;
  while (fd < 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || strlen(e->d_name) > 64) continue;
    char name_path[128], name[64] = {0};
    snprintf(name_path, sizeof name_path, "/sys/class/virtio-ports/%s/name", e->d_name);
    int nf = open(name_path, O_RDONLY | O_CLOEXEC);
    if (nf < 0) continue;
    ssize_t n = read(nf, name, sizeof name - 1);
    close(nf);
    if (n <= 0) continue;
    name[strcspn(name, "\n")] = '\0';
    if (strcmp(name, kPortName) != 0) continue;
    snprintf(path, sizeof path, "/dev/%s", e->d_name);
    fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  }
  closedir(d);
  return fd;
}

// True while the host end of the port is closed (poll then says POLLHUP at once).
static bool port_closed(int port) {
  struct pollfd p = {.fd = port, .events = POLLIN};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLHUP) != 0;
}

// The identity of the host that said hello on the port, in this child (as a direct
// connection's: the port is its stdin, stdout, stderr and exit line). The port stays
// non-blocking: the child's reads and writes wait in poll (identity.c), which a host that went
// away ends (POLLHUP), and it dies by SIGALRM after kPortChildSeconds whatever happens.
static void run_port_identity(int port) {
  signal(SIGALRM, SIG_DFL);
  alarm(kPortChildSeconds);
  int fds[3] = {port, port, port};
  run_identity_for(port, fds, kDirect);
}

// The child that serves the port's next hello, forked ahead: a fork right after a resume
// (a hand-out's) took 5-20 ms of a TCG guest, on the path of `new`. It waits for one byte on
// its end of `go` (a socketpair: a spare that died is no SIGPIPE to the waiter), then runs
// the identity; the end closed without a byte (the waiter is gone), it exits. pid 0: none.
struct spare {
  pid_t pid;
  int go;
};

static void fork_spare(struct spare* s, int port, int listener) {
  s->pid = 0;
  s->go = -1;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return;
  pid_t child = fork();
  if (child == 0) {
    close(pair[0]);
    close(listener);
    char byte;
    ssize_t n;
    do {
      n = read(pair[1], &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(0);
    close(pair[1]);
    run_port_identity(port);
  }
  close(pair[1]);
  if (child < 0) {
    close(pair[0]);
    return;
  }
  s->pid = child;
  s->go = pair[0];
}

// The identity of the host that said hello on the port: by the spare, or a child forked now
// when there is none (or it is gone), waited for; then the next spare.
static void serve_port_identity(int port, int listener, struct spare* spare) {
  pid_t child = 0;
  if (spare->pid > 0) {
    ssize_t w;
    do {
      w = send(spare->go, "g", 1, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    close(spare->go);
    if (w == 1) {
      child = spare->pid;
    } else {
      while (waitpid(spare->pid, NULL, 0) < 0 && errno == EINTR) {
      }
    }
    spare->pid = 0;
  }
  if (child == 0) {
    child = fork();
    if (child == 0) {
      close(listener);
      run_port_identity(port);
    }
  }
  while (child > 0 && waitpid(child, NULL, 0) < 0 && errno == EINTR) {
  }
  fork_spare(spare, port, listener);
}

// Answers the hello. The driver takes a host's bytes at interrupt time but its connect notice
// on a work queue, so the hello may be read while the port still counts as closed, when a
// write fails at once (EAGAIN, and poll() says POLLHUP, not POLLOUT): tried again every
// kAckRetryMs for up to kAckWaitMs (a host that hung up meanwhile gets no answer).
static bool write_ack(int port) {
  const size_t len = strlen(kPortAck);
  for (int waited = 0;; waited += kAckRetryMs) {
    ssize_t w = write(port, kPortAck, len);
    if (w == (ssize_t)len) return true;
    if (w >= 0 || (errno != EAGAIN && errno != EINTR) || waited >= kAckWaitMs) return false;
    struct timespec pause = {.tv_sec = 0, .tv_nsec = kAckRetryMs * 1000000L};
    nanosleep(&pause, NULL);
  }
}

// Reads what the port holds now, a byte at a time (what follows the hello is the child's),
// keeping the current line in `line`: a hello is answered and served; any other line, or a
// line too long, is dropped.
static void read_port(int port, int listener, struct spare* spare, char line[kPortLineMax],
                      size_t* len) {
  for (;;) {
    char c;
    ssize_t n = read(port, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) return;  // nothing more now (EAGAIN), or the host end is closed (0)
    if (c != '\n') {
      if (*len < kPortLineMax) line[(*len)++] = c;
      continue;
    }
    bool hello = *len == strlen(kPortHello) && memcmp(line, kPortHello, *len) == 0;
    *len = 0;
    if (hello && write_ack(port)) serve_port_identity(port, listener, spare);
  }
}

// Accepts one caller on the socket and serves it, if it is allowed.
static void serve_socket_caller(int listener, uid_t allowed) {
  int conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
  if (conn < 0) {
    if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) return;
    _exit(kExitInternal);
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      (cred.uid != allowed && cred.uid != 0)) {
    close(conn);
    return;
  }
  int fds[3] = {conn, conn, conn};
  enum hand_over how = receive_hand_over(conn, fds);
  if (how == kRefused) {
    close(conn);
    return;
  }
  pid_t child = fork();
  if (child == 0) {
    close(listener);
    run_identity_for(conn, fds, how);
  }
  if (child < 0) tell_status(conn, how, kExitInternal);  // no child to run it
  for (int i = 0; i < 3 && how == kDescriptors; i++) close(fds[i]);
  close(conn);
  while (child > 0 && waitpid(child, NULL, 0) < 0 && errno == EINTR) {
  }
}

// The detached root process: serves callers of the right uid one at a time, each `identity`
// in a child of its own, for as long as the VM runs. So a VM that took its identity from it
// keeps one waiting, and so does a live copy of that VM (its memory holds this process): the
// copy takes its identity without sudo too. A caller connecting while one is served waits in
// the backlog; a child always ends (the host closes the channel at its deadline, and the
// connection ends with the host's).
static void serve_callers(int listener, uid_t allowed) {
  char pid[24];
  int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  int fd = open(kWaitPid, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    if (write(fd, pid, (size_t)len) != len) unlink(kWaitPid);
    close(fd);
  }
  // The port (when the VM has one): SIGIO through a signalfd wakes the loop while its host
  // end is closed.
  sigset_t io;
  sigemptyset(&io);
  sigaddset(&io, SIGIO);
  sigprocmask(SIG_BLOCK, &io, NULL);
  int sfd = signalfd(-1, &io, SFD_CLOEXEC | SFD_NONBLOCK);
  int port = sfd >= 0 ? open_port() : -1;
  if (port >= 0) {
    fcntl(port, F_SETOWN, getpid());
    fcntl(port, F_SETFL, fcntl(port, F_GETFL) | O_ASYNC);
  }
  char line[kPortLineMax];
  size_t line_len = 0;
  struct spare spare = {0, -1};
  if (port >= 0) fork_spare(&spare, port, listener);
  for (;;) {
    struct pollfd p[3];
    int n = 0;
    p[n++] = (struct pollfd){.fd = listener, .events = POLLIN};
    if (port >= 0) p[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    const bool port_open = port >= 0 && !port_closed(port);
    if (port_open) p[n++] = (struct pollfd){.fd = port, .events = POLLIN};
    if (poll(p, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(kExitInternal);
    }
    if (port >= 0) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
      }
      // After SIGIO, or with the port readable: what it holds (data may come before the
      // driver has noted the host's connect).
      if (p[1].revents != 0 || (port_open && p[2].revents != 0)) {
        read_port(port, listener, &spare, line, &line_len);
      }
    }
    if (p[0].revents != 0) serve_socket_caller(listener, allowed);
  }
}

int cmd_identity_wait(void) {
  if (geteuid() != 0) return wait_fail(kExitNotRoot, "must run as root (through sudo)");
  long uid = env_id("SUDO_UID");
  long gid = env_id("SUDO_GID");
  if (uid < 0 || gid < 0) return wait_fail(kExitInvalid, "SUDO_UID and SUDO_GID must be set");
  if (mkdir(kWaitDir, 0755) != 0 && errno != EEXIST) {
    return wait_fail(kExitInternal, "cannot make %s: %s", kWaitDir, strerror(errno));
  }
  struct stat st;
  if (lstat(kWaitDir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & 022) != 0) {
    return wait_fail(kExitInternal, "%s is not a root-owned directory only root may write",
                     kWaitDir);
  }
  if (already_waiting()) {
    printf("identity waits\n");
    return kExitOk;
  }
  // A dead waiter's socket.
  if (unlink(kWaitSocket) != 0 && errno != ENOENT) {
    return wait_fail(kExitInternal, "cannot remove %s: %s", kWaitSocket, strerror(errno));
  }
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return wait_fail(kExitInternal, "socket: %s", strerror(errno));
  struct sockaddr_un addr;
  socket_address(&addr);
  mode_t old = umask(0177);  // born 0600 root-owned, then given to the user
  int rc = bind(listener, (struct sockaddr*)&addr, sizeof addr);
  umask(old);
  if (rc != 0) return wait_fail(kExitInternal, "bind %s: %s", kWaitSocket, strerror(errno));
  if (chown(kWaitSocket, (uid_t)uid, (gid_t)gid) != 0 || listen(listener, 4) != 0) {
    int e = errno;
    unlink(kWaitSocket);
    return wait_fail(kExitInternal, "preparing %s: %s", kWaitSocket, strerror(e));
  }
  pid_t child = fork();
  if (child < 0) return wait_fail(kExitInternal, "fork: %s", strerror(errno));
  if (child == 0) {
    setsid();
    pid_t waiter = fork();
    if (waiter != 0) _exit(waiter < 0 ? 1 : 0);
    // Off the channel: the pool pauses the VM once the channel closed on both sides.
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(127);
    if (null > 2) close(null);
    if (chdir("/") != 0) _exit(127);
    serve_callers(listener, (uid_t)uid);
  }
  close(listener);
  int status;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return wait_fail(kExitInternal, "waitpid: %s", strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    unlink(kWaitSocket);
    return wait_fail(kExitInternal, "could not start the waiting process");
  }
  printf("identity waits\n");
  return kExitOk;
}

int identity_hand_over(void) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct sockaddr_un addr;
  socket_address(&addr);
  if (connect(s, (struct sockaddr*)&addr, sizeof addr) != 0) {
    close(s);
    return -1;  // no waiter: the caller refuses as not root
  }
  char byte = 'i';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(3 * sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(3 * sizeof(int));
  int fds[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t n;
  do {
    n = sendmsg(s, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1) {
    close(s);
    return -1;
  }
  unsigned char status;
  do {
    n = read(s, &status, 1);
  } while (n < 0 && errno == EINTR);
  close(s);
  if (n != 1) {
    dprintf(STDERR_FILENO, "warren-run identity: the waiting root process went away\n");
    return kExitInternal;
  }
  return status;
}
