// The job directory, $HOME/.warren/jobs/ID (0700), and what its files say:
//   cmd         the first kKeptCommandBytes of the command (for listings)
//   started_at  unix seconds;  boot_id  the boot it started in
//   monitor     "PID STARTTIME" of the process that waits for the job
//   pgid        the job's process group (its session leader's pid)
//   out, err    the spooled output
//   ended_at, status   written by the monitor when the job ended ("exit N" / "signal N");
//               status is renamed into place last, so its presence means "finished".
// A job with no status whose monitor is gone (or whose boot is over) is "lost": the VM
// restarted under it, or its monitor was killed.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

bool jobs_root(char* out, size_t len, bool create) {
  const char* home = getenv("HOME");
  if (home == NULL || home[0] != '/') return false;
  char base[4096];
  if (snprintf(base, sizeof base, "%s/.warren", home) >= (int)sizeof base) return false;
  if (create && mkdir(base, 0700) != 0 && errno != EEXIST) return false;
  if (snprintf(out, len, "%s/jobs", base) >= (int)len) return false;
  if (create && mkdir(out, 0700) != 0 && errno != EEXIST) return false;
  return true;
}

bool job_dir(const char* id, char* out, size_t len) {
  char root[4096];
  if (!valid_job_id(id) || !jobs_root(root, sizeof root, false)) return false;
  return snprintf(out, len, "%s/%s", root, id) < (int)len;
}

ssize_t read_small(const char* dir, const char* name, char* buf, size_t len) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got + 1 < len) {
    ssize_t n = read(fd, buf + got, len - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = '\0';
  return (ssize_t)got;
}

bool write_atomic(const char* dir, const char* name, const char* data, size_t len) {
  char tmp[4600], path[4600];
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < len) {
    ssize_t n = write(fd, data + off, len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      unlink(tmp);
      return false;
    }
    off += (size_t)n;
  }
  // No fsync: a crash loses the VM's processes anyway, and the job then reads as lost.
  close(fd);
  if (rename(tmp, path) != 0) {
    unlink(tmp);
    return false;
  }
  return true;
}

void current_boot_id(char* out, size_t len) {
  out[0] = '\0';
  if (read_small("/proc/sys/kernel/random", "boot_id", out, len) < 0) out[0] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

unsigned long long process_start_time(pid_t pid) {
  char dir[64], buf[1024];
  snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
  if (read_small(dir, "stat", buf, sizeof buf) <= 0) return 0;
  // "PID (COMM) STATE PPID ..." where COMM may hold anything: fields count from the last ')'.
  char* p = strrchr(buf, ')');
  if (p == NULL) return 0;
  p++;
  // After ')' come fields 3.. ; starttime is field 22, the 20th one.
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (p == NULL) return 0;
  }
  return strtoull(p + 1, NULL, 10);
}

static int64_t read_int(const char* dir, const char* name) {
  char buf[32];
  if (read_small(dir, name, buf, sizeof buf) <= 0) return 0;
  return strtoll(buf, NULL, 10);
}

// "exit N" or "signal N" from the status file; false when there is none (or it is garbage).
static bool read_status(const char* dir, struct job_info* info) {
  char buf[32];
  if (read_small(dir, "status", buf, sizeof buf) <= 0) return false;
  int code;
  if (sscanf(buf, "exit %d", &code) == 1 && code >= 0 && code <= 255) {
    info->state = kJobExited;
  } else if (sscanf(buf, "signal %d", &code) == 1 && code > 0 && code < 128) {
    info->state = kJobSignaled;
  } else {
    return false;
  }
  info->code = code;
  info->ended_at = read_int(dir, "ended_at");
  return true;
}

bool job_finished(const char* dir, struct job_info* info) {
  memset(info, 0, sizeof *info);
  return read_status(dir, info);
}

bool job_status(const char* dir, struct job_info* info) {
  memset(info, 0, sizeof *info);
  char buf[128];
  if (read_small(dir, "started_at", buf, sizeof buf) <= 0) return false;
  info->started_at = strtoll(buf, NULL, 10);
  if (read_status(dir, info)) return true;
  char boot[64], now_boot[64];
  current_boot_id(now_boot, sizeof now_boot);
  if (read_small(dir, "boot_id", boot, sizeof boot) > 0 && now_boot[0] != '\0' &&
      strcmp(boot, now_boot) != 0) {
    info->state = kJobLost;
    return true;
  }
  if (read_small(dir, "monitor", buf, sizeof buf) > 0) {
    long pid = 0;
    unsigned long long start = 0;
    if (sscanf(buf, "%ld %llu", &pid, &start) == 2 && pid > 0 && start != 0 &&
        process_start_time((pid_t)pid) == start) {
      info->state = kJobRunning;
      return true;
    }
  } else if (time(NULL) - info->started_at < 60) {
    info->state = kJobRunning;  // still starting: the monitor writes its file first thing
    return true;
  }
  // The monitor is gone. It may have written the status just now.
  if (read_status(dir, info)) return true;
  info->state = kJobLost;
  return true;
}
