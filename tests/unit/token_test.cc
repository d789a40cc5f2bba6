// API tokens (keys/token.h) and their labels in a real LmdbStore in a temp dir: signing and
// the strict parser (forged, altered at every byte, truncated at every length, wrong prefix,
// huge, random mutations), the secret file, and the store-side checks (expired, revoked,
// relabelled with the same name, user removed), the name namespace shared with keys, and
// the upgrade from schema version 2.
#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "keys/base64.h"
#include "keys/lmdb_store.h"
#include "keys/token.h"

namespace warren {
namespace {

constexpr int64_t kNow = 1'700'000'000;
const std::string kSecret(32, 'k');

TokenSigner Signer(const std::string& secret = kSecret) {
  auto s = TokenSigner::FromSecret(secret);
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

TokenClaims Claims() {
  TokenClaims c;
  c.user = "alice";
  c.label_id = "0123456789abcdef0123456789abcdef";
  c.scope.cmds = {"ls", "share show"};
  c.scope.tag = "ci";
  c.scope.expires_at = kNow + 3600;
  c.issued_at = kNow;
  return c;
}

TEST(Base64UrlTest, RoundTripsAndIsStrict) {
  for (const std::string& s : {std::string(""), std::string("f"), std::string("fo"),
                               std::string("foo"), std::string("\xff\xfe\xfd\x00\x01", 5)}) {
    std::string enc = Base64UrlEncode(s);
    EXPECT_EQ(enc.find_first_of("+/="), std::string::npos) << enc;
    auto dec = Base64UrlDecode(enc);
    ASSERT_TRUE(dec.ok()) << enc;
    EXPECT_EQ(*dec, s);
  }
  EXPECT_FALSE(Base64UrlDecode("Zm9v=").ok());  // padding
  EXPECT_FALSE(Base64UrlDecode("Zm+v").ok());   // standard alphabet
  EXPECT_FALSE(Base64UrlDecode("Z").ok());      // impossible length
  EXPECT_FALSE(Base64UrlDecode("Zh").ok());     // non-zero trailing bits ("Zg" is canonical)
  EXPECT_TRUE(Base64UrlDecode("Zg").ok());
}

TEST(TokenSignerTest, SignsAndVerifies) {
  TokenSigner signer = Signer();
  auto token = signer.Sign(Claims());
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_TRUE(token->starts_with("wr1."));
  auto claims = signer.Verify(*token);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(*claims, Claims());
}

TEST(TokenSignerTest, ForgedWithAnotherSecretIsRefused) {
  auto forged = Signer(std::string(32, 'x')).Sign(Claims());
  ASSERT_TRUE(forged.ok());
  auto r = Signer().Verify(*forged);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(r.status().message(), "invalid API token");
}

// A payload with wider limits, re-encoded by hand with the old signature: refused.
TEST(TokenSignerTest, WidenedPayloadIsRefused) {
  TokenSigner signer = Signer();
  std::string token = *signer.Sign(Claims());
  size_t dot = token.rfind('.');
  std::string wide =
      R"({"v":1,"u":"alice","l":"0123456789abcdef0123456789abcdef","c":[],"t":"","e":0,"i":1})";
  std::string forged = "wr1." + Base64UrlEncode(wide) + token.substr(dot);
  EXPECT_FALSE(signer.Verify(forged).ok());
  // Same with the admin's name and no signature at all.
  EXPECT_FALSE(signer.Verify("wr1." + Base64UrlEncode(wide) + ".").ok());
  EXPECT_FALSE(signer.Verify("wr1." + Base64UrlEncode(wide)).ok());
}

TEST(TokenSignerTest, EveryByteFlipIsRefused) {
  TokenSigner signer = Signer();
  const std::string token = *signer.Sign(Claims());
  for (size_t i = 0; i < token.size(); ++i) {
    for (char flip : {char(1), char(2), char(0x20), char(0x40)}) {
      std::string altered = token;
      altered[i] = static_cast<char>(altered[i] ^ flip);
      EXPECT_FALSE(signer.Verify(altered).ok()) << "byte " << i << " xor " << int(flip);
    }
  }
}

TEST(TokenSignerTest, TruncatedAtEveryLengthIsRefused) {
  TokenSigner signer = Signer();
  const std::string token = *signer.Sign(Claims());
  for (size_t n = 0; n < token.size(); ++n) {
    EXPECT_FALSE(signer.Verify(token.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(signer.Verify(token + "A").ok());
  EXPECT_FALSE(signer.Verify(token + ".").ok());
}

TEST(TokenSignerTest, WrongPrefixAndGarbageAreRefused) {
  TokenSigner signer = Signer();
  const std::string token = *signer.Sign(Claims());
  for (const std::string& bad :
       {"wr2." + token.substr(4), "WR1." + token.substr(4), token.substr(4), std::string(""),
        std::string("Bearer ") + token, std::string("wr1."), std::string("wr1..")}) {
    auto r = signer.Verify(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  }
  EXPECT_NE(signer.Verify("xyz").status().message().find("not a warren API token"),
            std::string::npos);
}

TEST(TokenSignerTest, HugeInputIsRefusedWithoutWork) {
  TokenSigner signer = Signer();
  std::string huge = "wr1." + std::string(4 << 20, 'A') + ".AAAA";
  auto r = signer.Verify(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
}

// The widest scope a credential may carry (64 command paths of 128 bytes) still makes a
// token that fits under the size bound and verifies.
TEST(TokenSignerTest, TheLargestScopeFits) {
  TokenClaims c = Claims();
  c.scope.cmds.clear();
  for (int i = 0; i < 64; ++i) {
    c.scope.cmds.push_back(std::string(1, static_cast<char>('a' + i % 26)) +
                           std::string(127, static_cast<char>('a' + i / 26)));
  }
  auto token = Signer().Sign(c);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_LE(token->size(), kMaxTokenBytes);
  auto back = Signer().Verify(*token);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->scope.cmds, c.scope.cmds);
}

// Random edits (replace, insert, delete, duplicate a span) of a valid token: the parser never
// crashes and never accepts anything but the original.
TEST(TokenSignerTest, RandomMutationsAreRefused) {
  TokenSigner signer = Signer();
  const std::string token = *signer.Sign(Claims());
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m = token;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (m.size() + 1);
      switch (rng() % 4) {
        case 0:
          if (pos < m.size()) m[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          m.insert(m.begin() + static_cast<long>(pos), static_cast<char>(rng() % 256));
          break;
        case 2:
          if (pos < m.size()) m.erase(pos, 1 + rng() % 8);
          break;
        case 3:
          if (pos < m.size()) m.insert(pos, m.substr(pos, rng() % 16));
          break;
      }
    }
    if (m == token) continue;
    EXPECT_FALSE(signer.Verify(m).ok()) << m;
  }
}

class TokenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-token-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto s = LmdbStore::Open(root_ + "/store");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    ASSERT_TRUE(store_->CreateUser({"alice", false, 1}, {}).ok());
    ASSERT_TRUE(store_->CreateUser({"bob", false, 1}, {}).ok());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }

  // Mints a token under `label` for `user`, as `ssh-key generate-api-key` does.
  std::string Mint(const std::string& user, const std::string& label, Scope scope = {}) {
    auto id = NewTokenLabelId();
    EXPECT_TRUE(id.ok());
    auto recorded = store_->RecordToken(user, label, *id, IssuedToken{scope, kNow}, kNow);
    EXPECT_TRUE(recorded.ok()) << recorded.status().ToString();
    if (!recorded.ok()) return "";
    auto token = signer_.Sign(TokenClaims{user, recorded->id, scope, kNow, ""});
    EXPECT_TRUE(token.ok());
    return token.ok() ? *token : "";
  }

  std::string root_;
  std::unique_ptr<LmdbStore> store_;
  TokenSigner signer_ = Signer();
};

TEST_F(TokenStoreTest, ValidTokenChecksOut) {
  std::string token = Mint("alice", "ci");
  auto checked = CheckToken(*store_, signer_, token, kNow);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(checked->user.name, "alice");
  EXPECT_EQ(checked->label.name, "ci");
  EXPECT_EQ(checked->label.id.size(), 32u);
}

TEST_F(TokenStoreTest, ExpiredTokenIsRefusedFromItsExpirySecond) {
  Scope s;
  s.expires_at = kNow + 60;
  std::string token = Mint("alice", "ci", s);
  EXPECT_TRUE(CheckToken(*store_, signer_, token, kNow + 59).ok());
  auto r = CheckToken(*store_, signer_, token, kNow + 60);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  EXPECT_NE(r.status().message().find("expired"), std::string::npos);
}

TEST_F(TokenStoreTest, RemovingTheLabelRevokesEveryTokenAndANewLabelRevivesNone) {
  std::string t1 = Mint("alice", "ci");
  std::string t2 = Mint("alice", "ci");  // joins the label
  auto labels = store_->ListTokenLabels("alice");
  ASSERT_TRUE(labels.ok());
  ASSERT_EQ(labels->size(), 1u);
  EXPECT_EQ((*labels)[0].tokens.size(), 2u);
  const std::string old_id = (*labels)[0].id;
  EXPECT_TRUE(CheckToken(*store_, signer_, t1, kNow).ok());
  EXPECT_TRUE(CheckToken(*store_, signer_, t2, kNow).ok());

  ASSERT_TRUE(store_->RemoveTokenLabel("alice", old_id).ok());
  for (const std::string& t : {t1, t2}) {
    auto r = CheckToken(*store_, signer_, t, kNow);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
    EXPECT_NE(r.status().message().find("revoked"), std::string::npos);
  }
  // A new label of the same name has a new id.
  std::string t3 = Mint("alice", "ci");
  EXPECT_NE(store_->ListTokenLabels("alice")->at(0).id, old_id);
  EXPECT_TRUE(CheckToken(*store_, signer_, t3, kNow).ok());
  EXPECT_FALSE(CheckToken(*store_, signer_, t1, kNow).ok());
  EXPECT_FALSE(CheckToken(*store_, signer_, t2, kNow).ok());
}

TEST_F(TokenStoreTest, ALabelOfAnotherUserDoesNotMakeAToken) {
  std::string alice_token = Mint("alice", "ci");
  std::string alice_label = store_->ListTokenLabels("alice")->at(0).id;
  // Signed by the server (as if a bug let bob's token name alice's label): still refused.
  auto bob_token = signer_.Sign(TokenClaims{"bob", alice_label, {}, kNow, ""});
  ASSERT_TRUE(bob_token.ok());
  EXPECT_FALSE(CheckToken(*store_, signer_, *bob_token, kNow).ok());
  EXPECT_FALSE(store_->RemoveTokenLabel("bob", alice_label).ok());
  EXPECT_TRUE(CheckToken(*store_, signer_, alice_token, kNow).ok());
}

TEST_F(TokenStoreTest, RemovingTheUserRevokesItsTokensAndLabels) {
  std::string token = Mint("alice", "ci");
  ASSERT_TRUE(store_->DeleteUser("alice").ok());
  EXPECT_FALSE(CheckToken(*store_, signer_, token, kNow).ok());
  ASSERT_TRUE(store_->CreateUser({"alice", false, 2}, {}).ok());
  EXPECT_FALSE(CheckToken(*store_, signer_, token, kNow).ok());
  EXPECT_TRUE(store_->ListTokenLabels("alice")->empty());
}

TEST_F(TokenStoreTest, LabelsShareTheNamespaceOfKeyNames) {
  SshKey key;  // no blob: the store then checks only the fingerprint's form
  key.user = "alice";
  key.name = "laptop";
  key.algorithm = "ssh-ed25519";
  key.fingerprint = "SHA256:abc";
  ASSERT_TRUE(store_->AddKey(key).ok());
  auto id = NewTokenLabelId();
  auto r = store_->RecordToken("alice", "laptop", *id, IssuedToken{}, kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kConflict);

  Mint("alice", "ci");
  SshKey key2 = key;
  key2.name = "ci";
  key2.fingerprint = "SHA256:def";
  EXPECT_EQ(store_->AddKey(key2).code(), Code::kConflict);
  key2.name = "desk";
  ASSERT_TRUE(store_->AddKey(key2).ok());
  EXPECT_EQ(store_->RenameKey("alice", "SHA256:def", "ci").code(), Code::kConflict);
  std::string ci_id = store_->ListTokenLabels("alice")->at(0).id;
  EXPECT_EQ(store_->RenameTokenLabel("alice", ci_id, "desk").code(), Code::kConflict);
  ASSERT_TRUE(store_->RenameTokenLabel("alice", ci_id, "ci2").ok());
  EXPECT_EQ(store_->ListTokenLabels("alice")->at(0).name, "ci2");
  // Bob's names are his own.
  EXPECT_TRUE(store_->RecordToken("bob", "laptop", *NewTokenLabelId(), {}, kNow).ok());
}

TEST_F(TokenStoreTest, RecordTokenValidatesAndBounds) {
  EXPECT_EQ(store_->RecordToken("nobody", "ci", *NewTokenLabelId(), {}, kNow).status().code(),
            Code::kNotFound);
  EXPECT_EQ(store_->RecordToken("alice", "bad name", *NewTokenLabelId(), {}, kNow).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->RecordToken("alice", "ci", "not-hex", {}, kNow).status().code(),
            Code::kInvalidArgument);
  for (size_t i = 0; i < kMaxTokensPerLabel; ++i) {
    ASSERT_TRUE(store_->RecordToken("alice", "ci", *NewTokenLabelId(), {}, kNow).ok()) << i;
  }
  EXPECT_EQ(store_->RecordToken("alice", "ci", *NewTokenLabelId(), {}, kNow).status().code(),
            Code::kLimitExceeded);
}

TEST_F(TokenStoreTest, TouchKeepsTheLatestUse) {
  Mint("alice", "ci");
  std::string id = store_->ListTokenLabels("alice")->at(0).id;
  ASSERT_TRUE(store_->TouchTokenLabel(id, kNow + 10).ok());
  ASSERT_TRUE(store_->TouchTokenLabel(id, kNow + 5).ok());
  EXPECT_EQ(store_->GetTokenLabel(id)->last_used_at, kNow + 10);
  EXPECT_TRUE(store_->TouchTokenLabel("0123456789abcdef0123456789abcdef", kNow).ok());
}

TEST_F(TokenStoreTest, SecretFileIsCreatedOwnerOnlyAndReloaded) {
  const std::string path = root_ + "/token-signing.key";
  auto first = TokenSigner::LoadOrCreate(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string token = *first->Sign(Claims());
  auto second = TokenSigner::LoadOrCreate(path);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->Verify(token).ok());

  // A new secret (the file removed) revokes every token.
  std::filesystem::remove(path);
  auto third = TokenSigner::LoadOrCreate(path);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->Verify(token).ok());

  chmod(path.c_str(), 0640);
  auto loose = TokenSigner::LoadOrCreate(path);
  ASSERT_FALSE(loose.ok());
  EXPECT_NE(loose.status().message().find("chmod 600"), std::string::npos);

  const std::string garbage = root_ + "/garbage.key";
  std::ofstream(garbage) << "not hex at all\n";
  chmod(garbage.c_str(), 0600);
  auto bad = TokenSigner::LoadOrCreate(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("not hex"), std::string::npos);  // content never shown
}

// A store as schema version 2 left it gains the token tables on open.
TEST(TokenStoreUpgradeTest, UpgradesAVersionTwoStore) {
  char tmpl[] = "/tmp/warren-token-up-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  for (const char* name : {"users", "keys", "key_names", "vms", "vm_names", "jobs"}) {
    ASSERT_EQ(mdb_dbi_open(txn, name, MDB_CREATE, &dbi), 0);
  }
  ASSERT_EQ(mdb_dbi_open(txn, "users", 0, &dbi), 0);
  std::string user_key = "carol";
  std::string user_value = R"({"name":"carol","admin":true,"created_at":5})";
  MDB_val uk{user_key.size(), user_key.data()};
  MDB_val uv{user_value.size(), user_value.data()};
  ASSERT_EQ(mdb_put(txn, dbi, &uk, &uv, 0), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "meta", MDB_CREATE, &dbi), 0);
  std::string key = "schema_version", value = "2";
  MDB_val k{key.size(), key.data()};
  MDB_val v{value.size(), value.data()};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  {
    auto s = LmdbStore::Open(dir);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE((*s)->GetUser("carol").ok());
    auto label = (*s)->RecordToken("carol", "ci", *NewTokenLabelId(), {}, kNow);
    ASSERT_TRUE(label.ok()) << label.status().ToString();
    EXPECT_EQ((*s)->ListTokenLabels("carol")->size(), 1u);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace warren
