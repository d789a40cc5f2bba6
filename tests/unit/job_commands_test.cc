// `ssh VM CMD…` and jobs (wait, kill, jobs) through Interpreter::Execute, with
// FakeGuestControl: streaming over SSH vs collected output elsewhere, exit statuses, stderr
// kept apart, the remote command's own flags, hand-back as a job and reading it back,
// truncation, restarts — plus the HeadTailBuffer that bounds returned output.
#include <thread>

#include "keys/base64.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/head_tail.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

class JobCommandTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    New(Alice(), {"--name", "web-one"});
    id_ = IdOf("web-one");
  }

  // A command that prints `out` and keeps running; returns the job id it will get.
  std::string Hold(const std::string& command, const std::string& out = "",
                   const std::string& err = "") {
    guests_.SetScript(command, {out, err, std::nullopt, /*hold=*/true});
    return guests_.next_job();
  }

  std::string id_;
};

// --- ssh -----------------------------------------------------------------------------------

TEST_F(JobCommandTest, SshStreamsAndPropagatesTheExitStatus) {
  guests_.SetScript("make test", {"ok 1\n", "FAIL 2\n", 3});
  Outcome o = Exec(Alice(), {"ssh", "web-one", "make", "test"});
  EXPECT_EQ(o.out, "ok 1\n");
  EXPECT_EQ(o.err, "FAIL 2\n");  // as OpenSSH: the status says it, no extra line
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_EQ(o.exit_status, 3);

  guests_.SetScript("ok", {"fine\n", "", 0});
  o = Exec(Alice(), {"ssh", "web-one", "ok"});
  EXPECT_TRUE(o.status.ok());
  EXPECT_EQ(o.exit_status, 0);
  EXPECT_EQ(o.out, "fine\n");
  EXPECT_EQ(o.err, "");
}

TEST_F(JobCommandTest, SshJsonKeepsStdoutAndStderrApart) {
  guests_.SetScript("make test", {"ok 1\n", "FAIL 2\n", 3});
  Outcome o = Exec(Alice(), {"ssh", "--json", "web-one", "make", "test"});
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_EQ(o.exit_status, 3);
  json j = o.Json();
  EXPECT_EQ(j["stdout"], "ok 1\n");
  EXPECT_EQ(j["stderr"], "FAIL 2\n");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_FALSE(j.contains("job"));
  EXPECT_EQ(o.err, "");
}

// What a command in a VM prints need not be text. JSON carries bytes that are not UTF-8 as
// base64, byte for byte (the same rule for --json, /exec and MCP); text stays text; output
// returned as text passes the bytes through untouched.
TEST_F(JobCommandTest, OutputThatIsNotTextComesBackByteForByte) {
  const std::string bytes("\x89\xff\x00\xfe binary \x80\xc0", 14);
  const std::string err_bytes("\xc3\x28 bad\n", 7);
  guests_.SetScript("head -c 64 /dev/urandom", {bytes, err_bytes, 0});
  Outcome o = Exec(Alice(), {"ssh", "--json", "web-one", "head -c 64 /dev/urandom"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  EXPECT_EQ(j["stdout"], "");
  ASSERT_TRUE(j.contains("stdout_base64")) << j.dump();
  EXPECT_EQ(Base64Decode(j["stdout_base64"].get<std::string>()).value(), bytes);
  EXPECT_EQ(j["stderr"], "");
  EXPECT_EQ(Base64Decode(j["stderr_base64"].get<std::string>()).value(), err_bytes);
  EXPECT_EQ(j["exit_code"], 0);

  guests_.SetScript("echo", {"h\xc3\xa9llo\n", "", 0});
  j = Exec(Alice(), {"ssh", "--json", "web-one", "echo"}).Json();
  EXPECT_EQ(j["stdout"], "h\xc3\xa9llo\n");
  EXPECT_FALSE(j.contains("stdout_base64"));

  // As text: streamed over SSH, or collected elsewhere, the bytes are the guest's.
  EXPECT_EQ(Exec(Alice(), {"ssh", "web-one", "head -c 64 /dev/urandom"}).out, bytes);
  o = Exec(Alice("exec"), {"ssh", "web-one", "head -c 64 /dev/urandom"});
  EXPECT_EQ(o.out, bytes);
  EXPECT_EQ(o.err, err_bytes);

  // And `wait` on a job that prints bytes.
  const std::string job = Hold("bin", bytes.substr(0, 4));
  ASSERT_TRUE(Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "bin"}).status.ok());
  guests_.Release(job, 0, bytes.substr(4));
  j = Exec(Alice("mcp"), {"wait", "--json", "web-one/" + job}).Json();
  EXPECT_EQ(Base64Decode(j["stdout_base64"].get<std::string>()).value(), bytes.substr(4));
}

// How to go on with a job that still runs names only what the caller may run: a key held
// to `ssh` alone is not sent to `wait` or `kill`, which would refuse it.
TEST_F(JobCommandTest, TheRunningNoteNamesOnlyWhatTheCallerMayRun) {
  std::string job = Hold("serve", "up\n");
  json j = Exec(Alice("mcp"), {"ssh", "--json", "--wait-seconds", "0", "web-one", "serve"}).Json();
  const std::string name = "web-one/" + job;
  EXPECT_EQ(j["note"], "still running as job " + name + "; \"wait " + name +
                           "\" for the rest, \"kill " + name + "\" to stop it")
      << j.dump();

  constexpr const char* kSshOnlyKey =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 s@host";
  Scope ssh_only;
  ssh_only.cmds = {"ssh"};
  ASSERT_TRUE(store_->AddKey(KeyRecord(kSshOnlyKey, "alice", "ssh-only", ssh_only)).ok());
  job = Hold("serve2");
  Outcome o =
      Exec(As(kSshOnlyKey, "mcp"), {"ssh", "--json", "--wait-seconds", "0", "web-one", "serve2"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  j = o.Json();
  EXPECT_EQ(j["job"], "web-one/" + job);
  EXPECT_EQ(j["note"], "still running as job web-one/" + job +
                           ", which goes on in the VM after this call; look at it with: \"ssh "
                           "web-one ps\"")
      << j.dump();
  // In the text for people too.
  o = Exec(As(kSshOnlyKey, "exec"), {"ssh", "--wait-seconds", "0", "web-one", "serve2"});
  EXPECT_TRUE(Has(o.err, "goes on in the VM")) << o.err;
  EXPECT_FALSE(Has(o.err, "wait ")) << o.err;
  EXPECT_FALSE(Has(o.err, "kill ")) << o.err;
}

TEST_F(JobCommandTest, WordsAfterTheVmBelongToTheRemoteCommand) {
  ASSERT_TRUE(Exec(Alice(), {"ssh", "web-one", "ls", "-la"}).status.ok());
  EXPECT_EQ(guests_.commands().back(), "ls -la");
  ASSERT_TRUE(Exec(Alice(), {"ssh", "web-one", "grep", "--help", "-r", "x"}).status.ok());
  EXPECT_EQ(guests_.commands().back(), "grep --help -r x");
  // Not our --json: the remote program's. Output is the program's, not JSON.
  guests_.SetScript("tool --json", {"plain\n", "", 0});
  Outcome o = Exec(Alice(), {"ssh", "web-one", "tool", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "plain\n");
  // Nor our --wait-seconds.
  ASSERT_TRUE(Exec(Alice(), {"ssh", "web-one", "sleep", "--wait-seconds", "3"}).status.ok());
  EXPECT_EQ(guests_.commands().back(), "sleep --wait-seconds 3");
  // "--" after the VM only ends our flags.
  ASSERT_TRUE(Exec(Alice(), {"ssh", "web-one", "--", "echo", "hi"}).status.ok());
  EXPECT_EQ(guests_.commands().back(), "echo hi");
  // One quoted word stays one command line for the VM's shell.
  ASSERT_TRUE(Exec(Alice(), {"ssh", "web-one", "cd /srv && make"}).status.ok());
  EXPECT_EQ(guests_.commands().back(), "cd /srv && make");
  // Flags before the VM are ours.
  o = Exec(Alice(), {"ssh", "--wait-seconds", "99", "web-one", "true"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(Alice(), {"ssh", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(o.err, "ssh -p 2222 web-one@warren.test")) << o.err;
}

TEST_F(JobCommandTest, SshNeedsARunningVmAndSaysHowToGetThere) {
  // The target (table entry "VM", running) is resolved at dispatch: nothing runs in the VM.
  const size_t before = guests_.commands().size();
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  Outcome o = Exec(Alice(), {"ssh", "web-one", "true"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(o.status.message(), "web-one is stopped; start it with: \"start web-one\"") << o.err;
  ASSERT_TRUE(Exec(Alice(), {"start", "web-one"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"pause", "web-one"}).status.ok());
  o = Exec(Alice(), {"ssh", "web-one", "true"});
  EXPECT_EQ(o.status.message(), "web-one is paused; resume it with: \"resume web-one\"") << o.err;
  EXPECT_EQ(guests_.commands().size(), before);
  EXPECT_EQ(Exec(Alice(), {"ssh", "no-such-vm", "true"}).status.code(), Code::kNotFound);
}

TEST_F(JobCommandTest, SshPassesStdin) {
  Outcome o = Exec(Alice(), {"ssh", "web-one", "cat"}, "hello\n");
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.out, "hello\n");
  EXPECT_EQ(guests_.last_stdin(), "hello\n");
}

TEST_F(JobCommandTest, OtherSurfacesCollectAndReturnInOnePiece) {
  guests_.SetScript("ok", {"out\n", "err\n", 0});
  Outcome o = Exec(Alice("exec"), {"ssh", "web-one", "ok"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.out, "out\n");
  EXPECT_EQ(o.err, "err\n");
}

TEST_F(JobCommandTest, HandBackAsAJobThenWaitUntilItEnds) {
  const std::string job = Hold("long build", "step 1\n", "warn 1\n");
  const std::string name = "web-one/" + job;
  Outcome o =
      Exec(Alice("mcp"), {"ssh", "--json", "--wait-seconds", "0", "web-one", "long", "build"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.exit_status, 0);
  json j = o.Json();
  EXPECT_EQ(j["stdout"], "step 1\n");
  EXPECT_EQ(j["stderr"], "warn 1\n");
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["job"], name);
  JobRecord rec = store_->GetJob(id_, job).value();
  EXPECT_EQ(rec.command, "long build");
  EXPECT_EQ(rec.owner, "alice");
  EXPECT_EQ(rec.stdout_offset, 7u);
  EXPECT_EQ(rec.stderr_offset, 7u);
  EXPECT_FALSE(rec.finished);

  // Only what is new since the last read.
  guests_.Append(job, "step 2\n");
  o = Exec(Alice("mcp"), {"wait", "--json", "--wait-seconds", "0", name});
  ASSERT_TRUE(o.status.ok()) << o.out;
  j = o.Json();
  EXPECT_EQ(j["stdout"], "step 2\n");
  EXPECT_EQ(j["stderr"], "");
  EXPECT_EQ(j["finished"], false);
  EXPECT_EQ(j["job"], name);
  EXPECT_EQ(store_->GetJob(id_, job)->stdout_offset, 14u);

  // It ends while we wait.
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    guests_.Release(job, 4, "done\n");
  });
  o = Exec(Alice("mcp"), {"wait", "--json", "--wait-seconds", "5", name});
  finisher.join();
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_EQ(o.exit_status, 4);
  j = o.Json();
  EXPECT_EQ(j["stdout"], "done\n");
  EXPECT_EQ(j["finished"], true);
  EXPECT_EQ(j["exit_code"], 4);
  rec = store_->GetJob(id_, job).value();
  EXPECT_TRUE(rec.finished);
  EXPECT_EQ(rec.exit_code, 4);
  EXPECT_EQ(rec.ended_at, kStart);

  // Waiting again: nothing new, the same status.
  o = Exec(Alice("mcp"), {"wait", "--json", name});
  EXPECT_EQ(o.exit_status, 4);
  EXPECT_EQ(o.Json()["stdout"], "");
}

TEST_F(JobCommandTest, HandBackOverSshStreamsAndNotes) {
  const std::string job = Hold("serve", "listening\n");
  Outcome o = Exec(Alice(), {"ssh", "--wait-seconds", "0", "web-one", "serve"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "listening\n");
  EXPECT_TRUE(Has(o.err, "still running as job web-one/" + job)) << o.err;
  EXPECT_TRUE(Has(o.err, "wait web-one/" + job)) << o.err;
  guests_.Release(job, 0, "bye\n");
  o = Exec(Alice(), {"wait", "web-one/" + job});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "bye\n");
}

TEST_F(JobCommandTest, SshOverSshWithoutWaitStreamsUntilTheEnd) {
  const std::string job = Hold("slow", "start\n");
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    guests_.Release(job, 2, "end\n");
  });
  Outcome o = Exec(Alice(), {"ssh", "web-one", "slow"});
  finisher.join();
  EXPECT_EQ(o.out, "start\nend\n");
  EXPECT_EQ(o.exit_status, 2);
  EXPECT_FALSE(store_->GetJob(id_, job).ok());  // it never became a job
}

TEST_F(JobCommandTest, CancelBeforeHandBackKillsTheCommand) {
  const std::string job = Hold("slow");
  auto cancel = std::make_shared<CancelSignal>();
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel->Cancel();
  });
  Outcome o = Exec(Alice(), {"ssh", "web-one", "slow"}, "", cancel);
  canceller.join();
  EXPECT_EQ(o.status.code(), Code::kCancelled);
  EXPECT_TRUE(guests_.finished(job));
  EXPECT_EQ(guests_.killed(), 1);
}

TEST_F(JobCommandTest, KillEndsTheJob) {
  const std::string job = Hold("sleep 1000");
  const std::string name = "web-one/" + job;
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  Outcome o = Exec(Alice(), {"kill", name});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "killed " + name + "\n");
  o = Exec(Alice("mcp"), {"wait", "--json", name});
  json j = o.Json();
  EXPECT_EQ(j["finished"], true);
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["signal"], 9);
  EXPECT_EQ(o.exit_status, 128 + 9);
  o = Exec(Alice(), {"kill", name});
  EXPECT_TRUE(o.status.ok());
  EXPECT_TRUE(Has(o.out, "already ended")) << o.out;
}

TEST_F(JobCommandTest, JobNamesAreCheckedAndScoped) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one/xyz"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one/0000ffff"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"wait", "web-one/" + job}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"kill", "web-one/" + job}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(AliceCi(), {"wait", "web-one/" + job}).status.code(), Code::kNotFound);
  EXPECT_FALSE(guests_.finished(job));
}

TEST_F(JobCommandTest, JobsListsAndRefreshesFromTheGuest) {
  EXPECT_EQ(Exec(Alice(), {"jobs"}).out, "no jobs\n");
  const std::string a = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  const std::string b = Hold("make");
  ASSERT_TRUE(Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "make"}).status.ok());
  guests_.Release(b, 0);

  json j = Exec(Alice(), {"jobs", "--json"}).Json();
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][0]["job"], "web-one/" + a);
  EXPECT_EQ(j["jobs"][0]["command"], "sleep 1000");
  EXPECT_EQ(j["jobs"][0]["finished"], false);
  EXPECT_EQ(j["jobs"][1]["job"], "web-one/" + b);
  EXPECT_EQ(j["jobs"][1]["finished"], true);  // learned from the guest
  EXPECT_EQ(j["jobs"][1]["exit_code"], 0);
  EXPECT_TRUE(store_->GetJob(id_, b)->finished);

  Outcome text = Exec(Alice(), {"jobs", "web-one"});
  EXPECT_TRUE(Has(text.out, "running")) << text.out;
  EXPECT_TRUE(Has(text.out, "exited 0")) << text.out;
  EXPECT_TRUE(Exec(Bob(), {"jobs", "--json"}).Json()["jobs"].empty());
  EXPECT_EQ(Exec(Bob(), {"jobs", "web-one"}).status.code(), Code::kNotFound);
}

TEST_F(JobCommandTest, JobsEndWithTheirVmAndExpireAfterADay) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  json j = Exec(Alice(), {"jobs", "--json"}).Json();
  ASSERT_EQ(j["jobs"].size(), 1u);
  EXPECT_EQ(j["jobs"][0]["finished"], true);
  EXPECT_TRUE(j["jobs"][0]["exit_code"].is_null());
  Outcome o = Exec(Alice("mcp"), {"wait", "--json", "web-one/" + job});
  EXPECT_EQ(o.Json()["finished"], true);
  EXPECT_EQ(o.exit_status, 255);  // no status came back

  clock_.now += 24 * 3600 + 1;
  o = Exec(Alice(), {"wait", "web-one/" + job});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "more than a day ago")) << o.err;
  EXPECT_TRUE(Exec(Alice(), {"jobs", "--json"}).Json()["jobs"].empty());
  EXPECT_TRUE(store_->ListJobs(id_)->empty());
}

TEST_F(JobCommandTest, AJobTheGuestForgotIsGone) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  guests_.Forget(job);
  Outcome o = Exec(Alice(), {"wait", "web-one/" + job});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetJob(id_, job)->finished);
}

TEST_F(JobCommandTest, JobFollowsItsVmThroughARename) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"rename", "web-one", "web-new"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"jobs", "--json"}).Json()["jobs"][0]["job"], "web-new/" + job);
  EXPECT_TRUE(Exec(Alice(), {"wait", "--wait-seconds", "0", "web-new/" + job}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one/" + job}).status.code(), Code::kNotFound);
}

TEST_F(JobCommandTest, JobsSurviveAStoreRestart) {
  const std::string job = Hold("sleep 1000", "a\n");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  interpreter_.reset();
  OpenStore();
  MakeInterpreter();
  guests_.Release(job, 0, "b\n");
  Outcome o = Exec(Alice("mcp"), {"wait", "--json", "web-one/" + job});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["stdout"], "b\n");  // resumes where the last read stopped
  EXPECT_EQ(o.Json()["exit_code"], 0);
}

TEST_F(JobCommandTest, LongOutputComesBackAsHeadAndTail) {
  std::string big;
  for (int i = 0; big.size() < 100'000; ++i) big += "line " + std::to_string(i) + "\n";
  guests_.SetScript("spew", {big, "", 0});
  Outcome o = Exec(Alice("exec"), {"ssh", "--json", "web-one", "spew"});
  ASSERT_TRUE(o.status.ok());
  json j = o.Json();
  std::string out = j["stdout"];
  EXPECT_LT(out.size(), 36'000u);
  EXPECT_GT(out.size(), 34'000u);
  EXPECT_EQ(out.substr(0, 14), "line 0\nline 1\n");
  EXPECT_EQ(out.substr(out.size() - 20), big.substr(big.size() - 20));
  EXPECT_TRUE(Has(out, "bytes left out of " + std::to_string(big.size())))
      << out.substr(17000, 200);
  EXPECT_EQ(j["truncated"], true);

  // Streamed over SSH, nothing is cut.
  o = Exec(Alice(), {"ssh", "web-one", "spew"});
  EXPECT_EQ(o.out, big);
}

// --- HeadTailBuffer ----------------------------------------------------------------------

TEST(HeadTailBufferTest, KeepsEverythingThatFits) {
  HeadTailBuffer b(10);
  b.Write("hello");
  b.Write("world");
  EXPECT_EQ(b.Text(), "helloworld");
  EXPECT_FALSE(b.truncated());
  EXPECT_EQ(b.total_bytes(), 10u);
}

TEST(HeadTailBufferTest, KeepsStartAndEnd) {
  HeadTailBuffer b(10);
  b.Write("abcdefghij");
  b.Write("klmnopqrstuvwxyz");
  EXPECT_TRUE(b.truncated());
  EXPECT_EQ(b.Text(), "abcde\n[… 16 bytes left out of 26 …]\nvwxyz");
}

TEST(HeadTailBufferTest, ManySmallWritesAndOneHuge) {
  HeadTailBuffer small(8);
  for (char c = 'a'; c <= 'z'; ++c) small.Write(std::string(1, c));
  EXPECT_EQ(small.Text(), "abcd\n[… 18 bytes left out of 26 …]\nwxyz");
  HeadTailBuffer huge(8);
  huge.Write(std::string(1000, 'x') + "tail");
  EXPECT_EQ(huge.Text(), "xxxx\n[… 996 bytes left out of 1004 …]\ntail");
}

TEST(HeadTailBufferTest, CutsAtCharacterBoundaries) {
  HeadTailBuffer b(8);
  b.Write("aaa\xC3\xA9");  // 'é' straddles the head's end
  b.Write(std::string(20, '-'));
  b.Write(
      "\xE2\x82\xAC"
      "zz");  // '€' straddles the tail's start
  std::string text = b.Text();
  EXPECT_EQ(text.substr(0, 4), "aaa\n");
  EXPECT_EQ(text.substr(text.size() - 2), "zz");
  // Only whole characters: the output is valid UTF-8, which JSON needs.
  EXPECT_NO_THROW((void)json(text).dump());
  EXPECT_EQ(text.find("\xC3"), std::string::npos);
  EXPECT_EQ(text.find("\x82"), std::string::npos);
}

}  // namespace
}  // namespace warren::vmtest
