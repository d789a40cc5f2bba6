// `ssh NAME@HOST`: which login names lead into a VM (VmLoginTarget), who may go in
// (AuthorizeVmLogin), and the one way streams get there (vm_stream.h: OpenVmStream,
// AuthorizeVmExec, each with its audit line), against the real interpreter and store with
// the fake VM host and guest control.
#include "lobby/commands/vm_login.h"

#include <gtest/gtest.h>

#include "keys/public_key.h"
#include "lobby/commands/vm_stream.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

class VmLoginTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    New(Alice(), {"--name", "web-one"});
    New(Alice(), {"--name", "ci-box", "--tag", "ci"});
  }
};

// The audit lines written while `fn` runs (the log goes to stderr).
template <typename Fn>
std::vector<std::string> AuditLines(Fn fn) {
  testing::internal::CaptureStderr();
  fn();
  std::string all = testing::internal::GetCapturedStderr();
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find('\n', pos);
    if (end == std::string::npos) end = all.size();
    std::string line = all.substr(pos, end - pos);
    if (line.find(" audit ") != std::string::npos) lines.push_back(line);
    pos = end + 1;
  }
  return lines;
}

bool Has(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

TEST_F(VmLoginTest, LoginNamesLeadToVisibleVmsOnly) {
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "web-one"), "web-one");
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "vm+web-one"), "web-one");
  // vm+ always asks for a VM, even one that does not exist (it then gets a clear error).
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "vm+nope-nope"), "nope-nope");
  // Any other name reaches the lobby: local user names, unknown names, others' VMs.
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "alice"), std::nullopt);
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "root"), std::nullopt);
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "nope-nope"), std::nullopt);
  EXPECT_EQ(VmLoginTarget(*store_, Bob(), "web-one"), std::nullopt);
  // A key limited to tag ci sees only ci-box.
  EXPECT_EQ(VmLoginTarget(*store_, AliceCi(), "web-one"), std::nullopt);
  EXPECT_EQ(VmLoginTarget(*store_, AliceCi(), "ci-box"), "ci-box");
}

// Routing by an explicit rule, not by name length: a reserved login name (root, dev, lobby,
// any user's name) always reaches the lobby, even when a VM of that name exists (one made
// before the rule: `new` refuses such names now); vm+NAME still reaches it.
TEST_F(VmLoginTest, ReservedLoginNamesAlwaysReachTheLobby) {
  for (const char* name : {"bob", "dev"}) {
    VmRecord legacy;
    legacy.id = std::string(name) == "bob" ? "legacybob001" : "legacydev001";
    legacy.name = name;
    legacy.owner = "alice";
    legacy.image = "debian@20261129";
    legacy.cpus = 2;
    legacy.memory_mib = 2048;
    legacy.disk_gib = 10;
    legacy.phase = VmPhase::kReady;
    ASSERT_TRUE(store_->CreateVm(legacy).ok()) << name;
    EXPECT_EQ(VmLoginTarget(*store_, Alice(), name), std::nullopt) << name;
    EXPECT_EQ(VmLoginTarget(*store_, Alice(), std::string("vm+") + name), name);
  }
  EXPECT_EQ(VmLoginTarget(*store_, Alice(), "lobby"), std::nullopt);
}

TEST_F(VmLoginTest, AuthorizesTheOwnerOfARunningVm) {
  Caller alice = Alice();
  Result<VmRecord> vm = AuthorizeVmLogin(*interpreter_, alice, "web-one");
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  EXPECT_EQ(vm->id, IdOf("web-one"));
}

TEST_F(VmLoginTest, InvisibleVmsLookExactlyLikeMissingOnes) {
  Caller bob = Bob();
  Caller ci = AliceCi();
  Result<VmRecord> others = AuthorizeVmLogin(*interpreter_, bob, "web-one");
  Result<VmRecord> untagged = AuthorizeVmLogin(*interpreter_, ci, "web-one");
  Result<VmRecord> missing = AuthorizeVmLogin(*interpreter_, bob, "web-two");
  for (const auto* r : {&others, &untagged, &missing}) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->status().code(), Code::kNotFound);
  }
  EXPECT_EQ(others.status().message(), "no VM named \"web-one\"; see ssh -p 2222 warren.test ls");
  EXPECT_EQ(untagged.status().message(), others.status().message());
  EXPECT_EQ(missing.status().message(), "no VM named \"web-two\"; see ssh -p 2222 warren.test ls");
  // Not even a malformed name says more.
  Result<VmRecord> bad = AuthorizeVmLogin(*interpreter_, bob, "Bad_Name");
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
}

TEST_F(VmLoginTest, StoppedAndPausedVmsSayWhatToDo) {
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  Caller alice = Alice();
  Result<VmRecord> vm = AuthorizeVmLogin(*interpreter_, alice, "web-one");
  ASSERT_EQ(vm.status().code(), Code::kConflict);
  EXPECT_EQ(vm.status().message(),
            "web-one is stopped; start it with: ssh -p 2222 warren.test start web-one");
  ASSERT_TRUE(Exec(Alice(), {"start", "web-one"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"pause", "web-one"}).status.ok());
  vm = AuthorizeVmLogin(*interpreter_, alice, "web-one");
  ASSERT_EQ(vm.status().code(), Code::kConflict);
  EXPECT_NE(vm.status().message().find("resume web-one"), std::string::npos);
}

TEST_F(VmLoginTest, NeedsTheSshCommandAndALiveKey) {
  // A key whose --cmds leave out "ssh" may not log into a VM either.
  Scope ls_only;
  ls_only.cmds = {"ls"};
  constexpr const char* kLsKey =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBz6NlekMwAt+D/hyntXXzK5UR2zkdJTLXSAHwsno0De "
      "alice@ls";
  Result<PublicKey> pk = ParseAuthorizedKey(kLsKey);
  ASSERT_TRUE(pk.ok()) << pk.status().ToString();
  ASSERT_TRUE(store_->AddKey(KeyRecord(kLsKey, "alice", "ls", ls_only)).ok());
  Caller limited = As(kLsKey);
  Result<VmRecord> vm = AuthorizeVmLogin(*interpreter_, limited, "web-one");
  EXPECT_EQ(vm.status().code(), Code::kPermissionDenied);

  // A key removed after the login stops at the next channel.
  Caller alice = Alice();
  ASSERT_TRUE(AuthorizeVmLogin(*interpreter_, alice, "web-one").ok());
  ASSERT_TRUE(store_->RemoveKey("alice", alice.key_fingerprint).ok());
  vm = AuthorizeVmLogin(*interpreter_, alice, "web-one");
  EXPECT_EQ(vm.status().code(), Code::kUnauthenticated);
}

TEST_F(VmLoginTest, RawStreamsReachTheGuestThroughTheOneService) {
  // The fake echoes: what the lobby bridges is what the guest side sent back.
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kTcp;
  req.port = 8000;
  int notified = 0;
  Caller alice = Alice("ssh-vm");
  Result<std::shared_ptr<GuestPipe>> pipe = Internal("not opened");
  std::vector<std::string> audit = AuditLines(
      [&] { pipe = OpenVmStream(*interpreter_, alice, "web-one", req, [&] { ++notified; }); });
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  EXPECT_EQ((*pipe)->Write("ping"), 4u);
  std::string got;
  ASSERT_TRUE((*pipe)->PeekOutput(false, 100, &got));
  EXPECT_EQ(got, "ping");
  (*pipe)->ConsumeOutput(false, got.size());
  (*pipe)->CloseInput();
  GuestPipe::End end = (*pipe)->end();
  EXPECT_TRUE(end.closed);
  EXPECT_EQ(end.exit_status, 0);
  EXPECT_GT(notified, 0);
  ASSERT_EQ(guests_.channel_requests().size(), 1u);
  EXPECT_EQ(guests_.channel_requests()[0].port, 8000);

  // One audit line, in the interpreter's shape, naming the channel.
  ASSERT_EQ(audit.size(), 1u);
  const std::string& line = audit[0];
  EXPECT_TRUE(Has(line, "audit cmd=ssh vm=web-one channel=tcp:8000 caller=")) << line;
  EXPECT_TRUE(Has(line, " user=alice surface=ssh-vm code=ok dur_ms=")) << line;
}

TEST_F(VmLoginTest, AStreamIsRefusedByTheLoginRuleAndAuditedOnce) {
  GuestChannelRequest shell;
  shell.kind = GuestChannelRequest::Kind::kShell;
  shell.terminal = GuestTerminal{};
  Caller bob = Bob("ssh-vm");
  Result<std::shared_ptr<GuestPipe>> pipe = Internal("not opened");
  std::vector<std::string> audit =
      AuditLines([&] { pipe = OpenVmStream(*interpreter_, bob, "web-one", shell, [] {}); });
  ASSERT_EQ(pipe.status().code(), Code::kNotFound);
  EXPECT_EQ(pipe.status().message(), "no VM named \"web-one\"; see ssh -p 2222 warren.test ls");
  EXPECT_TRUE(guests_.channel_requests().empty());  // the guest never heard of it
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_TRUE(Has(audit[0], "cmd=ssh vm=web-one channel=shell ")) << audit[0];
  EXPECT_TRUE(Has(audit[0], " code=not_found ")) << audit[0];

  // A guest that cannot be reached: authorized, but the open fails, and the line says so.
  guests_.SetReachable(false);
  Caller alice = Alice("ssh-vm");
  GuestChannelRequest sftp;
  sftp.kind = GuestChannelRequest::Kind::kSubsystem;
  sftp.command = "sftp";
  audit = AuditLines([&] { pipe = OpenVmStream(*interpreter_, alice, "web-one", sftp, [] {}); });
  EXPECT_EQ(pipe.status().code(), Code::kUnavailable);
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_TRUE(Has(audit[0], "channel=sftp ")) << audit[0];
  EXPECT_TRUE(Has(audit[0], " code=unavailable ")) << audit[0];
}

TEST_F(VmLoginTest, ACommandTargetRunsUnderTheRunnerInTheAuthorizedVm) {
  guests_.SetScript("echo hi", {"hi\n", "", 3});
  Caller alice = Alice("ssh-vm");
  Result<VmExecTarget> target = Internal("not authorized");
  std::vector<std::string> audit =
      AuditLines([&] { target = AuthorizeVmExec(*interpreter_, alice, "web-one"); });
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->vm_name(), "web-one");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_TRUE(Has(audit[0], "cmd=ssh vm=web-one channel=exec ")) << audit[0];

  StringSink out, err;
  GuestStreams streams;
  streams.out = &out;
  streams.err = &err;
  GuestCommand cmd;
  cmd.command = "echo hi";
  Result<GuestProgress> progress = target->Exec(cmd, streams);
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  EXPECT_EQ(progress->exit_code, 3);
  EXPECT_EQ(out.str(), "hi\n");
  ASSERT_FALSE(guests_.commands().empty());
  EXPECT_EQ(guests_.commands().back(), "echo hi");  // after the readiness probes of `new`

  // Stopped: refused with the lobby's words, and nothing runs.
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  audit = AuditLines([&] { target = AuthorizeVmExec(*interpreter_, alice, "web-one"); });
  EXPECT_EQ(target.status().code(), Code::kConflict);
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_TRUE(Has(audit[0], " code=conflict ")) << audit[0];
}

}  // namespace
}  // namespace warren::vmtest
