// `warren-run serve`: a runner that stays, so that starting a command costs the host one
// channel instead of an sshd session, the user's login shell and a runner start (about
// 60 ms of a TCG guest's CPU on every `ssh VM CMD`, more on a VM's first command).
//
// The host's runner check runs `warren-run serve` on every new control connection, from
// that connection's session, so the server's environment is what the connection's sshd
// gives a command (its SetEnv lines: the VM's env, the login shell's exports).
// It binds $HOME/.warren/run/serve.sock (the directory 0700), starts the server as a
// detached process (its pid, start time and boot in serve.pid), stops the one an earlier
// connection started, prints `serve PATH` and exits 0. A VM restored from a template or a
// live copy finds the server of the VM it was copied from running: the same verb replaces
// it. When the socket cannot be made, it prints nothing and the host starts commands as
// before, through exec channels.
//
// The host reaches the socket over its control connection (a direct-streamlocal channel,
// which the guest's sshd connects as the VM user), sends one line `start ID`, and then
// speaks the protocol of `warren-run start ID` (the start header, the job's stdin; frames
// back) on the connection itself. The server forks a child per connection that checks the
// caller's uid (SO_PEERCRED: the server's own, or root), reads the line and runs `start`
// exactly as the verb does; its stderr goes nowhere (start reports through Error frames).
// Each job's shell gets the server's environment without SHLVL, so a bash sources
// ~/.bashrc as it does under OpenSSH's sshd. At most kMaxServed connections are served
// at once; more are closed unanswered. The server leaves when its socket is no longer
// the one at the path (a later server replaced it) or when stopped.
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

enum {
  kMaxServed = 256,            // connections served at once (the control sshd's MaxSessions)
  kRequestLine = 64,           // "start ID\n"
  kRequestSeconds = 30,        // for the request line to come
  kSocketCheckMs = 60 * 1000,  // how often an idle server looks whether it was replaced
};

struct serve_paths {
  char dir[4096];
  char sock[sizeof(((struct sockaddr_un*)0)->sun_path)];
  char sock_new[sizeof(((struct sockaddr_un*)0)->sun_path)];
  char pid[4200];
};

// $HOME/.warren/run and the files in it; false when HOME is unusable or the socket path too
// long for a unix socket address.
static bool serve_paths(struct serve_paths* p) {
  const char* home = getenv("HOME");
  if (home == NULL || home[0] != '/') return false;
  char warren[4096];
  if ((size_t)snprintf(warren, sizeof warren, "%s/.warren", home) >= sizeof warren) return false;
  if ((size_t)snprintf(p->dir, sizeof p->dir, "%s/run", warren) >= sizeof p->dir) return false;
  if ((size_t)snprintf(p->sock, sizeof p->sock, "%s/serve.sock", p->dir) >= sizeof p->sock ||
      (size_t)snprintf(p->sock_new, sizeof p->sock_new, "%s/serve.sock.new", p->dir) >=
          sizeof p->sock_new ||
      (size_t)snprintf(p->pid, sizeof p->pid, "%s/serve.pid", p->dir) >= sizeof p->pid) {
    return false;
  }
  if (mkdir(warren, 0700) != 0 && errno != EEXIST) return false;
  if (mkdir(p->dir, 0700) != 0 && errno != EEXIST) return false;
  return chmod(p->dir, 0700) == 0;
}

// The server an earlier `serve` recorded, when it still runs (same boot, same start time):
// its pid, else 0.
static pid_t recorded_server(int pid_fd) {
  char buf[160];
  ssize_t n = pread(pid_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  int pid = 0;
  unsigned long long start = 0;
  char boot[64] = "", now_boot[64];
  if (sscanf(buf, "%d %llu %63s", &pid, &start, boot) != 3 || pid <= 1) return 0;
  current_boot_id(now_boot, sizeof now_boot);
  if (now_boot[0] == '\0' || strcmp(boot, now_boot) != 0) return 0;
  if (process_start_time((pid_t)pid) != start) return 0;
  return (pid_t)pid;
}

// One connection, in its own process: the caller's line, then `start` on the connection.
static void serve_one(int conn) {
  signal(SIGCHLD, SIG_DFL);
  signal(SIGHUP, SIG_DFL);  // ignored by the server; a job's must not be (exec keeps it)
  struct timeval limit = {.tv_sec = kRequestSeconds, .tv_usec = 0};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char line[kRequestLine];
  size_t n = 0;
  for (;;) {
    if (n == sizeof line - 1) _exit(kExitInvalid);
    ssize_t r = read(conn, line + n, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) _exit(kExitInvalid);
    if (line[n] == '\n') break;
    n++;
  }
  line[n] = '\0';
  struct timeval none = {0, 0};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (dup2(conn, STDIN_FILENO) < 0 || dup2(conn, STDOUT_FILENO) < 0 || devnull < 0 ||
      dup2(devnull, STDERR_FILENO) < 0) {
    _exit(kExitInternal);
  }
  close(conn);
  close(devnull);
  if (strncmp(line, "start ", 6) == 0) exit(cmd_start(line + 6));
  send_error("invalid", "unknown request");
  exit(kExitInvalid);
}

// True while `sock` is still the socket this server listens on.
static bool still_ours(const char* sock, const struct stat* ours) {
  struct stat now;
  return stat(sock, &now) == 0 && now.st_ino == ours->st_ino && now.st_dev == ours->st_dev;
}

static void serve_loop(int lfd, const char* sock) {
  struct stat ours;
  if (stat(sock, &ours) != 0) _exit(kExitInternal);
  int served = 0;
  for (;;) {
    while (served > 0 && waitpid(-1, NULL, WNOHANG) > 0) served--;
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    // Replaced, it gets no more connections: looked at when idle, not on every command.
    int ready = poll(&p, 1, kSocketCheckMs);
    if (ready == 0 && !still_ours(sock, &ours)) _exit(kExitOk);
    if (ready <= 0) continue;
    int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0) continue;
    struct ucred cred;
    socklen_t len = sizeof cred;
    bool allowed = getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                   (cred.uid == getuid() || cred.uid == 0);
    if (!allowed || served >= kMaxServed) {
      close(conn);
      continue;
    }
    pid_t child = fork();
    if (child == 0) {
      close(lfd);
      serve_one(conn);
    }
    if (child > 0) served++;
    close(conn);
  }
}

// The server process: detached from the check's session and its channel.
static void become_server(int lfd, const char* sock) {
  setsid();
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0) {
    _exit(kExitInternal);
  }
  close(devnull);
  signal(SIGHUP, SIG_IGN);
  // The jobs' environment: the connection's, as a command run by its sshd sees it, but for
  // what the shells between sshd and here set for themselves.
  unsetenv("SHLVL");
  unsetenv("_");
  unsetenv("PWD");
  unsetenv("OLDPWD");
  const char* home = getenv("HOME");
  if (home == NULL || chdir(home) != 0) {
    if (chdir("/") != 0) _exit(kExitInternal);
  }
  serve_loop(lfd, sock);
  _exit(kExitOk);
}

bool serve_running(char* sock, size_t len) {
  // This binary is ~/.warren/bin/warren-run: its server's files are in ~/.warren/run.
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  for (int up = 0; up < 2; up++) {
    char* slash = strrchr(exe, '/');
    if (slash == NULL || slash == exe) return false;
    *slash = '\0';
  }
  char pid_path[4200];
  if ((size_t)snprintf(pid_path, sizeof pid_path, "%s/run/serve.pid", exe) >= sizeof pid_path ||
      (size_t)snprintf(sock, len, "%s/run/serve.sock", exe) >= len ||
      strlen(sock) >= sizeof(((struct sockaddr_un*)0)->sun_path)) {
    return false;
  }
  for (const char* p = sock; *p; p++) {
    if (!isalnum((unsigned char)*p) && strchr("/._-", *p) == NULL) return false;
  }
  int fd = open(pid_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool live = recorded_server(fd) > 0;
  close(fd);
  struct stat st;
  return live && lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode);
}

int cmd_serve(void) {
  struct serve_paths p;
  if (!serve_paths(&p)) {
    fprintf(stderr, "warren-run serve: no usable $HOME/.warren/run\n");
    return kExitInternal;
  }
  int pid_fd = open(p.pid, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (pid_fd < 0 || flock(pid_fd, LOCK_EX) != 0) {
    fprintf(stderr, "warren-run serve: %s: %s\n", p.pid, strerror(errno));
    return kExitInternal;
  }
  pid_t previous = recorded_server(pid_fd);

  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, p.sock_new, strlen(p.sock_new) + 1);
  unlink(p.sock_new);
  mode_t old_mask = umask(077);
  bool bound = lfd >= 0 && bind(lfd, (struct sockaddr*)&addr, sizeof addr) == 0;
  umask(old_mask);
  if (!bound || listen(lfd, 64) != 0 || rename(p.sock_new, p.sock) != 0) {
    fprintf(stderr, "warren-run serve: %s: %s\n", p.sock, strerror(errno));
    unlink(p.sock_new);
    return kExitInternal;
  }
  pid_t server = fork();
  if (server < 0) {
    fprintf(stderr, "warren-run serve: fork: %s\n", strerror(errno));
    unlink(p.sock);
    return kExitInternal;
  }
  if (server == 0) {
    close(pid_fd);  // and with it the lock
    become_server(lfd, p.sock);
  }
  close(lfd);
  char boot[64], record[160];
  current_boot_id(boot, sizeof boot);
  int n = snprintf(record, sizeof record, "%d %llu %s\n", (int)server, process_start_time(server),
                   boot[0] != '\0' ? boot : "-");
  if (ftruncate(pid_fd, 0) != 0 || pwrite(pid_fd, record, (size_t)n, 0) != n) {
    fprintf(stderr, "warren-run serve: %s: %s\n", p.pid, strerror(errno));
  }
  // The previous server's socket is gone from the path: it would leave at its next look;
  // stopping it now frees it at once. Connections it is serving are its children's.
  if (previous > 0 && previous != server) kill(previous, SIGTERM);
  close(pid_fd);
  printf("serve %s\n", p.sock);
  return kExitOk;
}
