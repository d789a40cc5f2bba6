// `warren-run identity`: gives a VM restored from a saved, already-booted template its own
// identity, in one process, as root (the host runs `sudo -n ~/.warren/bin/warren-run
// identity`, or the same without sudo where a root process waits to take it over:
// identity_wait.c). Inside, a restored clone is a copy of the template: same kernel RNG state,
// hostname, SSH host key, machine-id, MAC, and a clock that stopped when the template was
// saved. The clone's own seed disk (packaging/images/README.md) sits where the template's
// was, so most of it is applied by re-running apply-seed once the kernel forgets the
// template seed's cached blocks.
//
// stdin, text records of one line each (the host's half: vmhost/guest/identity.h):
//   seed-device /dev/vdX        a whole identity: only /dev/vd[a-z]
//   hostname NAME               or a hand-out's (below): [A-Za-z0-9.-], 1-63, not -first
//   host-key HEX                with hostname, optional: the private key file, lowercase hex
//   host-key-pub HEX            with host-key (both or neither): the public line, lowercase hex
//   machine-id new              with hostname, optional: a new machine-id as step 2 makes it
//   mac 52:54:00:12:34:56       optional (absent: the VM has no NIC); lowercase, unicast
//   random HEX                  required; 128 lowercase hex digits: 64 bytes of host randomness
//   end                         required, last
// Each record once, seed-device or hostname (not both), every line bounded, anything else
// refused (exit 2) before any step runs.
//
// A hand-out (hostname): a VM of the warm pool took a whole identity when it was pooled (its
// own RNG state, machine-id, MAC, seed), so at `new` only what `new` decides changes: step 3
// writes the hostname and, when given, the host key pair from the request (no seed to mount;
// a pooled VM keeps the key it took when it was pooled, which no one has seen), step 2
// keeps the machine-id (the report names it) unless `machine-id new` asks for one (a clone
// of a template, which took nothing of its own yet but holds everything else its seed
// carries), step 5 starts nothing. The seed disk carries the same name and key for the next
// boot (the host wrote it).
//
// Then, in order (a failed step: exit 1 with a one-line reason on stderr):
//   1. RNDADDENTROPY with the host's bytes, then RNDRESEEDCRNG: the clone's RNG no longer
//      repeats the template's (its kernel has no vmgenid driver to do it);
//   2. a new /etc/machine-id when the file exists (getrandom, after the reseed), and
//      /var/lib/dbus/machine-id when it is a regular file: written and synced to the disk by
//      a child, while this process goes on with step 3 (the sync is a wait for the host's
//      disk, 10-80 ms, that costs the guest no CPU); waited for before step 4;
//   3. BLKFLSBUF on the seed device, then apply-seed --restored on it, in this process
//      (seed.c, what every boot runs too): hostname from the seed, not the template's
//      kernel command line; authorized_keys, env, host key;
//   4. the MAC of the first physical ethernet interface, when asked (SIOCSIFHWADDR; down,
//      set, up when the driver refuses while up);
//   5. /usr/lib/warren/run-setup, detached, when the seed gave a setup script not yet run;
//   6. last, the clock: prints `clock?` and reads `clock SECONDS.NANOSECONDS` (the host's
//      CLOCK_REALTIME when it saw the question), sets CLOCK_REALTIME to it plus half the
//      round trip.
// stdout: `clock?`, then one report line:
//   identity ok hostname=NAME machine-id=HEX|- mac=MAC|- setup=started|none
//            clock-step-ms=N clock-rtt-us=N work-ms=N runner=VERSION [serve=PATH]
// (clock-step-ms: how far the clock moved; work-ms: steps 1-5; runner: this binary's
// --version, which spares the host its runner check on the connection; serve: the socket of
// the user's runner server, when one runs (it came with the template: serve.c), which the
// host may then start commands at). Exit 5 when not root.
// Nothing secret (the host's random bytes, the seed's host key) is ever printed.
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

enum {
  kRandomBytes = 64,
  kMaxRecordLine = 1024,   // the longest record is a host key in hex
  kMaxHostKeyBytes = 500,  // an ed25519 private key file is about 400 bytes
  kMaxRequestBytes = 4096,
  kMaxClockLine = 64,
  // A stalled host or step must not leave a root process behind forever; the host's own
  // deadline is shorter.
  kIdentityAlarmSeconds = 120,
};

static const char kRunSetup[] = "/usr/lib/warren/run-setup";
static const char kSetupScript[] = "/etc/warren/setup-script";
static const char kSetupDone[] = "/var/lib/warren/setup-done";
static const char kMachineId[] = "/etc/machine-id";
static const char kDbusMachineId[] = "/var/lib/dbus/machine-id";
static const char kChildPath[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

struct identity_request {
  char seed_device[16];
  char hostname[64];  // a hand-out's: "" for a whole identity
  unsigned char host_key[kMaxHostKeyBytes];
  size_t host_key_len;
  unsigned char host_key_pub[kMaxHostKeyBytes];
  size_t host_key_pub_len;
  bool new_machine_id;  // a hand-out's `machine-id new`
  bool has_mac;
  unsigned char mac[6];
  bool has_random;
  unsigned char random[kRandomBytes];
};

int verb_failure(const char* verb, int code, const char* fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  for (char* p = msg; *p; p++) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  dprintf(STDERR_FILENO, "warren-run %s: %s\n", verb, msg);
  return code;
}

// A one-line reason on stderr; exits with `code`.
static int fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verb_failure("identity", code, fmt, ap);
  va_end(ap);
  return rc;
}

static int64_t ns_of(const struct timespec* t) {
  return (int64_t)t->tv_sec * 1000000000LL + (int64_t)t->tv_nsec;
}

static int64_t now_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return ns_of(&t);
}

// A non-blocking descriptor (the identity port, identity_wait.c) is waited on, up to
// kPortWaitMs each time: a host that went away ends the identity, it never hangs it.
enum { kPortWaitMs = 30000 };

static bool wait_for(int fd, short events) {
  struct pollfd p = {.fd = fd, .events = events};
  int n;
  do {
    n = poll(&p, 1, kPortWaitMs);
  } while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & events) != 0;
}

static bool write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && wait_for(fd, POLLOUT)) continue;
    if (n <= 0) return false;
    data += n;
    len -= (size_t)n;
  }
  return true;
}

// ---- reading stdin: bounded lines over raw read(2), no stdio buffering ----

struct line_reader {
  char buf[kMaxRequestBytes];
  size_t len;
  size_t total;  // bytes taken so far, against `limit`
  size_t limit;
};

// Reads one line (without its '\n') into out (NUL-terminated). Returns 1 for a line, 0 at
// EOF before one, -1 for a line over max-1 bytes, over the reader's limit, or with a NUL.
static int read_line(struct line_reader* r, char* out, size_t max) {
  for (;;) {
    char* nl = memchr(r->buf, '\n', r->len);
    if (nl != NULL) {
      size_t n = (size_t)(nl - r->buf);
      if (n >= max || memchr(r->buf, '\0', n) != NULL) return -1;
      memcpy(out, r->buf, n);
      out[n] = '\0';
      memmove(r->buf, nl + 1, r->len - n - 1);
      r->len -= n + 1;
      return 1;
    }
    if (r->len >= max || r->len == sizeof r->buf) return -1;
    ssize_t got = read(STDIN_FILENO, r->buf + r->len, sizeof r->buf - r->len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN && wait_for(STDIN_FILENO, POLLIN)) continue;
    if (got <= 0) return 0;
    r->total += (size_t)got;
    if (r->total > r->limit) return -1;
    r->len += (size_t)got;
  }
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is refused: the host writes lowercase
}

static bool parse_mac(const char* s, unsigned char mac[6]) {
  if (strlen(s) != 17) return false;
  for (int i = 0; i < 6; i++) {
    int hi = hex_value(s[3 * i]), lo = hex_value(s[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':')) return false;
    mac[i] = (unsigned char)(hi * 16 + lo);
  }
  // Unicast, and not all zeros.
  bool zero = true;
  for (int i = 0; i < 6; i++) zero = zero && mac[i] == 0;
  return (mac[0] & 1) == 0 && !zero;
}

// Lowercase hex into out (at most max bytes): the length, or -1.
static long hex_decode(const char* in, unsigned char* out, size_t max) {
  size_t n = strlen(in);
  if (n == 0 || n % 2 != 0 || n / 2 > max) return -1;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hex_value(in[2 * i]), lo = hex_value(in[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (unsigned char)(hi * 16 + lo);
  }
  return (long)(n / 2);
}

static bool valid_hostname(const char* s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63 || s[0] == '-') return false;
  for (size_t i = 0; i < n; i++) {
    if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-') return false;
  }
  return true;
}

static bool valid_seed_device(const char* s) {
  return strlen(s) == 8 && strncmp(s, "/dev/vd", 7) == 0 && s[7] >= 'a' && s[7] <= 'z';
}

// Reads and checks the whole request; nothing has been done yet when this fails.
static int read_request(struct line_reader* r, struct identity_request* req) {
  char line[kMaxRecordLine];
  bool has_device = false;
  for (int n = 1;; n++) {
    int got = read_line(r, line, sizeof line);
    if (got == 0) return fail(kExitInvalid, "bad request: it ended before its end record");
    if (got < 0) return fail(kExitInvalid, "bad request: record %d is too long or binary", n);
    if (strcmp(line, "end") == 0) break;
    if (strncmp(line, "seed-device ", 12) == 0) {
      if (has_device) return fail(kExitInvalid, "bad request: seed-device given twice");
      if (!valid_seed_device(line + 12)) {
        return fail(kExitInvalid, "bad request: the seed device must be /dev/vd[a-z]");
      }
      memcpy(req->seed_device, line + 12, 9);  // "/dev/vdX" and the NUL
      has_device = true;
    } else if (strncmp(line, "hostname ", 9) == 0) {
      if (req->hostname[0] != '\0') return fail(kExitInvalid, "bad request: hostname given twice");
      if (!valid_hostname(line + 9)) return fail(kExitInvalid, "bad request: bad hostname");
      memcpy(req->hostname, line + 9, strlen(line + 9) + 1);  // at most 63 bytes and the NUL
    } else if (strncmp(line, "host-key ", 9) == 0 || strncmp(line, "host-key-pub ", 13) == 0) {
      // Never echoed: the private key.
      const bool pub = line[8] == '-';
      size_t* len = pub ? &req->host_key_pub_len : &req->host_key_len;
      unsigned char* into = pub ? req->host_key_pub : req->host_key;
      if (*len != 0) {
        explicit_bzero(line, sizeof line);
        return fail(kExitInvalid, "bad request: %s given twice", pub ? "host-key-pub" : "host-key");
      }
      long got = hex_decode(line + (pub ? 13 : 9), into, kMaxHostKeyBytes);
      explicit_bzero(line, sizeof line);
      if (got <= 0) {
        return fail(kExitInvalid, "bad request: %s is not lowercase hex of 1-%d bytes",
                    pub ? "host-key-pub" : "host-key", kMaxHostKeyBytes);
      }
      *len = (size_t)got;
    } else if (strcmp(line, "machine-id new") == 0) {
      if (req->new_machine_id) return fail(kExitInvalid, "bad request: machine-id given twice");
      req->new_machine_id = true;
    } else if (strncmp(line, "mac ", 4) == 0) {
      if (req->has_mac) return fail(kExitInvalid, "bad request: mac given twice");
      if (!parse_mac(line + 4, req->mac)) {
        return fail(kExitInvalid, "bad request: mac is not a unicast xx:xx:xx:xx:xx:xx");
      }
      req->has_mac = true;
    } else if (strncmp(line, "random ", 7) == 0) {
      // Never echoed, not even in part: it seeds the guest's RNG.
      const char* hex = line + 7;
      if (req->has_random) return fail(kExitInvalid, "bad request: random given twice");
      if (strlen(hex) != 2 * kRandomBytes) {
        explicit_bzero(line, sizeof line);
        return fail(kExitInvalid, "bad request: random must be %d hex digits", 2 * kRandomBytes);
      }
      for (int i = 0; i < kRandomBytes; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
          explicit_bzero(line, sizeof line);
          return fail(kExitInvalid, "bad request: random must be lowercase hex");
        }
        req->random[i] = (unsigned char)(hi * 16 + lo);
      }
      explicit_bzero(line, sizeof line);
      req->has_random = true;
    } else {
      return fail(kExitInvalid, "bad request: record %d is unknown", n);
    }
  }
  const bool handout = req->hostname[0] != '\0';
  if (has_device == handout) {
    return fail(kExitInvalid, "bad request: one of seed-device and hostname, not %s",
                handout ? "both" : "neither");
  }
  if ((req->host_key_len != 0) != (req->host_key_pub_len != 0)) {
    return fail(kExitInvalid, "bad request: host-key and host-key-pub come together");
  }
  if (!handout && req->host_key_len != 0) {
    return fail(kExitInvalid, "bad request: host-key and host-key-pub come with hostname only");
  }
  if (req->new_machine_id && !handout) {
    return fail(kExitInvalid, "bad request: machine-id comes with hostname only");
  }
  if (!req->has_random) return fail(kExitInvalid, "bad request: no random record");
  // The host writes nothing more until it sees the clock question.
  if (r->len != 0) return fail(kExitInvalid, "bad request: bytes after the end record");
  return kExitOk;
}

// ---- 1. the kernel RNG ----

static int reseed_rng(const struct identity_request* req) {
  struct {
    int entropy_count;
    int buf_size;
    uint32_t buf[kRandomBytes / 4];
  } pool;
  pool.entropy_count = kRandomBytes * 8;
  pool.buf_size = kRandomBytes;
  memcpy(pool.buf, req->random, kRandomBytes);
  int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    explicit_bzero(&pool, sizeof pool);
    return fail(kExitInternal, "cannot open /dev/urandom: %s", strerror(errno));
  }
  int rc = ioctl(fd, RNDADDENTROPY, &pool);
  int e = errno;
  explicit_bzero(&pool, sizeof pool);
  if (rc != 0) {
    close(fd);
    return fail(kExitInternal, "RNDADDENTROPY: %s", strerror(e));
  }
  // Mixing alone would leave the CRNG on its old key until its next scheduled reseed.
  rc = ioctl(fd, RNDRESEEDCRNG);
  e = errno;
  close(fd);
  if (rc != 0) return fail(kExitInternal, "RNDRESEEDCRNG: %s", strerror(e));
  return kExitOk;
}

// ---- 3. the seed ----

static int flush_seed_device(const char* dev) {
  int fd = open(dev, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return fail(kExitInternal, "cannot open the seed device %s: %s", dev, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISBLK(st.st_mode)) {
    close(fd);
    return fail(kExitInternal, "%s is not a block device", dev);
  }
  // The template's seed was read at its boot: without this the mount in apply-seed could
  // see the template's blocks instead of the clone's disk.
  int rc = ioctl(fd, BLKFLSBUF, 0);
  int e = errno;
  close(fd);
  if (rc != 0) return fail(kExitInternal, "BLKFLSBUF on %s: %s", dev, strerror(e));
  return kExitOk;
}

static int run_apply_seed(const char* seed_device) {
  // Its progress lines go nowhere: stdout is the protocol's.
  char why[512];
  if (apply_seed(true, seed_device, -1, why, sizeof why) == kExitOk) return kExitOk;
  return fail(kExitInternal, "apply-seed failed: %s", why);
}

static int run_apply_handout(const struct identity_request* req) {
  char why[512];
  if (apply_handout(req->hostname, (const char*)req->host_key, req->host_key_len,
                    (const char*)req->host_key_pub, req->host_key_pub_len, why,
                    sizeof why) == kExitOk) {
    return kExitOk;
  }
  return fail(kExitInternal, "the hand-out failed: %s", why);
}

// ---- 2. machine-id ----

// A hand-out keeps the id the VM took when it was pooled: into out[33], "" when there is
// none (the tiny image) or it is not 32 lowercase hex digits.
static void current_machine_id(char out[33]) {
  out[0] = '\0';
  char buf[34];
  int fd = open(kMachineId, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n != 33 || buf[32] != '\n') return;
  for (int i = 0; i < 32; i++) {
    if (!((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f'))) return;
  }
  memcpy(out, buf, 32);
  out[32] = '\0';
}

// Written in place (not temp + rename): /etc/machine-id keeps its inode, owner and mode, and
// a file bind-mounted there (systemd does that on a read-only root) is written, not replaced.
static bool write_in_place(const char* path, const char* data, size_t len) {
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool ok = write_all(fd, data, len) && fsync(fd) == 0;
  int e = errno;
  close(fd);
  errno = e;
  return ok;
}

// A fresh id, 32 lowercase hex digits, shaped like systemd's (a v4 UUID), into out[33],
// written by a child (*writer; 0 when there is nothing to write). Empty when the guest has
// no /etc/machine-id (the tiny image).
static int start_machine_id(char out[33], pid_t* writer) {
  out[0] = '\0';
  *writer = 0;
  struct stat st;
  if (lstat(kMachineId, &st) != 0) {
    if (errno == ENOENT) return kExitOk;
    return fail(kExitInternal, "cannot stat %s: %s", kMachineId, strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return fail(kExitInternal, "%s is not a regular file", kMachineId);
  unsigned char id[16];
  // After the reseed, so it cannot be the id every clone of the template would draw.
  if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id) {
    return fail(kExitInternal, "getrandom: %s", strerror(errno));
  }
  id[6] = (unsigned char)((id[6] & 0x0f) | 0x40);
  id[8] = (unsigned char)((id[8] & 0x3f) | 0x80);
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", id[i]);
  *writer = fork();
  if (*writer < 0) return fail(kExitInternal, "fork: %s", strerror(errno));
  if (*writer > 0) return kExitOk;
  // The child: its failure is its one line on stderr and its exit status.
  char line[34];
  snprintf(line, sizeof line, "%s\n", out);
  if (!write_in_place(kMachineId, line, 33)) {
    _exit(fail(kExitInternal, "cannot write %s: %s", kMachineId, strerror(errno)));
  }
  // Debian keeps D-Bus's copy as a symlink to /etc/machine-id; a copy of its own is updated.
  if (lstat(kDbusMachineId, &st) == 0 && S_ISREG(st.st_mode) &&
      !write_in_place(kDbusMachineId, line, 33)) {
    _exit(fail(kExitInternal, "cannot write %s: %s", kDbusMachineId, strerror(errno)));
  }
  _exit(kExitOk);
}

// The child's end: kExitOk once the id is on the disk (the child said why it is not).
static int finish_machine_id(pid_t writer) {
  if (writer == 0) return kExitOk;
  int st;
  while (waitpid(writer, &st, 0) < 0) {
    if (errno != EINTR)
      return fail(kExitInternal, "waiting for the machine-id: %s", strerror(errno));
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == kExitOk) return kExitOk;
  return WIFEXITED(st) ? WEXITSTATUS(st) : fail(kExitInternal, "the machine-id writer died");
}

// ---- 4. the MAC ----

static long read_long_file(const char* path, long fallback) {
  char buf[32];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fallback;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return fallback;
  buf[n] = '\0';
  char* end;
  long v = strtol(buf, &end, 10);
  return end == buf ? fallback : v;
}

// The first (lowest ifindex) ethernet interface backed by a device: bridges, veths, dummies
// and docker's interfaces live under /sys/devices/virtual and are skipped.
static bool find_nic(char name[IFNAMSIZ]) {
  DIR* d = opendir("/sys/class/net");
  if (d == NULL) return false;
  long best = -1;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= IFNAMSIZ || strcmp(e->d_name, "lo") == 0) {
      continue;
    }
    char path[256], target[512];
    snprintf(path, sizeof path, "/sys/class/net/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strstr(target, "/virtual/") != NULL) continue;
    snprintf(path, sizeof path, "/sys/class/net/%s/type", e->d_name);
    if (read_long_file(path, -1) != ARPHRD_ETHER) continue;
    snprintf(path, sizeof path, "/sys/class/net/%s/ifindex", e->d_name);
    long index = read_long_file(path, -1);
    if (index > 0 && (best < 0 || index < best)) {
      best = index;
      snprintf(name, IFNAMSIZ, "%s", e->d_name);
    }
  }
  closedir(d);
  return best > 0;
}

static void format_mac(const unsigned char mac[6], char out[18]) {
  snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
           mac[5]);
}

static int set_mac(const unsigned char mac[6], char shown[18]) {
  char nic[IFNAMSIZ];
  if (!find_nic(nic)) return fail(kExitInternal, "a MAC was asked for but there is no NIC");
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(kExitInternal, "socket: %s", strerror(errno));
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", nic);
  ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
  if (ioctl(s, SIOCSIFHWADDR, &ifr) != 0) {
    // A driver without live address changes refuses while the link is up (EBUSY): down,
    // set, up. Routes through the interface go with the down; virtio-net changes live.
    int e = errno;
    struct ifreq flags;
    memset(&flags, 0, sizeof flags);
    snprintf(flags.ifr_name, sizeof flags.ifr_name, "%s", nic);
    if (e != EBUSY || ioctl(s, SIOCGIFFLAGS, &flags) != 0 || !(flags.ifr_flags & IFF_UP)) {
      close(s);
      return fail(kExitInternal, "setting the MAC of %s: %s", nic, strerror(e));
    }
    short up = flags.ifr_flags;
    flags.ifr_flags = (short)(up & ~IFF_UP);
    if (ioctl(s, SIOCSIFFLAGS, &flags) != 0) {
      e = errno;
      close(s);
      return fail(kExitInternal, "taking %s down: %s", nic, strerror(e));
    }
    int rc = ioctl(s, SIOCSIFHWADDR, &ifr);
    e = errno;
    flags.ifr_flags = up;
    int up_rc = ioctl(s, SIOCSIFFLAGS, &flags);
    int up_e = errno;
    if (rc != 0) {
      close(s);
      return fail(kExitInternal, "setting the MAC of %s while down: %s", nic, strerror(e));
    }
    if (up_rc != 0) {
      close(s);
      return fail(kExitInternal, "bringing %s back up: %s", nic, strerror(up_e));
    }
  }
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", nic);
  int rc = ioctl(s, SIOCGIFHWADDR, &ifr);
  int e = errno;
  close(s);
  if (rc != 0) return fail(kExitInternal, "reading the MAC of %s: %s", nic, strerror(e));
  if (memcmp(ifr.ifr_hwaddr.sa_data, mac, 6) != 0) {
    return fail(kExitInternal, "the MAC of %s did not change", nic);
  }
  format_mac((const unsigned char*)ifr.ifr_hwaddr.sa_data, shown);
  return kExitOk;
}

// ---- 5. the setup script ----

// As the boot path would: only when apply-seed copied a script and it never ran. Detached
// (its own session, reparented to init, stdio on /dev/null) so it outlives this channel.
static int start_setup(bool* started) {
  *started = false;
  struct stat st;
  if (stat(kSetupScript, &st) != 0 || !S_ISREG(st.st_mode)) return kExitOk;
  if (lstat(kSetupDone, &st) == 0 || errno != ENOENT) return kExitOk;
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return fail(kExitInternal, "pipe: %s", strerror(errno));
  pid_t c1 = fork();
  if (c1 < 0) return fail(kExitInternal, "fork: %s", strerror(errno));
  if (c1 == 0) {
    close(ready[0]);
    setsid();
    pid_t c2 = fork();
    if (c2 != 0) _exit(c2 < 0 ? 1 : 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(127);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char* argv[] = {"run-setup", NULL};
    char* envp[] = {(char*)kChildPath, NULL};
    execve(kRunSetup, argv, envp);  // ready[1] is close-on-exec: EOF tells it ran
    int e = errno;
    if (write(ready[1], &e, sizeof e) < 0) {
    }
    _exit(127);
  }
  close(ready[1]);
  int st1;
  while (waitpid(c1, &st1, 0) < 0 && errno == EINTR) {
  }
  int e = 0;
  ssize_t n;
  do {
    n = read(ready[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(ready[0]);
  if (!WIFEXITED(st1) || WEXITSTATUS(st1) != 0) return fail(kExitInternal, "fork failed");
  if (n > 0) return fail(kExitInternal, "cannot run %s: %s", kRunSetup, strerror(e));
  *started = true;
  return kExitOk;
}

// ---- 6. the clock ----

// "clock SECONDS.NANOSECONDS": 1-12 digits, exactly 9 digits, within 2020..2200.
static bool parse_clock(const char* line, struct timespec* t) {
  if (strncmp(line, "clock ", 6) != 0) return false;
  const char* p = line + 6;
  int64_t sec = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; p++, digits++) {
    if (digits == 12) return false;
    sec = sec * 10 + (*p - '0');
  }
  if (digits == 0 || *p != '.') return false;
  p++;
  long nsec = 0;
  for (digits = 0; *p >= '0' && *p <= '9'; p++, digits++) {
    if (digits == 9) return false;
    nsec = nsec * 10 + (*p - '0');
  }
  if (digits != 9 || *p != '\0') return false;
  if (sec < 1577836800LL || sec >= 7258118400LL) return false;
  t->tv_sec = (time_t)sec;
  t->tv_nsec = nsec;
  return true;
}

static int set_clock(struct line_reader* r, int64_t* step_ms, int64_t* rtt_us) {
  int64_t asked = now_ns(CLOCK_MONOTONIC);
  if (!write_all(STDOUT_FILENO, "clock?\n", 7)) {
    return fail(kExitInternal, "cannot ask the host for the time: %s", strerror(errno));
  }
  char line[kMaxClockLine];
  r->limit = r->total + kMaxClockLine;
  int got = read_line(r, line, sizeof line);
  int64_t answered = now_ns(CLOCK_MONOTONIC);
  if (got == 0) return fail(kExitInternal, "the host went away before telling the time");
  struct timespec host;
  if (got < 0 || !parse_clock(line, &host)) return fail(kExitInvalid, "bad clock answer");
  // The host read its clock when the question reached it: about half the round trip ago
  // when the answer arrived (plus whatever passed since).
  int64_t rtt = answered - asked;
  int64_t target = ns_of(&host) + rtt / 2 + (now_ns(CLOCK_MONOTONIC) - answered);
  int64_t before = now_ns(CLOCK_REALTIME);
  struct timespec set = {.tv_sec = (time_t)(target / 1000000000LL),
                         .tv_nsec = (long)(target % 1000000000LL)};
  if (clock_settime(CLOCK_REALTIME, &set) != 0) {
    return fail(kExitInternal, "clock_settime: %s", strerror(errno));
  }
  *step_ms = (target - before) / 1000000LL;
  *rtt_us = rtt / 1000LL;
  return kExitOk;
}

// ---- the verb ----

int cmd_identity(void) {
  if (geteuid() != 0) {
    // A template clone's or pooled VM's root process waits for this (identity_wait.c).
    int handed = identity_hand_over();
    if (handed >= 0) return handed;
    return fail(kExitNotRoot, "must run as root (sudo -n ~/.warren/bin/warren-run identity)");
  }
  alarm(kIdentityAlarmSeconds);
  umask(022);
  int64_t t0 = now_ns(CLOCK_MONOTONIC);
  static struct line_reader reader = {.limit = kMaxRequestBytes};
  static struct identity_request req;
  int rc = read_request(&reader, &req);
  if (rc != kExitOk) {
    explicit_bzero(&reader, sizeof reader);
    explicit_bzero(&req, sizeof req);
    return rc;
  }
  explicit_bzero(reader.buf, sizeof reader.buf);
  rc = reseed_rng(&req);
  explicit_bzero(req.random, sizeof req.random);
  if (rc != kExitOk) return rc;

  const bool handout = req.hostname[0] != '\0';
  // A hand-out keeps the machine-id the VM made when it was pooled, unless asked for a new one.
  char machine_id[33];
  pid_t machine_id_writer = 0;
  if (handout && !req.new_machine_id) {
    current_machine_id(machine_id);
  } else if ((rc = start_machine_id(machine_id, &machine_id_writer)) != kExitOk) {
    return rc;
  }
  if (handout) {
    rc = run_apply_handout(&req);
    explicit_bzero(req.host_key, sizeof req.host_key);
  } else if ((rc = flush_seed_device(req.seed_device)) == kExitOk) {
    rc = run_apply_seed(req.seed_device);
  }
  // Waited for whatever came of step 3: no child is left behind.
  int written = finish_machine_id(machine_id_writer);
  if (rc != kExitOk) return rc;
  if (written != kExitOk) return written;
  struct utsname uts;
  if (uname(&uts) != 0 || !valid_hostname(uts.nodename)) {
    return fail(kExitInternal, "apply-seed left no valid hostname");
  }

  char mac[18] = "-";
  if (req.has_mac && (rc = set_mac(req.mac, mac)) != kExitOk) return rc;

  bool setup_started = false;
  if (!handout && (rc = start_setup(&setup_started)) != kExitOk) return rc;
  int64_t work_ms = (now_ns(CLOCK_MONOTONIC) - t0) / 1000000LL;

  int64_t step_ms = 0, rtt_us = 0;
  if ((rc = set_clock(&reader, &step_ms, &rtt_us)) != kExitOk) return rc;

  char serve[128] = "", serve_field[160] = "";
  if (serve_running(serve, sizeof serve)) {
    snprintf(serve_field, sizeof serve_field, " serve=%s", serve);
  }
  char report[512];
  int n = snprintf(report, sizeof report,
                   "identity ok hostname=%s machine-id=%s mac=%s setup=%s clock-step-ms=%lld "
                   "clock-rtt-us=%lld work-ms=%lld runner=%s%s\n",
                   uts.nodename, machine_id[0] != '\0' ? machine_id : "-", mac,
                   setup_started ? "started" : "none", (long long)step_ms, (long long)rtt_us,
                   (long long)work_ms, WARREN_RUN_VERSION, serve_field);
  if (n < 0 || n >= (int)sizeof report || !write_all(STDOUT_FILENO, report, (size_t)n)) {
    return fail(kExitInternal, "cannot write the report");
  }
  return kExitOk;
}
