// `ssh VM CMD…` through Interpreter::Execute with FakeGuestControl: streaming over SSH vs
// collected output elsewhere, exit statuses, stderr kept apart, bytes kept as bytes, the
// remote command's own words and flags, hand-back as a job, cancellation, head and tail.
#include <thread>

#include "keys/base64.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/head_tail.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

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

}  // namespace
}  // namespace warren::vmtest
