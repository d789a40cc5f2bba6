#include "vmhost/kvm_probe.h"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "vmhost/subprocess.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCacheFile = "accel-probe";

std::string HostKernelRelease() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return u.release;
}

// Cache line: "v1 <host kernel release> <kvm|tcg> <reason...>".
bool ReadCache(const std::string& data_dir, AccelChoice* out) {
  if (data_dir.empty()) return false;
  std::ifstream in(fs::path(data_dir) / kCacheFile);
  std::string version, release, accel;
  if (!(in >> version >> release >> accel) || version != "v1") return false;
  if (release != HostKernelRelease()) return false;
  Result<Accel> a = ParseAccel(accel);
  if (!a.ok()) return false;
  std::string reason;
  std::getline(in, reason);
  if (!reason.empty() && reason.front() == ' ') reason.erase(0, 1);
  out->accel = *a;
  out->reason = reason + " (cached)";
  out->cached = true;
  return true;
}

void WriteCache(const std::string& data_dir, const AccelChoice& choice) {
  if (data_dir.empty()) return;
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  fs::path tmp = fs::path(data_dir) / (std::string(kCacheFile) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "v1 " << HostKernelRelease() << ' ' << AccelName(choice.accel) << ' ' << choice.reason
        << '\n';
    if (!out) return;
  }
  fs::rename(tmp, fs::path(data_dir) / kCacheFile, ec);
}

// What a kernel prints once it is well past the BIOS, interrupts and timers working: with
// no root file system it panics (and -no-reboot ends QEMU), with an initramfs it runs init.
bool KernelGotFar(std::string_view out) {
  if (out.find("Linux version") == std::string_view::npos) return false;
  return out.find("Kernel panic") != std::string_view::npos ||
         out.find("Run /init") != std::string_view::npos ||
         out.find("Freeing unused kernel") != std::string_view::npos;
}

// `decisive` is false when the test itself could not run, so the verdict is not cached.
AccelChoice BootTest(const KvmProbeOptions& o, bool* decisive) {
  *decisive = false;
  AccelChoice c;
  std::vector<std::string> argv = {o.qemu,
                                   "-accel",
                                   "kvm",
                                   "-nodefaults",
                                   "-no-user-config",
                                   "-display",
                                   "none",
                                   "-m",
                                   "256",
                                   "-no-reboot",
                                   "-serial",
                                   "stdio",
                                   "-kernel",
                                   o.kernel,
                                   "-append",
                                   "console=ttyS0 panic=-1 loglevel=7"};
  ProcessOptions po;
  po.timeout = o.timeout;
  po.stop_when = KernelGotFar;
  Result<ProcessResult> r = RunProcess(argv, po);
  if (!r.ok()) {
    c.reason = "could not run " + o.qemu + ": " + r.status().message();
    return c;
  }
  if (r->stopped_early || KernelGotFar(r->output)) {
    c.accel = Accel::kKvm;
    c.reason = "a guest kernel booted under KVM";
    *decisive = true;
  } else if (r->timed_out) {
    *decisive = true;
    c.reason =
        "a guest kernel did not boot under KVM within " + std::to_string(o.timeout.count()) + " ms";
  } else {
    // QEMU refused KVM outright; its first line says why.
    std::string first = r->output.substr(0, r->output.find('\n'));
    c.reason = "qemu -accel kvm failed: " + first.substr(0, 200);
  }
  return c;
}

}  // namespace

std::string_view AccelName(Accel accel) { return accel == Accel::kKvm ? "kvm" : "tcg"; }

Result<Accel> ParseAccel(std::string_view text) {
  if (text == "kvm") return Accel::kKvm;
  if (text == "tcg" || text == "qemu") return Accel::kTcg;
  return InvalidArgument("accel must be kvm or tcg, not '" + std::string(text) + "'");
}

AccelChoice ProbeAccel(const KvmProbeOptions& o) {
  auto start = std::chrono::steady_clock::now();
  auto done = [&](AccelChoice c) {
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return c;
  };
  std::string force = o.force;
  std::string force_source = "--accel";
  if (force.empty()) {
    const char* env = std::getenv("WARREN_ACCEL");
    if (env != nullptr && *env != '\0') {
      force = env;
      force_source = "WARREN_ACCEL";
    }
  }
  if (!force.empty()) {
    Result<Accel> a = ParseAccel(force);
    AccelChoice c;
    if (a.ok()) {
      c.accel = *a;
      c.reason = "forced by " + force_source + "=" + force;
    } else {
      c.reason = "ignored " + force_source + "=" + force + " (not kvm or tcg); chose TCG";
    }
    return done(c);
  }

  AccelChoice c;
  std::error_code ec;
  if (!fs::exists(o.dev_kvm, ec)) {
    c.reason = "no " + o.dev_kvm;
    return done(c);
  }
  // kvm_pvm only runs guest kernels built for it: every image we boot would hang.
  if (fs::exists(fs::path(o.sys_module) / "kvm_pvm", ec)) {
    c.reason = "kvm_pvm serves " + o.dev_kvm + " (runs only PVM guest kernels)";
    return done(c);
  }
  if (ReadCache(o.data_dir, &c)) return done(c);
  int fd = open(o.dev_kvm.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    c.reason = "cannot open " + o.dev_kvm + ": " + std::strerror(errno);
    return done(c);
  }
  close(fd);
  if (o.kernel.empty() || !fs::exists(o.kernel, ec)) {
    c.reason = "no guest kernel to test KVM with";
    return done(c);
  }
  bool decisive = false;
  c = BootTest(o, &decisive);
  if (decisive) WriteCache(o.data_dir, c);
  return done(c);
}

}  // namespace warren
