#include "keys/lmdb_store.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "keys/base64.h"
#include "keys/public_key.h"

namespace warren {
namespace {

// A fresh directory per test, removed afterwards whatever happened.
class LmdbStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-store-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/data";  // not yet there: Open creates it
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }

  void Reopen() {
    store_.reset();  // close first: a directory may be open once per process
    Result<std::unique_ptr<LmdbStore>> s = LmdbStore::Open(dir_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  // A distinct, valid key: an ed25519-shaped blob whose 32 key bytes encode `seed`.
  static SshKey Key(const std::string& user, const std::string& name, int seed,
                    int64_t added_at = 1000) {
    std::string pk(32, '\0');
    for (int i = 0; i < 4; ++i) pk[i] = static_cast<char>(seed >> (8 * i));
    std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) + pk;
    SshKey k;
    k.user = user;
    k.name = name;
    k.algorithm = "ssh-ed25519";
    k.blob_base64 = Base64Encode(blob);
    k.fingerprint = FingerprintOfBlob(blob);
    k.comment = name + "@host";
    k.added_at = added_at;
    return k;
  }
  static User MakeUser(const std::string& name, bool admin = false) {
    return User{name, admin, 500};
  }

  std::string root_;
  std::string dir_;
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(LmdbStoreTest, CreatesPrivateDirectory) {
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(store_->dir(), dir_);
}

TEST_F(LmdbStoreTest, CreateGetListUsers) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("carol"), {}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice", true), {Key("alice", "laptop", 1)}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("bob"), {}).ok());

  Result<User> alice = store_->GetUser("alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->name, "alice");
  EXPECT_TRUE(alice->admin);
  EXPECT_EQ(alice->created_at, 500);

  Result<std::vector<User>> users = store_->ListUsers();
  ASSERT_TRUE(users.ok());
  ASSERT_EQ(users->size(), 3u);
  EXPECT_EQ((*users)[0].name, "alice");
  EXPECT_EQ((*users)[1].name, "bob");
  EXPECT_EQ((*users)[2].name, "carol");
}

TEST_F(LmdbStoreTest, NotFound) {
  EXPECT_EQ(store_->GetUser("nobody").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->DeleteUser("nobody").code(), Code::kNotFound);
  EXPECT_EQ(store_->GetKey("SHA256:nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ListKeys("nobody").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->AddKey(Key("nobody", "k", 1)).code(), Code::kNotFound);
  EXPECT_EQ(store_->RemoveKey("nobody", "SHA256:nope").code(), Code::kNotFound);
  EXPECT_EQ(store_->RenameKey("nobody", "SHA256:nope", "x").code(), Code::kNotFound);
  // Lookups with keys LMDB cannot hold are plain misses, not errors.
  EXPECT_EQ(store_->GetUser("").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetKey(std::string(2000, 'x')).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ListKeys(std::string(600, 'a')).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->TouchKey("SHA256:nope", 5).ok());  // a vanished key is fine
  Result<std::vector<User>> users = store_->ListUsers();
  ASSERT_TRUE(users.ok());
  EXPECT_TRUE(users->empty());
}

TEST_F(LmdbStoreTest, ValidatesNames) {
  EXPECT_EQ(store_->CreateUser(MakeUser("Alice"), {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateUser(MakeUser(""), {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateUser(MakeUser(std::string(33, 'a')), {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateUser(MakeUser("dave"), {Key("dave", "has space", 1)}).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateUser(MakeUser("dave"), {Key("dave", "SHA256:x", 1)}).code(),
            Code::kInvalidArgument);
  ASSERT_TRUE(store_->CreateUser(MakeUser("dave"), {}).ok());
  EXPECT_EQ(store_->AddKey(Key("dave", "", 2)).code(), Code::kInvalidArgument);
  SshKey mismatched = Key("dave", "k", 3);
  mismatched.fingerprint = Key("dave", "k", 4).fingerprint;
  EXPECT_EQ(store_->AddKey(mismatched).code(), Code::kInvalidArgument);
  SshKey bad_fp = Key("dave", "k", 3);
  bad_fp.fingerprint = "MD5:aa:bb";
  EXPECT_EQ(store_->AddKey(bad_fp).code(), Code::kInvalidArgument);
  SshKey other_user = Key("erin", "k", 5);
  EXPECT_EQ(store_->CreateUser(MakeUser("frank"), {other_user}).code(), Code::kInvalidArgument);
}

TEST_F(LmdbStoreTest, UserConflict) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {}).ok());
  EXPECT_EQ(store_->CreateUser(MakeUser("alice", true), {}).code(), Code::kConflict);
  Result<User> alice = store_->GetUser("alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_FALSE(alice->admin);  // the loser changed nothing
}

TEST_F(LmdbStoreTest, KeyCrudAndRecordFields) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {}).ok());
  SshKey k = Key("alice", "laptop", 1);
  k.scope.cmds = {"ls", "share show"};
  k.scope.tag = "ci";
  k.scope.expires_at = 99999;
  ASSERT_TRUE(store_->AddKey(k).ok());

  Result<SshKey> got = store_->GetKey(k.fingerprint);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->fingerprint, k.fingerprint);
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->name, "laptop");
  EXPECT_EQ(got->algorithm, "ssh-ed25519");
  EXPECT_EQ(got->blob_base64, k.blob_base64);
  EXPECT_EQ(got->comment, "laptop@host");
  EXPECT_EQ(got->added_at, 1000);
  EXPECT_EQ(got->last_used_at, 0);
  EXPECT_EQ(got->scope, k.scope);

  ASSERT_TRUE(store_->TouchKey(k.fingerprint, 2000).ok());
  ASSERT_TRUE(store_->TouchKey(k.fingerprint, 1500).ok());  // older: ignored
  EXPECT_EQ(store_->GetKey(k.fingerprint)->last_used_at, 2000);

  ASSERT_TRUE(store_->RemoveKey("alice", k.fingerprint).ok());
  EXPECT_EQ(store_->GetKey(k.fingerprint).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->RemoveKey("alice", k.fingerprint).code(), Code::kNotFound);
  // The name is free again.
  EXPECT_TRUE(store_->AddKey(Key("alice", "laptop", 2)).ok());
}

TEST_F(LmdbStoreTest, ParsedKeysStoreAsIs) {
  Result<PublicKey> pk = ParseAuthorizedKey(
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHlUAtZVMu5ssjgrkpCxu8NqZwA30GqwwHeIpLeGqJpM "
      "J\xc3\xbcrgen@laptop");
  ASSERT_TRUE(pk.ok());
  SshKey k;
  k.fingerprint = pk->fingerprint;
  k.name = "laptop";  // user left empty: CreateUser fills it in
  k.algorithm = pk->algorithm;
  k.blob_base64 = pk->blob_base64;
  k.comment = pk->comment;
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {k}).ok());
  Result<SshKey> got = store_->GetKey("SHA256:g1u2ZN4WTP6tqNS2XvKmWQjkHyP+09PkWWJWX1M8b/k");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->comment, "J\xc3\xbcrgen@laptop");
}

TEST_F(LmdbStoreTest, InvalidUtf8IsRefusedNotThrown) {
  SshKey k = Key("alice", "laptop", 1);
  k.comment = "bad\xff";
  EXPECT_EQ(store_->CreateUser(MakeUser("alice"), {k}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->GetUser("alice").status().code(), Code::kNotFound);
}

TEST_F(LmdbStoreTest, KeyConflicts) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {Key("alice", "laptop", 1)}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("bob"), {Key("bob", "laptop", 2)}).ok());
  // Same fingerprint: taken server-wide, by the owner or anyone else.
  EXPECT_EQ(store_->AddKey(Key("alice", "other", 1)).code(), Code::kConflict);
  EXPECT_EQ(store_->AddKey(Key("bob", "other", 1)).code(), Code::kConflict);
  // Same name: per user only.
  EXPECT_EQ(store_->AddKey(Key("alice", "laptop", 3)).code(), Code::kConflict);
  EXPECT_TRUE(store_->AddKey(Key("alice", "desktop", 3)).ok());
  // A user whose first key belongs to someone else is not created.
  EXPECT_EQ(store_->CreateUser(MakeUser("carol"), {Key("carol", "k", 2)}).code(), Code::kConflict);
  EXPECT_EQ(store_->GetUser("carol").status().code(), Code::kNotFound);
}

TEST_F(LmdbStoreTest, CreateUserIsAllOrNothing) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {Key("alice", "a", 9)}).ok());
  // The second key conflicts (with alice's) after the user and first key were written in
  // the transaction: nothing may remain.
  Status s = store_->CreateUser(MakeUser("bob"), {Key("bob", "one", 1), Key("bob", "two", 9)});
  EXPECT_EQ(s.code(), Code::kConflict);
  EXPECT_EQ(store_->GetUser("bob").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetKey(Key("bob", "one", 1).fingerprint).status().code(), Code::kNotFound);
  // Duplicates within one request are conflicts too.
  EXPECT_EQ(store_->CreateUser(MakeUser("bob"), {Key("bob", "x", 1), Key("bob", "x", 2)}).code(),
            Code::kConflict);
  EXPECT_EQ(store_->CreateUser(MakeUser("bob"), {Key("bob", "x", 1), Key("bob", "y", 1)}).code(),
            Code::kConflict);
  // And then it works.
  ASSERT_TRUE(
      store_->CreateUser(MakeUser("bob"), {Key("bob", "one", 1), Key("bob", "two", 2)}).ok());
  EXPECT_EQ(store_->ListKeys("bob")->size(), 2u);
}

TEST_F(LmdbStoreTest, ListKeysSortedByAddedAtThenName) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {Key("alice", "zeta", 1, 300)}).ok());
  ASSERT_TRUE(store_->AddKey(Key("alice", "beta", 2, 100)).ok());
  ASSERT_TRUE(store_->AddKey(Key("alice", "alpha", 3, 300)).ok());
  ASSERT_TRUE(store_->AddKey(Key("alice", "gamma", 4, 200)).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("alicia"), {Key("alicia", "x", 5, 1)}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("empty"), {}).ok());

  Result<std::vector<SshKey>> keys = store_->ListKeys("alice");
  ASSERT_TRUE(keys.ok());
  std::vector<std::string> names;
  for (const SshKey& k : *keys) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"beta", "gamma", "alpha", "zeta"}));
  Result<std::vector<SshKey>> none = store_->ListKeys("empty");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(LmdbStoreTest, RemoveKeyChecksOwner) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {Key("alice", "laptop", 1)}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("bob"), {}).ok());
  std::string fp = Key("alice", "laptop", 1).fingerprint;
  EXPECT_EQ(store_->RemoveKey("bob", fp).code(), Code::kNotFound);
  EXPECT_EQ(store_->RenameKey("bob", fp, "mine").code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetKey(fp).ok());
}

TEST_F(LmdbStoreTest, RenameKey) {
  ASSERT_TRUE(
      store_->CreateUser(MakeUser("alice"), {Key("alice", "laptop", 1), Key("alice", "desktop", 2)})
          .ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("bob"), {Key("bob", "phone", 3)}).ok());
  std::string fp = Key("alice", "laptop", 1).fingerprint;

  EXPECT_EQ(store_->RenameKey("alice", fp, "desktop").code(), Code::kConflict);
  EXPECT_EQ(store_->RenameKey("alice", fp, "bad name").code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->RenameKey("alice", fp, "laptop").ok());  // to itself: no-op
  EXPECT_TRUE(store_->RenameKey("alice", fp, "phone").ok());   // bob's name is no conflict
  EXPECT_EQ(store_->GetKey(fp)->name, "phone");
  // The old name is free, the new one taken.
  EXPECT_TRUE(store_->AddKey(Key("alice", "laptop", 4)).ok());
  EXPECT_EQ(store_->AddKey(Key("alice", "phone", 5)).code(), Code::kConflict);
  Result<std::vector<SshKey>> keys = store_->ListKeys("alice");
  ASSERT_TRUE(keys.ok());
  std::vector<std::string> names;
  for (const SshKey& k : *keys) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"desktop", "laptop", "phone"}));
}

TEST_F(LmdbStoreTest, DeleteUserRemovesItsKeysOnly) {
  ASSERT_TRUE(
      store_->CreateUser(MakeUser("alice"), {Key("alice", "a1", 1), Key("alice", "a2", 2)}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("alicia"), {Key("alicia", "a1", 3)}).ok());
  ASSERT_TRUE(store_->DeleteUser("alice").ok());

  EXPECT_EQ(store_->GetUser("alice").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetKey(Key("", "", 1).fingerprint).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetKey(Key("", "", 2).fingerprint).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetKey(Key("", "", 3).fingerprint).ok());  // prefix "alice" ≠ "alicia"
  EXPECT_EQ(store_->ListKeys("alicia")->size(), 1u);

  // Everything is free for reuse: the name, the fingerprints, the key names.
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {Key("alice", "a1", 2)}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("bob"), {Key("bob", "a1", 1)}).ok());
  EXPECT_EQ(store_->ListKeys("alice")->size(), 1u);
}

TEST_F(LmdbStoreTest, PersistsAcrossRestart) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice", true), {Key("alice", "laptop", 1)}).ok());
  ASSERT_TRUE(store_->TouchKey(Key("", "", 1).fingerprint, 4242).ok());
  Reopen();
  Result<User> alice = store_->GetUser("alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE(alice->admin);
  Result<SshKey> k = store_->GetKey(Key("", "", 1).fingerprint);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->name, "laptop");
  EXPECT_EQ(k->last_used_at, 4242);
  // The index survived too.
  EXPECT_EQ(store_->AddKey(Key("alice", "laptop", 2)).code(), Code::kConflict);
}

// Per-user limits ride on the user record: set, "none" and unset (the server's default)
// survive a restart; UpdateUser is one read-modify-write that cannot rename.
TEST_F(LmdbStoreTest, UserLimitsRoundTripAndUpdate) {
  User alice = MakeUser("alice");
  alice.limits.max_vms = 3;
  alice.limits.max_disk_gib = kNoLimit;
  ASSERT_TRUE(store_->CreateUser(alice, {}).ok());
  ASSERT_TRUE(store_->CreateUser(MakeUser("bob"), {}).ok());
  ASSERT_TRUE(store_
                  ->UpdateUser("bob",
                               [](User& u) {
                                 u.limits.max_cpus = 0;
                                 u.limits.max_memory_mib = 4096;
                                 return Status::Ok();
                               })
                  .ok());
  Reopen();
  Result<User> a = store_->GetUser("alice");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->limits.max_vms, 3);
  EXPECT_EQ(a->limits.max_disk_gib, kNoLimit);
  EXPECT_FALSE(a->limits.max_cpus.has_value());
  EXPECT_FALSE(a->limits.max_memory_mib.has_value());
  Result<User> b = store_->GetUser("bob");
  EXPECT_EQ(b->limits.max_cpus, 0);
  EXPECT_EQ(b->limits.max_memory_mib, 4096);
  EXPECT_FALSE(b->limits.max_vms.has_value());
  // Back to the default.
  ASSERT_TRUE(store_
                  ->UpdateUser("alice",
                               [](User& u) {
                                 u.limits.max_vms.reset();
                                 return Status::Ok();
                               })
                  .ok());
  EXPECT_FALSE(store_->GetUser("alice")->limits.max_vms.has_value());
  // Refused: renaming, a nonsense limit, an unknown user; a change that fails writes nothing.
  EXPECT_EQ(store_
                ->UpdateUser("alice",
                             [](User& u) {
                               u.name = "carol";
                               return Status::Ok();
                             })
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_
                ->UpdateUser("alice",
                             [](User& u) {
                               u.limits.max_vms = -7;
                               return Status::Ok();
                             })
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->UpdateUser("nobody", [](User&) { return Status::Ok(); }).code(),
            Code::kNotFound);
  EXPECT_EQ(store_
                ->UpdateUser("bob",
                             [](User& u) {
                               u.admin = true;
                               return Conflict("changed my mind");
                             })
                .code(),
            Code::kConflict);
  EXPECT_FALSE(store_->GetUser("bob")->admin);
  User bad = MakeUser("dave");
  bad.limits.max_cpus = -2;
  EXPECT_EQ(store_->CreateUser(bad, {}).code(), Code::kInvalidArgument);
}

TEST_F(LmdbStoreTest, SecondOpenOfSameDirectoryIsRefused) {
  Result<std::unique_ptr<LmdbStore>> again = LmdbStore::Open(dir_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kConflict);
  // Through another spelling of the same path as well.
  Result<std::unique_ptr<LmdbStore>> dotted = LmdbStore::Open(root_ + "/./data/");
  EXPECT_FALSE(dotted.ok());
  // The refused attempt did not disturb the open store.
  EXPECT_TRUE(store_->CreateUser(MakeUser("alice"), {}).ok());
}

TEST_F(LmdbStoreTest, OpenRejectsAFileAsDirectory) {
  std::string file = root_ + "/plain";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  Result<std::unique_ptr<LmdbStore>> s = LmdbStore::Open(file);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(LmdbStore::Open("").status().code(), Code::kInvalidArgument);
}

// Writes meta/schema_version straight into the environment, as another binary would.
void WriteSchemaVersion(const std::string& dir, const std::string& json_value) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, "meta", MDB_CREATE, &dbi), 0);
  std::string key = "schema_version";
  MDB_val k{key.size(), key.data()};
  MDB_val v{json_value.size(), const_cast<char*>(json_value.data())};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

TEST_F(LmdbStoreTest, NewerSchemaIsRefusedAndLeftAlone) {
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {}).ok());
  store_.reset();
  WriteSchemaVersion(dir_, std::to_string(LmdbStore::kSchemaVersion + 1));
  Result<std::unique_ptr<LmdbStore>> s = LmdbStore::Open(dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kConflict);
  EXPECT_NE(
      s.status().message().find("schema version " + std::to_string(LmdbStore::kSchemaVersion + 1)),
      std::string::npos)
      << s.status().message();
  // The refusal released the directory and changed nothing: put the version back and the
  // data is still there.
  WriteSchemaVersion(dir_, std::to_string(LmdbStore::kSchemaVersion));
  Reopen();
  EXPECT_TRUE(store_->GetUser("alice").ok());
}

TEST_F(LmdbStoreTest, CorruptSchemaVersionIsAnError) {
  store_.reset();
  WriteSchemaVersion(dir_, "\"one\"");
  Result<std::unique_ptr<LmdbStore>> s = LmdbStore::Open(dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInternal);
}

TEST_F(LmdbStoreTest, EmptyEnvironmentIsUpgradedFromVersionZero) {
  // An environment with a meta table but no version (what an interrupted first start would
  // leave if it were not transactional) goes through every upgrade step.
  store_.reset();
  std::string fresh = root_ + "/fresh";
  std::filesystem::create_directory(fresh);
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, fresh.c_str(), 0, 0600), 0);
  mdb_env_close(env);
  Result<std::unique_ptr<LmdbStore>> s = LmdbStore::Open(fresh);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE((*s)->CreateUser(MakeUser("alice"), {Key("alice", "k", 1)}).ok());
}

TEST_F(LmdbStoreTest, SchemaSixRenamesFullEgressToAll) {
  // A version 4 store kept "full" for a VM with a network device; version 6 calls it "all"
  // and leaves the other policies as they are (5 adds the integration tables on the way).
  ASSERT_TRUE(store_->CreateUser(MakeUser("alice"), {}).ok());
  VmRecord full;
  full.id = "aaaaaaaaaaaa";
  full.name = "net-one";
  full.owner = "alice";
  full.egress = "full";
  ASSERT_TRUE(store_->CreateVm(full).ok());
  VmRecord none = full;
  none.id = "bbbbbbbbbbbb";
  none.name = "sealed-two";
  none.egress = "none";
  ASSERT_TRUE(store_->CreateVm(none).ok());
  store_.reset();
  WriteSchemaVersion(dir_, "4");
  Reopen();
  Result<VmRecord> a = store_->GetVm("aaaaaaaaaaaa");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->egress, "all");
  Result<VmRecord> b = store_->GetVm("bbbbbbbbbbbb");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->egress, "none");
}

TEST_F(LmdbStoreTest, MapFullIsLimitExceeded) {
  store_.reset();
  LmdbStore::Options small;
  small.map_size_bytes = 256 * 1024;
  Result<std::unique_ptr<LmdbStore>> s = LmdbStore::Open(root_ + "/small", small);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Status last;
  for (int i = 0; i < 10000 && last.ok(); ++i) {
    last = (*s)->CreateUser(MakeUser("u" + std::to_string(i)), {Key("", "k", i)});
  }
  EXPECT_EQ(last.code(), Code::kLimitExceeded) << last.ToString();
  // Reads still work when full.
  EXPECT_TRUE((*s)->GetUser("u0").ok());
}

TEST_F(LmdbStoreTest, ConcurrentReadersSeeWholeTransactions) {
  constexpr int kUsers = 150;
  constexpr int kKeysPerUser = 3;
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::atomic<long> reads{0};

  // Readers check what one read transaction promises: a user is visible with all of its
  // keys or not at all (CreateUser and DeleteUser are each one write transaction).
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      int i = r;
      while (!done.load()) {
        std::string name = "user" + std::to_string(i % kUsers);
        Result<std::vector<SshKey>> keys = store_->ListKeys(name);
        if (keys.ok()) {
          if (keys->size() != kKeysPerUser) ++errors;
        } else if (keys.status().code() != Code::kNotFound) {
          ++errors;
        }
        Result<SshKey> k = store_->GetKey(Key("", "", (i % kUsers) * kKeysPerUser).fingerprint);
        if (k.ok() ? k->user != name : k.status().code() != Code::kNotFound) ++errors;
        Result<std::vector<User>> users = store_->ListUsers();
        if (!users.ok()) ++errors;
        ++reads;
        ++i;
      }
    });
  }
  // The writer records failures instead of ASSERTing: returning early would leave the
  // readers running and their threads unjoined.
  int write_errors = 0;
  for (int u = 0; u < kUsers; ++u) {
    std::string name = "user" + std::to_string(u);
    std::vector<SshKey> keys;
    for (int k = 0; k < kKeysPerUser; ++k) {
      keys.push_back(Key(name, "k" + std::to_string(k), u * kKeysPerUser + k));
    }
    write_errors += !store_->CreateUser(MakeUser(name), keys).ok();
    if (u % 3 == 0) write_errors += !store_->TouchKey(keys[0].fingerprint, u).ok();
  }
  for (int u = 0; u < kUsers; u += 2) {
    write_errors += !store_->DeleteUser("user" + std::to_string(u)).ok();
  }
  done = true;
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(write_errors, 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(store_->ListUsers()->size(), static_cast<size_t>(kUsers / 2));
}

TEST_F(LmdbStoreTest, ConcurrentWritersDoNotLoseUpdates) {
  std::vector<std::thread> writers;
  std::atomic<int> errors{0};
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 25; ++i) {
        std::string name = "w" + std::to_string(w) + "-" + std::to_string(i);
        if (!store_->CreateUser(MakeUser(name), {Key(name, "k", w * 1000 + i)}).ok()) ++errors;
      }
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(store_->ListUsers()->size(), 100u);
}

}  // namespace
}  // namespace warren
