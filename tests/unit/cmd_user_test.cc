// user add|ls|set|rm (lobby/commands/cmd_user.cc) through Interpreter::Execute.
#include <gtest/gtest.h>

#include "tests/unit/lobby_test_fixture.h"

namespace warren::lobbytest {
namespace {

using nlohmann::json;

class UserCommandTest : public LobbyTest {};

TEST_F(UserCommandTest, RestrictedAdminCannotCreateAnAdmin) {
  Outcome add = Exec(As(kRootKey), {"ssh-key", "add", kSpareKey1, "--cmds", "user"});
  ASSERT_TRUE(add.status.ok()) << add.err;
  Caller limited = As(kSpareKey1);
  Outcome o = Exec(limited, {"user", "add", "bob", "--admin", "--key", kSpareKey3});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  o = Exec(limited, {"user", "add", "bob", "--key", kSpareKey3});
  EXPECT_TRUE(o.status.ok()) << o.err;
}

TEST_F(UserCommandTest, UserAddLsRm) {
  Caller root = As(kRootKey);
  Outcome o = Exec(root, {"user", "add", "bob", "--key", kSpareKey3});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("ssh -p 2222 warren.test"), std::string::npos) << o.out;
  Result<User> bob = store_->GetUser("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_FALSE(bob->admin);
  EXPECT_EQ(bob->created_at, kStart);
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3))->user, "bob");
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3))->name, "bob@host");
  EXPECT_EQ(As(kSpareKey3).user, "bob");

  o = Exec(root, {"user", "add", "carol", "--admin"}, std::string(kSpareKey2) + "\n");
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(store_->GetUser("carol")->admin);

  o = Exec(root, {"user", "ls", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json users = o.Json()["users"];
  ASSERT_EQ(users.size(), 4u);
  EXPECT_EQ(users[0]["name"], "alice");
  EXPECT_EQ(users[1]["name"], "bob");
  EXPECT_EQ(users[1]["keys"], 1);
  EXPECT_EQ(users[2]["admin"], true);
  EXPECT_EQ(users[2]["created_at"], kStart);
  Outcome text = Exec(root, {"user", "ls"});
  EXPECT_NE(text.out.find("NAME"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("carol"), std::string::npos) << text.out;

  o = Exec(root, {"user", "rm", "bob"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("removed user bob and 1 key"), std::string::npos) << o.out;
  EXPECT_FALSE(store_->GetUser("bob").ok());
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3)).status().code(), Code::kNotFound);
}

// A credential limited to a tag reaches no VM outside it, so it cannot remove an account
// that has one (removing the account removes its VMs); nothing is removed when refused.
TEST_F(UserCommandTest, TagLimitedAdminCannotRemoveVmsOutsideItsTag) {
  Caller root = As(kRootKey);
  ASSERT_TRUE(Exec(root, {"user", "add", "bob", "--key", kSpareKey3}).status.ok());
  VmRecord vm;
  vm.id = "bobsvm000001";
  vm.name = "bobs-web";
  vm.owner = "bob";
  vm.image = "debian@1";
  vm.tags = {"prod"};
  ASSERT_TRUE(store_->CreateVm(vm).ok());
  ASSERT_TRUE(Exec(root, {"ssh-key", "add", kSpareKey1, "--tag", "ci"}).status.ok());

  Outcome o = Exec(As(kSpareKey1), {"user", "rm", "bob"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;
  EXPECT_NE(o.err.find("without the tag ci"), std::string::npos) << o.err;
  EXPECT_TRUE(store_->GetUser("bob").ok());
  EXPECT_TRUE(store_->GetVm(vm.id).ok());
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3))->user, "bob");
}

TEST_F(UserCommandTest, UserCommandsValidate) {
  Caller root = As(kRootKey);
  EXPECT_EQ(Exec(root, {"user", "add", "Bob", "--key", kSpareKey3}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "1bob", "--key", kSpareKey3}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", std::string(33, 'b'), "--key", kSpareKey3}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "bob"}).status.code(), Code::kInvalidArgument);  // no key
  EXPECT_EQ(Exec(root, {"user", "add", "bob", "--key", "ssh-ed25519 junk"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "alice", "--key", kSpareKey3}).status.code(),
            Code::kConflict);
  EXPECT_EQ(Exec(root, {"user", "add", "bob", "--key", kAliceKey}).status.code(), Code::kConflict);
  EXPECT_FALSE(store_->GetUser("bob").ok());

  Outcome self = Exec(root, {"user", "rm", "root"});
  EXPECT_EQ(self.status.code(), Code::kConflict);
  EXPECT_NE(self.err.find("yourself"), std::string::npos) << self.err;
  EXPECT_EQ(Exec(root, {"user", "rm", "nobody"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(root, {"user", "rm", "alice", "extra"}).status.code(), Code::kInvalidArgument);
}

// A user's own limits: given at `user add`, changed by `user set` (back to the server's with
// "default"), shown by `user ls` in force, with which are the user's own.
TEST_F(UserCommandTest, LimitsAtAddSetAndLs) {
  Caller root = As(kRootKey);
  Outcome o = Exec(root, {"user", "add", "bob", "--key", kSpareKey3, "--max-vms", "3",
                          "--max-memory", "8G", "--max-disk", "none", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_EQ(o.Json()["user"]["limits"]["vms"], 3);
  EXPECT_EQ(o.Json()["user"]["limits"]["memory_mib"], 8192);
  EXPECT_TRUE(o.Json()["user"]["limits"]["disk_gib"].is_null());  // none
  EXPECT_EQ(o.Json()["user"]["limits"]["cpus"], 16);              // the server's
  Result<User> bob = store_->GetUser("bob");
  EXPECT_EQ(bob->limits.max_vms, 3);
  EXPECT_EQ(bob->limits.max_memory_mib, 8192);
  EXPECT_EQ(bob->limits.max_disk_gib, kNoLimit);
  EXPECT_FALSE(bob->limits.max_cpus.has_value());

  o = Exec(root, {"user", "set", "bob", "--max-cpu", "4", "--max-vms", "default"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out,
            "bob: max-vms 10 (server's), max-cpu 4, max-memory 8 GiB, max-disk none, max-sandboxes "
            "20 (server's)\n");
  bob = store_->GetUser("bob");
  EXPECT_FALSE(bob->limits.max_vms.has_value());
  EXPECT_EQ(bob->limits.max_cpus, 4);
  o = Exec(root, {"user", "set", "bob", "--max-vms", "0", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["user"]["limits"]["vms"], 0);
  EXPECT_EQ(o.Json()["user"]["own_limits"], json({"vms", "cpus", "memory_mib", "disk_gib"}));
  EXPECT_EQ(o.Json()["user"]["held"]["vms"], 0);

  o = Exec(root, {"user", "ls", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json users = o.Json()["users"];
  ASSERT_EQ(users[1]["name"], "bob");
  EXPECT_EQ(users[1]["limits"]["cpus"], 4);
  EXPECT_EQ(users[0]["own_limits"], json::array());  // alice: every limit the server's
  EXPECT_EQ(users[0]["limits"]["disk_gib"], 1024);
  Outcome text = Exec(root, {"user", "ls"});
  EXPECT_NE(text.out.find("VMS"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("0/0"), std::string::npos) << text.out;         // bob's VMs
  EXPECT_NE(text.out.find("0/1024 GiB"), std::string::npos) << text.out;  // alice's disk

  // Refused: nothing to set, nonsense, an unknown user, a non-admin.
  EXPECT_EQ(Exec(root, {"user", "set", "bob"}).status.code(), Code::kInvalidArgument);
  o = Exec(root, {"user", "set", "bob", "--max-memory", "lots"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("--max-memory takes a size"), std::string::npos) << o.err;
  EXPECT_EQ(Exec(root, {"user", "set", "bob", "--max-cpu", "-1"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "carol", "--key", kSpareKey2, "--max-vms", "default"})
                .status.code(),
            Code::kInvalidArgument);  // nothing to go back to
  EXPECT_EQ(Exec(root, {"user", "set", "nobody", "--max-vms", "1"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(As(kAliceKey), {"user", "set", "alice", "--max-vms", "99"}).status.code(),
            Code::kPermissionDenied);
  EXPECT_EQ(store_->GetUser("bob")->limits.max_vms, 0);  // unchanged by the failures
  EXPECT_FALSE(store_->GetUser("alice")->limits.max_vms.has_value());
}

}  // namespace
}  // namespace warren::lobbytest
