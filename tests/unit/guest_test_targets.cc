#include "tests/unit/guest_test_targets.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "lobby/base/unix_socket.h"
#include "vmhost/guest/control_key.h"
#include "vmhost/image_layout.h"

namespace warren::guest::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(f, line);) {
    line.erase(std::remove(line.begin(), line.end(), '\r'), line.end());
    all.push_back(line);
  }
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "  | " + all[i] + "\n";
  }
  return out;
}

Status WriteText(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Internal("cannot write " + path);
  ::chmod(path.c_str(), mode);
  return Status::Ok();
}

// Removes the temp dirs of earlier test processes that died without cleaning up.
void SweepDeadRuns() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/tmp", ec)) {
    std::string base = entry.path().filename();
    const std::string prefix = "warren-guest-test-";
    if (base.rfind(prefix, 0) != 0) continue;
    std::string pid = base.substr(prefix.size(), base.find('-', prefix.size()) - prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!fs::exists("/proc/" + pid)) fs::remove_all(entry.path(), ec);
  }
}

Result<std::string> MakeTempDir() {
  SweepDeadRuns();
  std::string tmpl = "/tmp/warren-guest-test-" + std::to_string(getpid()) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return Internal("mkdtemp failed");
  return std::string(buf.data());
}

// Runs a helper to completion; its output (stdout and stderr) on success.
Result<std::string> Run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  char tmpl[] = "/tmp/warren-guest-run-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) return Internal("mkstemp failed");
  ::close(fd);
  std::string log = tmpl;
  ChildProcess child;
  Status st = child.Start(argv, log);
  int exit_code = -1;
  if (st.ok()) {
    auto give_up = Clock::now() + timeout;
    while (child.Running() && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    exit_code = child.Running() ? -1 : child.exit_code();
    child.Stop();
  }
  std::ifstream f(log);
  std::string output((std::istreambuf_iterator<char>(f)), {});
  ::unlink(log.c_str());
  if (!st.ok()) return st;
  if (exit_code != 0) {
    return Internal(argv[0] + " failed (exit " + std::to_string(exit_code) + "): " + output);
  }
  return output;
}

class LocalSshdTarget final : public GuestTarget {
 public:
  ~LocalSshdTarget() override { socat_.Stop(); }
  std::string LogTail() const override { return Tail(dir_ + "/sshd.log", 20); }
  ChildProcess socat_;
};

class QemuTarget final : public GuestTarget {
 public:
  ~QemuTarget() override { qemu_.Stop(); }
  std::string LogTail() const override { return Tail(dir_ + "/console.log", 30); }
  ChildProcess qemu_;
};

}  // namespace

Status ChildProcess::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0 || null < 0) return Internal("cannot open " + log_path);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    // Dies with the test process, whatever way that goes.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::setpgid(0, 0);
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(log);
  ::close(null);
  ::setpgid(pid, pid);
  pid_ = pid;
  return Status::Ok();
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int st;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    pid_ = -1;
    return false;
  }
  return true;
}

void ChildProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  ::kill(pid_, SIGTERM);
  auto give_up = Clock::now() + std::chrono::seconds(3);
  int st;
  while (Clock::now() < give_up) {
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      ::kill(-pid_, SIGKILL);  // anything left in its group
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

GuestTarget::~GuestTarget() {
  if (dir_.empty() || EnvOr("WARREN_GUEST_TEST_KEEP", "") == "1") return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

SshGuestControlOptions GuestTarget::ControlOptions() const {
  SshGuestControlOptions o;
  std::string socket = socket_;
  o.dial = [socket](std::string_view vm) -> Result<UniqueFd> {
    if (vm != kTestVm) return NotFound("no VM " + std::string(vm));
    return DialUnixSocket(socket);
  };
  o.key_path = key_;
  o.user = user_;
  o.runner_path = RunnerBinaryPath();
  // The allowances as set, whatever the test machine's load: tests that time them stay
  // exact; one that wants them stretched sets its own slowdown.
  o.slowdown = [] { return 1.0; };
  // The endpoint set up as soon as connected: a test of the delay sets its own.
  o.endpoint_setup_delay = std::chrono::milliseconds(0);
  return o;
}

std::string RunnerBinaryPath() { return WARREN_RUN_BINARY; }

Result<std::unique_ptr<GuestTarget>> StartLocalSshd() {
  for (const char* tool : {"/usr/sbin/sshd", "/usr/bin/socat"}) {
    if (::access(tool, X_OK) != 0) return NotFound(std::string(tool) + " is not installed");
  }
  // sshd refuses to start without its privilege separation directory, which only its own
  // service unit creates: on a machine where sshd never ran (a fresh install, a container)
  // there is none.
  if (::mkdir("/run/sshd", 0755) != 0 && errno != EEXIST) {
    return Internal(std::string("cannot create /run/sshd: ") + std::strerror(errno));
  }
  auto t = std::make_unique<LocalSshdTarget>();
  WARREN_ASSIGN_OR_RETURN(std::string dir, MakeTempDir());
  t->dir_ = dir;
  t->socket_ = dir + "/control.sock";
  t->key_ = dir + "/control_ed25519";
  t->user_ = "root";
  ::mkdir((dir + "/home").c_str(), 0700);
  WARREN_ASSIGN_OR_RETURN(std::string pub, EnsureControlKey(t->key_));
  WARREN_RETURN_IF_ERROR(WriteText(dir + "/authorized_keys", pub + "\n", 0600));
  WARREN_RETURN_IF_ERROR(
      Run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir + "/host_ed25519"},
          std::chrono::seconds(20))
          .status());
  // Like the guest images' control sshd (packaging/images/guest/common/sshd_config), but
  // for root with HOME in the temp dir, so jobs and the runner stay inside it.
  std::string config = "HostKey " + dir + "/host_ed25519\n" + "AuthorizedKeysFile " + dir +
                       "/authorized_keys\n" +
                       "AuthenticationMethods publickey\n"
                       "PasswordAuthentication no\n"
                       "KbdInteractiveAuthentication no\n"
                       "PermitRootLogin prohibit-password\n"
                       "AllowUsers root\n"
                       "UsePAM no\n"
                       "StrictModes no\n"
                       "PidFile none\n"
                       "UseDNS no\n"
                       "PrintMotd no\n"
                       "MaxSessions 256\n"
                       "GatewayPorts clientspecified\n"
                       "LogLevel ERROR\n"
                       "SetEnv HOME=" +
                       dir + "/home\n";
  WARREN_RETURN_IF_ERROR(WriteText(dir + "/sshd_config", config, 0600));
  WARREN_RETURN_IF_ERROR(t->socat_.Start({"socat", "UNIX-LISTEN:" + t->socket_ + ",fork",
                                          "EXEC:/usr/sbin/sshd -i -e -f " + dir + "/sshd_config"},
                                         dir + "/sshd.log"));
  for (int i = 0; i < 200 && ::access(t->socket_.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (::access(t->socket_.c_str(), F_OK) != 0) return Internal("socat did not listen");
  return std::unique_ptr<GuestTarget>(std::move(t));
}

BootedGuest BootGuest(const std::string& image_name) {
  BootedGuest out;
  std::string images = EnvOr("WARREN_TEST_IMAGES", "/var/lib/warren-test/images");
  std::string ref = NewestInstalledImage(images, image_name);
  if (ref.empty()) {
    // The build scripts are idempotent; tiny takes ~15 s with a warm package cache.
    std::string script =
        std::string(WARREN_SOURCE_DIR) + "/packaging/images/build-" + image_name + ".sh";
    Result<std::string> built = Run({script, images}, std::chrono::minutes(15));
    ref = NewestInstalledImage(images, image_name);
    if (ref.empty()) {
      out.skip_reason =
          "no " + image_name + " guest image in " + images + " and building one failed: " +
          (built.ok() ? "no image appeared" : built.status().message().substr(0, 2000));
      return out;
    }
  }
  const ImageFiles files = ImageFilesOf(images, ref);
  const std::string& image = files.dir;
  for (const char* tool : {"qemu-system-x86_64", "qemu-img", "mke2fs"}) {
    if (!Run({"sh", "-c", std::string("command -v ") + tool}, std::chrono::seconds(5)).ok()) {
      out.skip_reason = std::string(tool) + " is not installed (packaging/images/deps.txt)";
      return out;
    }
  }

  auto t = std::make_unique<QemuTarget>();
  auto fail = [&](const Status& st) {
    out.error = Status(st.code(), "booting " + image + ": " + st.message() + "\n" + t->LogTail());
    return std::move(out);
  };
  Result<std::string> dir = MakeTempDir();
  if (!dir.ok()) return fail(dir.status());
  t->dir_ = *dir;
  t->socket_ = *dir + "/control.sock";
  t->key_ = *dir + "/control_ed25519";
  t->user_ = "dev";
  ::chmod(dir->c_str(), 0755);

  Result<std::string> pub = EnsureControlKey(t->key_);
  if (!pub.ok()) return fail(pub.status());
  ::mkdir((*dir + "/seed").c_str(), 0755);
  Status st = WriteText(*dir + "/seed/authorized_keys", *pub + "\n");
  if (!st.ok()) return fail(st);
  std::string make_seed = std::string(WARREN_SOURCE_DIR) + "/packaging/images/make-seed.sh";
  Result<std::string> r =
      Run({make_seed, *dir + "/seed", *dir + "/seed.img"}, std::chrono::seconds(60));
  if (!r.ok()) return fail(r.status());
  r = Run({"qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", files.rootfs,
           *dir + "/disk.qcow2", "4G"},
          std::chrono::seconds(60));
  if (!r.ok()) return fail(r.status());

  std::ifstream meta_file(files.meta);
  nlohmann::json meta = nlohmann::json::parse(meta_file, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.contains("kernel_cmdline")) {
    return fail(Internal("unreadable image.json"));
  }
  std::string cmdline = meta["kernel_cmdline"].get<std::string>() + " warren.hostname=wtest";

  // tiny runs in 256 MiB; debian wants 1 GiB (packaging/images/README.md).
  std::string memory = image_name == "tiny" ? "512" : "1024";
  auto t0 = Clock::now();
  st = t->qemu_.Start({"qemu-system-x86_64",
                       "-accel",
                       "tcg",
                       "-m",
                       memory,
                       "-nographic",
                       "-no-reboot",
                       "-kernel",
                       files.kernel,
                       "-initrd",
                       files.initrd,
                       "-append",
                       cmdline,
                       "-drive",
                       "file=" + *dir + "/disk.qcow2,if=virtio,format=qcow2",
                       "-drive",
                       "file=" + *dir + "/seed.img,if=virtio,format=raw,readonly=on",
                       "-device",
                       "virtio-serial",
                       "-chardev",
                       "socket,id=c0,path=" + t->socket_ + ",server=on,wait=off",
                       "-device",
                       "virtserialport,chardev=c0,name=warren.control",
                       "-device",
                       "virtio-rng-pci",
                       "-nic",
                       "none"},
                      *dir + "/console.log");
  if (!st.ok()) return fail(st);
  for (int i = 0; i < 500 && ::access(t->socket_.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Ready once the control connection answers (this also installs the runner).
  SshGuestControlOptions o = t->ControlOptions();
  o.reach_timeout = std::chrono::minutes(4);
  Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(o);
  if (!control.ok()) return fail(control.status());
  Result<std::vector<GuestJob>> jobs = (*control)->Jobs(kTestVm);
  if (!jobs.ok()) return fail(jobs.status());
  out.boot_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  out.target = std::move(t);
  return out;
}

}  // namespace warren::guest::testing
