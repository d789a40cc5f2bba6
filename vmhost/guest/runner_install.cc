#include "vmhost/guest/runner_install.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/guest/runner_protocol.h"
#include "vmhost/guest_control.h"

#ifndef WARREN_RUN_VERSION
#error "WARREN_RUN_VERSION must be defined by the build (vmhost/guest/CMakeLists.txt)"
#endif

namespace warren::guest {
namespace {

constexpr size_t kMaxRunnerBytes = 16 * 1024 * 1024;
constexpr size_t kMaxReplyBytes = 4096;

// Every script below is run by `/bin/sh -c '...'` so that it does not depend on the user's
// login shell; none of them contains a single quote.
std::string ShellScript(std::string_view script) {
  return "/bin/sh -c '" + std::string(script) + "'";
}

// Whatever sits at the runner's path may be broken or hostile, so its answer is bounded:
// in time by timeout(1) (busybox and coreutils have it) and in size by head. It goes to a
// file, not a pipe: a child it leaves behind could hold a pipe open past the timeout.
std::string CheckScript() {
  return ShellScript(
      "r=\"$HOME/.warren/bin/warren-run\"; t=\"$HOME/.warren/.version.$$\"; "
      "mkdir -p \"$HOME/.warren\" || exit 1; "
      "if command -v timeout >/dev/null; then to=\"timeout 10\"; else to=; fi; "
      "$to \"$r\" --version </dev/null >\"$t\" 2>/dev/null; v=$(head -c 100 \"$t\"); rm -f \"$t\"; "
      "if [ \"$v\" = \"warren-run " WARREN_RUN_VERSION
      "\" ]; then echo current; "
      "$to \"$r\" serve </dev/null >\"$t\" 2>/dev/null; head -c 200 \"$t\"; rm -f \"$t\"; "
      "(\"$r\" gc </dev/null >/dev/null 2>&1 &); "
      "else echo missing; fi");
}

std::string InstallScript() {
  return ShellScript(
      "m=$(umask); umask 077; d=\"$HOME/.warren/bin\"; t=\"$d/.warren-run.$$\"; "
      "mkdir -p \"$d\" && cat >\"$t\" && chmod 700 \"$t\" && mv -f \"$t\" \"$d/warren-run\" "
      "&& { (umask \"$m\"; exec \"$d/warren-run\" serve </dev/null 2>/dev/null); "
      "exec \"$d/warren-run\" --version; }; "
      "rm -f \"$t\"; exit 1");
}

// The reply's lines, when it is whole lines; `expected` its one line besides the runner
// server's `serve PATH` (before or after it, as `serve_first` says). The server's socket
// path goes to *serve_socket ("" when the guest started none).
bool ParseReply(std::string_view reply, std::string_view expected, bool serve_first,
                std::string* serve_socket) {
  serve_socket->clear();
  std::vector<std::string_view> lines;
  while (!reply.empty()) {
    size_t nl = reply.find('\n');
    if (nl == std::string_view::npos) return false;
    lines.push_back(reply.substr(0, nl));
    reply.remove_prefix(nl + 1);
  }
  if (lines.size() == 1) return lines[0] == expected;
  if (lines.size() != 2) return false;
  std::string_view serve = serve_first ? lines[0] : lines[1];
  if ((serve_first ? lines[1] : lines[0]) != expected) return false;
  constexpr std::string_view kServe = "serve ";
  if (serve.substr(0, kServe.size()) != kServe) return false;
  std::string_view path = serve.substr(kServe.size());
  // Where the host opens its channels to.
  if (!ValidGuestSocketPath(path)) return false;
  serve_socket->assign(path);
  return true;
}

// Runs a channel to its end: its stdout (bounded) and exit status. Reads in slices of
// GuestChannel::kCancelPoll while `cancel` is given, so a guest that stalls mid-check does
// not hold a cancelled caller.
Result<std::string> RunToEnd(GuestChannel& ch, ControlSession::Clock::time_point deadline,
                             int* exit_status, const CancelSignal* cancel) {
  using Clock = ControlSession::Clock;
  auto slice = [&] {
    return cancel == nullptr ? deadline
                             : std::min(deadline, Clock::now() + GuestChannel::kCancelPoll);
  };
  auto cancelled = [&] { return cancel != nullptr && cancel->cancelled(); };
  std::string out;
  char buf[4096];
  for (;;) {
    if (cancelled()) return Cancelled("cancelled while checking the guest runner");
    Result<size_t> n = ch.Read(buf, sizeof buf, slice());
    if (!n.ok() && n.status().code() == Code::kTimeout && Clock::now() < deadline) continue;
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    if (out.size() < kMaxReplyBytes) out.append(buf, std::min(*n, kMaxReplyBytes - out.size()));
  }
  for (;;) {
    if (cancelled()) return Cancelled("cancelled while checking the guest runner");
    Result<int> st = ch.WaitExit(slice());
    if (!st.ok() && st.status().code() == Code::kTimeout && Clock::now() < deadline) continue;
    if (!st.ok()) return st.status();
    *exit_status = *st;
    return out;
  }
}

}  // namespace

const char* RunnerVersion() { return WARREN_RUN_VERSION; }

std::string DefaultRunnerPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "warren-run";
  std::string exe(buf, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  std::string dir = slash == std::string::npos ? std::string(".") : exe.substr(0, slash);
  // A build tree has it next to warren; an install (the Debian package: /usr/bin/warren)
  // in PREFIX/lib/warren, as packaging/install.cmake puts it.
  std::string beside = dir + "/warren-run";
  if (::access(beside.c_str(), F_OK) == 0) return beside;
  size_t up = dir.rfind('/');
  std::string installed =
      (up == std::string::npos ? std::string("..") : dir.substr(0, up)) + "/lib/warren/warren-run";
  if (::access(installed.c_str(), F_OK) == 0) return installed;
  return beside;
}

Result<RunnerBinary> LoadRunnerBinary(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Internal("cannot open the guest runner " + path + ": " + std::strerror(errno));
  }
  RunnerBinary r;
  r.path = path;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Internal("cannot read the guest runner " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    r.bytes.append(buf, static_cast<size_t>(n));
    if (r.bytes.size() > kMaxRunnerBytes) {
      ::close(fd);
      return Internal("the guest runner " + path + " is implausibly large");
    }
  }
  ::close(fd);
  // The binary prints its version from a string constant, so a stale or foreign binary is
  // caught here rather than in every guest.
  if (r.bytes.size() < 4 ||
      r.bytes.compare(0, 4,
                      "\x7f"
                      "ELF") != 0 ||
      r.bytes.find(WARREN_RUN_VERSION) == std::string::npos) {
    return Internal("the guest runner " + path + " is not warren-run version " +
                    WARREN_RUN_VERSION + "; rebuild it with warren");
  }
  return r;
}

Status EnsureRunner(ControlSession& session, const RunnerBinary& runner,
                    uint64_t* checked_generation, std::string* serve_socket,
                    ControlSession::Clock::time_point deadline, const CancelSignal* cancel) {
  uint64_t gen = session.generation();
  if (gen != 0 && gen == *checked_generation) return Status::Ok();
  auto t0 = ControlSession::Clock::now();
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestChannel> check,
                          session.OpenExec(CheckScript(), deadline, cancel));
  uint64_t used = check->generation();
  int exit_status = 0;
  Result<std::string> reply = RunToEnd(*check, deadline, &exit_status, cancel);
  std::string err = check->StderrText();
  check->Close();
  if (!reply.ok()) return reply.status().Annotate("checking the guest runner");
  if (ParseReply(*reply, "current", /*serve_first=*/false, serve_socket)) {
    *checked_generation = used;
    return Status::Ok();
  }
  if (*reply != "missing\n") {
    return Internal("checking the guest runner: unexpected reply \"" +
                    SanitizeGuestText(*reply + err, 200) + "\"");
  }

  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestChannel> install,
                          session.OpenExec(InstallScript(), deadline, cancel));
  Status wrote = install->Write(runner.bytes);
  install->CloseStdin();
  reply = RunToEnd(*install, deadline, &exit_status, cancel);
  err = install->StderrText();
  install->Close();
  if (!wrote.ok()) return wrote.Annotate("uploading the guest runner");
  if (!reply.ok()) return reply.status().Annotate("uploading the guest runner");
  if (exit_status != 0 || !ParseReply(*reply, std::string("warren-run ") + WARREN_RUN_VERSION,
                                      /*serve_first=*/true, serve_socket)) {
    return Internal("installing the guest runner failed (exit " + std::to_string(exit_status) +
                    "): " + SanitizeGuestText(*reply + err, 300));
  }
  *checked_generation = used;
  LogInfo("guest runner installed vm=" + LogQuote(session.vm_id()) + " version=" +
          WARREN_RUN_VERSION + " bytes=" + std::to_string(runner.bytes.size()) + " dur_ms=" +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                             ControlSession::Clock::now() - t0)
                             .count()));
  return Status::Ok();
}

}  // namespace warren::guest
