// `apply-seed [--restored]`: gives this VM the identity its seed disk carries, as root, in
// one process. It runs at every boot before the control launcher starts (the tiny image's
// rc.sysinit, Debian's warren-seed.service: both call /usr/lib/warren/apply-seed, a link to
// warren-run) and, in a VM restored from a saved template, inside `warren-run identity`
// (identity.c calls apply_seed). It was a shell script: every program started costs 30-60 ms
// under TCG, and it started about a dozen.
//  - The per-VM seed disk: ext4 labelled warren-seed, attached read-only by the host (layout
//    in packaging/images/README.md), mounted read-only at /run/warren-seed. When a seed is
//    found it is the whole truth for authorized_keys and env (and setup-script until
//    /var/lib/warren/setup-done exists): a file it lacks is removed. Its files land root-owned
//    with their modes, each by an atomic rename, in /etc/warren (the host key in /etc/ssh,
//    only when both halves are there). The seed is untrusted input: a name that is there but
//    not a regular file (a symlink, a directory), or larger than its bound, refuses the seed.
//  - The hostname: `warren.hostname=` on the kernel command line, else the seed's `hostname`
//    (its first line), else /etc/hostname; empty, starting with '-' or holding anything but
//    [A-Za-z0-9.-]: `warren`; cut to 63 bytes. Written to /etc/hostname and the kernel, and
//    as 127.0.1.1 in /etc/hosts (sudo and friends resolve their own name).
//  - /etc/warren/sshd_env.conf from /etc/warren/env (below).
// --restored: the kernel command line is the template's, so the hostname comes from the seed
// (else stays), never from the command line; and a seed that cannot be found, mounted or
// read is an error (exit 1), since the clone would otherwise keep the template's keys. The
// environment variable WARREN_SEED_DEVICE may then name the seed's block device, which skips
// the search by label. At boot, no seed keeps the previous identity (the hostname and
// sshd_env.conf are still written). Lines "warren: ..." tell what happened.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "runner.h"

enum {
  kMaxSeedFile = 1024 * 1024,   // a whole seed image is 1 MiB (vmhost/seed_image.h)
  kMaxHostKeyFile = 64 * 1024,  // an ed25519 key file is under 1 KiB
  kMaxLocalFile = 1024 * 1024,  // /etc/hosts, /etc/hostname, /etc/warren/env
  kMaxCmdline = 64 * 1024,      // /proc/cmdline (the kernel's own limit is smaller)
  kMaxHostname = 63,            // the longest DNS label
  kExt4Superblock = 1024,       // byte offset of the superblock on the device
  kExt4MagicAt = 56,            // le16 0xEF53, within the superblock
  kExt4LabelAt = 120,           // s_volume_name, 16 bytes, NUL-padded
  kExt4LabelLen = 16,
};

static const char kWarrenDir[] = "/etc/warren";
static const char kStateDir[] = "/var/lib/warren";
static const char kSshDir[] = "/etc/ssh";
static const char kSeedMount[] = "/run/warren-seed";
static const char kSeedLabelName[] = "warren-seed";
static const char kSeedSetupDone[] = "/var/lib/warren/setup-done";

struct seed_ctx {
  int say_fd;  // -1: no progress lines
  char* why;
  size_t why_len;
};

struct bytes {
  char* data;
  size_t len, cap;
};

// The seed's files. authorized_keys, env and setup-script go to /etc/warren, the key pair to
// /etc/ssh; hostname is only read.
enum seed_name { kAuthorizedKeys, kEnv, kSetupScript, kHostKey, kHostKeyPub, kHostname, kNames };
static const struct {
  const char* name;
  size_t max;
  mode_t mode;
} kSeedFiles[kNames] = {
    [kAuthorizedKeys] = {"authorized_keys", kMaxSeedFile, 0644},
    [kEnv] = {"env", kMaxSeedFile, 0644},
    [kSetupScript] = {"setup-script", kMaxSeedFile, 0755},
    [kHostKey] = {"ssh_host_ed25519_key", kMaxHostKeyFile, 0600},
    [kHostKeyPub] = {"ssh_host_ed25519_key.pub", kMaxHostKeyFile, 0644},
    [kHostname] = {"hostname", kMaxSeedFile, 0},
};

struct seed {
  bool wanted[kNames];   // looked at (setup-script only until it has run)
  bool present[kNames];  // there, read into data
  struct bytes data[kNames];
};

static void say(const struct seed_ctx* c, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const struct seed_ctx* c, const char* fmt, ...) {
  if (c->say_fd < 0) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dprintf(c->say_fd, "warren: %s\n", msg);
}

// Sets the one-line reason; returns kExitInternal.
static int refuse(struct seed_ctx* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct seed_ctx* c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, c->why_len, fmt, ap);
  va_end(ap);
  for (char* p = c->why; *p; p++) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  return kExitInternal;
}

// ---- bytes and files ----

static bool append(struct bytes* b, const char* p, size_t n) {
  if (b->cap - b->len < n) {
    size_t cap = b->cap == 0 ? 4096 : b->cap;
    while (cap - b->len < n) cap *= 2;
    char* grown = realloc(b->data, cap);
    if (grown == NULL) return false;
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return true;
}

static bool append_str(struct bytes* b, const char* s) { return append(b, s, strlen(s)); }

static void bytes_free(struct bytes* b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

// Reads fd to its end into out; false with errno set (EFBIG past max bytes).
static bool read_fd(int fd, size_t max, struct bytes* out) {
  out->len = 0;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    if ((size_t)n > max - out->len) {
      errno = EFBIG;
      return false;
    }
    if (!append(out, buf, (size_t)n)) {
      errno = ENOMEM;
      return false;
    }
  }
}

// A file root keeps for itself (followed if a symlink, as a shell's `[ -f ]` and `<` do).
// Returns 1 when read, 0 when absent or not a regular file, -1 on error (errno set).
static int read_local(const char* path, size_t max, struct bytes* out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = -1;
  } else if (S_ISREG(st.st_mode)) {
    rc = read_fd(fd, max, out) ? 1 : -1;
  }
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

static bool write_all_fd(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

// Like `mkdir -p`: false (errno set) unless PATH ends up a directory.
static bool make_dirs(const char* path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return true;
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
    errno = ENAMETOOLONG;
    return false;
  }
  for (char* s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
    if (s != NULL) *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) return false;
    if (s == NULL) break;
    *s = '/';
  }
  if (stat(path, &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return false;
  }
  return true;
}

// DIR/.NAME.apply-seed: where DIR/NAME is written before its rename (the same directory, so
// the same file system).
static void temp_path(const char* dir, const char* name, char* out, size_t len) {
  snprintf(out, len, "%s/.%s.apply-seed", dir, name);
}

// Writes a root-owned temp file with MODE; it is created 0600, so a private key is never
// readable by others, not even for a moment. False with errno set (and no temp file left).
static bool write_temp(const char* tmp, const char* data, size_t len, mode_t mode) {
  if (unlink(tmp) != 0 && errno != ENOENT) return false;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = write_all_fd(fd, data, len) && fchown(fd, 0, 0) == 0 && fchmod(fd, mode) == 0;
  int e = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    unlink(tmp);
    errno = e;
  }
  return ok;
}

// DIR/NAME replaced atomically by DATA.
static int replace_file(struct seed_ctx* c, const char* dir, const char* name, const char* data,
                        size_t len, mode_t mode) {
  char tmp[PATH_MAX], dest[PATH_MAX];
  temp_path(dir, name, tmp, sizeof tmp);
  snprintf(dest, sizeof dest, "%s/%s", dir, name);
  if (!write_temp(tmp, data, len, mode)) {
    return refuse(c, "cannot write %s: %s", tmp, strerror(errno));
  }
  if (rename(tmp, dest) != 0) {
    int e = errno;
    unlink(tmp);
    return refuse(c, "cannot replace %s: %s", dest, strerror(e));
  }
  return kExitOk;
}

// ---- finding, mounting and reading the seed ----

// The block device's sysfs attribute NAME as a number; -1 when sysfs does not say.
static long long sysfs_block_attr(dev_t dev, const char* name) {
  char path[96], buf[32];
  snprintf(path, sizeof path, "/sys/dev/block/%u:%u/%s", major(dev), minor(dev), name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* end;
  long long v = strtoll(buf, &end, 10);
  return end == buf ? -1 : v;
}

// Whether DIR/NAME is a block device holding an ext2/3/4 file system labelled warren-seed.
// Nothing else is opened: opening some character devices (a watchdog) has effects. Nor are
// devices sysfs calls empty (a free loop device) or removable: the seed is a disk the host
// attaches, and opening and reading an empty CD drive costs 150 ms under TCG.
static bool has_seed_label(int dir, const char* name) {
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISBLK(st.st_mode)) return false;
  if (sysfs_block_attr(st.st_rdev, "size") == 0 || sysfs_block_attr(st.st_rdev, "removable") == 1) {
    return false;
  }
  int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  unsigned char sb[kExt4LabelAt + kExt4LabelLen];
  bool read_ok = fstat(fd, &st) == 0 && S_ISBLK(st.st_mode) &&
                 pread(fd, sb, sizeof sb, kExt4Superblock) == (ssize_t)sizeof sb;
  close(fd);
  if (!read_ok || sb[kExt4MagicAt] != 0x53 || sb[kExt4MagicAt + 1] != 0xEF) return false;
  const char* label = (const char*)sb + kExt4LabelAt;
  size_t n = strnlen(label, kExt4LabelLen);
  return n == strlen(kSeedLabelName) && memcmp(label, kSeedLabelName, n) == 0;
}

// The block device in /dev labelled warren-seed (the first by name if several are), as
// `findfs LABEL=warren-seed` found it. False when there is none.
static bool find_seed_device(char* out, size_t len) {
  DIR* d = opendir("/dev");
  if (d == NULL) return false;
  char best[NAME_MAX + 1] = "";
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || (e->d_type != DT_BLK && e->d_type != DT_UNKNOWN)) continue;
    if (best[0] != '\0' && strcmp(e->d_name, best) >= 0) continue;
    if (has_seed_label(dirfd(d), e->d_name)) snprintf(best, sizeof best, "%s", e->d_name);
  }
  closedir(d);
  if (best[0] == '\0') return false;
  snprintf(out, len, "/dev/%s", best);
  return true;
}

// The seed's NAME into s (present or not); an error for anything but a regular file within
// its bound. The mount is read-only, so what is checked stays true while it is read.
static int read_seed_file(struct seed_ctx* c, int mnt, enum seed_name i, struct seed* s) {
  const char* name = kSeedFiles[i].name;
  struct stat st;
  if (fstatat(mnt, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return kExitOk;
    return refuse(c, "cannot read the seed's %s: %s", name, strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return refuse(c, "the seed's %s is not a regular file", name);
  if ((size_t)st.st_size > kSeedFiles[i].max) {
    return refuse(c, "the seed's %s is larger than %zu KiB", name, kSeedFiles[i].max / 1024);
  }
  int fd = openat(mnt, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return refuse(c, "cannot open the seed's %s: %s", name, strerror(errno));
  bool ok =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read_fd(fd, kSeedFiles[i].max, &s->data[i]);
  int e = errno;
  close(fd);
  if (!ok) return refuse(c, "cannot read the seed's %s: %s", name, strerror(e));
  s->present[i] = true;
  return kExitOk;
}

// read_seed's mount, read and unmount.
static int read_mounted_seed(struct seed_ctx* c, const char* dev, struct seed* s) {
  // noload: the image has no journal to replay, and the disk is read-only anyway.
  if (mount(dev, kSeedMount, "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "noload") != 0) {
    return refuse(c, "cannot mount seed disk %s: %s", dev, strerror(errno));
  }
  int rc = kExitOk;
  int mnt = open(kSeedMount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mnt < 0) rc = refuse(c, "cannot open %s: %s", kSeedMount, strerror(errno));
  for (int i = 0; i < kNames && rc == kExitOk; i++) {
    if (s->wanted[i]) rc = read_seed_file(c, mnt, (enum seed_name)i, s);
  }
  if (mnt >= 0) close(mnt);
  if (umount2(kSeedMount, 0) != 0 && umount2(kSeedMount, MNT_DETACH) != 0 && rc == kExitOk) {
    rc = refuse(c, "cannot unmount %s: %s", kSeedMount, strerror(errno));
  }
  return rc;
}

// The seed is mounted in a mount namespace of this process's own, entered for the read and
// left after. systemd (PID 1) follows every mount in its namespace: it makes a mount unit and
// stops it again, tells the journal and D-Bus. Under TCG that was 120-190 ms of the guest's
// CPU just when a VM from the warm pool is handed out (its first command waited for it).
// *back: the namespace to go back to, or -1 when none could be made (the mount is then a plain
// one, as before).
static int enter_own_mounts(struct seed_ctx* c, int* back) {
  *back = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (*back < 0) return kExitOk;
  if (unshare(CLONE_NEWNS) == 0) {
    // Mounts made here are not propagated to the system's, which it was copied from.
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) return kExitOk;
    int e = errno;
    if (setns(*back, CLONE_NEWNS) != 0) {
      close(*back);
      *back = -1;
      return refuse(c, "cannot make the seed's mount private (%s) nor go back", strerror(e));
    }
  }
  close(*back);
  *back = -1;
  return kExitOk;
}

// Back in the system's mounts, where whatever this process starts later (the setup script)
// belongs.
static int leave_own_mounts(struct seed_ctx* c, int back, int rc) {
  if (back < 0) return rc;
  int e = setns(back, CLONE_NEWNS) != 0 ? errno : 0;
  close(back);
  if (e != 0 && rc == kExitOk) {
    rc = refuse(c, "cannot return to the system's mounts: %s", strerror(e));
  }
  return rc;
}

// Mounts the seed on DEV, reads what is wanted of it into s and unmounts it.
static int read_seed(struct seed_ctx* c, const char* dev, struct seed* s) {
  if (!make_dirs(kSeedMount)) return refuse(c, "cannot make %s: %s", kSeedMount, strerror(errno));
  int back;
  int rc = enter_own_mounts(c, &back);
  if (rc != kExitOk) return rc;
  return leave_own_mounts(c, back, read_mounted_seed(c, dev, s));
}

// ---- installing it ----

struct staged {
  char tmp[PATH_MAX];
  char dest[PATH_MAX];
};

// The seed's files in place: every one written to a temp file first, then each renamed over
// its destination; then what the seed lacks removed.
static int install_seed(struct seed_ctx* c, const struct seed* s) {
  enum seed_name taken[kNames];
  int n = 0;
  for (int i = kAuthorizedKeys; i <= kSetupScript; i++) {
    if (s->present[i]) taken[n++] = (enum seed_name)i;
  }
  // A host that wants to pin the VM's host key before first contact may supply it.
  bool host_key = s->present[kHostKey] && s->present[kHostKeyPub];
  if (host_key) {
    if (!make_dirs(kSshDir)) return refuse(c, "cannot make %s: %s", kSshDir, strerror(errno));
    taken[n++] = kHostKey;
    taken[n++] = kHostKeyPub;
  }
  static struct staged staged[kNames];
  int rc = kExitOk, written = 0;
  for (; written < n; written++) {
    enum seed_name i = taken[written];
    const char* dir = i == kHostKey || i == kHostKeyPub ? kSshDir : kWarrenDir;
    temp_path(dir, kSeedFiles[i].name, staged[written].tmp, sizeof staged[written].tmp);
    snprintf(staged[written].dest, sizeof staged[written].dest, "%s/%s", dir, kSeedFiles[i].name);
    if (!write_temp(staged[written].tmp, s->data[i].data, s->data[i].len, kSeedFiles[i].mode)) {
      rc = refuse(c, "cannot write %s: %s", staged[written].tmp, strerror(errno));
      break;
    }
  }
  for (int k = 0; k < written; k++) {
    if (rc == kExitOk && rename(staged[k].tmp, staged[k].dest) != 0) {
      rc = refuse(c, "cannot replace %s: %s", staged[k].dest, strerror(errno));
    }
    if (rc != kExitOk) unlink(staged[k].tmp);
  }
  if (rc != kExitOk) return rc;
  for (int i = kAuthorizedKeys; i <= kSetupScript; i++) {
    if (!s->wanted[i] || s->present[i]) continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", kWarrenDir, kSeedFiles[i].name);
    if (unlink(path) != 0 && errno != ENOENT) {
      return refuse(c, "cannot remove %s: %s", path, strerror(errno));
    }
  }
  return kExitOk;
}

// ---- the hostname and /etc/hosts ----

static bool valid_name_char(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '-';
}

static bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\n'; }

// The last `warren.hostname=` word of the command line's first line; NULL when none.
static const char* cmdline_hostname(const struct bytes* cmdline, size_t* len) {
  static const char kKey[] = "warren.hostname=";
  const char* found = NULL;
  const char* p = cmdline->data;
  const char* end = p + cmdline->len;
  const char* nl = p != NULL ? memchr(p, '\n', cmdline->len) : NULL;
  if (nl != NULL) end = nl;
  while (p < end) {
    while (p < end && is_blank(*p)) p++;
    const char* word = p;
    while (p < end && !is_blank(*p)) p++;
    if ((size_t)(p - word) >= sizeof kKey - 1 && memcmp(word, kKey, sizeof kKey - 1) == 0) {
      found = word + sizeof kKey - 1;
      *len = (size_t)(p - found);
    }
  }
  return found;
}

// The name this VM takes (the rules are at the top), into out.
static void choose_hostname(bool restored, const struct seed* s, char out[kMaxHostname + 1]) {
  struct bytes local = {0};
  const char* name = NULL;
  size_t len = 0;
  if (!restored) {
    if (read_local("/proc/cmdline", kMaxCmdline, &local) > 0) name = cmdline_hostname(&local, &len);
  }
  if (len == 0 && s->present[kHostname]) {
    name = s->data[kHostname].data;
    const char* nl = name != NULL ? memchr(name, '\n', s->data[kHostname].len) : NULL;
    len = nl != NULL ? (size_t)(nl - name) : s->data[kHostname].len;
  }
  if (len == 0) {
    // As `$(cat /etc/hostname)`: the whole file less its trailing newlines.
    if (read_local("/etc/hostname", kMaxLocalFile, &local) > 0) {
      name = local.data;
      len = local.len;
      while (len > 0 && name[len - 1] == '\n') len--;
    } else {
      len = 0;
    }
  }
  bool valid = len > 0 && name[0] != '-';
  for (size_t i = 0; valid && i < len; i++) valid = valid_name_char(name[i]);
  if (!valid) {
    name = "warren";
    len = strlen(name);
  }
  if (len > kMaxHostname) len = kMaxHostname;
  memcpy(out, name, len);
  out[len] = '\0';
  bytes_free(&local);
}

// PATH rewritten in place with DATA (LEN > 0): written over from the start, then cut to
// LEN. The file keeps its inode (a bind mount over it is written, not replaced). Never cut
// to nothing first (O_TRUNC) nor replaced by a rename: ext4 flushes a file at its close after
// either (auto_da_alloc), which cost 17-19 ms of a TCG guest each on the path of a hand-out,
// and the seed is applied again at every boot anyway.
static int write_in_place(struct seed_ctx* c, const char* path, const char* data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return refuse(c, "cannot write %s: %s", path, strerror(errno));
  bool ok = write_all_fd(fd, data, len) && ftruncate(fd, (off_t)len) == 0;
  int e = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  return ok ? kExitOk : refuse(c, "cannot write %s: %s", path, strerror(e));
}

static int set_hostname(struct seed_ctx* c, const char* name) {
  size_t len = strlen(name);
  // As `echo NAME >/etc/hostname` was (in place), without the flush (write_in_place).
  char line[kMaxHostname + 2];
  snprintf(line, sizeof line, "%s\n", name);
  int rc = write_in_place(c, "/etc/hostname", line, len + 1);
  if (rc != kExitOk) return rc;
  if (sethostname(name, len) != 0) return refuse(c, "cannot set the hostname: %s", strerror(errno));
  return kExitOk;
}

// /etc/hosts with its 127.0.1.1 lines replaced by one naming this VM (every other line kept):
// replaced atomically (a boot's), or rewritten in place (a hand-out's: write_in_place; no
// process of the VM's user runs yet, and a reader at that instant would at worst see the end
// of the old name's line for a moment).
static int rewrite_hosts(struct seed_ctx* c, const char* name, bool in_place) {
  struct bytes old = {0}, out = {0};
  int got = read_local("/etc/hosts", kMaxLocalFile, &old);
  if (got < 0) {
    bytes_free(&old);
    return refuse(c, "cannot read /etc/hosts: %s", strerror(errno));
  }
  bool ok = true;
  if (got > 0) {
    for (size_t at = 0; at < old.len && ok;) {
      const char* line = old.data + at;
      const char* nl = memchr(line, '\n', old.len - at);
      size_t len = nl != NULL ? (size_t)(nl - line) : old.len - at;
      at += len + 1;
      // 127.0.1.1 then a blank ([[:space:]]): a line the rewrite owns.
      if (len > 9 && memcmp(line, "127.0.1.1", 9) == 0 && memchr(" \t\v\f\r", line[9], 5) != NULL) {
        continue;
      }
      ok = append(&out, line, len) && append(&out, "\n", 1);
    }
  } else {
    ok = append_str(&out, "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n");
  }
  ok = ok && append_str(&out, "127.0.1.1\t") && append_str(&out, name) && append(&out, "\n", 1);
  int rc = !ok       ? refuse(c, "out of memory for /etc/hosts")
           : in_place ? write_in_place(c, "/etc/hosts", out.data, out.len)
                      : replace_file(c, "/etc", "hosts", out.data, out.len, 0644);
  bytes_free(&old);
  bytes_free(&out);
  return rc;
}

// ---- sshd_env.conf ----

static bool valid_env_key(const char* key, size_t len) {
  if (len == 0 ||
      !((key[0] >= 'A' && key[0] <= 'Z') || (key[0] >= 'a' && key[0] <= 'z') || key[0] == '_')) {
    return false;
  }
  for (size_t i = 1; i < len; i++) {
    char ch = key[i];
    bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_';
    if (!ok) return false;
  }
  return true;
}

// The VM's environment (KEY=VALUE lines) for every session of the control sshd: one SetEnv
// line (sshd honours only the first SetEnv), each "KEY=VALUE" quoted for sshd's argument
// splitter (a backslash before every backslash and double quote). Blank and # lines are
// skipped, as are lines without '=' and (with a message) lines with a bad name.
static int write_sshd_env(struct seed_ctx* c) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/env", kWarrenDir);
  struct bytes env = {0}, out = {0}, setenv = {0};
  int got = read_local(path, kMaxLocalFile, &env);
  if (got < 0) {
    bytes_free(&env);
    return refuse(c, "cannot read %s: %s", path, strerror(errno));
  }
  bool ok = true;
  for (size_t at = 0; got > 0 && at < env.len && ok;) {
    const char* line = env.data + at;
    const char* nl = memchr(line, '\n', env.len - at);
    size_t len = nl != NULL ? (size_t)(nl - line) : env.len - at;
    at += len + 1;
    if (len == 0 || line[0] == '#') continue;
    const char* eq = memchr(line, '=', len);
    if (eq == NULL) continue;
    if (!valid_env_key(line, (size_t)(eq - line))) {
      say(c, "env: ignoring a line with a bad name");
      continue;
    }
    ok = append(&setenv, " \"", 2);
    for (size_t i = 0; i < len && ok; i++) {
      if (line[i] == '\\' || line[i] == '"') ok = append(&setenv, "\\", 1);
      ok = ok && append(&setenv, line + i, 1);
    }
    ok = ok && append(&setenv, "\"", 1);
  }
  ok = ok && append_str(&out, "# Generated at boot from /etc/warren/env by apply-seed.\n");
  if (setenv.len > 0) {
    ok = ok && append_str(&out, "SetEnv") && append(&out, setenv.data, setenv.len) &&
         append(&out, "\n", 1);
  }
  int rc = ok ? replace_file(c, kWarrenDir, "sshd_env.conf", out.data, out.len, 0644)
              : refuse(c, "out of memory for sshd_env.conf");
  bytes_free(&env);
  bytes_free(&out);
  bytes_free(&setenv);
  return rc;
}

// ---- the whole ----

static void seed_free(struct seed* s) {
  for (int i = 0; i < kNames; i++) bytes_free(&s->data[i]);
}

// The seed on DEV read and installed. At boot one that cannot be mounted or read is only
// reported (and s left empty); restored, it is an error.
static int take_seed(struct seed_ctx* c, bool restored, const char* dev, struct seed* s) {
  for (int i = 0; i < kNames; i++) s->wanted[i] = true;
  // The setup script runs once per VM; after that the seed's copy is ignored.
  struct stat st;
  s->wanted[kSetupScript] = stat(kSeedSetupDone, &st) != 0;
  int rc = read_seed(c, dev, s);
  if (rc != kExitOk) {
    if (restored) return rc;
    say(c, "%s: keeping the previous identity", c->why);
    c->why[0] = '\0';
    seed_free(s);
    memset(s->present, 0, sizeof s->present);
    return kExitOk;
  }
  if ((rc = install_seed(c, s)) != kExitOk) return rc;
  say(c, "applied seed from %s", dev);
  return kExitOk;
}

int apply_seed(bool restored, const char* device, int say_fd, char* why, size_t why_len) {
  struct seed_ctx c = {.say_fd = say_fd, .why = why, .why_len = why_len};
  why[0] = '\0';
  umask(022);
  if (!make_dirs(kWarrenDir) || !make_dirs(kStateDir)) {
    return refuse(&c, "cannot make %s and %s: %s", kWarrenDir, kStateDir, strerror(errno));
  }
  char dev[PATH_MAX] = "";
  if (device != NULL && device[0] != '\0') {
    struct stat st;
    if (stat(device, &st) != 0 || !S_ISBLK(st.st_mode)) {
      return refuse(&c, "seed device %s is not a block device", device);
    }
    snprintf(dev, sizeof dev, "%s", device);
  } else if (!find_seed_device(dev, sizeof dev)) {
    if (restored) return refuse(&c, "no seed disk (label %s)", kSeedLabelName);
    say(&c, "no seed disk (label %s): keeping the previous identity", kSeedLabelName);
  }

  struct seed s;
  memset(&s, 0, sizeof s);
  int rc = dev[0] != '\0' ? take_seed(&c, restored, dev, &s) : kExitOk;
  if (rc == kExitOk) {
    char name[kMaxHostname + 1];
    choose_hostname(restored, &s, name);
    rc = set_hostname(&c, name);
    if (rc == kExitOk) rc = rewrite_hosts(&c, name, /*in_place=*/false);
    if (rc == kExitOk) rc = write_sshd_env(&c);
  }
  seed_free(&s);
  return rc;
}

int apply_handout(const char* hostname, const char* host_key, size_t host_key_len,
                  const char* host_key_pub, size_t host_key_pub_len, char* why, size_t why_len) {
  struct seed_ctx c = {.say_fd = -1, .why = why, .why_len = why_len};
  why[0] = '\0';
  umask(022);
  struct seed s;
  memset(&s, 0, sizeof s);
  // Only the key pair is taken (when given: a pooled VM keeps its own): the rest of
  // /etc/warren is the pooled VM's, and stays.
  const struct {
    enum seed_name name;
    const char* data;
    size_t len;
  } given[] = {{kHostKey, host_key, host_key_len}, {kHostKeyPub, host_key_pub, host_key_pub_len}};
  const bool new_key = host_key_len != 0 || host_key_pub_len != 0;
  int rc = kExitOk;
  for (size_t i = 0; i < sizeof given / sizeof given[0] && rc == kExitOk && new_key; i++) {
    if (given[i].len == 0 || given[i].len > kSeedFiles[given[i].name].max ||
        !append(&s.data[given[i].name], given[i].data, given[i].len)) {
      rc = refuse(&c, "bad %s", kSeedFiles[given[i].name].name);
    }
    s.present[given[i].name] = true;
  }
  if (rc == kExitOk && new_key) rc = install_seed(&c, &s);
  if (rc == kExitOk) {
    size_t len = strlen(hostname);
    bool ok = len > 0 && len <= kMaxHostname && hostname[0] != '-';
    for (size_t i = 0; i < len && ok; i++) ok = valid_name_char(hostname[i]);
    rc = ok ? set_hostname(&c, hostname) : refuse(&c, "bad hostname");
  }
  if (rc == kExitOk) rc = rewrite_hosts(&c, hostname, /*in_place=*/true);
  seed_free(&s);
  return rc;
}

int cmd_apply_seed(int argc, char** argv) {
  bool restored = argc == 1 && strcmp(argv[0], "--restored") == 0;
  if (argc > 1 || (argc == 1 && !restored)) {
    fprintf(stderr, "usage: apply-seed [--restored]\n");
    return kExitInvalid;
  }
  char why[512];
  int rc = apply_seed(restored, restored ? getenv("WARREN_SEED_DEVICE") : NULL, STDOUT_FILENO, why,
                      sizeof why);
  if (rc != kExitOk) dprintf(STDERR_FILENO, "warren: %s\n", why);
  return rc;
}
