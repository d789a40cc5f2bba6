#include "tests/unit/guest_control_scenarios.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "lobby/base/unix_socket.h"
#include "tests/unit/skip_or_fail.h"
#include "vmhost/guest/runner_install.h"
#include "vmhost/guest/runner_protocol.h"

namespace warren::guest::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TargetSetup& SharedTarget() {
  // Made on first use and kept until the process exits (its destructor kills the target).
  static TargetSetup* setup = new TargetSetup(MakeGuestTarget());
  static struct Reaper {
    ~Reaper() { setup->target.reset(); }
  } reaper;
  return *setup;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char b[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
}

// How many processes in the guest run `pattern` (a grep regex that does not match itself).
int CountProcesses(GuestControl& control, const std::string& pattern) {
  Outcome o = RunExec(control,
                      "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; "
                      "done | grep -c '" +
                          pattern + "' || true");
  EXPECT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  return std::atoi(o.out.c_str());
}

// A sleep duration no other test (or process) uses, to find its processes by.
std::string UniqueSeconds() {
  static std::atomic<int> n{0};
  return std::to_string(40000 + (getpid() % 1000) * 10 + n++);
}

// A reader that takes its time: 20 ms per write.
class SlowSink final : public OutputSink {
 public:
  void Write(std::string_view bytes) override {
    bytes_ += bytes.size();
    std::this_thread::sleep_for(milliseconds(20));
  }
  size_t bytes() const { return bytes_.load(); }

 private:
  std::atomic<size_t> bytes_{0};
};

}  // namespace

void GuestControlTest::SetUp() {
  TargetSetup& s = SharedTarget();
  if (!s.skip_reason.empty()) WARREN_SKIP_OR_FAIL() << s.skip_reason;
  ASSERT_TRUE(s.error.ok()) << s.error.ToString();
  ASSERT_NE(s.target, nullptr);
  control_ = NewControl();
}

void GuestControlTest::TearDown() {
  if (HasFailure() && SharedTarget().target != nullptr) {
    std::fprintf(stderr, "target log:\n%s", SharedTarget().target->LogTail().c_str());
  }
  control_.reset();
}

GuestTarget& GuestControlTest::target() { return *SharedTarget().target; }

std::unique_ptr<SshGuestControl> GuestControlTest::NewControl() {
  Result<std::unique_ptr<SshGuestControl>> c = SshGuestControl::Create(target().ControlOptions());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

Outcome RunExec(GuestControl& control, const GuestCommand& command, int wait_ms, InputStream* in,
                std::shared_ptr<CancelSignal> cancel) {
  StringSink out, err;
  GuestStreams s;
  s.in = in;
  s.out = &out;
  s.err = &err;
  s.cancel = std::move(cancel);
  s.wait_ms = wait_ms;
  Outcome o;
  o.progress = control.Exec(kTestVm, command, s);
  o.out = out.str();
  o.err = err.str();
  return o;
}

Outcome RunExec(GuestControl& control, const std::string& command, int wait_ms) {
  GuestCommand c;
  c.command = command;
  return RunExec(control, c, wait_ms);
}

Outcome RunWait(GuestControl& control, const GuestProgress& from, int wait_ms) {
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  s.wait_ms = wait_ms;
  Outcome o;
  o.progress = control.Wait(kTestVm, from.job, from.stdout_offset, from.stderr_offset, s);
  o.out = out.str();
  o.err = err.str();
  return o;
}

TEST_F(GuestControlTest, SeparatesStdoutStderrAndExitStatus) {
  Outcome o = RunExec(*control_, "echo hi; echo err >&2; exit 3");
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_TRUE(o.progress->finished);
  EXPECT_EQ(o.progress->exit_code, 3);
  EXPECT_EQ(o.progress->signal, 0);
  EXPECT_EQ(o.out, "hi\n");
  EXPECT_EQ(o.err, "err\n");
  EXPECT_TRUE(ValidJobId(o.progress->job));
  EXPECT_EQ(o.progress->stdout_offset, 3u);
  EXPECT_EQ(o.progress->stderr_offset, 4u);
}

TEST_F(GuestControlTest, StdinRoundTripOfOneMebibyte) {
  std::string data(1 << 20, '\0');
  uint32_t x = 12345;
  for (char& c : data) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 24);
  }
  StringInput in(data);
  GuestCommand c;
  c.command = "sha256sum; echo done >&2";
  auto t0 = Clock::now();
  Outcome o = RunExec(*control_, c, -1, &in);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.progress->exit_code, 0);
  EXPECT_EQ(o.out.substr(0, 64), Sha256Hex(data)) << o.out;
  EXPECT_EQ(o.err, "done\n");
  std::fprintf(stderr, "1 MiB stdin round trip: %.2f s\n", Seconds(t0));
}

TEST_F(GuestControlTest, CatEchoesStdinBack) {
  std::string data;
  for (int i = 0; i < 20000; ++i) data += "line " + std::to_string(i) + "\n";
  StringInput in(data);
  GuestCommand c;
  c.command = "cat";
  Outcome o = RunExec(*control_, c, -1, &in);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.progress->exit_code, 0);
  EXPECT_TRUE(o.out == data) << "got " << o.out.size() << " bytes of " << data.size();
}

TEST_F(GuestControlTest, NoStdinMeansImmediateEof) {
  Outcome o = RunExec(*control_, "cat; echo eof");
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.out, "eof\n");
}

TEST_F(GuestControlTest, EnvAndWorkingDirectory) {
  GuestCommand c;
  c.command = "printf '%s|' \"$FOO\" \"$EMPTY\"; pwd; echo \"$WARREN_JOB\"";
  c.env = {{"FOO", "a \"b\" $HOME \\ c'd"}, {"EMPTY", ""}};
  c.cwd = "/tmp";
  Outcome o = RunExec(*control_, c);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.out, "a \"b\" $HOME \\ c'd||/tmp\n" + o.progress->job + "\n");
}

TEST_F(GuestControlTest, HandsBackAtTheDeadlineAndWaitReadsTheRest) {
  // The command prints, then holds until the test opens its gate: what comes back at each
  // step depends on the deadline alone, not on how fast a loaded guest runs a sleep. (It
  // gives up after 2 minutes, so a test that fails before opening it leaves nothing behind.)
  const std::string gate = "/tmp/warren-gate-" + UniqueSeconds();
  const int deadline_ms = static_cast<int>(1500 * TimeScale());
  auto t0 = Clock::now();
  Outcome o = RunExec(*control_,
                      "echo start; i=0; until [ -e " + gate +
                          " ] || [ $i -ge 1200 ]; do sleep 0.1; i=$((i+1)); done; echo end",
                      deadline_ms);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_FALSE(o.progress->finished);
  EXPECT_GE(Seconds(t0), deadline_ms / 1000.0 - 0.05) << "handed back before its deadline";
  EXPECT_LT(Seconds(t0), 5.0 * TimeScale());
  EXPECT_EQ(o.out, "start\n");
  EXPECT_EQ(o.progress->stdout_offset, 6u);

  Outcome mid = RunWait(*control_, *o.progress, 300);
  ASSERT_TRUE(mid.progress.ok()) << mid.progress.status().ToString();
  EXPECT_FALSE(mid.progress->finished);
  EXPECT_EQ(mid.out, "");
  EXPECT_EQ(mid.progress->job, o.progress->job);

  Outcome open = RunExec(*control_, "touch " + gate);
  ASSERT_TRUE(open.progress.ok()) << open.progress.status().ToString();
  Outcome rest = RunWait(*control_, *mid.progress, -1);
  RunExec(*control_, "rm -f " + gate);
  ASSERT_TRUE(rest.progress.ok()) << rest.progress.status().ToString();
  EXPECT_TRUE(rest.progress->finished);
  EXPECT_EQ(rest.progress->exit_code, 0);
  EXPECT_EQ(rest.out, "end\n");
  EXPECT_EQ(rest.progress->stdout_offset, 10u);

  // A finished job's output can be read again, from any offset.
  GuestProgress from = *rest.progress;
  from.stdout_offset = 2;
  Outcome again = RunWait(*control_, from, -1);
  ASSERT_TRUE(again.progress.ok());
  EXPECT_EQ(again.out, "art\nend\n");
}

TEST_F(GuestControlTest, WaitZeroHandsBackOnceStarted) {
  Outcome o = RunExec(*control_, "sleep 1; echo late", 0);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_FALSE(o.progress->finished);
  Outcome rest = RunWait(*control_, *o.progress, -1);
  ASSERT_TRUE(rest.progress.ok()) << rest.progress.status().ToString();
  EXPECT_EQ(rest.out, "late\n");
  EXPECT_EQ(rest.progress->exit_code, 0);
}

// A wait of no time reports what is there now: the rest of the output and, for a job that
// has ended, its end — never "still running" for a job that is over.
TEST_F(GuestControlTest, WaitZeroOnAnEndedJobReportsItsEnd) {
  Outcome o = RunExec(*control_, "echo one; sleep 1; echo two; exit 3", 0);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  ASSERT_FALSE(o.progress->finished);
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(2500 * TimeScale())));
  for (int i = 0; i < 3; ++i) {
    Outcome now = RunWait(*control_, *o.progress, 0);
    ASSERT_TRUE(now.progress.ok()) << now.progress.status().ToString();
    EXPECT_TRUE(now.progress->finished) << i;
    EXPECT_EQ(now.progress->exit_code, 3) << i;
    EXPECT_EQ(o.out + now.out, "one\ntwo\n") << i;
  }
  // And a running job with nothing new: handed back at once, still running.
  Outcome run = RunExec(*control_, "echo x; sleep 30", 0);
  ASSERT_TRUE(run.progress.ok()) << run.progress.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(500 * TimeScale())));
  auto t0 = Clock::now();
  Outcome mid = RunWait(*control_, *run.progress, 0);
  ASSERT_TRUE(mid.progress.ok()) << mid.progress.status().ToString();
  EXPECT_FALSE(mid.progress->finished);
  EXPECT_EQ(run.out + mid.out, "x\n") << "what the start had not delivered comes now";
  EXPECT_LT(Seconds(t0), 5.0 * TimeScale());
  EXPECT_TRUE(control_->Kill(kTestVm, run.progress->job).ok());
}

TEST_F(GuestControlTest, KillEndsTheWholeProcessTree) {
  std::string n = UniqueSeconds();
  Outcome o = RunExec(*control_, "sleep " + n + " & sleep " + n + "; echo never", 1000);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  ASSERT_FALSE(o.progress->finished);
  // The shell and both sleeps.
  EXPECT_GE(CountProcesses(*control_, "[s]leep " + n), 2);

  ASSERT_TRUE(control_->Kill(kTestVm, o.progress->job).ok());
  Outcome end = RunWait(*control_, *o.progress, 10000 * TimeScale());
  ASSERT_TRUE(end.progress.ok()) << end.progress.status().ToString();
  EXPECT_TRUE(end.progress->finished);
  EXPECT_FALSE(end.progress->exit_code.has_value());
  EXPECT_EQ(end.progress->signal, 15);
  EXPECT_EQ(end.out, "");
  EXPECT_EQ(CountProcesses(*control_, "[s]leep " + n), 0);

  EXPECT_TRUE(control_->Kill(kTestVm, o.progress->job).ok()) << "killing an ended job is fine";
  EXPECT_EQ(control_->Kill(kTestVm, "0badc0de").code(), Code::kNotFound);
}

TEST_F(GuestControlTest, CancelBeforeHandBackKillsTheCommand) {
  auto cancel = std::make_shared<CancelSignal>();
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(milliseconds(static_cast<int>(1500 * TimeScale())));
    cancel->Cancel();
  });
  std::string n = UniqueSeconds();
  GuestCommand c;
  c.command = "sleep " + n + " & sleep " + n;
  auto t0 = Clock::now();
  Outcome o = RunExec(*control_, c, -1, nullptr, cancel);
  canceller.join();
  EXPECT_EQ(o.progress.status().code(), Code::kCancelled) << o.progress.status().ToString();
  EXPECT_LT(Seconds(t0), 10.0 * TimeScale());
  EXPECT_EQ(CountProcesses(*control_, "[s]leep " + n), 0);

  Result<std::vector<GuestJob>> jobs = control_->Jobs(kTestVm);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  bool seen = false;
  for (const GuestJob& j : *jobs) {
    if (j.command != c.command) continue;
    seen = true;
    EXPECT_TRUE(j.finished);
    EXPECT_FALSE(j.exit_code.has_value());
  }
  EXPECT_TRUE(seen);
}

TEST_F(GuestControlTest, CancelAfterHandBackOnlyDetaches) {
  Outcome o = RunExec(*control_, "sleep 2; echo kept", 0);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  auto cancel = std::make_shared<CancelSignal>();
  cancel->Cancel();
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  s.cancel = cancel;
  Result<GuestProgress> w = control_->Wait(kTestVm, o.progress->job, 0, 0, s);
  EXPECT_EQ(w.status().code(), Code::kCancelled);
  Outcome rest = RunWait(*control_, *o.progress, -1);
  ASSERT_TRUE(rest.progress.ok()) << rest.progress.status().ToString();
  EXPECT_EQ(rest.out, "kept\n");
  EXPECT_EQ(rest.progress->exit_code, 0);
}

TEST_F(GuestControlTest, TenConcurrentExecsShareOneConnection) {
  constexpr int kN = 10;
  std::vector<Outcome> results(kN);
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      results[i] =
          RunExec(*control_, "echo " + std::to_string(i) + "; sleep 2; echo " + std::to_string(i) +
                                 " done >&2; exit " + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  double took = Seconds(t0);
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(results[i].progress.ok()) << i << ": " << results[i].progress.status().ToString();
    EXPECT_EQ(results[i].out, std::to_string(i) + "\n");
    EXPECT_EQ(results[i].err, std::to_string(i) + " done\n");
    EXPECT_EQ(results[i].progress->exit_code, i);
  }
  EXPECT_LT(took, 2.0 * kN) << "the commands ran one after another";
  std::fprintf(stderr, "%d concurrent 2 s commands: %.2f s\n", kN, took);
}

TEST_F(GuestControlTest, BusyChannelDoesNotStallAnother) {
  auto cancel = std::make_shared<CancelSignal>();
  SlowSink slow;
  StringSink err;
  Result<GuestProgress> busy = Internal("not run");
  std::thread flood([&] {
    GuestStreams s;
    s.out = &slow;
    s.err = &err;
    s.cancel = cancel;
    GuestCommand c;
    c.command = "yes | head -c 50000000";
    busy = control_->Exec(kTestVm, c, s);
  });
  auto t0 = Clock::now();
  while (slow.bytes() < 256 * 1024 && Seconds(t0) < 60 * TimeScale()) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_GE(slow.bytes(), 256u * 1024) << "the flood never started";
  for (int i = 0; i < 3; ++i) {
    auto t1 = Clock::now();
    Outcome o = RunExec(*control_, "true");
    ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
    EXPECT_EQ(o.progress->exit_code, 0);
    EXPECT_LT(Seconds(t1), 2.0 * TimeScale()) << "a busy channel stalled `true`";
    std::fprintf(stderr, "true beside a flood: %.3f s\n", Seconds(t1));
  }
  EXPECT_LT(slow.bytes(), 50000000u) << "the slow reader was not slow";
  cancel->Cancel();
  flood.join();
  EXPECT_EQ(busy.status().code(), Code::kCancelled) << busy.status().ToString();
}

TEST_F(GuestControlTest, ReconnectsAfterDisconnect) {
  Outcome a = RunExec(*control_, "echo a");
  ASSERT_TRUE(a.progress.ok()) << a.progress.status().ToString();
  std::string fingerprint = control_->HostKeyFingerprint(kTestVm);
  EXPECT_EQ(fingerprint.rfind("SHA256:", 0), 0u) << fingerprint;
  control_->Disconnect(kTestVm);
  EXPECT_EQ(control_->HostKeyFingerprint(kTestVm), "");
  Outcome b = RunExec(*control_, "echo b");
  ASSERT_TRUE(b.progress.ok()) << b.progress.status().ToString();
  EXPECT_EQ(b.out, "b\n");
  EXPECT_EQ(control_->HostKeyFingerprint(kTestVm), fingerprint);
  control_->Disconnect(kTestVm);
  control_->Disconnect(kTestVm);  // twice is fine
  Outcome c = RunExec(*control_, "echo c");
  ASSERT_TRUE(c.progress.ok()) << c.progress.status().ToString();
  EXPECT_EQ(c.out, "c\n");
}

// Connect makes the connection (a VM's identity meanwhile goes over its identity port) and
// opens no channel; a second Connect finds it made. The first command then needs no handshake.
// Its `answered` comes once, when the guest's sshd sent its banner: before the key exchange
// (no host key pinned yet); with the connection up already, at once.
TEST_F(GuestControlTest, ConnectMakesTheConnectionAlone) {
  control_->Disconnect(kTestVm);
  EXPECT_EQ(control_->HostKeyFingerprint(kTestVm), "");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  struct Answers {
    std::atomic<int> calls{0};
    std::atomic<bool> before_the_key{false};
  };
  auto answers = std::make_shared<Answers>();
  SshGuestControl* control = control_.get();
  ASSERT_TRUE(control_
                  ->Connect(kTestVm, deadline,
                            [answers, control] {
                              answers->before_the_key =
                                  control->HostKeyFingerprint(kTestVm).empty();
                              ++answers->calls;
                            })
                  .ok());
  EXPECT_EQ(answers->calls.load(), 1);
  EXPECT_TRUE(answers->before_the_key.load());
  EXPECT_EQ(control_->HostKeyFingerprint(kTestVm).rfind("SHA256:", 0), 0u);
  EXPECT_EQ(control_->OpenChannels(kTestVm), 0);
  ASSERT_TRUE(control_->Connect(kTestVm, deadline, [answers] { ++answers->calls; }).ok());
  EXPECT_EQ(answers->calls.load(), 2);
  Outcome a = RunExec(*control_, "echo a");
  ASSERT_TRUE(a.progress.ok()) << a.progress.status().ToString();
  EXPECT_EQ(a.out, "a\n");
  // A VM with nothing at its control port: Unavailable by the deadline, not a hang.
  const auto soon = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  Status none = control_->Connect("no-such-vm", soon, [answers] { ++answers->calls; });
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(answers->calls.load(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - soon, std::chrono::seconds(2));
}

// The runner's server (runner/serve.c): each connection's check starts it anew, and
// commands start there, with no sshd session, in the environment a command run by that
// connection's sshd gets. One stopped in the guest costs the rest of the connection the
// fast path, not a command; the next connection starts it again.
TEST_F(GuestControlTest, CommandsStartAtTheRunnersServerInSshdsEnvironment) {
  // The runner removed: the next connection's check installs it, and the install starts the
  // server (with the session's umask, not the install's own 077).
  ASSERT_TRUE(RunExec(*control_, "rm -f ~/.warren/bin/warren-run").progress.ok());
  control_->Disconnect(kTestVm);
  const SshGuestControl::StartRoutes before = control_->start_routes();
  // What differs between the two routes by design: the shells in between, the job's id, and
  // the login session (pam_systemd makes one per sshd session: the server runs in its check's).
  GuestCommand c;
  c.command =
      "env | grep -v -E '^(SHLVL|_|PWD|OLDPWD|WARREN_JOB|XDG_SESSION_ID)=' | sort; "
      "echo \"umask $(umask) groups $(id -G)\"; grep -E '^Sig(Ign|Blk)' /proc/self/status; "
      "echo \"$FOO\"; pwd; cat";
  c.env = {{"FOO", "bar"}};
  c.cwd = "/tmp";
  auto run = [&] {
    StringInput in("typed\n");
    Outcome o = RunExec(*control_, c, -1, &in);
    EXPECT_TRUE(o.progress.ok()) << o.progress.status().ToString();
    return o.out;
  };
  const std::string installed = run();
  SshGuestControl::StartRoutes after = control_->start_routes();
  EXPECT_EQ(after.server - before.server, 1);
  EXPECT_EQ(after.exec - before.exec, 0);

  // Stopped (the server pid file names it, on this boot): the next command still runs.
  Outcome stop = RunExec(*control_, "kill $(cut -d' ' -f1 ~/.warren/run/serve.pid)");
  ASSERT_TRUE(stop.progress.ok()) << stop.progress.status().ToString();
  const std::string through_exec = run();
  EXPECT_EQ(installed, through_exec) << "the job's environment differs between the routes";
  EXPECT_NE(installed.find("\nbar\n/tmp\ntyped\n"), std::string::npos) << installed;
  const SshGuestControl::StartRoutes fallen = control_->start_routes();
  EXPECT_EQ(fallen.server - after.server, 1);  // the kill
  EXPECT_EQ(fallen.exec - after.exec, 1);

  // The next connection's check (the runner current) starts it again.
  control_->Disconnect(kTestVm);
  EXPECT_EQ(run(), through_exec) << "the job's environment differs between the routes";
  EXPECT_EQ(control_->start_routes().server - fallen.server, 1);
}

TEST_F(GuestControlTest, JobSurvivesDisconnectAndARestartedWarren) {
  Outcome o = RunExec(*control_, "echo before; sleep 3; echo survived", 500);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  ASSERT_FALSE(o.progress->finished);
  control_->Disconnect(kTestVm);
  control_.reset();  // warren goes away

  std::unique_ptr<SshGuestControl> restarted = NewControl();
  ASSERT_NE(restarted, nullptr);
  GuestProgress from;
  from.job = o.progress->job;
  Outcome all = RunWait(*restarted, from, -1);
  ASSERT_TRUE(all.progress.ok()) << all.progress.status().ToString();
  EXPECT_TRUE(all.progress->finished);
  EXPECT_EQ(all.progress->exit_code, 0);
  EXPECT_EQ(all.out, "before\nsurvived\n");
}

TEST_F(GuestControlTest, JobsListsNewestFirst) {
  Outcome a = RunExec(*control_, "echo first");
  ASSERT_TRUE(a.progress.ok());
  std::this_thread::sleep_for(milliseconds(1100));  // listings order by whole seconds
  Outcome b = RunExec(*control_, "printf 'second\\n'\n# a comment\texit 3\nexit 4", -1);
  ASSERT_TRUE(b.progress.ok());
  Result<std::vector<GuestJob>> jobs = control_->Jobs(kTestVm);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  int ia = -1, ib = -1;
  for (size_t i = 0; i < jobs->size(); ++i) {
    const GuestJob& j = (*jobs)[i];
    if (j.job == a.progress->job) {
      ia = static_cast<int>(i);
      EXPECT_EQ(j.command, "echo first");
      EXPECT_TRUE(j.finished);
      EXPECT_EQ(j.exit_code, 0);
      EXPECT_GT(j.started_at, 0);
      EXPECT_GE(j.finished_at, j.started_at);
    }
    if (j.job == b.progress->job) {
      ib = static_cast<int>(i);
      EXPECT_EQ(j.command, "printf 'second\\n'\n# a comment\texit 3\nexit 4");
      EXPECT_EQ(j.exit_code, 4);
    }
  }
  ASSERT_GE(ia, 0);
  ASSERT_GE(ib, 0);
  EXPECT_LT(ib, ia) << "newest first";
}

TEST_F(GuestControlTest, InstallsTheRunnerAndReplacesAStaleOne) {
  std::string want = std::string("warren-run ") + RunnerVersion() + "\n";
  Outcome v = RunExec(*control_, "~/.warren/bin/warren-run --version");
  ASSERT_TRUE(v.progress.ok()) << v.progress.status().ToString();
  EXPECT_EQ(v.out, want);
  // An old runner (a running binary can be unlinked, not overwritten).
  Outcome old = RunExec(*control_,
                        "r=~/.warren/bin/warren-run; rm -f $r && printf '#!/bin/sh\\necho "
                        "warren-run 0-old\\n' > $r && chmod 700 $r && $r --version");
  ASSERT_TRUE(old.progress.ok()) << old.progress.status().ToString();
  EXPECT_EQ(old.out, "warren-run 0-old\n");
  control_->Disconnect(kTestVm);  // checked again on the next connection
  v = RunExec(*control_, "~/.warren/bin/warren-run --version");
  ASSERT_TRUE(v.progress.ok()) << v.progress.status().ToString();
  EXPECT_EQ(v.out, want);
}

TEST_F(GuestControlTest, RefusesBadInputAndUnknownJobs) {
  GuestCommand big;
  big.command.assign(kMaxCommandBytes + 1, 'x');
  EXPECT_EQ(RunExec(*control_, big).progress.status().code(), Code::kTooLarge);
  GuestCommand nul;
  nul.command = std::string("echo a\0b", 8);
  EXPECT_EQ(RunExec(*control_, nul).progress.status().code(), Code::kInvalidArgument);
  GuestCommand env;
  env.command = "true";
  env.env = {{"BAD-NAME", "x"}};
  EXPECT_EQ(RunExec(*control_, env).progress.status().code(), Code::kInvalidArgument);

  GuestProgress unknown;
  unknown.job = "0badc0de";
  EXPECT_EQ(RunWait(*control_, unknown).progress.status().code(), Code::kNotFound);
  unknown.job = "../../etc";
  EXPECT_EQ(RunWait(*control_, unknown).progress.status().code(), Code::kNotFound);
  EXPECT_EQ(control_->Kill(kTestVm, "x; reboot").code(), Code::kNotFound);

  Outcome done = RunExec(*control_, "echo 12");
  ASSERT_TRUE(done.progress.ok());
  GuestProgress beyond = *done.progress;
  beyond.stdout_offset = 100;
  EXPECT_EQ(RunWait(*control_, beyond).progress.status().code(), Code::kInvalidArgument);

  StringSink out;
  GuestStreams no_err;
  no_err.out = &out;
  EXPECT_EQ(control_->Exec(kTestVm, GuestCommand{"true", {}, ""}, no_err).status().code(),
            Code::kInvalidArgument);
}

TEST_F(GuestControlTest, UnknownOrUnreachableVmFailsInBoundedTime) {
  EXPECT_EQ(RunExec(*control_, "true").progress.status().code(), Code::kOk);
  SshGuestControlOptions o = target().ControlOptions();
  std::string missing = target().dir() + "/no-such.sock";
  o.dial = [missing](std::string_view vm) -> Result<UniqueFd> {
    if (vm == "stopped") return Conflict("VM stopped is not running");
    return DialUnixSocket(missing);
  };
  o.reach_timeout = std::chrono::milliseconds(1500);
  Result<std::unique_ptr<SshGuestControl>> c = SshGuestControl::Create(o);
  ASSERT_TRUE(c.ok());
  auto t0 = Clock::now();
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  Result<GuestProgress> r = (*c)->Exec(kTestVm, GuestCommand{"true", {}, ""}, s);
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no-such.sock"), std::string::npos) << r.status().ToString();
  EXPECT_LT(Seconds(t0), 4.0);
  t0 = Clock::now();
  EXPECT_EQ((*c)->Jobs("stopped").status().code(), Code::kConflict);
  EXPECT_LT(Seconds(t0), 1.0) << "a VM without a socket must not be retried";
}

TEST_F(GuestControlTest, ManyQuickCommandsInARow) {
  auto t0 = Clock::now();
  constexpr int kN = 20;
  for (int i = 0; i < kN; ++i) {
    Outcome o = RunExec(*control_, "echo " + std::to_string(i));
    ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
    ASSERT_EQ(o.out, std::to_string(i) + "\n");
  }
  std::fprintf(stderr, "%d sequential execs: %.3f s each\n", kN, Seconds(t0) / kN);
}

TEST_F(GuestControlTest, SignalledCommandReportsTheSignal) {
  Outcome o = RunExec(*control_, "echo x; kill -9 $$");
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_TRUE(o.progress->finished);
  EXPECT_FALSE(o.progress->exit_code.has_value());
  EXPECT_EQ(o.progress->signal, 9);
  EXPECT_EQ(o.out, "x\n");
}

}  // namespace warren::guest::testing

namespace warren::guest::testing {
namespace {

// Where the fake runner is reached from for `start`: the runner's server socket (the fake
// behind socat there, as a hostile guest could put one), or an exec channel (no server).
enum class FakeAt { kServer, kExec };

// Replaces the guest's runner with a script (as a hostile guest could) for the rest of this
// connection, and the runner's server with it or with nothing. It reconnects first: the new
// connection's check puts the real runner and server back, so the replacing command itself
// runs under the real ones.
void FakeRunner(GuestControl& control, const std::string& body, FakeAt at = FakeAt::kExec) {
  control.Disconnect(kTestVm);
  const std::string server =
      at == FakeAt::kServer
          ? "printf '#!/bin/sh\\nread l\\nexec %s $l\\n' $r > $r.serve; chmod 700 $r.serve\n"
            // unlink-close=0: the previous fake, killed just before, must not remove this
            // one's socket when it gets round to exiting (under load it did, after this one
            // bound it, and the wait below never ended).
            "timeout 120 socat UNIX-LISTEN:$s,unlink-early,unlink-close=0,fork EXEC:$r.serve "
            "</dev/null >/dev/null 2>&1 & echo $! > $s.fake\n"
            "i=0; while [ ! -S $s ] || [ $s -ef $s.real ]; do\n"
            "  i=$((i + 1)); [ $i -lt 3000 ] || { echo no fake at $s >&2; exit 1; }; sleep 0.01\n"
            "done; rm -f $s.real\n"
          : "rm -f $s $s.real\n";
  Outcome o = RunExec(control,
                      "r=~/.warren/bin/warren-run; s=~/.warren/run/serve.sock; "
                      "kill $(cut -d' ' -f1 ~/.warren/run/serve.pid) $(cat $s.fake 2>/dev/null); "
                      "rm -f $s.fake; ln $s $s.real; "
                      "rm -f $r && cat > $r <<'EOF'\n"
                      "#!/bin/sh\n" +
                          body + "\nEOF\nchmod 700 $r\n" + server);
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
}

TEST_F(GuestControlTest, AHostileRunnerIsContained) {
  SshGuestControlOptions o = target().ControlOptions();
  o.reach_timeout = std::chrono::seconds(30);
  o.reply_timeout = std::chrono::seconds(static_cast<int>(5 * TimeScale()));
  Result<std::unique_ptr<SshGuestControl>> made = SshGuestControl::Create(o);
  ASSERT_TRUE(made.ok());
  SshGuestControl& c = **made;
  // Every fake answers the version check at once (wrongly), and misbehaves only on `start`.
  const std::string prefix = "[ \"$1\" = start ] || exit 0\n";
  const std::string started = "printf 'S\\000\\000\\000\\010%s' \"$2\"\n";
  struct Case {
    const char* name;
    std::string script;
    Code want;
    // At the server there is no stderr: a connection that ends without a frame is one that
    // ended early.
    Code want_at_server = want;
  };
  const std::vector<Case> cases = {
      {"unknown frame type", "printf 'Z\\000\\000\\000\\001x'", Code::kInternal},
      {"oversized frame", "printf 'o\\177\\377\\377\\377'; cat /dev/zero", Code::kInternal},
      {"output before start", "printf 'o\\000\\000\\000\\001x'", Code::kInternal},
      {"start for another job", "printf 'S\\000\\000\\000\\01000000000'", Code::kInternal},
      {"bad end", started + "printf 'x\\000\\000\\000\\003bad'", Code::kInternal},
      {"no end, and attach says nothing", started, Code::kUnavailable},
      {"stderr flood instead of a start", "head -c 20000000 /dev/zero >&2", Code::kInternal,
       Code::kUnavailable},
  };
  // A fake behind the server's socket needs socat in the guest (the local target has it;
  // the images do not): there the fakes come through exec channels only.
  std::vector<FakeAt> routes = {FakeAt::kExec};
  Outcome socat = RunExec(c, "command -v socat");
  if (socat.progress.ok() && socat.progress->exit_code == 0) {
    routes.insert(routes.begin(), FakeAt::kServer);
  } else {
    std::fprintf(stderr, "no socat in this guest: hostile runners through exec channels only\n");
  }
  for (FakeAt at : routes) {
    for (const Case& k : cases) {
      SCOPED_TRACE(at == FakeAt::kServer ? "at the runner's server" : "through exec channels");
      FakeRunner(c, prefix + k.script, at);
      auto t0 = Clock::now();
      Outcome r = RunExec(c, "true");
      // No fake reads its header: when one has exited before the host wrote it, the host finds
      // the channel closed before it reads what the fake sent (a race, seen under ASan in CI),
      // and says so instead. Either way the runner is contained.
      const bool not_taken =
          r.progress.status().code() == Code::kUnavailable &&
          r.progress.status().message().find("did not take the command") != std::string::npos;
      const Code want = at == FakeAt::kServer ? k.want_at_server : k.want;
      EXPECT_TRUE(r.progress.status().code() == want || not_taken)
          << k.name << ": " << r.progress.status().ToString();
      EXPECT_LT(r.progress.status().message().size(), 1000u) << k.name;
      EXPECT_LT(Seconds(t0), 10 * TimeScale()) << k.name;
      EXPECT_EQ(r.out, "") << k.name;
    }
  }
  FakeRunner(c, "[ \"$1\" = list ] && head -c 3000000 /dev/zero");
  EXPECT_EQ(c.Jobs(kTestVm).status().code(), Code::kInternal) << "an oversized listing";
  FakeRunner(c, "printf 'garbage\\n0000000z 1 exit 0 1 x\\n00000001 5 exit 0 6 fine\\n'");
  Result<std::vector<GuestJob>> jobs = c.Jobs(kTestVm);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u) << "bad lines are skipped";
  EXPECT_EQ((*jobs)[0].command, "fine");

  // A runner that hangs even on --version: the check gives up on it (10 s) and replaces it.
  FakeRunner(c, "sleep 600");
  c.Disconnect(kTestVm);
  auto t0 = Clock::now();
  Outcome healed = RunExec(c, "echo healed");
  ASSERT_TRUE(healed.progress.ok()) << healed.progress.status().ToString();
  EXPECT_EQ(healed.out, "healed\n");
  EXPECT_LT(Seconds(t0), 10 + 5 * TimeScale());
}

// ---- Raw channels (ssh NAME@HOST: shells, terminals, sftp, port forwards) ----

// A raw channel driven the way the lobby drives one: on notifications, without blocking.
struct RawRun {
  std::string out, err;
  GuestPipe::End end;
  Status status;
};

class Notified {
 public:
  std::function<void()> Callback() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      ++n_;
      cv_.notify_all();
    };
  }
  void WaitFor(int ms) {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t seen = n_;
    cv_.wait_for(lock, milliseconds(ms), [&] { return n_ != seen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t n_ = 0;
};

RawRun DrainPipe(GuestPipe& pipe, Notified& notified, const std::string& input, bool close_input,
                 double seconds) {
  RawRun r;
  size_t sent = 0;
  bool input_closed = false;
  auto deadline = Clock::now() + milliseconds(static_cast<int>(seconds * 1000));
  while (Clock::now() < deadline) {
    if (!pipe.opening()) {
      if (sent < input.size()) sent += pipe.Write(std::string_view(input).substr(sent));
      if (sent == input.size() && close_input && !input_closed) {
        pipe.CloseInput();
        input_closed = true;
      }
      std::string bytes;
      for (bool is_stderr : {false, true}) {
        while (pipe.PeekOutput(is_stderr, 65536, &bytes)) {
          (is_stderr ? r.err : r.out) += bytes;
          pipe.ConsumeOutput(is_stderr, bytes.size());
        }
      }
      r.end = pipe.end();
      r.status = pipe.status();
      if (r.end.closed || !r.status.ok()) return r;
    }
    notified.WaitFor(100);
  }
  r.status = Timeout("the raw channel did not end");
  return r;
}

int OpenChannelsSettled(SshGuestControl& control, int want, double seconds) {
  auto deadline = Clock::now() + milliseconds(static_cast<int>(seconds * 1000));
  int n = control.OpenChannels(kTestVm);
  while (n != want && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
    n = control.OpenChannels(kTestVm);
  }
  return n;
}

TEST_F(GuestControlTest, RawTerminalCommandWithEnvAndExitStatus) {
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kExec;
  req.command = "echo \"$GREETING\"; stty size; exit 3";
  req.terminal = GuestTerminal{"xterm", 101, 33, 0, 0};
  req.env = {{"GREETING", "it's \"quoted\" $HOME"}};
  Notified notified;
  Result<std::shared_ptr<GuestPipe>> pipe =
      control_->OpenChannel(kTestVm, req, notified.Callback());
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  RawRun r = DrainPipe(**pipe, notified, "", false, 30 * TimeScale());
  ASSERT_TRUE(r.status.ok()) << r.status.ToString() << "\n" << target().LogTail();
  // One stream with a terminal, and the terminal's own line endings.
  EXPECT_EQ(r.out, "it's \"quoted\" $HOME\r\n33 101\r\n");
  EXPECT_EQ(r.end.exit_status, 3);
}

TEST_F(GuestControlTest, RawShellWithoutTerminalReadsItsInput) {
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kShell;
  req.env = {{"FOO", "bar"}};
  Notified notified;
  Result<std::shared_ptr<GuestPipe>> pipe =
      control_->OpenChannel(kTestVm, req, notified.Callback());
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  RawRun r =
      DrainPipe(**pipe, notified, "echo $FOO; echo oops >&2; exit 4\n", true, 30 * TimeScale());
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out, "bar\n");
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(r.end.exit_status, 4);
}

TEST_F(GuestControlTest, RawTcpToAClosedPortFailsClearly) {
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kTcp;
  req.port = 1;
  Notified notified;
  Result<std::shared_ptr<GuestPipe>> pipe =
      control_->OpenChannel(kTestVm, req, notified.Callback());
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  RawRun r = DrainPipe(**pipe, notified, "", false, 30 * TimeScale());
  EXPECT_EQ(r.status.code(), Code::kUnavailable) << r.status.ToString();
  EXPECT_NE(r.status.message().find("port 1"), std::string::npos) << r.status.message();
}

TEST_F(GuestControlTest, FiftyRawChannelsAtOnceAndNoneLeftOpen) {
  // What a client with 50 channels into one VM costs the control connection, and that
  // closing them (a dropped client) leaves nothing open on it.
  constexpr int kN = 50;
  Notified notified;
  std::vector<std::shared_ptr<GuestPipe>> pipes;
  for (int i = 0; i < kN; ++i) {
    GuestChannelRequest req;
    req.kind = GuestChannelRequest::Kind::kExec;
    req.command = "cat";
    Result<std::shared_ptr<GuestPipe>> pipe =
        control_->OpenChannel(kTestVm, req, notified.Callback());
    ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
    pipes.push_back(std::move(pipe).value());
  }
  for (int i = 0; i < kN; ++i) {
    RawRun r =
        DrainPipe(*pipes[i], notified, "n" + std::to_string(i) + "\n", true, 60 * TimeScale());
    ASSERT_TRUE(r.status.ok()) << i << ": " << r.status.ToString();
    EXPECT_EQ(r.out, "n" + std::to_string(i) + "\n");
    EXPECT_EQ(r.end.exit_status, 0);
  }
  pipes.clear();
  EXPECT_EQ(OpenChannelsSettled(*control_, 0, 10 * TimeScale()), 0);

  // Channels still running when their client goes away are closed too.
  for (int i = 0; i < kN; ++i) {
    GuestChannelRequest req;
    req.kind = GuestChannelRequest::Kind::kExec;
    req.command = "cat";
    req.terminal = GuestTerminal{};
    Result<std::shared_ptr<GuestPipe>> pipe =
        control_->OpenChannel(kTestVm, req, notified.Callback());
    ASSERT_TRUE(pipe.ok());
    pipes.push_back(std::move(pipe).value());
  }
  auto t0 = Clock::now();
  while (std::any_of(pipes.begin(), pipes.end(), [](auto& p) { return p->opening(); }) &&
         Seconds(t0) < 60 * TimeScale()) {
    notified.WaitFor(100);
  }
  EXPECT_EQ(control_->OpenChannels(kTestVm), kN);
  pipes.clear();
  EXPECT_EQ(OpenChannelsSettled(*control_, 0, 10 * TimeScale()), 0);
  // And the connection serves on.
  Outcome o = RunExec(*control_, "echo still");
  ASSERT_TRUE(o.progress.ok()) << o.progress.status().ToString();
  EXPECT_EQ(o.out, "still\n");
}

}  // namespace
}  // namespace warren::guest::testing
