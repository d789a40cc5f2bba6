// ssh-key list|add|remove|rename|generate-api-key (lobby/commands/cmd_ssh_key.cc)
// through Interpreter::Execute: keys from argv and stdin, the narrower-only rule for
// restricted callers, API tokens and their labels.
#include <gtest/gtest.h>

#include "lobby/base/error_map.h"
#include "tests/unit/lobby_test_fixture.h"

namespace warren::lobbytest {
namespace {

using nlohmann::json;

class SshKeyCommandTest : public LobbyTest {};

TEST_F(SshKeyCommandTest, RestrictedCallerCannotAddAWiderKey) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--cmds", "whoami,ssh-key add"});
  // Wider commands.
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--cmds", "whoami,ssh-key list"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("a restricted key can only add narrower keys"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("ssh-key list"), std::string::npos) << o.err;
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey2)).ok());
  // Narrower commands are fine.
  o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--cmds", "whoami"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey2))->scope.cmds,
            (std::vector<std::string>{"whoami"}));
}

TEST_F(SshKeyCommandTest, RestrictedCallerWithoutFlagsInheritsItsLimits) {
  Caller agent =
      AliceKeyWith(kSpareKey1, {"--cmds", "whoami,ssh-key", "--tag", "ci", "--exp", "30d"});
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2});
  ASSERT_TRUE(o.status.ok()) << o.err;
  Scope child = store_->GetKey(Fingerprint(kSpareKey2))->scope;
  EXPECT_EQ(child, agent.scope);
  EXPECT_EQ(child.tag, "ci");
  EXPECT_EQ(child.expires_at, kStart + 30 * 24 * kHour);
}

TEST_F(SshKeyCommandTest, TagRestrictedCallerCannotDropOrChangeItsTag) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--tag", "ci"});
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--tag", "prod"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("keep the tag \"ci\""), std::string::npos) << o.err;
  // A tag-limited key cannot remove its owner's unrestricted key either.
  o = Exec(agent, {"ssh-key", "remove", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("narrower"), std::string::npos) << o.err;
}

TEST_F(SshKeyCommandTest, ExpiringCallerCannotAddALongerLivedKey) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--exp", "7d"});
  for (const char* exp : {"never", "30d", "1y"}) {
    Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--exp", exp});
    EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << exp;
    EXPECT_NE(o.err.find("must expire by"), std::string::npos) << o.err;
  }
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--exp", "1d"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey2))->scope.expires_at, kStart + 24 * kHour);
}

TEST_F(SshKeyCommandTest, SshKeyAddFromSplitArgumentWords) {
  // `ssh HOST ssh-key add ssh-ed25519 AAAA… alice@desktop` arrives as separate words.
  Outcome o = Line(As(kAliceKey), std::string("ssh-key add ") + kSpareKey1);
  ASSERT_TRUE(o.status.ok()) << o.err;
  Result<SshKey> key = store_->GetKey(Fingerprint(kSpareKey1));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->user, "alice");
  EXPECT_EQ(key->name, "alice@desktop");  // from the comment
  EXPECT_EQ(key->comment, "alice@desktop");
  EXPECT_EQ(key->algorithm, "ssh-ed25519");
  EXPECT_EQ(key->added_at, kStart);
  EXPECT_TRUE(key->scope.Unrestricted());
  EXPECT_NE(o.out.find("added key alice@desktop"), std::string::npos) << o.out;
}

TEST_F(SshKeyCommandTest, SshKeyAddFromStdin) {
  std::string in = std::string("# my CI key\n\n") + kSpareKey2 + "\n";
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "add", "--json"}, in);
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  EXPECT_EQ(j["key"]["fingerprint"], Fingerprint(kSpareKey2));
  // "ci key" is not a valid name, so the key gets the first free key-N.
  EXPECT_EQ(j["key"]["name"], "key-2");
  EXPECT_EQ(j["key"]["in_use"], false);
}

TEST_F(SshKeyCommandTest, SshKeyAddValidates) {
  Caller alice = As(kAliceKey);
  Outcome o = Exec(alice, {"ssh-key", "add", "ssh-ed25519", "AAAAnotakey"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_GT(o.err.size(), std::string("error: \n").size()) << o.err;

  o = Exec(alice, {"ssh-key", "add"}, "");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("no key given"), std::string::npos) << o.err;

  o = Exec(alice, {"ssh-key", "add"},
           "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
           "-----END OPENSSH PRIVATE KEY-----\n");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("private key"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("b3BlbnNzaC1"), std::string::npos) << o.err;

  o = Exec(alice, {"ssh-key", "add"}, std::string(kSpareKey1) + "\n" + kSpareKey2 + "\n");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("one key at a time"), std::string::npos) << o.err;

  o = Exec(alice, {"ssh-key", "add"}, std::string(20 * 1024, 'A'));
  EXPECT_EQ(o.status.code(), Code::kTooLarge);

  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "bad name!"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "-x"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--cmds", "lss"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("unknown command \"lss\""), std::string::npos) << o.err;
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--tag", "Bad"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--exp", "soon"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->ListKeys("alice")->size(), 1u);
}

TEST_F(SshKeyCommandTest, SshKeyAddConflicts) {
  Caller alice = As(kAliceKey);
  Outcome o = Exec(alice, {"ssh-key", "add", kAliceKey});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_NE(o.err.find("already on your account as \"laptop\""), std::string::npos) << o.err;
  o = Exec(alice, {"ssh-key", "add", kRootKey});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(o.err.find("root"), std::string::npos) << "names another account: " << o.err;
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kConflict));
}

TEST_F(SshKeyCommandTest, SshKeyListShowsKeys) {
  Caller alice = As(kAliceKey);
  clock_.now = kStart + 10;  // listed by time added
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "ci", "--cmds", "whoami",
                           "--exp", "30d"})
                  .status.ok());
  Outcome o = Exec(alice, {"ssh-key", "list"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("laptop"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("cmds: whoami; expires"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("* the key you are using"), std::string::npos) << o.out;
  json j = Exec(alice, {"ssh-key", "list", "--json"}).Json();
  ASSERT_EQ(j["keys"].size(), 2u);
  EXPECT_EQ(j["keys"][0]["name"], "laptop");
  EXPECT_EQ(j["keys"][0]["in_use"], true);
  EXPECT_EQ(j["keys"][1]["name"], "ci");
  EXPECT_EQ(j["keys"][1]["restrictions"]["cmds"], json::array({"whoami"}));
  EXPECT_EQ(j["keys"][1]["restrictions"]["expires_at"], kStart + 10 + 30 * 24 * kHour);
  EXPECT_EQ(j["keys"][0]["last_used_at"], kStart);  // touched by As()
  // Only the caller's own keys.
  json root = Exec(As(kRootKey), {"ssh-key", "list", "--json"}).Json();
  ASSERT_EQ(root["keys"].size(), 1u);
  EXPECT_EQ(root["keys"][0]["name"], "root-key");
}

TEST_F(SshKeyCommandTest, SshKeyRemoveByNameOrFingerprint) {
  Caller alice = As(kAliceKey);
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "one"}).status.ok());
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey2, "--name", "two"}).status.ok());
  Outcome o = Exec(alice, {"ssh-key", "remove", "one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey1)).ok());
  o = Exec(alice, {"ssh-key", "remove", Fingerprint(kSpareKey2), "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["removed"]["name"], "two");
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey2)).ok());
  o = Exec(alice, {"ssh-key", "remove", "nope"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  // Another user's key is "not found", not removable.
  o = Exec(alice, {"ssh-key", "remove", Fingerprint(kRootKey)});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetKey(Fingerprint(kRootKey)).ok());
}

TEST_F(SshKeyCommandTest, SshKeyRemoveRefusesTheKeyInUse) {
  Caller alice = As(kAliceKey);
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1}).status.ok());
  Outcome o = Exec(alice, {"ssh-key", "remove", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_NE(o.err.find("the key you are using"), std::string::npos) << o.err;
  EXPECT_TRUE(store_->GetKey(Fingerprint(kAliceKey)).ok());
}

TEST_F(SshKeyCommandTest, SshKeyRemoveRefusesTheLastKey) {
  // A caller without a key in use (a token, later) must not lock the account either.
  Caller token = As(kAliceKey);
  token.key_fingerprint.clear();
  token.credential = "token:test";
  Outcome o = Exec(token, {"ssh-key", "remove", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_NE(o.err.find("last key"), std::string::npos) << o.err;
}

TEST_F(SshKeyCommandTest, SshKeyRename) {
  Caller alice = As(kAliceKey);
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "old"}).status.ok());
  Outcome o = Exec(alice, {"ssh-key", "rename", "old", "new.name@x", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["key"]["name"], "new.name@x");
  EXPECT_EQ(o.Json()["old_name"], "old");
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey1))->name, "new.name@x");
  // By fingerprint, and the key in use may be renamed.
  o = Exec(alice, {"ssh-key", "rename", Fingerprint(kAliceKey), "work"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetKey(Fingerprint(kAliceKey))->name, "work");
  o = Exec(alice, {"ssh-key", "rename", "work", "new.name@x"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  o = Exec(alice, {"ssh-key", "rename", "missing", "x"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  o = Exec(alice, {"ssh-key", "rename", "work", "bad/name"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
}

TEST_F(SshKeyCommandTest, GenerateApiKeyPrintsATokenThatAuthenticates) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "generate-api-key", "--label", "ci"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  std::string token = o.out.substr(0, o.out.find('\n'));
  EXPECT_TRUE(token.starts_with("wr1.")) << o.out;
  EXPECT_EQ(o.out, token + "\n");  // stdout is the token alone; the note is on stderr
  EXPECT_NE(o.err.find("ssh-key remove ci"), std::string::npos) << o.err;

  Caller caller = ForToken(token);
  EXPECT_EQ(caller.user, "alice");
  EXPECT_FALSE(caller.admin);
  EXPECT_TRUE(caller.credential.starts_with("token:")) << caller.credential;
  EXPECT_EQ(caller.credential, "token:" + caller.token_label_id);
  EXPECT_TRUE(caller.key_fingerprint.empty());
  Outcome who = Exec(caller, {"whoami", "--json"});
  ASSERT_TRUE(who.status.ok()) << who.out;
  EXPECT_EQ(who.Json()["user"], "alice");

  Outcome list = Exec(caller, {"ssh-key", "list", "--json"});
  ASSERT_TRUE(list.status.ok()) << list.out;
  json labels = list.Json()["api_tokens"];
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(labels[0]["label"], "ci");
  EXPECT_EQ(labels[0]["in_use"], true);
  EXPECT_EQ(list.out.find(token), std::string::npos);  // listings never show a token
}

TEST_F(SshKeyCommandTest, TokensCarryTheirLimitsAndRestrictedCallersMintNarrowerOnly) {
  std::string token = MintToken(
      As(kAliceKey), {"--label", "ro", "--cmds", "whoami,ssh-key", "--tag", "ci", "--exp", "12h"});
  Caller caller = ForToken(token);
  EXPECT_EQ(caller.scope.cmds, (std::vector<std::string>{"whoami", "ssh-key"}));
  EXPECT_EQ(caller.scope.tag, "ci");
  EXPECT_EQ(caller.scope.expires_at, kStart + 12 * kHour);
  EXPECT_EQ(Exec(caller, {"ls"}).status.code(), Code::kPermissionDenied);

  // Leaving a flag out inherits it; asking for more is refused with the reason.
  std::string child = MintToken(caller, {"--label", "child"});
  Caller child_caller = ForToken(child);
  EXPECT_EQ(child_caller.scope, caller.scope);
  Outcome wider = Exec(caller, {"ssh-key", "generate-api-key", "--label", "w", "--cmds", "ls"});
  EXPECT_EQ(wider.status.code(), Code::kPermissionDenied);
  EXPECT_NE(wider.err.find("it would allow \"ls\""), std::string::npos) << wider.err;
  EXPECT_EQ(
      Exec(caller, {"ssh-key", "generate-api-key", "--label", "w", "--tag", "other"}).status.code(),
      Code::kPermissionDenied);
  EXPECT_EQ(
      Exec(caller, {"ssh-key", "generate-api-key", "--label", "w", "--exp", "never"}).status.code(),
      Code::kPermissionDenied);
  // A restricted token cannot remove a wider label; the owner's key can.
  MintToken(As(kAliceKey), {"--label", "wide"});
  EXPECT_EQ(Exec(caller, {"ssh-key", "remove", "wide"}).status.code(), Code::kPermissionDenied);
  EXPECT_TRUE(Exec(caller, {"ssh-key", "remove", "child"}).status.ok());
}

TEST_F(SshKeyCommandTest, RemovingALabelRevokesItsTokensAtOnceAndANewOneRevivesNone) {
  std::string t1 = MintToken(As(kAliceKey), {"--label", "ci"});
  std::string t2 = MintToken(As(kAliceKey), {"--label", "ci"});
  Caller open_session = ForToken(t1);  // a caller built before the removal
  ASSERT_TRUE(Exec(open_session, {"whoami"}).status.ok());

  Outcome removed = Exec(As(kAliceKey), {"ssh-key", "remove", "ci", "--json"});
  ASSERT_TRUE(removed.status.ok()) << removed.out;
  EXPECT_EQ(removed.Json()["revoked_tokens"], 2);
  Outcome after = Exec(open_session, {"whoami"});
  EXPECT_EQ(after.status.code(), Code::kUnauthenticated);
  EXPECT_NE(after.err.find("revoked"), std::string::npos) << after.err;
  EXPECT_FALSE(interpreter_->CallerForToken(t2, "exec").ok());

  std::string t3 = MintToken(As(kAliceKey), {"--label", "ci"});
  EXPECT_TRUE(interpreter_->CallerForToken(t3, "exec").ok());
  EXPECT_FALSE(interpreter_->CallerForToken(t1, "exec").ok());
  EXPECT_FALSE(interpreter_->CallerForToken(t2, "exec").ok());
}

TEST_F(SshKeyCommandTest, LabelsAndKeyNamesShareANamespace) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "generate-api-key", "--label", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  MintToken(As(kAliceKey), {"--label", "ci"});
  o = Exec(As(kAliceKey), {"ssh-key", "add", "--name", "ci", kSpareKey1});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "rename", "ci", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "rename", "ci", "ci2"});
  EXPECT_TRUE(o.status.ok()) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "remove", "nothing-here"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(
      Exec(As(kAliceKey), {"ssh-key", "generate-api-key", "--label", "bad label"}).status.code(),
      Code::kInvalidArgument);
  EXPECT_EQ(Exec(As(kAliceKey), {"ssh-key", "generate-api-key"}).status.code(),
            Code::kInvalidArgument);  // --label is required
}

}  // namespace
}  // namespace warren::lobbytest
