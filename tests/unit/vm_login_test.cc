// `ssh NAME@HOST`: which login names lead into a VM (VmLoginTarget) and who may go in
// (AuthorizeVmLogin), against the real interpreter and store with the fake VM host.
#include "lobby/commands/vm_login.h"

#include <gtest/gtest.h>

#include "keys/public_key.h"
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
  EXPECT_EQ(others.status().message(), "no VM named \"web-one\"; see ls");
  EXPECT_EQ(untagged.status().message(), others.status().message());
  EXPECT_EQ(missing.status().message(), "no VM named \"web-two\"; see ls");
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

TEST_F(VmLoginTest, RawChannelsReachTheGuestControl) {
  // The fake echoes: what the lobby bridges is what the guest side sent back.
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kTcp;
  req.port = 8000;
  int notified = 0;
  Result<std::shared_ptr<GuestPipe>> pipe =
      guests_.OpenChannel(IdOf("web-one"), req, [&] { ++notified; });
  ASSERT_TRUE(pipe.ok());
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
}

}  // namespace
}  // namespace warren::vmtest
