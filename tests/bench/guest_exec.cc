// guest_exec_bench: what reusing the control connection buys. Boots a guest image under QEMU
// TCG (tiny unless --image debian), then in one run measures `true` in the guest
//   warm:         SshGuestControl::Exec over the one open control connection, N times;
//   warm raw:     a bare exec channel running `true` on that connection (no runner, no job
//                 directory), N times: what the runner adds is the difference;
//   cold warren:  a fresh SshGuestControl per call (socket, SSH handshake, authentication,
//                 runner check, exec), M times;
//   cold OpenSSH: `ssh -o ProxyCommand='socat - UNIX-CONNECT:SOCK' dev@vm true`, M times;
// and prints each (median, mean, min) and the ratios cold/warm.
//
// Usage: guest_exec_bench [--image tiny|debian] [--warm N] [--cold M]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "lobby/base/log.h"
#include "tests/unit/guest_test_targets.h"

namespace warren::guest::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median = 0, mean = 0, min = 0;
  int failures = 0;
};

Stats Summarize(std::vector<double> v, int failures) {
  Stats s;
  s.failures = failures;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.min = v.front();
  return s;
}

bool ExecTrue(SshGuestControl& control) {
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  Result<GuestProgress> r = control.Exec(kTestVm, GuestCommand{"true", {}, ""}, s);
  if (!r.ok()) std::fprintf(stderr, "exec failed: %s\n", r.status().ToString().c_str());
  return r.ok() && r->exit_code == 0;
}

bool OpenSshTrue(const GuestTarget& t) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string proxy = "ProxyCommand=socat - UNIX-CONNECT:" + t.socket_path();
    std::string dest = t.user() + "@" + kTestVm;
    execlp("ssh", "ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i",
           t.key_path().c_str(), "-o", "StrictHostKeyChecking=no", "-o",
           "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=60", "-o",
           proxy.c_str(), dest.c_str(), "true", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// An exec channel running `true` straight through the guest user's shell, to its end.
bool RawTrue(ControlSession& session) {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  Result<std::shared_ptr<GuestChannel>> ch = session.OpenExec("true", deadline);
  if (!ch.ok()) return false;
  (*ch)->CloseStdin();
  char buf[256];
  for (;;) {
    Result<size_t> n = (*ch)->Read(buf, sizeof buf, deadline);
    if (!n.ok() || *n == 0) break;
  }
  Result<int> exit = (*ch)->WaitExit(deadline);
  (*ch)->Close();
  return exit.ok() && *exit == 0;
}

template <typename F>
Stats Measure(int n, F&& once) {
  std::vector<double> times;
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    bool ok = once();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (ok) {
      times.push_back(dt);
    } else {
      ++failures;
    }
  }
  return Summarize(std::move(times), failures);
}

void Print(const char* name, int n, const Stats& s) {
  std::printf("%-14s n=%-4d median %7.1f ms  mean %7.1f ms  min %7.1f ms  failures %d\n", name, n,
              s.median * 1000, s.mean * 1000, s.min * 1000, s.failures);
}

int Main(int argc, char** argv) {
  std::string image = "tiny";
  int warm_n = 50, cold_n = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--image") == 0) image = argv[i + 1];
    if (std::strcmp(argv[i], "--warm") == 0) warm_n = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--cold") == 0) cold_n = std::atoi(argv[i + 1]);
  }
  SetLogLevel(LogLevel::kWarn);
  BootedGuest g = BootGuest(image);
  if (g.target == nullptr) {
    std::fprintf(stderr, "cannot boot %s: %s%s\n", image.c_str(), g.skip_reason.c_str(),
                 g.error.ToString().c_str());
    return 1;
  }
  std::printf("image %s: control port answered %.1f s after QEMU started (TCG)\n", image.c_str(),
              g.boot_seconds);
  GuestTarget& t = *g.target;

  Result<std::unique_ptr<SshGuestControl>> warm = SshGuestControl::Create(t.ControlOptions());
  if (!warm.ok() || !ExecTrue(**warm)) return 1;  // connects and checks the runner
  Stats w = Measure(warm_n, [&] { return ExecTrue(**warm); });
  (*warm)->Disconnect(kTestVm);

  ControlSessionOptions so;
  SshGuestControlOptions go = t.ControlOptions();
  so.vm_id = kTestVm;
  so.dial = go.dial;
  so.key_path = go.key_path;
  so.user = go.user;
  Stats raw;
  {
    ControlSession session(so);
    if (!RawTrue(session)) return 1;
    raw = Measure(warm_n, [&] { return RawTrue(session); });
  }

  Stats cw = Measure(cold_n, [&] {
    Result<std::unique_ptr<SshGuestControl>> c = SshGuestControl::Create(t.ControlOptions());
    return c.ok() && ExecTrue(**c);
  });
  Stats co = Measure(cold_n, [&] { return OpenSshTrue(t); });

  Print("warm Exec", warm_n, w);
  Print("warm raw exec", warm_n, raw);
  Print("cold warren", cold_n, cw);
  Print("cold OpenSSH", cold_n, co);
  if (w.median > 0) {
    std::printf("ratio (median): cold warren / warm = %.1fx, cold OpenSSH / warm = %.1fx\n",
                cw.median / w.median, co.median / w.median);
  }
  return w.failures + cw.failures + co.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace warren::guest::testing

int main(int argc, char** argv) { return warren::guest::testing::Main(argc, argv); }
