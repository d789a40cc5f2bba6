// warren-launcher: serves a command (OpenSSH's `sshd -i`) on a virtio-serial port, one host
// connection at a time, relaying bytes between the port and the command through a socket
// pair. Runs inside every warren guest image; single-threaded, one poll loop.
//
// Why it exists: a virtio-serial port is a byte pipe without connection boundaries. The host
// end (QEMU's chardev socket) connects and disconnects; the guest driver reports that only as
// POLLHUP on the port while the host end is closed. Measured on this project's machines, a
// plain `while :; do sshd -i; done` fails every other back-to-back connection, and a launcher
// that trusts the connect/disconnect notices still failed about one in seven, because:
//   - bytes a finished client sent after its sshd stopped reading stay queued for the next
//     reader (they would be the next sshd's "banner");
//   - bytes an old sshd writes while the host end is closed are held and delivered to the
//     *next* client;
//   - the driver handles connect/disconnect notices on a work queue, data at interrupt time,
//     so a new client's first bytes can be readable before the old client's disconnect
//     notice, let alone the new one's connect notice.
// So the launcher keeps the port to itself (it is opened once; a second open answers EBUSY),
// gives the command a socket instead, and tells connections apart by their content too:
//   - Each read() of the port returns bytes of one virtqueue buffer, which QEMU fills from
//     one read of one client's socket; a client's first bytes are its identification string
//     ("SSH-2.0-", RFC 4253 makes it the first thing a client sends). So a chunk that starts
//     with it opens a new session, ending the current one whatever the notices say.
//   - Between sessions, anything before a client's "SSH-" is stale and dropped. A host that
//     connects and stays silent for IDLE ms gets a session anyway (sshd speaks first), so a
//     client that waits for the server's banner still works; OpenSSH, libssh and paramiko
//     clients all send theirs at once.
//   - A session also ends when the host end closes (the command's socket is closed and its
//     process group sent SIGTERM, SIGKILL 5 s later) or when the command closes its side
//     (its last bytes are flushed to the host first). Late writes of an old sshd go to its
//     dead socket, never to the port.
//   - SIGIO (the driver raises it on data and on host connect/disconnect) wakes the loop
//     while the host end is closed, because poll() on the port then reports POLLHUP at once.
// What no guest can fix: if a new client connects at the very moment the old one leaves,
// bytes the old sshd writes before the guest learns of it reach the new client. Hosts keep one
// connection per VM and leave a short pause (~200 ms) before reconnecting.
//
// A spare (-w): under TCG, sshd's own start-up (exec, configuration, host key) is about 0.27 s
// of a connection's 0.6 s. So with -w the launcher keeps the next session's command started
// ahead, SPARE_DELAY ms after a session begins (not to compete with its handshake), at
// start-up, and at once when a session ends: its banner waits in its socket until a client
// comes. A VM restored from a saved template, or copied live, inherits the spare and answers
// its first connection without the start-up. The spare is only used while the files named by
// -w (the host key, sshd's configuration) are as they were when it started; otherwise it is
// killed and a fresh command started, as without -w (the identity step replaces the host
// key, for one). The command must wait for its client indefinitely (sshd: LoginGraceTime 0);
// a spare that dies within SPARE_RETRY ms of its start is not replaced before that much time
// has passed. A spare starts at idle priority (SCHED_IDLE), so its start-up takes only time
// nothing else in the guest wants: it must never slow the commands of the session it waits
// behind (a VM handed out from the warm pool starts its spare just as its first commands
// come). It is raised to the normal policy before it gets its client.
//
// Usage: warren-launcher [-p PORT_NAME] [-i IDLE_MS] [-w FILE]... [-v] -- COMMAND [ARG...]
//   PORT_NAME defaults to "warren.control" (/dev/virtio-ports/NAME, or found through
//   /sys/class/virtio-ports/*/name when no udev made the symlink). COMMAND gets the session's
//   socket on stdin and stdout and the launcher's stderr. -w FILE (up to 8): keep a spare,
//   stale once FILE changes.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
  kBufSize = 64 * 1024,
  kKillGraceMs = 5000,
  kMaxWatched = 8,
  kSpareDelayMs = 2000,
  kSpareRetryMs = 60000,
};

static bool verbose = false;

static void logmsg(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("warren-launcher: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// True while the host end of the port is closed (the driver reports POLLHUP then).
static bool host_closed(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) < 0) return false;
  return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Finds the device node of the named port. udev makes /dev/virtio-ports/NAME; without udev
// (the tiny image) the name is in sysfs next to the vportNpM node that devtmpfs created.
static bool find_port(const char* name, char* path, size_t len) {
  snprintf(path, len, "/dev/virtio-ports/%s", name);
  if (access(path, F_OK) == 0) return true;
  DIR* d = opendir("/sys/class/virtio-ports");
  if (!d) return false;
  bool found = false;
  struct dirent* e;
  while (!found && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char npath[512], got[256];
    snprintf(npath, sizeof npath, "/sys/class/virtio-ports/%s/name", e->d_name);
    FILE* f = fopen(npath, "r");
    if (!f) continue;
    if (fgets(got, sizeof got, f)) {
      got[strcspn(got, "\n")] = '\0';
      if (strcmp(got, name) == 0) {
        snprintf(path, len, "/dev/%s", e->d_name);
        found = access(path, F_OK) == 0;
      }
    }
    fclose(f);
  }
  closedir(d);
  return found;
}

static int open_port(const char* name, int sfd) {
  char path[512];
  long long last_log = -100000;
  for (;;) {
    if (find_port(name, path, sizeof path)) {
      int fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
      if (fd >= 0) {
        logmsg("serving port %s (%s)", name, path);
        return fd;
      }
      if (now_ms() - last_log > 10000) {
        logmsg("cannot open %s: %s; retrying", path, strerror(errno));
        last_log = now_ms();
      }
    } else if (now_ms() - last_log > 10000) {
      logmsg("waiting for virtio-serial port %s", name);
      last_log = now_ms();
    }
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    if (poll(&p, 1, 200) > 0) {
      struct signalfd_siginfo si;
      if (read(sfd, &si, sizeof si) == sizeof si &&
          (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)) {
        return -1;
      }
    }
  }
}

// A byte queue between two file descriptors.
struct queue {
  char data[kBufSize];
  size_t len;
};

static void queue_drop_front(struct queue* q, size_t n) {
  memmove(q->data, q->data + n, q->len - n);
  q->len -= n;
}

// Writes as much of q as fd takes now. Returns false on a hard error.
static bool queue_flush(struct queue* q, int fd) {
  while (q->len > 0) {
    ssize_t n = write(fd, q->data, q->len);
    if (n > 0) {
      queue_drop_front(q, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

struct session {
  bool active;
  int sock;              // our end of the command's socket pair, -1 when closed
  pid_t pid;             // the command, 0 once reaped
  bool seen_connected;   // the host end was seen open during this session
  bool command_done;     // the command closed its side; flushing its last bytes
  bool got_data;         // the session has received bytes from the host
  struct queue to_cmd;   // port -> command
  struct queue to_host;  // command -> port
};

// What a watched file was: a spare started then is stale once any of them differs. (The
// ctime moves with every write, rename over it or chmod: no mtime needed.)
struct stamp {
  bool present;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec ctime;
};

// The next session's command, started ahead (-w).
struct spare {
  int sock;  // our end of its socket pair, -1 when there is no spare
  pid_t pid;
  long long born;
  struct stamp stamps[kMaxWatched];
};

static struct session s;
static struct queue between;  // bytes read while no session runs: scanned for "SSH-"
static pid_t dying_pid = 0;   // a command sent SIGTERM, to SIGKILL at dying_deadline
static long long dying_deadline = 0;
static unsigned long sessions = 0;
static const char* watched[kMaxWatched];  // -w
static int n_watched = 0;
static struct spare spare = {.sock = -1};
static long long spare_due = 0;  // when to start the next spare; 0: none wanted yet

static void stamp_all(struct stamp* out) {
  for (int i = 0; i < n_watched; i++) {
    struct stat st;
    memset(&out[i], 0, sizeof out[i]);
    if (stat(watched[i], &st) != 0) continue;
    out[i] = (struct stamp){.present = true,
                            .dev = st.st_dev,
                            .ino = st.st_ino,
                            .size = st.st_size,
                            .ctime = st.st_ctim};
  }
}

static bool same_stamp(const struct stamp* a, const struct stamp* b) {
  return a->present == b->present && a->dev == b->dev && a->ino == b->ino &&
         a->size == b->size && a->ctime.tv_sec == b->ctime.tv_sec &&
         a->ctime.tv_nsec == b->ctime.tv_nsec;
}

// Forks the command on a new socket pair: our end in *sock (non-blocking). An idle one runs
// under SCHED_IDLE until raise_to_normal.
static bool spawn(char** cmd, int* sock, pid_t* pid, bool idle) {
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
    logmsg("socketpair: %s", strerror(errno));
    return false;
  }
  *pid = fork();
  if (*pid < 0) {
    logmsg("fork: %s", strerror(errno));
    close(sp[0]);
    close(sp[1]);
    return false;
  }
  if (*pid == 0) {
    // Own session: sshd's monitor and privsep child form one process group to signal.
    setsid();
    struct sched_param zero = {.sched_priority = 0};
    if (idle && sched_setscheduler(0, SCHED_IDLE, &zero) != 0) {
      fprintf(stderr, "warren-launcher: SCHED_IDLE: %s\n", strerror(errno));
      _exit(127);
    }
    if (dup2(sp[1], 0) < 0 || dup2(sp[1], 1) < 0) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(cmd[0], cmd);
    fprintf(stderr, "warren-launcher: exec %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
  }
  close(sp[1]);
  set_nonblock(sp[0]);
  *sock = sp[0];
  return true;
}

static void drop_spare(const char* why) {
  if (spare.sock < 0) return;
  close(spare.sock);
  spare.sock = -1;
  if (spare.pid > 0) kill(-spare.pid, SIGKILL);  // it never had a client
  if (verbose) logmsg("spare pid %d dropped: %s", (int)spare.pid, why);
  spare.pid = 0;
}

static void make_spare(char** cmd) {
  spare_due = 0;
  stamp_all(spare.stamps);
  if (!spawn(cmd, &spare.sock, &spare.pid, /*idle=*/true)) {
    spare_due = now_ms() + kSpareRetryMs;
    return;
  }
  spare.born = now_ms();
  if (verbose) logmsg("spare pid %d started", (int)spare.pid);
}

// Takes the spare for a session if it still runs and the watched files are as it found them.
static bool take_spare(int* sock, pid_t* pid) {
  if (spare.sock < 0) return false;
  struct stamp now[kMaxWatched];
  stamp_all(now);
  for (int i = 0; i < n_watched; i++) {
    if (!same_stamp(&now[i], &spare.stamps[i])) {
      drop_spare(watched[i]);
      return false;
    }
  }
  if (spare.pid <= 0 || waitpid(spare.pid, NULL, WNOHANG) != 0) {
    spare.pid = 0;  // reaped: its process group is not ours to signal any more
    drop_spare("it exited");
    return false;
  }
  // Before its client's first byte: the processes it forks for the session inherit this.
  struct sched_param zero = {.sched_priority = 0};
  if (sched_setscheduler(spare.pid, SCHED_OTHER, &zero) != 0) {
    logmsg("raising spare pid %d: %s", (int)spare.pid, strerror(errno));
    drop_spare("it could not be raised");
    return false;
  }
  *sock = spare.sock;
  *pid = spare.pid;
  spare.sock = -1;
  spare.pid = 0;
  return true;
}

static void reap(void) {
  pid_t p;
  while ((p = waitpid(-1, NULL, WNOHANG)) > 0) {
    if (p == s.pid) s.pid = 0;
    if (p == dying_pid) dying_pid = 0;
    if (p == spare.pid) {
      // Not replaced at once if it died young: a command that cannot wait would loop.
      const bool young = now_ms() - spare.born < kSpareRetryMs;
      spare.pid = 0;
      drop_spare("it exited");
      spare_due = now_ms() + (young ? kSpareRetryMs : kSpareDelayMs);
    }
  }
}

static bool start_session(char** cmd, const char* why) {
  int sock = -1;
  pid_t pid = 0;
  const bool spared = take_spare(&sock, &pid);
  if (!spared && !spawn(cmd, &sock, &pid, /*idle=*/false)) return false;
  if (n_watched > 0) spare_due = now_ms() + kSpareDelayMs;
  s.active = true;
  s.sock = sock;
  s.pid = pid;
  s.seen_connected = false;
  s.command_done = false;
  s.got_data = false;
  s.to_cmd.len = 0;
  s.to_host.len = 0;
  sessions++;
  // Always said (a line per host connection): whether the spare served it is what tests and
  // operators look for.
  logmsg("session %lu: pid %d (%s%s)", sessions, (int)pid, why, spared ? ", spare" : "");
  return true;
}

static void end_session(const char* why) {
  if (s.sock >= 0) close(s.sock);
  s.sock = -1;
  if (s.pid > 0) {
    if (dying_pid > 0) kill(-dying_pid, SIGKILL);
    kill(-s.pid, SIGTERM);
    dying_pid = s.pid;
    dying_deadline = now_ms() + kKillGraceMs;
  }
  if (verbose) {
    logmsg("session %lu ended: %s (%zu bytes to host dropped)", sessions, why, s.to_host.len);
  }
  s.active = false;
  s.pid = 0;
  // With the host gone nothing competes with a spare's start-up: one is started now (a
  // template is saved right after its host disconnects, and its clones inherit the spare).
  if (n_watched > 0 && spare.sock < 0 && spare_due != 0) spare_due = now_ms();
  s.to_cmd.len = 0;
  s.to_host.len = 0;
  between.len = 0;
}

// Between sessions: drops everything before the client's "SSH-" and, once it is there,
// starts a session that receives the bytes from it on.
static void scan_between(char** cmd) {
  char* at = memmem(between.data, between.len, "SSH-", 4);
  if (!at) {
    size_t keep = between.len < 3 ? between.len : 3;  // a split "SSH-" may continue
    if (verbose && between.len > keep) logmsg("dropped %zu stale bytes", between.len - keep);
    queue_drop_front(&between, between.len - keep);
    return;
  }
  size_t skip = (size_t)(at - between.data);
  if (verbose && skip > 0) logmsg("dropped %zu stale bytes before a banner", skip);
  queue_drop_front(&between, skip);
  if (start_session(cmd, "client banner")) {
    memcpy(s.to_cmd.data, between.data, between.len);
    s.to_cmd.len = between.len;
    s.got_data = true;
    between.len = 0;
  }
}

// Reads the host end's state and ends a session whose host went away. What the port still
// holds then is either that client's leftovers or a new client's first bytes (they can beat
// the connect notice): the between-sessions scanner sorts them out, nothing is drained here.
static void check_host(int port, bool* closed, bool* was_closed, long long* idle_since) {
  *closed = host_closed(port);
  if (*closed != *was_closed) {
    if (verbose) logmsg("host %s", *closed ? "disconnected" : "connected");
    *was_closed = *closed;
    *idle_since = now_ms();
  }
  if (s.active && !*closed) s.seen_connected = true;
  if (s.active && *closed && s.seen_connected) {
    end_session("host disconnected");
    *idle_since = now_ms();
  }
}

// Whether a chunk read from the port opens a new connection. Every read returns bytes of one
// virtqueue buffer, and QEMU fills a buffer from one read of one client's socket, so a new
// client's first chunk starts with its identification string. Inside an established session
// the bytes are encrypted: a chunk starting with these 8 bytes is a 2^-64 accident.
static bool is_client_banner(const char* p, size_t n) {
  return (n >= 8 && memcmp(p, "SSH-2.0-", 8) == 0) || (n >= 9 && memcmp(p, "SSH-1.99-", 9) == 0);
}

static void usage(void) {
  fputs("usage: warren-launcher [-p PORT_NAME] [-i IDLE_MS] [-w FILE]... [-v] -- COMMAND [ARG...]\n",
        stderr);
  exit(2);
}

int main(int argc, char** argv) {
  const char* port_name = "warren.control";
  long idle_ms = 2000;
  int opt;
  while ((opt = getopt(argc, argv, "p:i:w:v")) != -1) {
    switch (opt) {
      case 'w':
        if (n_watched == kMaxWatched) usage();
        watched[n_watched++] = optarg;
        break;
      case 'p':
        port_name = optarg;
        break;
      case 'i':
        idle_ms = strtol(optarg, NULL, 10);
        break;
      case 'v':
        verbose = true;
        break;
      default:
        usage();
    }
  }
  if (optind >= argc || argv[optind][0] != '/') usage();  // sshd wants an absolute path
  char** cmd = &argv[optind];
  signal(SIGPIPE, SIG_IGN);  // a dead socket is an error return, not a death

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGIO);
  sigaddset(&sigs, SIGCHLD);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  sigprocmask(SIG_BLOCK, &sigs, NULL);
  int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    logmsg("signalfd: %s", strerror(errno));
    return 1;
  }

  int port = open_port(port_name, sfd);
  if (port < 0) return 0;
  // SIGIO on data and on every host connect/disconnect (the driver calls kill_fasync).
  fcntl(port, F_SETOWN, getpid());
  fcntl(port, F_SETFL, fcntl(port, F_GETFL) | O_ASYNC);

  s.sock = -1;
  if (n_watched > 0) spare_due = now_ms() + kSpareDelayMs;
  bool stopping = false;
  long long idle_since = now_ms();  // host connected, no session, nothing received
  bool was_closed = true;
  bool closed = true;
  while (!stopping) {
    check_host(port, &closed, &was_closed, &idle_since);
    if (s.active && s.command_done && s.to_host.len == 0) {
      // The command finished and its last bytes reached the host.
      end_session("command finished");
      idle_since = now_ms();
    }

    // Host connected and silent with no session: start one, sshd speaks first.
    int timeout = 1000;
    if (!s.active && !closed) {
      long long left = idle_since + idle_ms - now_ms();
      if (left <= 0) {
        between.len = 0;  // at most a stale fragment of a "SSH-"
        if (!start_session(cmd, "idle host")) idle_since = now_ms();
        continue;
      }
      if (left < timeout) timeout = (int)left;
    }
    if (spare_due > 0 && spare.sock < 0) {
      long long left = spare_due - now_ms();
      if (left <= 0) {
        make_spare(cmd);
      } else if (left < timeout) {
        timeout = (int)left;
      }
    }
    if (dying_pid > 0) {
      long long left = dying_deadline - now_ms();
      if (left <= 0) {
        kill(-dying_pid, SIGKILL);
        dying_pid = 0;
      } else if (left < timeout) {
        timeout = (int)left;
      }
    }

    struct pollfd fds[3];
    int n = 0;
    fds[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    int port_i = -1, sock_i = -1;
    struct queue* in_q = s.active ? &s.to_cmd : &between;
    // With the host end closed, poll() on the port returns at once (POLLHUP); SIGIO wakes us
    // instead, and the port is read below without waiting.
    if (!closed) {
      short ev = 0;
      if (in_q->len < kBufSize) ev |= POLLIN;
      if (s.active && s.to_host.len > 0) ev |= POLLOUT;
      port_i = n;
      fds[n++] = (struct pollfd){.fd = port, .events = ev};
    }
    if (s.active && s.sock >= 0) {
      short ev = 0;
      if (!s.command_done && s.to_host.len < kBufSize) ev |= POLLIN;
      if (s.to_cmd.len > 0) ev |= POLLOUT;
      sock_i = n;
      fds[n++] = (struct pollfd){.fd = s.sock, .events = ev};
    }
    bool try_port_read = closed;  // data may arrive before the connect notice
    if (poll(fds, n, timeout) < 0 && errno != EINTR) {
      logmsg("poll: %s", strerror(errno));
      return 1;
    }

    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP) {
          stopping = true;
        }
        if (si.ssi_signo == SIGCHLD) reap();
      }
    }
    if (port_i >= 0 && (fds[port_i].revents & (POLLIN | POLLHUP | POLLERR))) try_port_read = true;

    // Look again before reading: if the host end closed while we slept, what the port holds
    // now may already be the next client's first bytes, which must not reach this session.
    check_host(port, &closed, &was_closed, &idle_since);
    in_q = s.active ? &s.to_cmd : &between;

    // Port -> command (or the between-sessions scanner).
    if (try_port_read && in_q->len < kBufSize) {
      static char chunk[kBufSize];
      ssize_t r = read(port, chunk, kBufSize - in_q->len);
      if (r > 0) {
        if (s.active && s.got_data && is_client_banner(chunk, (size_t)r)) {
          // A new client (see is_client_banner): the old one is gone even though its
          // disconnect notice has not arrived yet.
          end_session("a new client's banner arrived");
          in_q = &between;
        }
        memcpy(in_q->data + in_q->len, chunk, (size_t)r);
        in_q->len += (size_t)r;
        if (s.active) {
          s.got_data = true;
        } else {
          idle_since = now_ms();
          scan_between(cmd);
        }
      }
    }
    // Command -> port, and the command's end.
    if (sock_i >= 0 && s.active && s.sock >= 0 &&
        (fds[sock_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t r = read(s.sock, s.to_host.data + s.to_host.len, kBufSize - s.to_host.len);
      if (r > 0) {
        s.to_host.len += (size_t)r;
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        s.command_done = true;
      }
    }
    if (s.active && s.to_host.len > 0 && !closed) {
      if (!queue_flush(&s.to_host, port)) s.to_host.len = 0;
    }
    if (s.active && s.sock >= 0 && s.to_cmd.len > 0) {
      if (!queue_flush(&s.to_cmd, s.sock)) s.command_done = true;
    }
  }
  if (s.active) end_session("stopping");
  drop_spare("stopping");
  logmsg("stopping after %lu sessions", sessions);
  return 0;
}
