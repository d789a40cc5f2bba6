// The sandbox in which the guest runner's root verbs run on this machine
// (guest_identity_runner_test: `identity`; guest_seed_runner_test: `apply-seed`). Nothing
// on this machine changes: each run is a child in new mount, UTS and network namespaces where
//   - /etc, /var/lib and /usr/lib are overlays whose writes land in the test's temp dir
//     (DIR/etc.up, DIR/var-lib.up, DIR/usr-lib.up), and chosen temp files are bind-mounted
//     over real ones (so such a file must be written in place: a rename over it fails);
//   - /run is an empty tmpfs, /proc/cmdline is a temp file when one is given;
//   - /dev is a tmpfs holding null, zero, random, urandom and the block nodes asked for
//     (loop devices attached to the test's images, named /dev/vdX as in a guest);
//   - /sys is the new network namespace's (only lo: no NIC);
//   - optionally a seccomp filter turns clock_settime, settimeofday, clock_adjtime and
//     adjtimex into no-ops that succeed (a time namespace never virtualizes CLOCK_REALTIME).
//     The filter is proven before the program starts with a call the real one would refuse.
// Seed disks are ext4 images on read-only loop devices, made by the product's own builder
// (vmhost/seed_image.h) or by its mkfs.ext4 call on a directory (MakeSeedImage), for trees
// the builder would never make.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/loop.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "vmhost/seed_image.h"
#include "vmhost/subprocess.h"

namespace warren::runner_sandbox {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  ::chmod(path.c_str(), mode);
}

// The file type and mode bits of `path` itself (lstat); 0 when it is not there.
inline mode_t Mode(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

// A file the seed put in place: `text`, a regular file with `mode`, owned by root.
inline void ExpectRootFile(const std::string& path, const std::string& text, mode_t mode) {
  EXPECT_EQ(ReadFile(path), text) << path;
  EXPECT_EQ(Mode(path), S_IFREG | mode) << path;
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_uid, 0u) << path;
  EXPECT_EQ(st.st_gid, 0u) << path;
}

// What the child makes before it execs; everything is prepared before the fork.
struct Sandbox {
  std::vector<std::pair<std::string, std::string>> binds;     // temp file -> real path
  std::vector<std::pair<std::string, std::string>> overlays;  // mount point -> options
  std::vector<std::pair<std::string, dev_t>> block_nodes;     // "/dev/vdb" -> a loop device
  std::string cmdline;     // a file bind-mounted over /proc/cmdline; empty: the real one
  bool as_nobody = false;  // no namespaces, just another uid (a non-root run)
  bool seccomp = false;    // the clock filter
};

[[noreturn]] inline void ChildFail(int code, const char* what) {
  dprintf(2, "sandbox setup: %s: %s\n", what, std::strerror(errno));
  ::_exit(code);
}

inline void InstallClockFilter() {
  // Any x86-64 syscall that sets the clock returns 0 without doing anything.
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_settime, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_settimeofday, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_adjtime, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_adjtimex, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(91, "no_new_privs");
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ChildFail(91, "seccomp");
  // Proof, before anything may set the clock: the real call refuses a bad nanosecond count.
  timespec bad{0, 2000000000L};
  if (::syscall(SYS_clock_settime, CLOCK_REALTIME, &bad) != 0) ChildFail(92, "clock filter");
}

// Makes the namespaces and mounts described at the top; _exit(90..99) when one fails.
inline void EnterSandbox(const Sandbox& s) {
  if (s.as_nobody) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ChildFail(90, "dropping to nobody");
    }
    return;
  }
  if (::unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWNET) != 0) ChildFail(93, "unshare");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    ChildFail(93, "making / private");
  }
  for (const auto& [target, options] : s.overlays) {
    if (::mount("overlay", target.c_str(), "overlay", 0, options.c_str()) != 0) {
      ChildFail(94, "overlay");
    }
  }
  for (const auto& [file, target] : s.binds) {
    if (::mount(file.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      ChildFail(95, "bind mount");
    }
  }
  if (!s.cmdline.empty() &&
      ::mount(s.cmdline.c_str(), "/proc/cmdline", nullptr, MS_BIND, nullptr) != 0) {
    ChildFail(95, "bind mount over /proc/cmdline");
  }
  if (::mount("tmpfs", "/run", "tmpfs", 0, "mode=0755") != 0) ChildFail(96, "tmpfs on /run");
  if (::mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) ChildFail(96, "sysfs");
  if (::mount("tmpfs", "/dev", "tmpfs", 0, "mode=0755") != 0) ChildFail(97, "tmpfs on /dev");
  struct {
    const char* path;
    mode_t mode;
    dev_t dev;
  } nodes[] = {{"/dev/null", S_IFCHR | 0666, makedev(1, 3)},
               {"/dev/zero", S_IFCHR | 0666, makedev(1, 5)},
               {"/dev/random", S_IFCHR | 0666, makedev(1, 8)},
               {"/dev/urandom", S_IFCHR | 0666, makedev(1, 9)}};
  for (const auto& n : nodes) {
    if (::mknod(n.path, n.mode, n.dev) != 0) ChildFail(97, "mknod");
  }
  for (const auto& [path, dev] : s.block_nodes) {
    if (::mknod(path.c_str(), S_IFBLK | 0600, dev) != 0) ChildFail(97, "mknod of a block node");
  }
  if (s.seccomp) InstallClockFilter();
}

// One run of a program in the sandbox, with pipes on its three streams.
class SandboxRun {
 public:
  SandboxRun(const Sandbox& s, const std::string& binary, const std::vector<std::string>& args,
             const std::vector<std::string>& env = {}) {
    std::vector<const char*> argv, envp;
    for (const auto& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    envp.push_back("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
    for (const auto& e : env) envp.push_back(e.c_str());
    envp.push_back(nullptr);
    int in[2], out[2], err[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      EnterSandbox(s);
      ::chdir("/");
      ::execve(binary.c_str(), const_cast<char**>(argv.data()), const_cast<char**>(envp.data()));
      ChildFail(98, "exec");
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
  }
  ~SandboxRun() {
    CloseStdin();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
    ::close(err_);
  }
  SandboxRun(const SandboxRun&) = delete;
  SandboxRun& operator=(const SandboxRun&) = delete;

  void Write(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(in_, data.data() + off, data.size() - off);
      if (n <= 0) return;  // it exited: EPIPE (the tests ignore SIGPIPE)
      off += static_cast<size_t>(n);
    }
  }
  void CloseStdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  // Reads stdout until it holds `want` (true) or ends or 10 s pass (false).
  bool ReadUntil(std::string_view want) {
    auto give_up = Clock::now() + std::chrono::seconds(10);
    while (out_text_.find(want) == std::string::npos) {
      pollfd p{out_, POLLIN, 0};
      if (Clock::now() > give_up || ::poll(&p, 1, 100) < 0) return false;
      if (p.revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return false;
      out_text_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // Waits for the end (10 s at most): the exit status, with stdout and stderr complete.
  int Finish() {
    CloseStdin();
    auto drain = [](int fd, std::string* into) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) into->append(buf, static_cast<size_t>(n));
    };
    for (int i = 0; i < 1000; ++i) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        drain(out_, &out_text_);
        drain(err_, &err_text_);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  const std::string& out() const { return out_text_; }
  const std::string& err() const { return err_text_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_text_, err_text_;
};

// An image attached to a free loop device, read-only, detached again when this goes (the
// kernel's autoclear also detaches it should the test die).
class LoopDevice {
 public:
  explicit LoopDevice(const std::string& image) {
    int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int img = ::open(image.c_str(), O_RDONLY | O_CLOEXEC);
    if (ctl < 0 || img < 0) {
      error_ = std::string(ctl < 0 ? "/dev/loop-control: " : image + ": ") + std::strerror(errno);
    }
    // Another test may take the same free device between the two calls: try the next.
    for (int attempt = 0; attempt < 32 && error_.empty() && fd_ < 0; ++attempt) {
      int n = ::ioctl(ctl, LOOP_CTL_GET_FREE);
      if (n < 0) {
        error_ = std::string("LOOP_CTL_GET_FREE: ") + std::strerror(errno);
        break;
      }
      int fd = ::open(("/dev/loop" + std::to_string(n)).c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) continue;
      loop_config cfg{};
      cfg.fd = static_cast<uint32_t>(img);
      cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
      struct stat st {};
      if (::ioctl(fd, LOOP_CONFIGURE, &cfg) == 0 && ::fstat(fd, &st) == 0) {
        fd_ = fd;
        dev_ = st.st_rdev;
        break;
      }
      if (errno != EBUSY) error_ = std::string("LOOP_CONFIGURE: ") + std::strerror(errno);
      ::close(fd);
    }
    if (error_.empty() && fd_ < 0) error_ = "no free loop device";
    if (ctl >= 0) ::close(ctl);
    if (img >= 0) ::close(img);
  }
  ~LoopDevice() {
    if (fd_ < 0) return;
    ::ioctl(fd_, LOOP_CLR_FD, 0);
    ::close(fd_);
  }
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  dev_t dev() const { return dev_; }

 private:
  int fd_ = -1;
  dev_t dev_ = 0;
  std::string error_;
};

// The product's seed image (vmhost/seed_image.h) as the file `path`; "" or why it failed.
inline std::string BuildSeedFile(const SeedContents& seed, const std::string& scratch,
                                 const std::string& path) {
  Result<std::string> bytes = BuildSeedImage(seed, scratch);
  if (!bytes.ok()) return bytes.status().ToString();
  WriteFile(path, *bytes);
  return "";
}

// An ext4 image of `files` (name -> contents; "->target" makes a symlink, "/" a directory)
// made by the same mkfs.ext4 call as BuildSeedImage, labelled `label`, of `kib` KiB.
inline std::string MakeSeedImage(const std::map<std::string, std::string>& files,
                                 const std::string& tree, const std::string& path,
                                 const std::string& label = kSeedLabel, size_t kib = 1024) {
  fs::remove_all(tree);
  fs::create_directories(tree);
  for (const auto& [name, text] : files) {
    std::string file = tree + "/" + name;
    if (text.rfind("->", 0) == 0) {
      fs::create_symlink(text.substr(2), file);
    } else if (text == "/") {
      fs::create_directory(file);
    } else {
      mode_t mode = name == "setup-script" ? 0755 : name == "ssh_host_ed25519_key" ? 0600 : 0644;
      WriteFile(file, text, mode);
    }
  }
  fs::remove(path);
  Result<ProcessResult> r = RunProcess({"mkfs.ext4",
                                        "-q",
                                        "-F",
                                        "-t",
                                        "ext4",
                                        "-L",
                                        label,
                                        "-b",
                                        "1024",
                                        "-N",
                                        "64",
                                        "-m",
                                        "0",
                                        "-O",
                                        "^has_journal",
                                        "-E",
                                        "root_owner=0:0",
                                        "-d",
                                        tree,
                                        path,
                                        std::to_string(kib)});
  if (!r.ok()) return r.status().ToString();
  if (r->exit_code != 0) return "mkfs.ext4: " + r->output;
  return "";
}

// A fixture's temp dir with the overlays over /etc, /var/lib and /usr/lib in `sandbox`.
inline void AddOverlays(const std::string& dir, Sandbox* sandbox) {
  for (const char* target : {"/etc", "/var/lib", "/usr/lib"}) {
    std::string name = std::string(target).substr(1);
    std::replace(name.begin(), name.end(), '/', '-');
    std::string up = dir + "/" + name + ".up", work = dir + "/" + name + ".work";
    fs::create_directories(up);
    fs::create_directories(work);
    sandbox->overlays.emplace_back(
        target, "lowerdir=" + std::string(target) + ",upperdir=" + up + ",workdir=" + work);
  }
}

}  // namespace warren::runner_sandbox
