// warren-run: runs commands for warren inside a guest, as the VM user, so that they can
// outlive the SSH channel that started them (jobs). The host uploads it to
// ~/.warren/bin/warren-run over the control connection and calls it through exec channels:
//
//   warren-run --version              "warren-run VERSION"
//   warren-run start ID               stdin: a start header (header.c), then the job's stdin.
//                                     Starts the job, then attaches to it (frames on stdout).
//   warren-run attach ID OUT ERR      frames of the job's output from those byte offsets
//   warren-run kill ID                SIGTERM to the job's processes, SIGKILL after 2 s
//   warren-run list                   one line per job (below)
//   warren-run gc                     removes jobs that ended more than a day ago
//   warren-run serve                  starts the runner that stays (serve.c): `start` over a
//                                     unix socket the host reaches without an sshd session
//   warren-run identity               as root: a restored clone's own identity (identity.c);
//                                     without root: handed to the process identity-wait left
//   warren-run identity-wait          as root: a root `identity` made ready (identity_wait.c)
//   warren-run apply-seed [--restored]
//                                     as root: the seed disk applied (seed.c), at every boot
//                                     and inside `identity`. Run by the name apply-seed (the
//                                     images link /usr/lib/warren/apply-seed here), the
//                                     program is `warren-run apply-seed`.
//
// A job is `$SHELL -c COMMAND` in its own session (so its process group is the whole tree
// unless a process leaves it), stdout and stderr spooled to files in ~/.warren/jobs/ID/
// (jobdir.c), stdin from a pipe fed by `start` (or /dev/null). It is started by a monitor
// process, double-forked away from sshd, that waits for it and writes its status; the
// monitor is a child subreaper, so orphans of the job are reaped, and a process that left
// the group (setsid) or double-forked is still below the monitor, where `kill` finds it.
//
// list lines, newest first: "ID STARTED STATE CODE ENDED COMMAND" with STATE
// running|exit|signal|lost and COMMAND the first bytes of the command, escaped (\\, \xHH for
// anything not printable ASCII).
// Frames (start, attach): 1 type byte, a big-endian u32 length, the payload; see runner.h.
//
// The host treats every byte from here as untrusted; this program trusts only its argv and
// the header, both of which it checks.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static void close_from(int lowfd, int keep) {
  // close_range is in glibc 2.34+ and Linux 5.9+; fall back to a loop on older kernels.
  if (keep >= lowfd) {
    if (keep > lowfd && close_range((unsigned)lowfd, (unsigned)keep - 1, 0) != 0) {
      for (int fd = lowfd; fd < keep; fd++) close(fd);
    }
    lowfd = keep + 1;
  }
  if (close_range((unsigned)lowfd, ~0U, 0) != 0) {
    for (int fd = lowfd; fd < 4096; fd++) close(fd);
  }
}

static const char* user_shell(void) {
  const char* s = getenv("SHELL");
  if (s != NULL && s[0] == '/' && access(s, X_OK) == 0) return s;
  return "/bin/sh";
}

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

struct launch {
  const char* id;
  const char* dir;
  const struct start_header* h;
  int out_fd, err_fd;
  int stdin_r, stdin_w;  // the job's stdin pipe, or -1
  int ready_w;           // monitor -> start: "1" once the job runs
};

// The job: a new session, the spool files, the user's shell.
static void run_job(const struct launch* l, int exec_err_w) {
  setsid();
  signal(SIGPIPE, SIG_DFL);  // ignored here, and ignored dispositions survive exec
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int in = l->stdin_r >= 0 ? l->stdin_r : open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || dup2(in, 0) < 0 || dup2(l->out_fd, 1) < 0 || dup2(l->err_fd, 2) < 0) _exit(127);
  const char* cwd = l->h->cwd != NULL && l->h->cwd[0] != '\0' ? l->h->cwd : getenv("HOME");
  if (cwd != NULL && chdir(cwd) != 0) {
    dprintf(2, "warren-run: cannot change directory to %s: %s\n", cwd, strerror(errno));
    _exit(1);
  }
  for (int i = 0; i < l->h->env_count; i++) setenv(l->h->env[i].name, l->h->env[i].value, 1);
  setenv("WARREN_JOB", l->id, 1);
  close_from(3, exec_err_w);
  const char* shell = user_shell();
  const char* base = strrchr(shell, '/');
  char* argv[] = {(char*)(base ? base + 1 : shell), "-c", l->h->command, NULL};
  execv(shell, argv);
  int e = errno;
  dprintf(2, "warren-run: cannot run %s: %s\n", shell, strerror(e));
  if (write(exec_err_w, &e, sizeof e) < 0) {
  }
  _exit(127);
}

// The monitor: starts the job, tells `start` it runs, waits for it, records how it ended.
static void run_monitor(const struct launch* l) {
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
  }
  if (l->stdin_w >= 0) close(l->stdin_w);  // the job must see EOF when `start` goes away
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  char buf[96];
  int n = snprintf(buf, sizeof buf, "%d %llu\n", (int)getpid(), process_start_time(getpid()));
  write_atomic(l->dir, "monitor", buf, (size_t)n);

  int exec_err[2];
  if (pipe2(exec_err, O_CLOEXEC) != 0) _exit(1);
  pid_t job = fork();
  if (job < 0) {
    write_atomic(l->dir, "status", "signal 9\n", 9);
    _exit(1);
  }
  if (job == 0) run_job(l, exec_err[1]);
  close(exec_err[1]);
  n = snprintf(buf, sizeof buf, "%d\n", (int)job);
  write_atomic(l->dir, "pgid", buf, (size_t)n);
  // Wait until the shell was exec'd (or failed to be): then a kill reaches its session.
  int e;
  while (read(exec_err[0], &e, sizeof e) < 0 && errno == EINTR) {
  }
  close(exec_err[0]);
  if (write(l->ready_w, "1", 1) < 0) {
  }
  close(l->ready_w);
  close(l->out_fd);
  close(l->err_fd);
  if (l->stdin_r >= 0) close(l->stdin_r);

  int status = 0;
  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w == job) {
      status = st;
      break;
    }
    if (w < 0 && errno != EINTR) _exit(1);  // cannot happen: the job is our child
  }
  n = snprintf(buf, sizeof buf, "%lld\n", (long long)time(NULL));
  write_atomic(l->dir, "ended_at", buf, (size_t)n);
  if (WIFSIGNALED(status)) {
    n = snprintf(buf, sizeof buf, "signal %d\n", WTERMSIG(status));
  } else {
    n = snprintf(buf, sizeof buf, "exit %d\n", WEXITSTATUS(status));
  }
  write_atomic(l->dir, "status", buf, (size_t)n);
  _exit(0);
}

static bool write_file(const char* dir, const char* name, const char* data, size_t len) {
  return write_atomic(dir, name, data, len);
}

int cmd_start(const char* id) {
  if (!valid_job_id(id)) {
    send_error("invalid", "bad job id");
    return kExitInvalid;
  }
  static struct start_header h;
  size_t cap = 64 * 1024, len = 0, pos = 0;
  char* buf = malloc(cap);
  if (buf == NULL) {
    send_error("internal", "out of memory");
    return kExitInternal;
  }
  char err[256];
  for (;;) {
    int r = header_parse(&h, buf, len, &pos, err, sizeof err);
    if (r < 0) {
      send_error("invalid", "%s", err);
      return kExitInvalid;
    }
    if (r == 1) break;
    if (len == cap) {
      if (cap >= (size_t)kMaxHeader + 64 * 1024) {
        send_error("invalid", "header too large");
        return kExitInvalid;
      }
      cap *= 2;
      char* nb = realloc(buf, cap);
      if (nb == NULL) {
        send_error("internal", "out of memory");
        return kExitInternal;
      }
      buf = nb;
    }
    ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      send_error("invalid", "header ended early");
      return kExitInvalid;
    }
    len += (size_t)n;
  }

  char root[4096], dir[4400];
  if (!jobs_root(root, sizeof root, true)) {
    send_error(errno_kind(errno), "cannot create ~/.warren/jobs: %s", strerror(errno));
    return kExitInternal;
  }
  snprintf(dir, sizeof dir, "%s/%s", root, id);
  if (mkdir(dir, 0700) != 0) {
    if (errno == EEXIST) {
      send_error("exists", "job %s exists", id);
      return kExitExists;
    }
    send_error(errno_kind(errno), "cannot create %s: %s", dir, strerror(errno));
    return kExitInternal;
  }
  char tbuf[64], boot[64];
  int n = snprintf(tbuf, sizeof tbuf, "%lld\n", (long long)time(NULL));
  current_boot_id(boot, sizeof boot);
  size_t keep = h.command_len < kKeptCommandBytes ? h.command_len : kKeptCommandBytes;
  char path[4600];
  snprintf(path, sizeof path, "%s/out", dir);
  int out_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  snprintf(path, sizeof path, "%s/err", dir);
  int err_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  int stdin_pipe[2] = {-1, -1}, ready[2];
  if (out_fd < 0 || err_fd < 0 || !write_file(dir, "cmd", h.command, keep) ||
      !write_file(dir, "boot_id", boot, strlen(boot)) ||
      !write_file(dir, "started_at", tbuf, (size_t)n) ||
      (h.has_stdin && pipe2(stdin_pipe, O_CLOEXEC) != 0) || pipe2(ready, O_CLOEXEC) != 0) {
    send_error(errno_kind(errno), "cannot set up job %s: %s", id, strerror(errno));
    return kExitInternal;
  }
  struct launch l = {.id = id,
                     .dir = dir,
                     .h = &h,
                     .out_fd = out_fd,
                     .err_fd = err_fd,
                     .stdin_r = stdin_pipe[0],
                     .stdin_w = stdin_pipe[1],
                     .ready_w = ready[1]};
  pid_t c1 = fork();
  if (c1 < 0) {
    send_error("internal", "fork: %s", strerror(errno));
    return kExitInternal;
  }
  if (c1 == 0) {
    // Double fork: the monitor is nobody's child but init's (or a subreaper's), in a session
    // of its own, so neither sshd's exit nor the channel's close reaches it.
    close(ready[0]);
    setsid();
    pid_t m = fork();
    if (m != 0) _exit(m < 0 ? 1 : 0);
    run_monitor(&l);
  }
  close(ready[1]);
  close(out_fd);
  close(err_fd);
  if (stdin_pipe[0] >= 0) close(stdin_pipe[0]);
  int st;
  while (waitpid(c1, &st, 0) < 0 && errno == EINTR) {
  }
  char ok = 0;
  ssize_t r;
  do {
    r = read(ready[0], &ok, 1);
  } while (r < 0 && errno == EINTR);
  close(ready[0]);
  if (r != 1 || ok != '1') {
    send_error("internal", "job %s did not start", id);
    return kExitInternal;
  }
  int rc = attach_loop(id, 0, 0, h.has_stdin ? STDIN_FILENO : -1, stdin_pipe[1], buf + pos,
                       len - pos, true);
  header_free(&h);
  free(buf);
  return rc;
}

static bool parse_u64(const char* s, uint64_t* out) {
  if (s[0] == '\0' || strlen(s) > 19) return false;
  uint64_t v = 0;
  for (const char* p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  *out = v;
  return true;
}

static int cmd_attach(const char* id, const char* out_s, const char* err_s) {
  uint64_t out_from, err_from;
  if (!valid_job_id(id) || !parse_u64(out_s, &out_from) || !parse_u64(err_s, &err_from)) {
    send_error("invalid", "usage: attach ID OUT_OFFSET ERR_OFFSET");
    return kExitInvalid;
  }
  return attach_loop(id, out_from, err_from, -1, -1, "", 0, false);
}

// One process as /proc/PID/stat shows it. False when it is gone (or unreadable).
struct proc_stat {
  pid_t ppid, pgrp;
  char state;
  unsigned long long start;  // start time since boot, in clock ticks: tells a reused pid
};

static bool read_proc_stat(pid_t pid, struct proc_stat* st) {
  char dir[64], buf[1024];
  snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
  if (read_small(dir, "stat", buf, sizeof buf) <= 0) return false;
  char* p = strrchr(buf, ')');  // "PID (COMM) STATE PPID PGRP ..." - COMM may hold anything
  long ppid, pgrp;
  if (p == NULL || sscanf(p + 1, " %c %ld %ld", &st->state, &ppid, &pgrp) != 3) return false;
  st->ppid = (pid_t)ppid;
  st->pgrp = (pid_t)pgrp;
  st->start = process_start_time(pid);
  return st->start != 0;
}

// The job's processes, tracked through a kill: every member of its process group and every
// descendant of its monitor. A process that left the group (setsid, setpgid) is still below
// the monitor, and since the monitor is a child subreaper so is a double-forked daemon whose
// parent exited. The set is taken before the first signal and only grows: once the job's
// shell dies the monitor exits and the survivors move to init, where a fresh walk would no
// longer find them.
enum { kMaxTracked = 8192 };
struct tracked {
  pid_t pid;
  unsigned long long start;
};
struct job_procs {
  pid_t pgid, monitor;
  struct tracked p[kMaxTracked];
  size_t n;
};

static bool tracked_has(const struct job_procs* j, pid_t pid) {
  for (size_t i = 0; i < j->n; i++) {
    if (j->p[i].pid == pid) return true;
  }
  return false;
}

// Adds the job's processes alive now to the set.
static void job_procs_collect(struct job_procs* j) {
  DIR* d = opendir("/proc");
  if (d == NULL) return;
  size_t cap = 256, n = 0;
  struct {
    pid_t pid, ppid, pgrp;
    unsigned long long start;
  }* ps = malloc(cap * sizeof *ps);
  struct dirent* e;
  while (ps != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
    struct proc_stat st;
    if (pid == j->monitor || !read_proc_stat(pid, &st) || st.state == 'Z' || st.state == 'X') {
      continue;
    }
    if (n == cap) {
      void* more = realloc(ps, 2 * cap * sizeof *ps);
      if (more == NULL) break;
      ps = more;
      cap *= 2;
    }
    ps[n].pid = pid;
    ps[n].ppid = st.ppid;
    ps[n].pgrp = st.pgrp;
    ps[n].start = st.start;
    n++;
  }
  closedir(d);
  if (ps == NULL) return;
  // Members and children of the monitor first, then children of members until nothing new.
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < n && j->n < kMaxTracked; i++) {
      if (tracked_has(j, ps[i].pid)) continue;
      bool mine = ps[i].pgrp == j->pgid || (j->monitor > 1 && ps[i].ppid == j->monitor) ||
                  (ps[i].ppid > 1 && tracked_has(j, ps[i].ppid));
      if (mine) {
        j->p[j->n++] = (struct tracked){ps[i].pid, ps[i].start};
        grew = true;
      }
    }
  }
  free(ps);
}

// Sends sig (0: none) to every tracked process still alive (same pid, same start time, not
// a zombie). Returns how many are alive; one we may not signal (EPERM, e.g. run as root
// under sudo) counts as alive. The job's process group gets the signal first, all at once:
// signalled one by one, a shell could see its child die and exit with a status of its own
// before its signal arrives. The group is still the job's while a tracked process is in it
// (Linux reuses no pid that names a live process group).
static int job_procs_signal(const struct job_procs* j, int sig) {
  int alive = 0;
  for (size_t i = 0; sig != 0 && i < j->n; i++) {
    struct proc_stat st;
    if (read_proc_stat(j->p[i].pid, &st) && st.start == j->p[i].start && st.pgrp == j->pgid &&
        st.state != 'Z' && st.state != 'X') {
      kill(-j->pgid, sig);
      break;
    }
  }
  for (size_t i = 0; i < j->n; i++) {
    struct proc_stat st;
    if (!read_proc_stat(j->p[i].pid, &st) || st.start != j->p[i].start || st.state == 'Z' ||
        st.state == 'X') {
      continue;
    }
    if (kill(j->p[i].pid, sig) == 0 || errno == EPERM) alive++;
  }
  return alive;
}

// The monitor's pid while that very process still runs (its start time matches), else 0.
static pid_t live_monitor(const char* dir) {
  char buf[96];
  long pid = 0;
  unsigned long long start = 0;
  if (read_small(dir, "monitor", buf, sizeof buf) <= 0) return 0;
  if (sscanf(buf, "%ld %llu", &pid, &start) != 2 || pid <= 1 || start == 0) return 0;
  return process_start_time((pid_t)pid) == start ? (pid_t)pid : 0;
}

static int cmd_kill(const char* id) {
  char dir[4400];
  struct job_info info;
  if (!job_dir(id, dir, sizeof dir)) {
    fprintf(stderr, "warren-run: bad job id\n");
    return kExitInvalid;
  }
  if (!job_status(dir, &info)) {
    fprintf(stderr, "warren-run: no job %s\n", id);
    return kExitNotFound;
  }
  if (info.state != kJobRunning) return kExitOk;
  char buf[32];
  long pgid = 0;
  for (int i = 0; i < 100 && pgid <= 0; i++) {
    if (read_small(dir, "pgid", buf, sizeof buf) > 0) pgid = strtol(buf, NULL, 10);
    if (pgid <= 0) sleep_ms(20);
  }
  if (pgid <= 1) {
    fprintf(stderr, "warren-run: job %s has no process group\n", id);
    return kExitInternal;
  }
  static struct job_procs procs;  // large: keep it off the stack
  procs.pgid = (pid_t)pgid;
  procs.monitor = live_monitor(dir);
  procs.n = 0;
  job_procs_collect(&procs);  // before any signal, while the monitor still holds the tree
  job_procs_signal(&procs, SIGTERM);
  job_procs_signal(&procs, SIGCONT);  // a stopped process acts on SIGTERM only once continued
  for (int i = 0; i < 100; i++) {
    job_procs_collect(&procs);
    if (job_procs_signal(&procs, 0) == 0) break;
    sleep_ms(20);
  }
  // SIGKILL until none is left: a process may still fork while the tree is walked.
  for (int i = 0; i < 100; i++) {
    job_procs_collect(&procs);
    if (job_procs_signal(&procs, SIGKILL) == 0) break;
    sleep_ms(20);
  }
  // Let the monitor record the end, so a Wait right after sees it.
  for (int i = 0; i < 100; i++) {
    if (!job_status(dir, &info) || info.state != kJobRunning) break;
    sleep_ms(20);
  }
  return kExitOk;
}

static void print_escaped(const char* s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\\') {
      fputs("\\\\", stdout);
    } else if (c >= 0x20 && c < 0x7f) {
      putchar(c);
    } else {
      printf("\\x%02x", c);
    }
  }
}

static const char* state_name(enum job_state s) {
  switch (s) {
    case kJobRunning:
      return "running";
    case kJobExited:
      return "exit";
    case kJobSignaled:
      return "signal";
    default:
      return "lost";
  }
}

struct listed {
  char id[9];
  long long started_at;
};

static int newest_first(const void* a, const void* b) {
  const struct listed* x = a;
  const struct listed* y = b;
  if (x->started_at != y->started_at) return x->started_at < y->started_at ? 1 : -1;
  return strcmp(x->id, y->id);
}

// The newest kMaxListedJobs jobs, newest first, in at most kMaxListBytes of output (so a
// guest with many jobs still gives the host a listing it accepts).
static int cmd_list(void) {
  char root[4096];
  if (!jobs_root(root, sizeof root, false)) return kExitInternal;
  DIR* d = opendir(root);
  if (d == NULL) return errno == ENOENT ? kExitOk : kExitInternal;
  size_t n = 0, cap = 256;
  struct listed* all = malloc(cap * sizeof *all);
  struct dirent* e;
  while (all != NULL && (e = readdir(d)) != NULL && n < kMaxScannedJobs) {
    if (!valid_job_id(e->d_name)) continue;
    char dir[4400], buf[32];
    snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
    if (read_small(dir, "started_at", buf, sizeof buf) <= 0) continue;
    if (n == cap) {
      cap *= 2;
      struct listed* more = realloc(all, cap * sizeof *all);
      if (more == NULL) break;
      all = more;
    }
    memcpy(all[n].id, e->d_name, 9);
    all[n].started_at = strtoll(buf, NULL, 10);
    n++;
  }
  closedir(d);
  if (all == NULL) return kExitInternal;
  qsort(all, n, sizeof *all, newest_first);
  size_t bytes = 0;
  for (size_t i = 0; i < n && i < kMaxListedJobs; i++) {
    char dir[4400], cmd[kListCommandBytes + 1];
    snprintf(dir, sizeof dir, "%s/%s", root, all[i].id);
    struct job_info info;
    if (!job_status(dir, &info)) continue;
    ssize_t len = read_small(dir, "cmd", cmd, sizeof cmd);
    // At most 4 output bytes per command byte, plus the fixed fields.
    bytes += 100 + 4 * (len > 0 ? (size_t)len : 0);
    if (bytes > kMaxListBytes) break;
    printf("%s %lld %s %d %lld ", all[i].id, (long long)info.started_at, state_name(info.state),
           info.code, (long long)info.ended_at);
    print_escaped(cmd, len > 0 ? (size_t)len : 0);
    putchar('\n');
  }
  free(all);
  return fflush(stdout) == 0 ? kExitOk : kExitInternal;
}

static void remove_job_dir(int root_fd, const char* name) {
  int fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return;
  }
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    unlinkat(fd, e->d_name, 0);
  }
  closedir(d);
  unlinkat(root_fd, name, AT_REMOVEDIR);
}

static int cmd_gc(void) {
  char root[4096];
  if (!jobs_root(root, sizeof root, false)) return kExitInternal;
  DIR* d = opendir(root);
  if (d == NULL) return errno == ENOENT ? kExitOk : kExitInternal;
  time_t now = time(NULL);
  int removed = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (!valid_job_id(e->d_name)) continue;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
    struct job_info info;
    int64_t since;
    if (job_status(dir, &info)) {
      if (info.state == kJobRunning) continue;
      since = info.ended_at > 0 ? info.ended_at : info.started_at;
    } else {
      struct stat st;  // a start that failed half-way: judge it by its directory's age
      if (stat(dir, &st) != 0) continue;
      since = st.st_mtime;
    }
    if (now - since > kKeepFinishedSeconds) {
      remove_job_dir(dirfd(d), e->d_name);
      removed++;
    }
  }
  closedir(d);
  printf("removed %d\n", removed);
  return kExitOk;
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);  // a host that goes away shows up as EPIPE
  const char* base = argc > 0 ? strrchr(argv[0], '/') : NULL;
  if (argc > 0 && strcmp(base != NULL ? base + 1 : argv[0], "apply-seed") == 0) {
    return cmd_apply_seed(argc - 1, argv + 1);
  }
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("warren-run %s\n", WARREN_RUN_VERSION);
    return kExitOk;
  }
  if (argc == 3 && strcmp(argv[1], "start") == 0) return cmd_start(argv[2]);
  if (argc == 5 && strcmp(argv[1], "attach") == 0) return cmd_attach(argv[2], argv[3], argv[4]);
  if (argc == 3 && strcmp(argv[1], "kill") == 0) return cmd_kill(argv[2]);
  if (argc == 2 && strcmp(argv[1], "list") == 0) return cmd_list();
  if (argc == 2 && strcmp(argv[1], "gc") == 0) return cmd_gc();
  if (argc == 2 && strcmp(argv[1], "serve") == 0) return cmd_serve();
  if (argc == 2 && strcmp(argv[1], "identity") == 0) return cmd_identity();
  if (argc == 2 && strcmp(argv[1], "identity-wait") == 0) return cmd_identity_wait();
  if (argc >= 2 && strcmp(argv[1], "apply-seed") == 0) return cmd_apply_seed(argc - 2, argv + 2);
  fprintf(
      stderr,
      "usage: warren-run --version | start ID | attach ID OUT ERR | kill ID | list | gc | serve | "
      "identity | identity-wait | apply-seed [--restored]\n");
  return kExitInvalid;
}
