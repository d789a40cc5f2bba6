// keys/backup.h and keys/tar_format.h: the backup file's format (a tar stream GNU tar reads,
// the manifest first, sizes and SHA-256 of every file), a backup restored into a fresh data
// directory opens with the same records and keys, and the refusals of restore: a non-empty
// directory, a store in use, a newer schema or format, a damaged, altered or truncated file —
// each leaving the target as it was.
#include <gtest/gtest.h>
#include <lmdb.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/backup.h"
#include "keys/base64.h"
#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "keys/tar_format.h"
#include "lobby/base/file_write.h"
#include "lobby/base/streams.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

SshKey Key(const std::string& user, const std::string& name, int seed) {
  std::string pk(32, '\0');
  for (int i = 0; i < 4; ++i) pk[i] = static_cast<char>(seed >> (8 * i));
  std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) + pk;
  SshKey k;
  k.user = user;
  k.name = name;
  k.algorithm = "ssh-ed25519";
  k.blob_base64 = Base64Encode(blob);
  k.fingerprint = FingerprintOfBlob(blob);
  k.added_at = 1000;
  return k;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Writes meta/schema_version straight into the environment, as another warren would.
void WriteSchemaVersion(const std::string& dir, int version) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 64), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, "meta", MDB_CREATE, &dbi), 0);
  std::string key = "schema_version", value = std::to_string(version);
  MDB_val k{key.size(), key.data()};
  MDB_val v{value.size(), value.data()};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

// A backup's entries in order, as (name, bytes), for tests that alter one.
using Entries = std::vector<std::pair<std::string, std::string>>;

Entries Unpack(const std::string& archive) {
  Entries out;
  size_t at = 0;
  while (at + kTarBlock <= archive.size()) {
    Result<std::optional<TarEntry>> e = ParseTarHeader(archive.substr(at, kTarBlock));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok() || !e->has_value()) break;
    at += kTarBlock;
    out.emplace_back((*e)->name, archive.substr(at, (*e)->size));
    at += (*e)->size + TarPadding((*e)->size).size();
  }
  return out;
}

// `header` with its checksum made right again (after a test changed a field).
std::string Resum(std::string header) {
  header.replace(148, 8, "        ");
  uint64_t sum = 0;
  for (unsigned char c : header) sum += c;
  char digits[8];
  std::snprintf(digits, sizeof digits, "%06o", static_cast<unsigned>(sum));
  header.replace(148, 6, digits);
  header[154] = '\0';
  return header;
}

std::string Pack(const Entries& entries) {
  std::string out;
  for (const auto& [name, bytes] : entries) {
    out += TarHeader({name, 0600, bytes.size(), 1}).value() + bytes + TarPadding(bytes.size());
  }
  return out + TarEnd();
}

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-backup-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    data_ = root_ + "/data";
    auto s = LmdbStore::Open(data_ + "/store");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    ASSERT_TRUE(store_->CreateUser(User{"alice", true, 500}, {Key("alice", "laptop", 1)}).ok());
    ASSERT_TRUE(store_->CreateUser(User{"bob", false, 600}, {}).ok());
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(store_->AddKey(Key("bob", "k" + std::to_string(i), 100 + i)).ok());
    }
    ASSERT_TRUE(
        WriteFileAtomic(data_ + "/token-signing.key", std::string(64, 'a') + "\n", 0600).ok());
    ASSERT_TRUE(WriteFileAtomic(data_ + "/ssh_host_ed25519_key", "PRIVATE HOST KEY\n", 0600).ok());
    ASSERT_TRUE(
        WriteFileAtomic(data_ + "/ssh_host_ed25519_key.pub", "ssh-ed25519 AAAA host\n", 0644).ok());
    ASSERT_TRUE(WriteFileAtomic(data_ + "/control_ed25519", "PRIVATE CONTROL KEY\n", 0600).ok());
    ASSERT_TRUE(
        WriteFileAtomic(data_ + "/integration.key", std::string(64, 'b') + "\n", 0600).ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(root_);
  }

  Result<BackupManifest> Backup(std::string& out, LmdbStore* live) {
    BackupSource src;
    src.data_dir = data_;
    src.live_store = live;
    src.warren_version = "9.9.9";
    src.now = 1'700'000'000;
    return WriteBackup(src, [&](std::string_view b) {
      out.append(b);
      return Status::Ok();
    });
  }
  std::string Backup() {
    std::string out;
    Result<BackupManifest> m = Backup(out, store_.get());
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return out;
  }
  static Result<BackupManifest> Restore(const std::string& dir, const std::string& archive,
                                        bool force = false) {
    StringInput in(archive);
    return RestoreBackup({dir, force, LmdbStore::kSchemaVersion}, in);
  }

  std::string root_, data_;
  std::unique_ptr<LmdbStore> store_;
};

TEST(TarFormatTest, HeaderRoundTripsAndIsChecked) {
  Result<std::string> h = TarHeader({"store/data.mdb", 0600, 12345, 1'700'000'000});
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), kTarBlock);
  Result<std::optional<TarEntry>> e = ParseTarHeader(*h);
  ASSERT_TRUE(e.ok() && e->has_value()) << e.status().ToString();
  EXPECT_EQ((*e)->name, "store/data.mdb");
  EXPECT_EQ((*e)->mode, 0600u);
  EXPECT_EQ((*e)->size, 12345u);
  EXPECT_EQ((*e)->mtime, 1'700'000'000);
  // Past ustar's 8 GiB: GNU tar's base-256.
  uint64_t huge = (uint64_t{1} << 34) + 7;
  e = ParseTarHeader(TarHeader({"big", 0600, huge, 0}).value());
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->size, huge);

  std::string bad = *h;
  bad[10] ^= 1;
  EXPECT_EQ(ParseTarHeader(bad).status().code(), Code::kInvalidArgument);
  std::string link = *h;
  link[156] = '2';  // a symlink: refused even with a right checksum
  EXPECT_EQ(ParseTarHeader(Resum(link)).status().code(), Code::kInvalidArgument);
  std::string up = *h;
  up.replace(0, 14, "../../etc/x\0\0\0");  // a path out of the directory
  EXPECT_EQ(ParseTarHeader(Resum(up)).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(ParseTarHeader(Resum(*h)).ok());
  EXPECT_FALSE(ParseTarHeader(std::string(kTarBlock, '\0')).value().has_value());
  for (const char* name : {"../x", "/etc/passwd", "a//b", "a/./b", ""}) {
    EXPECT_FALSE(TarHeader({name, 0600, 0, 0}).ok()) << name;
  }
  EXPECT_EQ(TarPadding(512), "");
  EXPECT_EQ(TarPadding(513).size(), 511u);
}

TEST_F(BackupTest, IsATarStreamWithTheManifestFirst) {
  std::string archive;
  Result<BackupManifest> m = Backup(archive, store_.get());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(archive.size() % kTarBlock, 0u);
  Entries entries = Unpack(archive);
  ASSERT_GE(entries.size(), 2u);
  EXPECT_EQ(entries[0].first, kBackupManifestName);
  EXPECT_EQ(entries[1].first, kBackupStoreEntry);
  nlohmann::json j = nlohmann::json::parse(entries[0].second);
  EXPECT_EQ(j["format"], kBackupFormatVersion);
  EXPECT_EQ(j["warren_version"], "9.9.9");
  EXPECT_EQ(j["schema_version"], LmdbStore::kSchemaVersion);
  EXPECT_EQ(j["created_at"], 1'700'000'000);
  std::map<std::string, nlohmann::json> files;
  for (const auto& f : j["files"]) files[f["name"]] = f;
  // The store and the keys that exist, nothing else (no .pub of the control key, no CA).
  std::vector<std::string> names;
  for (const auto& [name, f] : files) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"control_ed25519", "integration.key",
                                             "ssh_host_ed25519_key", "ssh_host_ed25519_key.pub",
                                             "store/data.mdb", "token-signing.key"}));
  EXPECT_EQ(files["ssh_host_ed25519_key.pub"]["mode"], 0644);
  EXPECT_EQ(files["token-signing.key"]["mode"], 0600);
  EXPECT_EQ(files["token-signing.key"]["size"], 65);
  for (const auto& [name, bytes] : entries) {
    if (name == kBackupManifestName) continue;
    EXPECT_EQ(files[name]["size"], bytes.size()) << name;
  }
  // sha256sum of 64 'a' and a newline.
  EXPECT_EQ(files["token-signing.key"]["sha256"],
            "44c2336fedab8ff6a85c74c2b94165377b0981f526adb9487895ca6314165e86");

  // GNU tar reads it as it is.
  const std::string file = root_ + "/b.tar";
  std::ofstream(file, std::ios::binary) << archive;
  const std::string listing = root_ + "/list.txt";
  ASSERT_EQ(std::system(("tar -tf " + file + " > " + listing).c_str()), 0);
  EXPECT_EQ(ReadFile(listing),
            "warren-backup.json\nstore/data.mdb\ntoken-signing.key\nintegration.key\n"
            "ssh_host_ed25519_key\nssh_host_ed25519_key.pub\ncontrol_ed25519\n");
}

TEST_F(BackupTest, RestoredIntoAFreshDirectoryHasTheSameRecordsAndKeys) {
  const std::string archive = Backup();
  // A change after the backup is not in it.
  ASSERT_TRUE(store_->AddKey(Key("bob", "after", 999)).ok());
  const std::string fresh = root_ + "/restored";
  Result<BackupManifest> m = Restore(fresh, archive);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->schema_version, LmdbStore::kSchemaVersion);
  EXPECT_EQ(ModeOf(fresh), 0700u);
  EXPECT_EQ(ModeOf(fresh + "/token-signing.key"), 0600u);
  EXPECT_EQ(ModeOf(fresh + "/ssh_host_ed25519_key"), 0600u);
  EXPECT_EQ(ModeOf(fresh + "/ssh_host_ed25519_key.pub"), 0644u);
  EXPECT_EQ(ModeOf(fresh + "/store/data.mdb"), 0600u);
  for (const char* f : {"token-signing.key", "ssh_host_ed25519_key", "ssh_host_ed25519_key.pub",
                        "control_ed25519", "integration.key"}) {
    EXPECT_EQ(ReadFile(fresh + "/" + f), ReadFile(data_ + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(fresh + "/control_ed25519.pub"));
  // Nothing of the restore's scratch is left.
  for (const auto& e : fs::directory_iterator(fresh)) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".restore")) << e.path();
  }
  auto restored = LmdbStore::Open(fresh + "/store");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ((*restored)->ListUsers().value().size(), 2u);
  EXPECT_TRUE((*restored)->GetUser("alice").value().admin);
  auto bob_keys = (*restored)->ListKeys("bob");
  ASSERT_TRUE(bob_keys.ok());
  EXPECT_EQ(bob_keys->size(), 20u);
  EXPECT_EQ((*restored)->GetKey(Key("bob", "after", 999).fingerprint).status().code(),
            Code::kNotFound);
  EXPECT_TRUE((*restored)->GetKey(Key("alice", "laptop", 1).fingerprint).ok());
}

TEST_F(BackupTest, ACopyOfAStoreThisProcessHasNotOpenedIsTheSame) {
  store_.reset();  // LMDB: one environment per process
  std::string archive;
  Result<BackupManifest> m = Backup(archive, nullptr);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string fresh = root_ + "/restored";
  ASSERT_TRUE(Restore(fresh, archive).ok());
  auto restored = LmdbStore::Open(fresh + "/store");
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ((*restored)->ListKeys("bob").value().size(), 20u);
  // No store there: NotFound, and no store made.
  std::string none;
  BackupSource src{root_ + "/nothing", nullptr, "1", 1, nullptr};
  ASSERT_EQ(::mkdir(src.data_dir.c_str(), 0700), 0);
  EXPECT_EQ(WriteBackup(src, [&](std::string_view b) { return Status::Ok(); }).status().code(),
            Code::kNotFound);
  EXPECT_FALSE(fs::exists(src.data_dir + "/store"));
}

TEST_F(BackupTest, ANonEmptyDirectoryIsRefusedUnlessForced) {
  const std::string archive = Backup();
  const std::string target = root_ + "/other";
  {
    auto other = LmdbStore::Open(target + "/store");
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->CreateUser(User{"carol", false, 1}, {}).ok());
  }
  ASSERT_TRUE(WriteFileAtomic(target + "/integrations-ca.key", "OLD CA\n", 0600).ok());
  ASSERT_TRUE(fs::create_directories(target + "/vms/abc"));
  const std::string before = ReadFile(target + "/store/data.mdb");
  Result<BackupManifest> refused = Restore(target, archive);
  EXPECT_EQ(refused.status().code(), Code::kConflict);
  EXPECT_NE(refused.status().message().find("--force"), std::string::npos);
  EXPECT_EQ(ReadFile(target + "/store/data.mdb"), before);

  ASSERT_TRUE(Restore(target, archive, /*force=*/true).ok());
  auto restored = LmdbStore::Open(target + "/store");
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ((*restored)->GetUser("carol").status().code(), Code::kNotFound);
  EXPECT_TRUE((*restored)->GetUser("bob").ok());
  // A key file the backup does not hold goes; what is not the backup's business stays.
  EXPECT_FALSE(fs::exists(target + "/integrations-ca.key"));
  EXPECT_TRUE(fs::exists(target + "/vms/abc"));
  EXPECT_EQ(ReadFile(target + "/token-signing.key"), ReadFile(data_ + "/token-signing.key"));
}

TEST_F(BackupTest, AStoreAnotherProcessHasOpenIsNotReplaced) {
  const std::string archive = Backup();
  const std::string target = root_ + "/busy";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto s = LmdbStore::Open(target + "/store");
    (void)!::write(ready[1], s.ok() ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_TRUE(LmdbStore::OpenElsewhere(target + "/store").value());
  Result<BackupManifest> r = Restore(target, archive, /*force=*/true);
  EXPECT_EQ(r.status().code(), Code::kConflict);
  EXPECT_NE(r.status().message().find("stop it"), std::string::npos) << r.status().message();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(LmdbStore::OpenElsewhere(target + "/store").value());
  EXPECT_TRUE(Restore(target, archive, /*force=*/true).ok());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(BackupTest, ANewerSchemaIsRefusedBeforeAnythingIsWritten) {
  store_.reset();
  WriteSchemaVersion(data_ + "/store", LmdbStore::kSchemaVersion + 1);
  std::string archive;
  Result<BackupManifest> m = Backup(archive, nullptr);  // a backup copies any store
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->schema_version, LmdbStore::kSchemaVersion + 1);
  const std::string fresh = root_ + "/restored";
  Result<BackupManifest> r = Restore(fresh, archive);
  EXPECT_EQ(r.status().code(), Code::kConflict);
  EXPECT_NE(
      r.status().message().find("schema version " + std::to_string(LmdbStore::kSchemaVersion + 1)),
      std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("9.9.9"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(fresh));

  // A manifest that claims an older schema does not get the newer store past the check.
  Entries entries = Unpack(archive);
  nlohmann::json j = nlohmann::json::parse(entries[0].second);
  j["schema_version"] = LmdbStore::kSchemaVersion;
  entries[0].second = j.dump();
  r = Restore(fresh, Pack(entries));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("its manifest says"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(fresh));

  // A newer format too.
  entries = Unpack(archive);
  j = nlohmann::json::parse(entries[0].second);
  j["format"] = kBackupFormatVersion + 1;
  entries[0].second = j.dump();
  EXPECT_EQ(Restore(fresh, Pack(entries)).status().code(), Code::kConflict);
  EXPECT_FALSE(fs::exists(fresh));
}

TEST_F(BackupTest, DamagedAlteredOrTruncatedBackupsAreRefusedAndLeaveNothing) {
  const std::string archive = Backup();
  const std::string fresh = root_ + "/restored";
  Entries entries = Unpack(archive);

  // A flipped byte in a key.
  Entries damaged = entries;
  for (auto& [name, bytes] : damaged) {
    if (name == "token-signing.key") bytes[3] ^= 1;
  }
  Result<BackupManifest> r = Restore(fresh, Pack(damaged));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("SHA-256"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(fresh));

  // A flipped byte in the store.
  damaged = entries;
  damaged[1].second[5000] ^= 1;
  EXPECT_EQ(Restore(fresh, Pack(damaged)).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fresh));

  // An entry the manifest does not list; one it lists left out.
  Entries extra = entries;
  extra.emplace_back("control_ed25519.pub", "ssh-ed25519 AAAA\n");
  EXPECT_EQ(Restore(fresh, Pack(extra)).status().code(), Code::kInvalidArgument);
  Entries missing = entries;
  missing.pop_back();
  r = Restore(fresh, Pack(missing));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  Entries unknown = entries;
  unknown.emplace_back("etc/cron.d/x", "boom");
  EXPECT_EQ(Restore(fresh, Pack(unknown)).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fresh));
  // A path out of the directory, before the end.
  std::string packed = Pack(entries);
  std::string evil = TarHeader({"evil-name", 0600, 4, 1}).value();
  evil.replace(0, 10, "../../x\0\0\0");
  packed.insert(packed.size() - 2 * kTarBlock, Resum(evil) + "boom" + TarPadding(4));
  EXPECT_EQ(Restore(fresh, packed).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists(root_ + "/x"));

  // Cut anywhere.
  for (size_t cut : {size_t{0}, size_t{100}, kTarBlock + 3, archive.size() / 2,
                     archive.size() - 2 * kTarBlock - 1}) {
    r = Restore(fresh, archive.substr(0, cut));
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << cut << ": " << r.status().ToString();
    EXPECT_FALSE(fs::exists(fresh)) << cut;
  }
  // Not a backup at all.
  EXPECT_EQ(Restore(fresh, std::string(4096, 'x')).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fresh));
  // And the real thing still restores.
  EXPECT_TRUE(Restore(fresh, archive).ok());
}

TEST_F(BackupTest, ACancelledOrFailingWriterStops) {
  CancelSignal cancel;
  cancel.Cancel();
  BackupSource src{data_, store_.get(), "1", 1, &cancel};
  size_t wrote = 0;
  Result<BackupManifest> m = WriteBackup(src, [&](std::string_view b) {
    wrote += b.size();
    return Status::Ok();
  });
  EXPECT_EQ(m.status().code(), Code::kCancelled);
  EXPECT_EQ(wrote, 0u);
  src.cancel = nullptr;
  m = WriteBackup(src, [](std::string_view) { return Unavailable("the client went away"); });
  EXPECT_EQ(m.status().code(), Code::kUnavailable);
  // The scratch copy had no name: nothing is left in the data directory.
  for (const auto& e : fs::directory_iterator(data_)) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".backup")) << e.path();
  }
}

}  // namespace
}  // namespace warren
