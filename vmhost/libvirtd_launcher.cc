#include "vmhost/libvirtd_launcher.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "lobby/base/log.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/subprocess.h"

namespace warren {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Runs in the forked child before exec (async-signal-safe syscalls only). rslave rather
// than private: mounts the host makes later still reach the daemon, while our mask never
// leaks out to the host.
int MaskDevKvm(const char* mask_file) {
  if (unshare(CLONE_NEWNS) != 0) return 1;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return 2;
  if (mount(mask_file, "/dev/kvm", nullptr, MS_BIND, nullptr) != 0) return 3;
  return 0;
}

// A private character-device node with /dev/null's numbers and mode 0: only root can
// open it, so libvirt finds KVM unusable for libvirt-qemu and probes TCG only; and unlike
// /dev/null itself, nothing ever writes to this inode, so its ctime, the key of libvirt's
// capability cache, stays put. A regular file would do the former but not survive libvirt's
// per-domain /dev namespace, which can only carry device nodes mounted under /dev.
Status MakeMaskNode(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return Status::Ok();
    unlink(path.c_str());
  }
  if (mknod(path.c_str(), S_IFCHR | 0, makedev(1, 3)) != 0) {
    return Unavailable("mknod " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

bool UnixSocketAnswers(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    close(fd);
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

std::string MountNamespace(const std::string& pid) {
  std::error_code ec;
  fs::path link = fs::read_symlink("/proc/" + pid + "/ns/mnt", ec);
  return ec ? "" : link.string();
}

// Whether a running libvirtd shares our view of /dev/kvm (then every start may stall).
bool DaemonSeesDevKvm(const LibvirtdOptions& o) {
  std::ifstream in(o.libvirtd_pid_file);
  std::string pid;
  if (!(in >> pid)) return false;
  std::string theirs = MountNamespace(pid);
  return !theirs.empty() && theirs == MountNamespace("self");
}

// Where systemd is PID 1 and systemd-run is there to ask it for units.
bool UnderSystemd(const LibvirtdOptions& o) {
  std::error_code ec;
  return fs::is_directory(o.systemd_booted_dir, ec) && access(o.systemd_run.c_str(), X_OK) == 0;
}

// The daemon's LIBVIRT_LOG_OUTPUTS: an operator's own (set in our environment), else a file
// in log_dir (their default, syslog, may not exist here).
std::string LogOutputs(const std::string& program, const LibvirtdOptions& o) {
  if (const char* own = std::getenv("LIBVIRT_LOG_OUTPUTS"); own != nullptr) {
    return std::string("LIBVIRT_LOG_OUTPUTS=") + own;
  }
  return "LIBVIRT_LOG_OUTPUTS=3:file:" + o.log_dir + "/" + fs::path(program).filename().string() +
         ".log";
}

Status StartDaemon(const std::string& program, const LibvirtdOptions& o, bool mask) {
  const bool as_unit = UnderSystemd(o);
  ProcessOptions po;
  po.timeout = o.timeout;
  po.new_session = true;
  if (mask) {
    WARREN_RETURN_IF_ERROR(MakeMaskNode(o.kvm_mask_file));
    if (!as_unit) {
      const char* mask_file = o.kvm_mask_file.c_str();
      po.child_setup = [mask_file] { return MaskDevKvm(mask_file); };
    }
  }
  std::string name = fs::path(program).filename();
  std::error_code ec;
  fs::create_directories(o.log_dir, ec);
  if (!as_unit) po.env.push_back(LogOutputs(program, o));
  // --daemon returns once the daemon is initialised (or has failed), with its exit status;
  // systemd-run waits for the unit's start job, which (forking) ends then too.
  Result<ProcessResult> r = RunProcess(DaemonCommand(program, o, mask, as_unit), po);
  if (!r.ok()) return Unavailable("starting " + name + ": " + r.status().message());
  if (r->timed_out) return Unavailable(name + " did not daemonise in time");
  if (r->exit_code != 0) {
    std::string why = r->output.empty() ? "exit " + std::to_string(r->exit_code) : r->output;
    if (as_unit) why = "systemd-run --unit=warren-" + name + ": " + why;
    if (mask && !as_unit && r->exit_code == 127 && r->output.empty()) {
      why = "could not mask /dev/kvm in a private mount namespace (needs root)";
    }
    return Unavailable("starting " + name + ": " + why);
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> DaemonCommand(const std::string& program, const LibvirtdOptions& o,
                                       bool mask, bool as_unit) {
  if (!as_unit) return {program, "--daemon"};
  const std::string name = fs::path(program).filename();
  const bool libvirtd = program == o.libvirtd;
  std::vector<std::string> argv = {
      o.systemd_run,
      "--quiet",
      "--collect",
      "--unit=warren-" + name,
      "--description=" + name + " started by warren",
      "--property=Type=forking",
      "--property=PIDFile=" + (libvirtd ? o.libvirtd_pid_file : o.virtlogd_pid_file),
  };
  // Like Debian's libvirtd.service: stopping the daemon leaves its QEMUs running.
  if (libvirtd) argv.push_back("--property=KillMode=process");
  // A unit does not inherit our environment: the log setting is passed on explicitly.
  argv.push_back("--setenv=" + LogOutputs(program, o));
  if (mask) argv.push_back("--property=BindPaths=" + o.kvm_mask_file + ":/dev/kvm");
  argv.insert(argv.end(), {"--", program, "--daemon"});
  return argv;
}

Result<LibvirtdStatus> EnsureLibvirtd(const LibvirtdOptions& o) {
  LibvirtdStatus status;
  auto start = Clock::now();
  std::error_code ec;
  bool have_kvm = fs::exists("/dev/kvm", ec);
  if (OpenLibvirt(o.uri).ok()) {
    if (o.mask_dev_kvm && have_kvm && DaemonSeesDevKvm(o)) {
      status.warning =
          "the running libvirtd sees /dev/kvm, which cannot run our guests here; libvirt may "
          "probe it on domain starts (recorded stalling ~48 s); warren masks it in daemons it "
          "starts itself";
    }
    return status;
  }
  if (o.uri != "qemu:///system") {
    return Unavailable("no libvirt daemon answers at " + o.uri +
                       " (warren starts only the local "
                       "qemu:///system daemon)");
  }
  bool mask = o.mask_dev_kvm && have_kvm;
  if (!UnixSocketAnswers(o.virtlogd_socket)) {
    WARREN_RETURN_IF_ERROR(StartDaemon(o.virtlogd, o, false));
  }
  WARREN_RETURN_IF_ERROR(StartDaemon(o.libvirtd, o, mask));
  auto deadline = start + o.timeout;
  Status last = Unavailable("libvirtd did not answer");
  while (Clock::now() < deadline) {
    Result<ConnectHandle> conn = OpenLibvirt(o.uri);
    if (conn.ok()) {
      status.started = true;
      status.masked = mask;
      status.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return status;
    }
    last = conn.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Unavailable("started libvirtd but it did not answer within " +
                     std::to_string(o.timeout.count()) + " ms: " + last.message());
}

}  // namespace warren
