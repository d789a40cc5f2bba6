// The guest runner (vmhost/guest/runner/warren-run.c) run on this machine, with HOME in a
// temp dir: its framing and header parsing, job directories, kill, list, gc and the states
// it reports, read back through the host's own parser (runner_protocol.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/unit/guest_test_targets.h"
#include "vmhost/guest/runner_install.h"
#include "vmhost/guest/runner_protocol.h"

namespace warren::guest {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// One run of the runner with pipes on all three standard streams.
class RunnerProcess {
 public:
  RunnerProcess(const std::string& home, const std::vector<std::string>& args) {
    int in[2], out[2], err[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    std::vector<std::string> argv = {testing::RunnerBinaryPath()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::string home_env = "HOME=" + home;
    char* envp[] = {home_env.data(), const_cast<char*>("PATH=/usr/bin:/bin"),
                    const_cast<char*>("SHELL=/bin/sh"), nullptr};
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::chdir(home.c_str());
      ::execve(cargv[0], cargv.data(), envp);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
  }
  ~RunnerProcess() {
    CloseStdin();
    CloseStdout();
    if (err_ >= 0) ::close(err_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  void Write(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(in_, data.data() + off, data.size() - off);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  void CloseStdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  void CloseStdout() {
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }
  // Reads frames until one of `type` arrives (returned) or stdout ends (nullopt).
  std::optional<Frame> ReadUntil(FrameType type, std::vector<Frame>* seen = nullptr) {
    char buf[65536];
    for (;;) {
      for (;;) {
        Result<std::optional<Frame>> f = reader_.Next();
        EXPECT_TRUE(f.ok()) << f.status().ToString();
        if (!f.ok() || !f->has_value()) break;
        Frame fr = std::move(**f);
        if (seen != nullptr) seen->push_back(fr);
        if (fr.type == type) return fr;
      }
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      reader_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  std::string Stderr() {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(err_, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }
  int Wait() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  FrameReader reader_;
};

struct RunnerRun {
  int exit_code = -1;
  std::vector<Frame> frames;
  std::string out;  // stdout frames' payloads
  std::string err;  // stderr frames' payloads
  std::optional<Frame> last;
  std::string text;  // raw stdout for the plain-text verbs
  std::string stderr_text;
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A runner that refuses its arguments exits without reading stdin: writing to it must be
    // an error, not a death.
    ::signal(SIGPIPE, SIG_IGN);
    char tmpl[] = "/tmp/warren-runner-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    home_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(home_, ec);
  }

  std::string Header(const std::string& cmd, bool has_stdin = false,
                     std::vector<std::pair<std::string, std::string>> env = {},
                     std::string cwd = "") {
    GuestCommand c;
    c.command = cmd;
    c.env = std::move(env);
    c.cwd = std::move(cwd);
    Result<std::string> h = EncodeStartHeader(c, has_stdin);
    EXPECT_TRUE(h.ok());
    return h.ok() ? *h : "";
  }

  // Runs a framed verb (start, attach) to its end.
  RunnerRun Framed(const std::vector<std::string>& args, const std::string& input = "") {
    RunnerProcess p(home_, args);
    std::thread writer([&] {
      p.Write(input);
      p.CloseStdin();
    });
    RunnerRun r;
    r.last = p.ReadUntil(FrameType::kEnd, &r.frames);
    writer.join();
    r.stderr_text = p.Stderr();
    r.exit_code = p.Wait();
    for (const Frame& f : r.frames) {
      if (f.type == FrameType::kStdout) r.out += f.payload;
      if (f.type == FrameType::kStderr) r.err += f.payload;
    }
    if (!r.frames.empty()) r.last = r.frames.back();
    return r;
  }

  // Runs a plain-text verb (kill, list, gc, --version).
  RunnerRun Plain(const std::vector<std::string>& args) {
    RunnerProcess p(home_, args);
    p.CloseStdin();
    RunnerRun r;
    std::optional<Frame> none = p.ReadUntil(FrameType::kEnd);  // drains stdout (empty)
    EXPECT_FALSE(none.has_value());
    r.stderr_text = p.Stderr();
    r.exit_code = p.Wait();
    return r;
  }
  std::string ListText() {
    // `list` prints text, not frames: read it through a shell redirect instead.
    std::string out = home_ + "/list.out";
    std::string cmd = "HOME=" + home_ + " " + testing::RunnerBinaryPath() + " list > " + out;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream f(out);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  std::string JobDir(const std::string& id) { return home_ + "/.warren/jobs/" + id; }
  bool WaitForStatus(const std::string& id, double seconds = 10) {
    auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < until) {
      if (fs::exists(JobDir(id) + "/status")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  void WriteFile(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
  }

  std::string home_;
};

TEST_F(RunnerTest, Version) {
  std::string cmd = testing::RunnerBinaryPath() + " --version > " + home_ + "/v";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream f(home_ + "/v");
  std::string v(std::istreambuf_iterator<char>(f), {});
  EXPECT_EQ(v, std::string("warren-run ") + RunnerVersion() + "\n");
}

TEST_F(RunnerTest, StartStreamsFramesAndEnds) {
  RunnerRun r = Framed({"start", "0123abcd"}, Header("echo hi; echo err >&2; exit 3"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  ASSERT_GE(r.frames.size(), 2u);
  EXPECT_EQ(r.frames.front().type, FrameType::kStarted);
  EXPECT_EQ(r.frames.front().payload, "0123abcd");
  EXPECT_EQ(r.out, "hi\n");
  EXPECT_EQ(r.err, "err\n");
  ASSERT_TRUE(r.last.has_value());
  EXPECT_EQ(r.last->type, FrameType::kEnd);
  EXPECT_EQ(r.last->payload, "exit 3");
  for (const char* f :
       {"out", "err", "cmd", "started_at", "ended_at", "status", "pgid", "monitor"}) {
    EXPECT_TRUE(fs::exists(JobDir("0123abcd") + "/" + f)) << f;
  }
  EXPECT_EQ(fs::status(JobDir("0123abcd")).permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(RunnerTest, StdinEnvAndCwd) {
  std::string data(200000, 'z');
  RunnerRun r =
      Framed({"start", "00000001"},
             Header("wc -c; echo \"$A|$WARREN_JOB\"; pwd", true, {{"A", "x y"}}, "/tmp") + data);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.out, "200000\nx y|00000001\n/tmp\n");
  EXPECT_EQ(r.last->payload, "exit 0");
}

TEST_F(RunnerTest, NoStdinReadsEof) {
  RunnerRun r = Framed({"start", "00000002"}, Header("cat; echo end"));
  EXPECT_EQ(r.out, "end\n");
}

TEST_F(RunnerTest, MissingWorkingDirectoryFailsTheJob) {
  RunnerRun r = Framed({"start", "00000003"}, Header("echo no", false, {}, "/nonexistent/dir"));
  EXPECT_EQ(r.last->payload, "exit 1");
  EXPECT_NE(r.err.find("cannot change directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(RunnerTest, MalformedHeadersAreRefused) {
  const std::vector<std::string> bad = {
      "warren-run 1\n2\ncmd 4\ntrue\nstdin 1\n0\nend 0\n\n",       // protocol version 2
      "cmd 4\ntrue\nend 0\n\n",                                    // no version first
      "warren-run 1\n1\nend 0\n\n",                                // no cmd
      "warren-run 1\n1\ncmd 4\ntrue\nfoo 1\nx\nend 0\n\n",         // unknown record
      "warren-run 1\n1\ncmd 4\ntrue\ncmd 4\ntrue\nend 0\n\n",      // repeated cmd
      std::string("warren-run 1\n1\ncmd 3\na\0b\nend 0\n\n", 30),  // NUL
      "warren-run 1\n1\ncmd 4\ntrue\nenv 3\n1=x\nend 0\n\n",       // bad env name
      "warren-run 1\n1\ncmd 4\ntrue\nenv 3\nABC\nend 0\n\n",       // env without '='
      "warren-run 1\n1\ncmd 4x\ntrue\nend 0\n\n",                  // bad length
      "warren-run 1\n1\ncmd 4\ntrueXend 0\n\n",                    // value not terminated
      "warren-run 1\n1\ncmd 99999999\n",                           // over the size limit
      "warren-run 1\n1\ncmd 4\ntrue\nstdin 1\n2\nend 0\n\n",       // bad stdin flag
      "warren-run 1\n1\ncmd 4\ntrue\n",                            // ends early
      "warren-run 1\n1\n" + std::string(100, 'k') + " 1\nx\n",     // key too long
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    std::string id = "0000ff" + std::string(i < 10 ? "0" : "") + std::to_string(i);
    RunnerRun r = Framed({"start", id}, bad[i]);
    EXPECT_EQ(r.exit_code, 2) << i;
    ASSERT_EQ(r.frames.size(), 1u) << i;
    EXPECT_EQ(r.frames[0].type, FrameType::kError) << i;
    EXPECT_EQ(ParseRunnerError(r.frames[0].payload).code(), Code::kInvalidArgument)
        << i << ": " << r.frames[0].payload;
    EXPECT_FALSE(fs::exists(JobDir(id))) << i << ": no job for a refused header";
  }
}

TEST_F(RunnerTest, BadIdsAndDuplicates) {
  for (const char* id : {"../x", "0123ABCD", "0123abc", ""}) {
    RunnerRun r = Framed({"start", id}, Header("true"));
    EXPECT_EQ(r.exit_code, 2) << id;
    ASSERT_EQ(r.frames.size(), 1u);
    EXPECT_EQ(r.frames[0].type, FrameType::kError);
  }
  RunnerRun first = Framed({"start", "0000dddd"}, Header("echo one"));
  EXPECT_EQ(first.out, "one\n");
  RunnerRun again = Framed({"start", "0000dddd"}, Header("echo two"));
  EXPECT_EQ(again.exit_code, 4);
  ASSERT_EQ(again.frames.size(), 1u);
  EXPECT_EQ(ParseRunnerError(again.frames[0].payload).code(), Code::kConflict);
  RunnerRun read = Framed({"attach", "0000dddd", "0", "0"});
  EXPECT_EQ(read.out, "one\n") << "the first job's output is untouched";
}

TEST_F(RunnerTest, AttachFromOffsets) {
  RunnerRun r = Framed({"start", "0000aaaa"}, Header("echo 0123456789; echo abc >&2"));
  ASSERT_EQ(r.last->payload, "exit 0");
  RunnerRun a = Framed({"attach", "0000aaaa", "4", "1"});
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out, "456789\n");
  EXPECT_EQ(a.err, "bc\n");
  EXPECT_EQ(a.last->payload, "exit 0");
  RunnerRun end = Framed({"attach", "0000aaaa", "11", "4"});
  EXPECT_EQ(end.frames.size(), 1u);
  EXPECT_EQ(end.last->type, FrameType::kEnd);

  RunnerRun beyond = Framed({"attach", "0000aaaa", "12", "0"});
  EXPECT_EQ(beyond.exit_code, 2);
  EXPECT_EQ(ParseRunnerError(beyond.last->payload).code(), Code::kInvalidArgument);
  RunnerRun unknown = Framed({"attach", "0000abab", "0", "0"});
  EXPECT_EQ(unknown.exit_code, 3);
  EXPECT_EQ(ParseRunnerError(unknown.last->payload).code(), Code::kNotFound);
  RunnerRun garbage = Framed({"attach", "0000aaaa", "-1", "0"});
  EXPECT_EQ(garbage.exit_code, 2);
}

TEST_F(RunnerTest, AttachFollowsARunningJob) {
  RunnerProcess start(home_, {"start", "0000cccc"});
  start.Write(Header("echo a; sleep 1; echo b; sleep 1; echo c"));
  start.CloseStdin();
  ASSERT_TRUE(start.ReadUntil(FrameType::kStarted).has_value());
  RunnerRun follow = Framed({"attach", "0000cccc", "0", "0"});
  EXPECT_EQ(follow.out, "a\nb\nc\n");
  EXPECT_EQ(follow.last->payload, "exit 0");
}

// `wait` with no time to wait needs to know when the runner has sent all it had: one
// CaughtUp frame per attach, after the spooled output and before anything newer; none for a
// job that has already ended (its End says it all).
TEST_F(RunnerTest, AttachSaysOnceThatItCaughtUp) {
  RunnerProcess start(home_, {"start", "0000c0c0"});
  start.Write(Header("echo a; sleep 1; echo b"));
  start.CloseStdin();
  ASSERT_TRUE(start.ReadUntil(FrameType::kStarted).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RunnerRun follow = Framed({"attach", "0000c0c0", "0", "0"});
  std::string order;
  for (const Frame& f : follow.frames) {
    if (f.type == FrameType::kCaughtUp) {
      EXPECT_TRUE(f.payload.empty());
      order += "|";
    } else if (f.type == FrameType::kStdout) {
      order += f.payload;
    }
  }
  EXPECT_EQ(order, "a\n|b\n");
  EXPECT_EQ(follow.last->payload, "exit 0");

  RunnerRun ended = Framed({"attach", "0000c0c0", "0", "0"});
  for (const Frame& f : ended.frames) EXPECT_NE(f.type, FrameType::kCaughtUp);
  EXPECT_EQ(ended.out, "a\nb\n");
  EXPECT_EQ(ended.last->payload, "exit 0");
}

TEST_F(RunnerTest, LargeOutputComesInBoundedFrames) {
  RunnerRun r = Framed({"start", "0000eeee"}, Header("head -c 1000000 /dev/zero | tr '\\0' a"));
  EXPECT_EQ(r.out, std::string(1000000, 'a'));
  for (const Frame& f : r.frames) EXPECT_LE(f.payload.size(), 32u * 1024);
}

TEST_F(RunnerTest, SignalledJob) {
  RunnerRun r = Framed({"start", "00009999"}, Header("kill -9 $$"));
  EXPECT_EQ(r.last->payload, "signal 9");
}

TEST_F(RunnerTest, DetachedJobKeepsRunning) {
  {
    RunnerProcess start(home_, {"start", "0000bbbb"});
    start.Write(Header("sleep 1; echo done", true));
    ASSERT_TRUE(start.ReadUntil(FrameType::kStarted).has_value());
    start.CloseStdout();  // the host goes away
    EXPECT_EQ(start.Wait(), 0) << "the runner notices and exits";
  }
  ASSERT_TRUE(WaitForStatus("0000bbbb"));
  RunnerRun r = Framed({"attach", "0000bbbb", "0", "0"});
  EXPECT_EQ(r.out, "done\n");
  EXPECT_EQ(r.last->payload, "exit 0");
}

TEST_F(RunnerTest, KillEndsTheProcessGroup) {
  RunnerProcess start(home_, {"start", "00004242"});
  start.Write(Header("sleep 4242 & sleep 4242; echo never"));
  start.CloseStdin();
  ASSERT_TRUE(start.ReadUntil(FrameType::kStarted).has_value());
  std::string pgid;
  std::ifstream(JobDir("00004242") + "/pgid") >> pgid;
  ASSERT_FALSE(pgid.empty());
  EXPECT_EQ(::kill(-std::stoi(pgid), 0), 0);

  auto t0 = Clock::now();
  RunnerRun k = Plain({"kill", "00004242"});
  EXPECT_EQ(k.exit_code, 0) << k.stderr_text;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
  std::optional<Frame> end = start.ReadUntil(FrameType::kEnd);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->payload, "signal 15");
  // Every member is gone (zombies not counted: init reaps them when it gets to it).
  bool alive = false;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state, ppid, pgrp;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != "Z") alive = true;
  }
  EXPECT_FALSE(alive);

  EXPECT_EQ(Plain({"kill", "00004242"}).exit_code, 0) << "an ended job";
  EXPECT_EQ(Plain({"kill", "00004243"}).exit_code, 3) << "an unknown job";
  EXPECT_EQ(Plain({"kill", "../../x"}).exit_code, 2);
}

TEST_F(RunnerTest, ListEscapesAndReportsStates) {
  EXPECT_EQ(ListText(), "") << "no jobs yet, no directory";
  Framed({"start", "00000a01"}, Header("echo 'a\\b'\necho \xe2\x96\xb6; exit 7"));
  std::string text = ListText();
  std::vector<GuestJob> jobs = ParseJobList(text);
  ASSERT_EQ(jobs.size(), 1u) << text;
  EXPECT_EQ(jobs[0].job, "00000a01");
  EXPECT_EQ(jobs[0].command, "echo 'a\\b'\necho \xe2\x96\xb6; exit 7");
  EXPECT_EQ(jobs[0].exit_code, 7);
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line per job: " << text;
}

TEST_F(RunnerTest, ListIsNewestFirstAndBounded) {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  for (int i = 0; i < 5000; ++i) {
    char id[9];
    std::snprintf(id, sizeof id, "%08x", i * 7919 % 5000);  // directory order != age order
    fs::create_directories(JobDir(id));
    WriteFile(JobDir(id) + "/started_at", std::to_string(1000 + (i * 7919 % 5000)) + "\n");
    WriteFile(JobDir(id) + "/status", "exit 0\n");
    WriteFile(JobDir(id) + "/ended_at", "9999\n");
    WriteFile(JobDir(id) + "/cmd", std::string(300, '\x01'));  // 4 bytes each when escaped
  }
  std::string text = ListText();
  EXPECT_LE(text.size(), 1024u * 1024);
  std::vector<GuestJob> jobs = ParseJobList(text);
  ASSERT_GT(jobs.size(), 500u);
  EXPECT_EQ(jobs[0].job, "00001387") << "the newest (started_at 5999) first";
  EXPECT_EQ(jobs[0].started_at, 5999);
  EXPECT_EQ(jobs[0].command, std::string(256, '\x01'));
  for (size_t i = 1; i < jobs.size(); ++i) EXPECT_GT(jobs[i - 1].started_at, jobs[i].started_at);
}

TEST_F(RunnerTest, JobsWhoseMonitorIsGoneAreLost) {
  std::string root = home_ + "/.warren/jobs";
  fs::create_directories(root);
  auto fake = [&](const std::string& id, const std::string& boot, const std::string& monitor) {
    fs::create_directories(JobDir(id));
    WriteFile(JobDir(id) + "/started_at", "1000\n");
    WriteFile(JobDir(id) + "/cmd", "fake " + id);
    WriteFile(JobDir(id) + "/out", "partial");
    WriteFile(JobDir(id) + "/err", "");
    if (!boot.empty()) WriteFile(JobDir(id) + "/boot_id", boot);
    if (!monitor.empty()) WriteFile(JobDir(id) + "/monitor", monitor);
  };
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  fake("00000b01", "another-boot", "1 1");    // the VM restarted under it
  fake("00000b02", boot, "999999999 12345");  // its monitor died
  fake("00000b03", boot, "");                 // never got a monitor, long ago
  std::vector<GuestJob> jobs = ParseJobList(ListText());
  ASSERT_EQ(jobs.size(), 3u);
  for (const GuestJob& j : jobs) {
    EXPECT_TRUE(j.finished) << j.job;
    EXPECT_FALSE(j.exit_code.has_value()) << j.job;
  }
  RunnerRun r = Framed({"attach", "00000b01", "0", "0"});
  EXPECT_EQ(r.out, "partial");
  EXPECT_EQ(r.last->payload, "lost");
  EXPECT_EQ(Plain({"kill", "00000b02"}).exit_code, 0) << "nothing to kill";
}

TEST_F(RunnerTest, GcRemovesWhatEndedMoreThanADayAgo) {
  Framed({"start", "00000c01"}, Header("echo recent"));
  Framed({"start", "00000c02"}, Header("echo old"));
  WriteFile(JobDir("00000c02") + "/ended_at", std::to_string(::time(nullptr) - 2 * 86400) + "\n");
  RunnerProcess running(home_, {"start", "00000c03"});
  running.Write(Header("sleep 30"));
  running.CloseStdin();
  ASSERT_TRUE(running.ReadUntil(FrameType::kStarted).has_value());
  fs::create_directories(JobDir("00000c04"));  // a start that died half-way, long ago
  struct timeval old[2] = {{::time(nullptr) - 3 * 86400, 0}, {::time(nullptr) - 3 * 86400, 0}};
  ::utimes(JobDir("00000c04").c_str(), old);
  fs::create_directories(JobDir("00000c05"));  // ... or just now

  std::string cmd = "HOME=" + home_ + " " + testing::RunnerBinaryPath() + " gc > " + home_ + "/gc";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(fs::exists(JobDir("00000c01")));
  EXPECT_FALSE(fs::exists(JobDir("00000c02")));
  EXPECT_TRUE(fs::exists(JobDir("00000c03")));
  EXPECT_FALSE(fs::exists(JobDir("00000c04")));
  EXPECT_TRUE(fs::exists(JobDir("00000c05")));
  Plain({"kill", "00000c03"});
}

// `serve` (runner/serve.c): the runner that stays, reached on its socket.
class ServeTest : public RunnerTest {
 protected:
  void TearDown() override {
    if (pid_t p = ServerPid(); p > 0) ::kill(p, SIGKILL);
    RunnerTest::TearDown();
  }
  std::string Socket() { return home_ + "/.warren/run/serve.sock"; }
  // `warren-run serve` with this environment added; its stdout.
  std::string Serve(const std::string& env = "") {
    std::string out = home_ + "/serve.out";
    std::string cmd = "env -i HOME=" + home_ + " PATH=/usr/bin:/bin SHELL=/bin/sh " + env + " " +
                      testing::RunnerBinaryPath() + " serve > " + out;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream f(out);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  pid_t ServerPid() {
    std::ifstream f(home_ + "/.warren/run/serve.pid");
    int pid = 0;
    f >> pid;
    return pid;
  }
  // One connection to the server: `line`, then `input`, then EOF; the frames back.
  RunnerRun Served(const std::string& line, const std::string& input) {
    RunnerRun r;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = Socket();
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "connect " << path << ": " << std::strerror(errno);
      ::close(fd);
      return r;
    }
    std::string sent = line + input;
    EXPECT_EQ(::write(fd, sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
    ::shutdown(fd, SHUT_WR);
    FrameReader reader;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      reader.Feed(std::string_view(buf, static_cast<size_t>(n)));
      for (;;) {
        Result<std::optional<Frame>> f = reader.Next();
        EXPECT_TRUE(f.ok()) << f.status().ToString();
        if (!f.ok() || !f->has_value()) break;
        r.frames.push_back(std::move(**f));
        if (r.frames.back().type == FrameType::kStdout) r.out += r.frames.back().payload;
      }
    }
    ::close(fd);
    if (!r.frames.empty()) r.last = r.frames.back();
    return r;
  }
};

TEST_F(ServeTest, StartsJobsOnItsSocketInItsEnvironmentWithoutShlvl) {
  EXPECT_EQ(Serve("SHLVL=4 FOO=from-serve"), "serve " + Socket() + "\n");
  EXPECT_TRUE(fs::is_socket(Socket()));
  EXPECT_EQ(fs::status(home_ + "/.warren/run").permissions() & fs::perms::all,
            fs::perms::owner_all);
  const pid_t server = ServerPid();
  ASSERT_GT(server, 0);
  EXPECT_EQ(::kill(server, 0), 0);

  RunnerRun r = Served(
      "start 0000beef\n",
      Header("echo \"$FOO|${SHLVL-none}|$WARREN_JOB\"; pwd; cat", true, {}, "/tmp") + "typed\n");
  ASSERT_FALSE(r.frames.empty());
  EXPECT_EQ(r.frames.front().type, FrameType::kStarted);
  EXPECT_EQ(r.out, "from-serve|none|0000beef\n/tmp\ntyped\n");
  ASSERT_TRUE(r.last.has_value());
  EXPECT_EQ(r.last->payload, "exit 0");

  // Bad requests get an Error frame, and the server goes on.
  r = Served("bogus 1\n", "");
  ASSERT_TRUE(r.last.has_value());
  EXPECT_EQ(r.last->type, FrameType::kError);
  r = Served("start ../x\n", Header("true"));
  ASSERT_TRUE(r.last.has_value());
  EXPECT_EQ(r.last->type, FrameType::kError);
  r = Served(std::string(200, 'x') + "\n", "");
  EXPECT_TRUE(r.frames.empty()) << "an overlong request line is dropped";
  r = Served("start 0000bee2\n", Header("echo still"));
  EXPECT_EQ(r.out, "still\n");

  // A later `serve` (the next connection's) takes the socket and stops this one.
  EXPECT_EQ(Serve("FOO=second"), "serve " + Socket() + "\n");
  const pid_t second = ServerPid();
  EXPECT_NE(second, server);
  auto until = Clock::now() + std::chrono::seconds(5);
  while (::kill(server, 0) == 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(::kill(server, 0), 0) << "the replaced server still runs";
  r = Served("start 0000bee3\n", Header("echo $FOO"));
  EXPECT_EQ(r.out, "second\n");
}

TEST_F(ServeTest, OnlyItsUserReachesIt) {
  ASSERT_EQ(Serve(), "serve " + Socket() + "\n");
  // CI runs as root; elsewhere, without root there is no other uid to try.
  if (::geteuid() != 0 && std::getenv("CI") == nullptr) GTEST_SKIP() << "needs root";
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = Socket();
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ::_exit(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 1 : 0);
  }
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "another user connected";
}

TEST_F(RunnerTest, UsageErrors) {
  EXPECT_EQ(Plain({}).exit_code, 2);
  EXPECT_EQ(Plain({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Plain({"start"}).exit_code, 2);
}

}  // namespace
}  // namespace warren::guest
