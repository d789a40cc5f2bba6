// user add|ls|rm (lobby/commands/cmd_user.cc) through Interpreter::Execute.
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

}  // namespace
}  // namespace warren::lobbytest
