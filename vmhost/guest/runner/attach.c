// Attaching to a job: its spooled output, from the host's offsets, as frames on stdout until
// the job ends, plus (for `start`) the host's stdin forwarded into the job's stdin pipe.
// One poll loop, no threads. New output is noticed through inotify on the job directory
// (100 ms polling when no inotify instance is left); the host going away shows as an error
// on stdout, which ends the attach and leaves the job running.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

enum { kStdinChunk = 64 * 1024 };

struct out_buf {
  char data[5 + kFrameData];
  size_t len;
  size_t off;
};

static void queue_frame(struct out_buf* b, char type, const char* payload, size_t len) {
  frame_head(b->data, type, (uint32_t)len);
  memcpy(b->data + 5, payload, len);
  b->len = 5 + len;
  b->off = 0;
}

// Blocking write of everything (used for the single error frame, stdout maybe non-blocking).
static void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      poll(&pfd, 1, 1000);
      continue;
    }
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

const char* errno_kind(int e) { return e == ENOSPC || e == EDQUOT ? "full" : "internal"; }

void send_error(const char* kind, const char* fmt, ...) {
  char msg[512];
  int k = snprintf(msg, sizeof msg, "%s ", kind);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
  va_end(ap);
  char frame[5 + sizeof msg];
  size_t len = strlen(msg);
  frame_head(frame, kFrameError, (uint32_t)len);
  memcpy(frame + 5, msg, len);
  write_all(STDOUT_FILENO, frame, 5 + len);
}

static long long monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads the next piece of one spool file into a data frame. True when bytes were queued.
static bool produce(struct out_buf* b, int fd, uint64_t* off, char type) {
  ssize_t n;
  do {
    n = pread(fd, b->data + 5, kFrameData, (off_t)*off);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  frame_head(b->data, type, (uint32_t)n);
  b->len = 5 + (size_t)n;
  b->off = 0;
  *off += (uint64_t)n;
  return true;
}

static void end_payload(const struct job_info* info, char* out, size_t len) {
  switch (info->state) {
    case kJobExited:
      snprintf(out, len, "exit %d", info->code);
      break;
    case kJobSignaled:
      snprintf(out, len, "signal %d", info->code);
      break;
    default:
      snprintf(out, len, "lost");
      break;
  }
}

int attach_loop(const char* id, uint64_t out_from, uint64_t err_from, int stdin_src, int stdin_dst,
                const char* pending, size_t pending_len, bool send_started) {
  char dir[4400];
  if (!job_dir(id, dir, sizeof dir)) {
    send_error("invalid", "bad job id");
    return kExitInvalid;
  }
  struct job_info info;
  if (!job_status(dir, &info)) {
    send_error("notfound", "no job %s", id);
    return kExitNotFound;
  }
  char path[4600];
  snprintf(path, sizeof path, "%s/out", dir);
  int out_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  snprintf(path, sizeof path, "%s/err", dir);
  int err_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (out_fd < 0 || err_fd < 0) {
    send_error("notfound", "job %s has no output files", id);
    return kExitNotFound;
  }
  struct stat so, se;
  if (fstat(out_fd, &so) != 0 || fstat(err_fd, &se) != 0 || (uint64_t)so.st_size < out_from ||
      (uint64_t)se.st_size < err_from) {
    send_error("invalid", "offset beyond the output of job %s", id);
    return kExitInvalid;
  }

  // Watch before the first read, so no write between the read and the wait goes unseen.
  int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (ino >= 0 &&
      inotify_add_watch(ino, dir, IN_MODIFY | IN_MOVED_TO | IN_CREATE | IN_CLOSE_WRITE) < 0) {
    close(ino);
    ino = -1;
  }
  set_nonblock(STDOUT_FILENO);
  if (stdin_src >= 0) set_nonblock(stdin_src);
  if (stdin_dst >= 0) set_nonblock(stdin_dst);

  size_t scap = pending_len > kStdinChunk ? pending_len : kStdinChunk;
  char* sbuf = malloc(scap);
  if (sbuf == NULL) {
    send_error("internal", "out of memory");
    return kExitInternal;
  }
  memcpy(sbuf, pending, pending_len);
  size_t slen = pending_len, soff = 0;

  static struct out_buf ob;
  ob.len = ob.off = 0;
  if (send_started) queue_frame(&ob, kFrameStarted, id, strlen(id));
  uint64_t out_off = out_from, err_off = err_from;
  bool ended = false, done = false, prefer_err = false, caught_up_sent = false;
  long long last_full_check = monotonic_ms();
  char inobuf[4096];

  for (;;) {
    bool progressed = false;
    if (ob.off == ob.len && !done) {
      // Alternate between the two files so a flood on one never starves the other.
      bool got = prefer_err ? (produce(&ob, err_fd, &err_off, kFrameStderr) ||
                               produce(&ob, out_fd, &out_off, kFrameStdout))
                            : (produce(&ob, out_fd, &out_off, kFrameStdout) ||
                               produce(&ob, err_fd, &err_off, kFrameStderr));
      if (got) {
        prefer_err = ob.data[0] == kFrameStdout;
        progressed = true;
      } else if (ended) {
        char end[64];
        end_payload(&info, end, sizeof end);
        queue_frame(&ob, kFrameEnd, end, strlen(end));
        done = true;
      }
    }
    if (ob.off < ob.len) {
      ssize_t w = write(STDOUT_FILENO, ob.data + ob.off, ob.len - ob.off);
      if (w > 0) {
        ob.off += (size_t)w;
        progressed = true;
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        break;  // the host went away: detach, the job keeps running
      }
    }
    if (done && ob.off == ob.len) break;

    // The host's stdin, into the job's stdin pipe.
    if (slen == soff && stdin_src >= 0) {
      ssize_t n = read(stdin_src, sbuf, scap);
      if (n > 0) {
        slen = (size_t)n;
        soff = 0;
        progressed = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        stdin_src = -1;  // EOF
      }
    }
    if (slen > soff) {
      if (stdin_dst < 0) {
        slen = soff = 0;  // the job closed its stdin: what the host still sends is dropped
      } else {
        ssize_t w = write(stdin_dst, sbuf + soff, slen - soff);
        if (w > 0) {
          soff += (size_t)w;
          progressed = true;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
          close(stdin_dst);
          stdin_dst = -1;
        }
      }
    }
    if (stdin_src < 0 && slen == soff && stdin_dst >= 0) {
      close(stdin_dst);  // EOF for the job
      stdin_dst = -1;
    }
    if (progressed) continue;

    if (ob.off == ob.len && !ended) {
      // Nothing new to read: has the job ended? Checked before waiting, so output written
      // before the status is always read before the End frame. The status file is cheap to
      // look at; whether the job was lost (monitor gone, VM rebooted) costs more reads, so
      // that is looked at once a second, not after every write of a busy job.
      long long now = monotonic_ms();
      bool full = now - last_full_check >= 1000;
      if (full) last_full_check = now;
      if ((full ? job_status(dir, &info) : job_finished(dir, &info)) && info.state != kJobRunning) {
        ended = true;
        continue;
      }
      // Once per attach: all that was spooled has been sent and the job still runs, so a
      // host that asked to wait for no time can answer now instead of guessing.
      if (!caught_up_sent) {
        queue_frame(&ob, kFrameCaughtUp, "", 0);
        caught_up_sent = true;
        continue;
      }
    }

    struct pollfd p[4];
    int np = 0;
    p[np++] = (struct pollfd){.fd = STDOUT_FILENO, .events = ob.off < ob.len ? POLLOUT : 0};
    int ino_i = -1, src_i = -1, dst_i = -1;
    if (ino >= 0) {
      ino_i = np;
      p[np++] = (struct pollfd){.fd = ino, .events = POLLIN};
    }
    if (stdin_src >= 0 && slen == soff) {
      src_i = np;
      p[np++] = (struct pollfd){.fd = stdin_src, .events = POLLIN};
    }
    if (stdin_dst >= 0 && slen > soff) {
      dst_i = np;
      p[np++] = (struct pollfd){.fd = stdin_dst, .events = POLLOUT};
    }
    int timeout = ino >= 0 ? 1000 : 100;
    if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) break;
    if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) break;  // the host went away
    if (ino_i >= 0 && (p[ino_i].revents & POLLIN)) {
      while (read(ino, inobuf, sizeof inobuf) > 0) {
      }
    }
    if (dst_i >= 0 && (p[dst_i].revents & (POLLERR | POLLHUP))) {
      close(stdin_dst);
      stdin_dst = -1;
    }
    (void)src_i;
  }
  free(sbuf);
  if (ino >= 0) close(ino);
  close(out_fd);
  close(err_fd);
  if (stdin_dst >= 0) close(stdin_dst);
  return kExitOk;
}
