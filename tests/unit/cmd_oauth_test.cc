// oauth clients list|remove through the interpreter, against a real LmdbStore in a temp
// dir: admins only, --json, and removal signing out what was signed in through the client.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/lmdb_store.h"
#include "keys/oauth.h"
#include "keys/public_key.h"
#include "lobby/base/clock.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/session.h"

namespace warren {
namespace {

using nlohmann::json;

constexpr const char* kRootKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";
constexpr const char* kAliceKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpiw2c40u05jE00mSRp+vT+DI/HeS0e/0O9x2wN8yM9 "
    "alice@laptop";
constexpr int64_t kNow = 1'700'000'000;

class FixedClock final : public Clock {
 public:
  int64_t NowUnix() const override { return kNow; }
};

SshKey KeyRecord(const char* line, const std::string& user) {
  PublicKey pk = ParseAuthorizedKey(line).value();
  SshKey k;
  k.fingerprint = pk.fingerprint;
  k.user = user;
  k.name = user + "-key";
  k.algorithm = pk.algorithm;
  k.blob_base64 = pk.blob_base64;
  k.added_at = kNow;
  return k;
}

struct Outcome {
  std::string out, err;
  Status status;
};

class OAuthCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-cmd-oauth-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = LmdbStore::Open(dir_ + "/store").value();
    Services services;
    services.store = store_.get();
    services.oauth = store_.get();
    services.clock = &clock_;
    interpreter_ = std::make_unique<Interpreter>(services);
    ASSERT_TRUE(store_->CreateUser({"root", true, kNow}, {KeyRecord(kRootKey, "root")}).ok());
    ASSERT_TRUE(store_->CreateUser({"alice", false, kNow}, {KeyRecord(kAliceKey, "alice")}).ok());
  }
  void TearDown() override {
    interpreter_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  Outcome Exec(const char* key, std::vector<std::string> argv) {
    Caller caller =
        CallerForKey(*store_, clock_, ParseAuthorizedKey(key)->fingerprint, "ssh").value();
    StringInput in("");
    StringSink out, err;
    CommandSession s;
    s.caller = caller;
    s.in = &in;
    s.out = &out;
    s.err = &err;
    s.argv = std::move(argv);
    interpreter_->Execute(s);
    return {out.str(), err.str(), s.status};
  }

  FixedClock clock_;
  std::string dir_;
  std::unique_ptr<LmdbStore> store_;
  std::unique_ptr<Interpreter> interpreter_;
};

TEST_F(OAuthCommandsTest, ListShowsClientsToAdminsOnly) {
  Outcome empty = Exec(kRootKey, {"oauth", "clients", "list"});
  ASSERT_TRUE(empty.status.ok()) << empty.err;
  EXPECT_NE(empty.out.find("no OAuth clients"), std::string::npos) << empty.out;

  OAuthClient c{"wc-0123", "Claude Code", {"http://127.0.0.1:1/cb"}, kNow - 100, ""};
  c.source = "192.0.2.1";
  ASSERT_TRUE(store_->CreateOAuthClient(c).ok());
  ASSERT_TRUE(store_->MarkOAuthClientUsed("wc-0123", kNow - 50).ok());

  Outcome listed = Exec(kRootKey, {"oauth", "clients", "list", "--json"});
  ASSERT_TRUE(listed.status.ok()) << listed.err;
  json clients = json::parse(listed.out)["clients"];
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0]["id"], "wc-0123");
  EXPECT_EQ(clients[0]["name"], "Claude Code");
  EXPECT_EQ(clients[0]["source"], "192.0.2.1");
  EXPECT_EQ(clients[0]["last_used_at"], kNow - 50);
  EXPECT_EQ(clients[0]["expires_at"], kNow - 50 + kOAuthIdleClientSeconds);
  Outcome text = Exec(kRootKey, {"oauth", "clients", "list"});
  EXPECT_NE(text.out.find("Claude Code"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("192.0.2.1"), std::string::npos) << text.out;

  EXPECT_EQ(Exec(kAliceKey, {"oauth", "clients", "list"}).status.code(), Code::kPermissionDenied);
  EXPECT_EQ(Exec(kAliceKey, {"oauth", "clients", "remove", "wc-0123"}).status.code(),
            Code::kPermissionDenied);
}

TEST_F(OAuthCommandsTest, RemoveRevokesTheClientsSignIns) {
  ASSERT_TRUE(
      store_->CreateOAuthClient({"wc-0123", "Cursor", {"http://127.0.0.1:1/cb"}, kNow, ""}).ok());
  const std::string label(32, 'a');
  ASSERT_TRUE(store_->RecordToken("alice", "oauth-cursor-1", label, IssuedToken{}, kNow).ok());
  ASSERT_TRUE(store_
                  ->PutOAuthRefresh(OAuthRefresh{HashSecret("r"), label, "alice", "wc-0123", "",
                                                 Scope{}, kNow, false})
                  .ok());

  Outcome removed = Exec(kRootKey, {"oauth", "clients", "remove", "wc-0123", "--json"});
  ASSERT_TRUE(removed.status.ok()) << removed.err;
  json j = json::parse(removed.out);
  EXPECT_EQ(j["removed"]["name"], "Cursor");
  EXPECT_EQ(j["sign_ins_revoked"], 1);
  EXPECT_EQ(store_->GetOAuthClient("wc-0123").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetTokenLabel(label).status().code(), Code::kNotFound);

  Outcome again = Exec(kRootKey, {"oauth", "clients", "remove", "wc-0123"});
  EXPECT_EQ(again.status.code(), Code::kNotFound);
  EXPECT_NE(again.status.message().find("oauth clients list"), std::string::npos);
}

}  // namespace
}  // namespace warren
