// Integrations in keys/: the secret box (AES-256-GCM under DATA/integration.key), the rules
// (names, target URLs, headers, attachments), and the records on a real LmdbStore in a temp
// dir — sealed secrets that never reach the database file in plaintext, per-owner names,
// attachments that never outlive their VM or user, a reopen, and the upgrade from schema 4.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "keys/integration.h"
#include "keys/lmdb_store.h"
#include "keys/secret_box.h"
#include "keys/token.h"
#include "tests/unit/store_rollback.h"

namespace warren {
namespace {

constexpr int64_t kDeleteAtMs = 1'700'000'000'000;  // when the tests remove VMs

constexpr const char kBearer[] = "sk_live_PLAINTEXTBEARER123";
constexpr const char kHeaderValue[] = "hv-PLAINTEXTHEADER456";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

SecretKey TestKey(char fill = 'k') {
  return SecretKey::FromBytes(std::string(SecretKey::kKeyBytes, fill)).value();
}

// ---- the secret box -----------------------------------------------------------------------

TEST(SecretKeyTest, SealsAndOpensBoundToItsContext) {
  SecretKey key = TestKey();
  auto a = key.Seal("the secret", "ctx-1");
  auto b = key.Seal("the secret", "ctx-1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);  // a fresh nonce each time
  EXPECT_EQ(a->find("the secret"), std::string::npos);
  EXPECT_EQ(*key.Open(*a, "ctx-1"), "the secret");
  EXPECT_EQ(*key.Open(*b, "ctx-1"), "the secret");
  EXPECT_EQ(*key.Open(*key.Seal("", "c"), "c"), "");

  // Another context (another record), another key, any altered byte: nothing opens, and
  // the message says nothing of the content.
  EXPECT_EQ(key.Open(*a, "ctx-2").status().code(), Code::kInternal);
  EXPECT_FALSE(TestKey('o').Open(*a, "ctx-1").ok());
  for (size_t i = 3; i < a->size(); i += 7) {
    std::string altered = *a;
    altered[i] = altered[i] == 'A' ? 'B' : 'A';
    Result<std::string> opened = key.Open(altered, "ctx-1");
    EXPECT_FALSE(opened.ok() && *opened == "the secret") << i;
  }
  EXPECT_FALSE(key.Open("s1.", "ctx-1").ok());
  EXPECT_FALSE(key.Open("plain text", "ctx-1").ok());
  EXPECT_FALSE(SecretKey::FromBytes("short").ok());

  // The fingerprint key is not the sealing key, and depends on the file's key.
  EXPECT_EQ(key.Mac("x"), TestKey().Mac("x"));
  EXPECT_NE(key.Mac("x"), TestKey('o').Mac("x"));
}

TEST(SecretKeyTest, KeyFileIsMadeOwnerOnlyAndReloaded) {
  char tmpl[] = "/tmp/warren-secretkey-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const std::string path = root + "/integration.key";
  auto first = SecretKey::LoadOrCreate(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(path).size(), 2 * SecretKey::kKeyBytes + 1);  // hex and a newline
  std::string sealed = *first->Seal("kept", "c");
  auto second = SecretKey::LoadOrCreate(path);  // a restart
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second->Open(sealed, "c"), "kept");

  chmod(path.c_str(), 0644);
  auto loose = SecretKey::LoadOrCreate(path);
  ASSERT_FALSE(loose.ok());
  EXPECT_NE(loose.status().message().find("chmod 600"), std::string::npos);
  EXPECT_NE(loose.status().message().find("integration"), std::string::npos);

  const std::string garbage = root + "/garbage.key";
  std::ofstream(garbage) << "zz not a key\n";
  chmod(garbage.c_str(), 0600);
  auto bad = SecretKey::LoadOrCreate(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a integration key"), std::string::npos);
  EXPECT_EQ(bad.status().message().find("zz"), std::string::npos);

  // The token signing key is made by the same code: a file of one is not a key of the other
  // length, and each names itself.
  const std::string signing = root + "/token-signing.key";
  ASSERT_TRUE(TokenSigner::LoadOrCreate(signing).ok());
  EXPECT_TRUE(SecretKey::LoadOrCreate(signing).ok());  // both 32 bytes: the format is shared
  std::filesystem::remove_all(root);
}

// ---- the rules ------------------------------------------------------------------------------

TEST(IntegrationRulesTest, Names) {
  for (std::string ok : {std::string("stripe"), std::string("a"), std::string("llm-2"),
                         std::string("0day"), std::string(40, 'x')}) {
    EXPECT_TRUE(CheckIntegrationName(ok).ok()) << ok;
  }
  for (std::string bad : {std::string(), std::string(41, 'x'), std::string("-a"), std::string("a-"),
                          std::string("Stripe"), std::string("a_b"), std::string("a.b"),
                          std::string("a b"), std::string("ü")}) {
    EXPECT_EQ(CheckIntegrationName(bad).code(), Code::kInvalidArgument) << bad;
  }
}

TEST(IntegrationRulesTest, HeadersAndBearer) {
  EXPECT_TRUE(CheckHeaderName("X-Api-Key").ok());
  EXPECT_TRUE(CheckHeaderName("Authorization").ok());
  for (const char* refused : {"Host", "content-length", "Transfer-Encoding", "Connection",
                              "Upgrade", "TE", "Proxy-Authorization", "keep-alive"}) {
    EXPECT_EQ(CheckHeaderName(refused).code(), Code::kInvalidArgument) << refused;
  }
  for (const char* bad : {"", "X Key", "X:Key", "X\x01"}) {
    EXPECT_EQ(CheckHeaderName(bad).code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(CheckHeaderValue("X", "a value\twith spaces").ok());
  for (std::string bad :
       {std::string(), std::string(" leadSECRETBITS"), std::string("SECRETBITS trail "),
        std::string("SECRETBITS\nbreak"), std::string("SECRETBITS caf\xc3\xa9"),
        std::string("SECRETBITS") + std::string(kMaxSecretBytes, 'v')}) {
    Status st = CheckHeaderValue("X-Key", bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(st.message().find("SECRETBITS"), std::string::npos);
    EXPECT_NE(st.message().find("X-Key"), std::string::npos);
  }
  EXPECT_TRUE(CheckBearer(kBearer).ok());
  EXPECT_EQ(CheckBearer("Bearer abc").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckBearer("").code(), Code::kInvalidArgument);

  IntegrationSecrets twice{{{"X-Key", "a"}, {"x-key", "b"}}, ""};
  EXPECT_EQ(CheckIntegrationSecrets(twice).code(), Code::kInvalidArgument);
  IntegrationSecrets both{{{"authorization", "Basic x"}}, "tok"};
  EXPECT_EQ(CheckIntegrationSecrets(both).code(), Code::kInvalidArgument);
  IntegrationSecrets many;
  for (size_t i = 0; i <= kMaxIntegrationHeaders; ++i) {
    many.headers.emplace_back("X-" + std::to_string(i), "v");
  }
  EXPECT_EQ(CheckIntegrationSecrets(many).code(), Code::kInvalidArgument);
}

TEST(IntegrationRulesTest, AttachmentsAndWhichVmsTheyReach) {
  EXPECT_TRUE(CheckStoredAttachment("all").ok());
  EXPECT_TRUE(CheckStoredAttachment("tag:ci").ok());
  EXPECT_TRUE(CheckStoredAttachment("vm:aaaaaaaaaaaa").ok());
  for (const char* bad : {"", "vm:web-1", "tag:", "tag:Bad", "everyone", "vm:"}) {
    EXPECT_EQ(CheckStoredAttachment(bad).code(), Code::kInvalidArgument) << bad;
  }
  VmRecord vm;
  vm.id = "aaaaaaaaaaaa";
  vm.owner = "alice";
  vm.tags = {"ci", "web"};
  IntegrationRecord i;
  i.owner = "alice";
  EXPECT_FALSE(IntegrationAppliesTo(i, vm));
  for (std::vector<std::string> reach :
       {std::vector<std::string>{"vm:aaaaaaaaaaaa"}, {"tag:web"}, {"all"}, {"tag:x", "tag:ci"}}) {
    i.attachments = reach;
    EXPECT_TRUE(IntegrationAppliesTo(i, vm)) << reach[0];
  }
  i.attachments = {"vm:bbbbbbbbbbbb", "tag:prod"};
  EXPECT_FALSE(IntegrationAppliesTo(i, vm));
  i.attachments = {"all"};
  i.owner = "bob";  // another owner's integration never reaches alice's VMs
  EXPECT_FALSE(IntegrationAppliesTo(i, vm));
}

// ---- the records ----------------------------------------------------------------------------

class IntegrationStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-intstore-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/store";
    Reopen();
    ASSERT_TRUE(store_->CreateUser({"alice", false, 1}, {}).ok());
    ASSERT_TRUE(store_->CreateUser({"bob", false, 1}, {}).ok());
    ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-one", "alice")).ok());
    ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "bobs-vm", "bob")).ok());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  void Reopen() {
    store_.reset();
    auto s = LmdbStore::Open(dir_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  static VmRecord Vm(const std::string& id, const std::string& name, const std::string& owner) {
    VmRecord vm;
    vm.id = id;
    vm.name = name;
    vm.owner = owner;
    vm.image = "debian@1";
    return vm;
  }
  IntegrationRecord Integration(const std::string& owner, const std::string& name,
                                std::vector<std::string> attachments = {}) {
    IntegrationRecord i;
    i.id = NewIntegrationId().value();
    i.owner = owner;
    i.name = name;
    i.target = "https://api.example.com/v1";
    i.attachments = std::move(attachments);
    i.created_at = 7;
    IntegrationSecrets secrets{{{"X-Api-Key", kHeaderValue}}, kBearer};
    EXPECT_TRUE(SealIntegrationSecrets(key_, secrets, i).ok());
    return i;
  }

  std::string root_, dir_;
  SecretKey key_ = TestKey();
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(IntegrationStoreTest, SecretsAreSealedAndNeverInTheDatabaseFile) {
  IntegrationRecord i = Integration("alice", "stripe", {"vm:aaaaaaaaaaaa"});
  EXPECT_EQ(i.header_names, std::vector<std::string>{"X-Api-Key"});
  EXPECT_TRUE(i.bearer);
  EXPECT_EQ(i.fingerprint.size(), kIntegrationFingerprintChars);
  ASSERT_TRUE(store_->CreateIntegration(i).ok());
  Reopen();  // a restart: the records, and the key, as they were

  Result<IntegrationRecord> back = store_->GetIntegration("alice", "stripe");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->fingerprint, i.fingerprint);
  Result<IntegrationSecrets> opened = OpenIntegrationSecrets(key_, *back);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->bearer, kBearer);
  ASSERT_EQ(opened->headers.size(), 1u);
  EXPECT_EQ(opened->headers[0].first, "X-Api-Key");
  EXPECT_EQ(opened->headers[0].second, kHeaderValue);
  EXPECT_FALSE(OpenIntegrationSecrets(TestKey('o'), *back).ok());  // another server's key

  // The raw bytes on disk: the record is there (its header name and target), the secrets
  // are not.
  store_.reset();
  const std::string raw = ReadFile(dir_ + "/data.mdb");
  ASSERT_FALSE(raw.empty());
  EXPECT_NE(raw.find("X-Api-Key"), std::string::npos);
  EXPECT_NE(raw.find("api.example.com"), std::string::npos);
  EXPECT_EQ(raw.find(kBearer), std::string::npos);
  EXPECT_EQ(raw.find(kHeaderValue), std::string::npos);
  EXPECT_EQ(raw.find("PLAINTEXT"), std::string::npos);
}

TEST_F(IntegrationStoreTest, FingerprintTellsVersionsApart) {
  IntegrationRecord a = Integration("alice", "a");
  IntegrationRecord b = Integration("alice", "b");
  EXPECT_EQ(a.fingerprint, b.fingerprint);  // the same secrets, on one server
  IntegrationSecrets other{{{"X-Api-Key", kHeaderValue}}, "sk_live_rotated"};
  ASSERT_TRUE(SealIntegrationSecrets(key_, other, b).ok());
  EXPECT_NE(a.fingerprint, b.fingerprint);
  IntegrationRecord none;
  none.id = NewIntegrationId().value();
  ASSERT_TRUE(SealIntegrationSecrets(key_, {}, none).ok());
  EXPECT_TRUE(none.sealed.empty());
  EXPECT_FALSE(none.bearer);
  EXPECT_EQ(none.fingerprint.size(), kIntegrationFingerprintChars);
}

TEST_F(IntegrationStoreTest, NamesArePerOwner) {
  ASSERT_TRUE(store_->CreateIntegration(Integration("alice", "stripe")).ok());
  EXPECT_EQ(store_->CreateIntegration(Integration("alice", "stripe")).code(), Code::kConflict);
  EXPECT_TRUE(store_->CreateIntegration(Integration("bob", "stripe")).ok());
  ASSERT_TRUE(store_->CreateIntegration(Integration("alice", "llm")).ok());
  EXPECT_EQ(store_->CreateIntegration(Integration("carol", "x")).code(), Code::kNotFound);
  Result<std::vector<IntegrationRecord>> mine = store_->ListIntegrations("alice");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].name, "llm");
  EXPECT_EQ((*mine)[1].name, "stripe");
  EXPECT_TRUE(store_->ListIntegrations("nobody")->empty());
  EXPECT_EQ(store_->GetIntegration("alice", "nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetIntegration("alice", "Bad Name").status().code(), Code::kNotFound);

  // Rename within the owner's namespace; the seal (bound to the id) still opens.
  EXPECT_EQ(store_->RenameIntegration("alice", "llm", "stripe").code(), Code::kConflict);
  EXPECT_EQ(store_->RenameIntegration("alice", "llm", "Bad").code(), Code::kInvalidArgument);
  ASSERT_TRUE(store_->RenameIntegration("alice", "llm", "model").ok());
  EXPECT_EQ(store_->GetIntegration("alice", "llm").status().code(), Code::kNotFound);
  Result<IntegrationRecord> model = store_->GetIntegration("alice", "model");
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(OpenIntegrationSecrets(key_, *model).ok());
  EXPECT_TRUE(store_->CreateIntegration(Integration("alice", "llm")).ok());  // free again

  ASSERT_TRUE(store_->DeleteIntegration("alice", "model").ok());
  EXPECT_EQ(store_->DeleteIntegration("alice", "model").code(), Code::kNotFound);
  EXPECT_EQ(store_->DeleteIntegration("bob", "llm").code(), Code::kNotFound);
}

TEST_F(IntegrationStoreTest, RecordsAreChecked) {
  IntegrationRecord bad = Integration("alice", "x");
  bad.target = "https://API.example.com";  // not normalised
  EXPECT_EQ(store_->CreateIntegration(bad).code(), Code::kInvalidArgument);
  bad = Integration("alice", "x", {"tag:b", "tag:a"});  // unsorted
  EXPECT_EQ(store_->CreateIntegration(bad).code(), Code::kInvalidArgument);
  bad = Integration("alice", "x");
  bad.sealed.clear();
  EXPECT_EQ(store_->CreateIntegration(bad).code(), Code::kInvalidArgument);
  bad = Integration("alice", "x");
  bad.kind = "smtp";
  EXPECT_EQ(store_->CreateIntegration(bad).code(), Code::kInvalidArgument);

  ASSERT_TRUE(store_->CreateIntegration(Integration("alice", "x")).ok());
  // What UpdateIntegration answers for a change that sets `name` and `attachments`, then
  // says `verdict`.
  auto update = [&](std::string name, std::vector<std::string> attachments, Status verdict) {
    return store_
        ->UpdateIntegration("alice", "x",
                            [&](IntegrationRecord& r) {
                              r.name = name;
                              r.attachments = attachments;
                              return verdict;
                            })
        .code();
  };
  EXPECT_EQ(update("y", {}, Status::Ok()), Code::kInvalidArgument);
  EXPECT_EQ(update("x", {"everyone"}, Status::Ok()), Code::kInvalidArgument);
  // A refusal from the change itself abandons it.
  EXPECT_EQ(update("x", {"all"}, NotFound("no")), Code::kNotFound);
  EXPECT_TRUE(store_->GetIntegration("alice", "x")->attachments.empty());
}

TEST_F(IntegrationStoreTest, AttachmentsNameTheOwnersVmsAndGoWithThem) {
  // Only the owner's existing VMs can be attached.
  EXPECT_EQ(store_->CreateIntegration(Integration("alice", "x", {"vm:bbbbbbbbbbbb"})).code(),
            Code::kNotFound);
  EXPECT_EQ(store_->CreateIntegration(Integration("alice", "x", {"vm:cccccccccccc"})).code(),
            Code::kNotFound);
  ASSERT_TRUE(store_->CreateVm(Vm("cccccccccccc", "web-two", "alice")).ok());
  ASSERT_TRUE(store_
                  ->CreateIntegration(Integration(
                      "alice", "x", {"all", "tag:ci", "vm:aaaaaaaaaaaa", "vm:cccccccccccc"}))
                  .ok());
  ASSERT_TRUE(store_->CreateIntegration(Integration("alice", "y", {"vm:aaaaaaaaaaaa"})).ok());
  auto attach = [&](const std::string& a) {
    return store_->UpdateIntegration("alice", "y", [&](IntegrationRecord& r) {
      r.attachments.push_back(a);
      std::sort(r.attachments.begin(), r.attachments.end());
      return Status::Ok();
    });
  };
  EXPECT_EQ(attach("vm:bbbbbbbbbbbb").code(), Code::kNotFound);

  // A rename keeps the attachment (by id); removing the VM drops it everywhere, at once.
  ASSERT_TRUE(store_->RenameVm("aaaaaaaaaaaa", "web-renamed").ok());
  EXPECT_EQ(store_->GetIntegration("alice", "y")->attachments,
            std::vector<std::string>{"vm:aaaaaaaaaaaa"});
  ASSERT_TRUE(store_->DeleteVm("aaaaaaaaaaaa", kDeleteAtMs).ok());
  EXPECT_EQ(store_->GetIntegration("alice", "x")->attachments,
            (std::vector<std::string>{"all", "tag:ci", "vm:cccccccccccc"}));
  EXPECT_TRUE(store_->GetIntegration("alice", "y")->attachments.empty());
  EXPECT_EQ(attach("vm:aaaaaaaaaaaa").code(), Code::kNotFound);  // gone for good

  // Removing the user removes every integration of theirs, and only theirs.
  ASSERT_TRUE(store_->CreateIntegration(Integration("bob", "x", {"vm:bbbbbbbbbbbb"})).ok());
  ASSERT_TRUE(store_->DeleteUser("alice").ok());
  EXPECT_TRUE(store_->ListIntegrations("alice")->empty());
  ASSERT_TRUE(store_->CreateUser({"alice", false, 2}, {}).ok());
  EXPECT_TRUE(store_->ListIntegrations("alice")->empty());  // nothing revives
  EXPECT_TRUE(store_->GetIntegration("bob", "x").ok());
}

// An attach racing the VM's removal never leaves an attachment to a VM that is gone: the
// attach checks the VM in its write transaction, and DeleteVm drops attachments in its own.
TEST_F(IntegrationStoreTest, AnAttachRacingTheVmsRemovalLeavesNoOrphan) {
  ASSERT_TRUE(store_->CreateIntegration(Integration("alice", "x")).ok());
  for (int round = 0; round < 50; ++round) {
    std::string id =
        "race" + std::string(8 - std::to_string(round).size(), '0') + std::to_string(round);
    ASSERT_TRUE(store_->CreateVm(Vm(id, "race-" + std::to_string(round), "alice")).ok());
    std::thread attach([&] {
      Status st = store_->UpdateIntegration("alice", "x", [&](IntegrationRecord& r) {
        r.attachments.push_back(VmAttachment(id));
        std::sort(r.attachments.begin(), r.attachments.end());
        return Status::Ok();
      });
      EXPECT_TRUE(st.ok() || st.code() == Code::kNotFound) << st.ToString();
    });
    ASSERT_TRUE(store_->DeleteVm(id, kDeleteAtMs).ok());
    attach.join();
    EXPECT_TRUE(store_->GetIntegration("alice", "x")->attachments.empty()) << round;
  }
}

// A store as schema version 4 left it (no integration tables) gains them on open.
TEST_F(IntegrationStoreTest, UpgradesAVersionFourStore) {
  store_.reset();
  ASSERT_NO_FATAL_FAILURE(RollBackStore(dir_, 4, {"integrations", "integration_names"}));

  Reopen();
  EXPECT_TRUE(store_->GetVm("aaaaaaaaaaaa").ok());  // schema 4's data intact
  EXPECT_TRUE(store_->CreateIntegration(Integration("alice", "x", {"vm:aaaaaaaaaaaa"})).ok());
  EXPECT_TRUE(store_->DeleteVm("aaaaaaaaaaaa", kDeleteAtMs).ok());
}

}  // namespace
}  // namespace warren
