// The store's VM and job records on a real LmdbStore in a temp dir: the name index, the
// one-transaction changes (create, rename, delete with jobs), persistence across a reopen,
// the upgrade from schema version 1, and the VM naming rules.
#include <gtest/gtest.h>
#include <lmdb.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/vm_rules.h"

namespace warren {
namespace {

constexpr int64_t kDeleteAtMs = 1'700'000'000'000;  // when the tests remove VMs

class VmStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-vmstore-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/data";
    Reopen();
    ASSERT_TRUE(store_->CreateUser({"alice", false, 1}, {}).ok());
    ASSERT_TRUE(store_->CreateUser({"bob", false, 1}, {}).ok());
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

  static VmRecord Vm(const std::string& id, const std::string& name,
                     const std::string& owner = "alice") {
    VmRecord vm;
    vm.id = id;
    vm.name = name;
    vm.owner = owner;
    vm.image = "debian@1";
    vm.cpus = 2;
    vm.memory_mib = 2048;
    vm.disk_gib = 10;
    vm.created_at = 100;
    return vm;
  }
  static JobRecord Job(const std::string& vm_id, const std::string& job, int64_t started) {
    JobRecord j;
    j.job = job;
    j.vm_id = vm_id;
    j.owner = "alice";
    j.command = "sleep 100";
    j.started_at = started;
    return j;
  }

  std::string root_, dir_;
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(VmStoreTest, CreateGetByNameAndList) {
  VmRecord web = Vm("aaaaaaaaaaaa", "web-one");
  web.tags = {"ci", "prod"};
  web.env = {{"A", "1"}, {"B", "two words"}};
  web.comment = "the web";
  ASSERT_TRUE(store_->CreateVm(web).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "api-two", "bob")).ok());

  Result<VmRecord> got = store_->GetVm("aaaaaaaaaaaa");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->name, "web-one");
  EXPECT_EQ(got->tags, (std::vector<std::string>{"ci", "prod"}));
  EXPECT_EQ(got->env, web.env);
  EXPECT_EQ(got->comment, "the web");
  EXPECT_EQ(got->phase, VmPhase::kCreating);
  EXPECT_EQ(got->desired_state, DesiredState::kRunning);

  Result<VmRecord> by_name = store_->GetVmByName("api-two");
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->id, "bbbbbbbbbbbb");
  EXPECT_EQ(store_->GetVmByName("nope-vm").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetVm("cccccccccccc").status().code(), Code::kNotFound);

  Result<std::vector<VmRecord>> all = store_->ListVms();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "api-two");  // name order
  EXPECT_EQ((*all)[1].name, "web-one");
}

TEST_F(VmStoreTest, CreateRefusesTakenNamesIdsAndBadRecords) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-one")).ok());
  // Names are unique server-wide, whoever owns them.
  EXPECT_EQ(store_->CreateVm(Vm("bbbbbbbbbbbb", "web-one", "bob")).code(), Code::kConflict);
  EXPECT_EQ(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-two")).code(), Code::kConflict);
  // The failed create of web-two wrote nothing, its name included.
  EXPECT_EQ(store_->GetVmByName("web-two").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->CreateVm(Vm("short", "web-three")).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateVm(Vm("cccccccccccc", "Web")).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateVm(Vm("cccccccccccc", "web-three", "carol")).code(), Code::kNotFound);
  VmRecord bad_tags = Vm("cccccccccccc", "web-three");
  bad_tags.tags = {"b", "a"};
  EXPECT_EQ(store_->CreateVm(bad_tags).code(), Code::kInvalidArgument);
  bad_tags.tags = {"Bad"};
  EXPECT_EQ(store_->CreateVm(bad_tags).code(), Code::kInvalidArgument);
  VmRecord bad_made = Vm("cccccccccccc", "web-three");
  bad_made.made = "magic";
  EXPECT_EQ(store_->CreateVm(bad_made).code(), Code::kInvalidArgument);
  bad_made.made = "template";
  bad_made.made_ms = -1;
  EXPECT_EQ(store_->CreateVm(bad_made).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->ListVms()->size(), 1u);
}

TEST_F(VmStoreTest, UpdateIsReadModifyWriteAndGuardsIdentity) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-one")).ok());
  ASSERT_TRUE(store_
                  ->UpdateVm("aaaaaaaaaaaa",
                             [](VmRecord& vm) {
                               vm.phase = VmPhase::kReady;
                               vm.desired_state = DesiredState::kPaused;
                               vm.comment = "x";
                               return Status::Ok();
                             })
                  .ok());
  VmRecord vm = store_->GetVm("aaaaaaaaaaaa").value();
  EXPECT_EQ(vm.phase, VmPhase::kReady);
  EXPECT_EQ(vm.desired_state, DesiredState::kPaused);
  EXPECT_EQ(vm.comment, "x");

  Status refused = store_->UpdateVm("aaaaaaaaaaaa", [](VmRecord& vm) {
    vm.comment = "lost";
    return Conflict("no thanks");
  });
  EXPECT_EQ(refused.code(), Code::kConflict);
  EXPECT_EQ(store_->GetVm("aaaaaaaaaaaa")->comment, "x");
  EXPECT_EQ(store_
                ->UpdateVm("aaaaaaaaaaaa",
                           [](VmRecord& vm) {
                             vm.name = "sneaky";
                             return Status::Ok();
                           })
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->UpdateVm("cccccccccccc", [](VmRecord&) { return Status::Ok(); }).code(),
            Code::kNotFound);
}

TEST_F(VmStoreTest, ConcurrentUpdatesDoNotLoseChanges) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-one")).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 10; ++i) {
        std::string tag = "t" + std::to_string(t) + "-" + std::to_string(i);
        ASSERT_TRUE(store_
                        ->UpdateVm("aaaaaaaaaaaa",
                                   [&](VmRecord& vm) {
                                     vm.tags.push_back(tag);
                                     std::sort(vm.tags.begin(), vm.tags.end());
                                     return Status::Ok();
                                   })
                        .ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(store_->GetVm("aaaaaaaaaaaa")->tags.size(), 40u);
}

TEST_F(VmStoreTest, RenameMovesTheNameInOneTransaction) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-one")).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "api-two")).ok());
  EXPECT_EQ(store_->RenameVm("aaaaaaaaaaaa", "api-two").code(), Code::kConflict);
  EXPECT_EQ(store_->RenameVm("aaaaaaaaaaaa", "X").code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->RenameVm("cccccccccccc", "other-one").code(), Code::kNotFound);
  ASSERT_TRUE(store_->RenameVm("aaaaaaaaaaaa", "web-renamed").ok());
  EXPECT_EQ(store_->GetVmByName("web-renamed")->id, "aaaaaaaaaaaa");
  EXPECT_EQ(store_->GetVm("aaaaaaaaaaaa")->name, "web-renamed");
  EXPECT_EQ(store_->GetVmByName("web-one").status().code(), Code::kNotFound);
  // The old name is free again.
  EXPECT_TRUE(store_->CreateVm(Vm("cccccccccccc", "web-one")).ok());
  EXPECT_TRUE(store_->RenameVm("aaaaaaaaaaaa", "web-renamed").ok());  // same name: no-op
}

TEST_F(VmStoreTest, JobsAreKeptPerVmAndDeletedWithIt) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web-one")).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "api-two")).ok());
  ASSERT_TRUE(store_->PutJob(Job("aaaaaaaaaaaa", "0000000b", 20)).ok());
  ASSERT_TRUE(store_->PutJob(Job("aaaaaaaaaaaa", "0000000a", 10)).ok());
  ASSERT_TRUE(store_->PutJob(Job("bbbbbbbbbbbb", "0000000c", 5)).ok());
  EXPECT_EQ(store_->PutJob(Job("cccccccccccc", "0000000d", 5)).code(), Code::kNotFound);
  EXPECT_EQ(store_->PutJob(Job("aaaaaaaaaaaa", "XYZ", 5)).code(), Code::kInvalidArgument);
  JobRecord long_command = Job("aaaaaaaaaaaa", "0000000e", 5);
  long_command.command = std::string(kMaxJobCommandBytes + 1, 'x');
  EXPECT_EQ(store_->PutJob(long_command).code(), Code::kInvalidArgument);

  Result<std::vector<JobRecord>> jobs = store_->ListJobs("aaaaaaaaaaaa");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job, "0000000a");  // oldest first
  EXPECT_EQ(store_->ListJobs("")->size(), 3u);

  ASSERT_TRUE(store_
                  ->UpdateJob("aaaaaaaaaaaa", "0000000a",
                              [](JobRecord& j) {
                                j.stdout_offset = 7;
                                j.finished = true;
                                j.exit_code = 3;
                                return Status::Ok();
                              })
                  .ok());
  JobRecord a = store_->GetJob("aaaaaaaaaaaa", "0000000a").value();
  EXPECT_EQ(a.stdout_offset, 7u);
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(a.exit_code, 3);
  EXPECT_EQ(store_->GetJob("bbbbbbbbbbbb", "0000000a").status().code(), Code::kNotFound);

  ASSERT_TRUE(store_->DeleteJob("aaaaaaaaaaaa", "0000000b").ok());
  EXPECT_EQ(store_->DeleteJob("aaaaaaaaaaaa", "0000000b").code(), Code::kNotFound);

  ASSERT_TRUE(store_->DeleteVm("aaaaaaaaaaaa", kDeleteAtMs).ok());
  EXPECT_EQ(store_->GetVm("aaaaaaaaaaaa").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetVmByName("web-one").status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->ListJobs("aaaaaaaaaaaa")->empty());
  EXPECT_EQ(store_->ListJobs("")->size(), 1u);  // the other VM's job stays
  EXPECT_EQ(store_->DeleteVm("aaaaaaaaaaaa", kDeleteAtMs).code(), Code::kNotFound);
}

TEST_F(VmStoreTest, VmsAndJobsSurviveAReopen) {
  VmRecord vm = Vm("aaaaaaaaaaaa", "web-one");
  vm.phase = VmPhase::kReady;
  vm.desired_state = DesiredState::kStopped;
  vm.made = "template";
  vm.made_ms = 812;
  ASSERT_TRUE(store_->CreateVm(vm).ok());
  JobRecord job = Job("aaaaaaaaaaaa", "0000000a", 10);
  job.finished = true;
  job.signal = 9;
  job.stderr_offset = 12;
  ASSERT_TRUE(store_->PutJob(job).ok());
  Reopen();
  VmRecord back = store_->GetVmByName("web-one").value();
  EXPECT_EQ(back.phase, VmPhase::kReady);
  EXPECT_EQ(back.desired_state, DesiredState::kStopped);
  EXPECT_EQ(back.made, "template");
  EXPECT_EQ(back.made_ms, 812);
  JobRecord job_back = store_->GetJob("aaaaaaaaaaaa", "0000000a").value();
  EXPECT_TRUE(job_back.finished);
  EXPECT_FALSE(job_back.exit_code.has_value());
  EXPECT_EQ(job_back.signal, 9);
  EXPECT_EQ(job_back.stderr_offset, 12u);
  EXPECT_FALSE(back.pending_resize.has_value());
  // What `rm` and `resize` leave for reconcile should warren stop half-way.
  ASSERT_TRUE(store_
                  ->UpdateVm("aaaaaaaaaaaa",
                             [](VmRecord& r) {
                               r.phase = VmPhase::kRemoving;
                               r.pending_resize = PendingResize{4, 0, 20};
                               return Status::Ok();
                             })
                  .ok());
  Reopen();
  back = store_->GetVmByName("web-one").value();
  EXPECT_EQ(back.phase, VmPhase::kRemoving);
  ASSERT_TRUE(back.pending_resize.has_value());
  EXPECT_EQ(back.pending_resize->cpus, 4);
  EXPECT_EQ(back.pending_resize->memory_mib, 0);
  EXPECT_EQ(back.pending_resize->disk_gib, 20);
}

// A store as schema version 1 left it (users and keys only) gains the VM tables on open,
// its users intact.
TEST_F(VmStoreTest, UpgradesAVersionOneStore) {
  store_.reset();
  std::string old = root_ + "/v1";
  std::filesystem::create_directory(old);
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, old.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  for (const char* name : {"users", "keys", "key_names"}) {
    ASSERT_EQ(mdb_dbi_open(txn, name, MDB_CREATE, &dbi), 0);
  }
  ASSERT_EQ(mdb_dbi_open(txn, "users", 0, &dbi), 0);
  std::string user_key = "carol";
  std::string user_value = R"({"name":"carol","admin":true,"created_at":5})";
  MDB_val uk{user_key.size(), user_key.data()};
  MDB_val uv{user_value.size(), user_value.data()};
  ASSERT_EQ(mdb_put(txn, dbi, &uk, &uv, 0), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "meta", MDB_CREATE, &dbi), 0);
  std::string key = "schema_version", value = "1";
  MDB_val k{key.size(), key.data()};
  MDB_val v{value.size(), value.data()};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);

  auto s = LmdbStore::Open(old);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE((*s)->GetUser("carol").ok());
  EXPECT_TRUE((*s)->CreateVm(Vm("aaaaaaaaaaaa", "web-one", "carol")).ok());
  EXPECT_EQ((*s)->ListVms()->size(), 1u);
}

TEST(VmRulesTest, Names) {
  // 1-52: sbx1 (seed 002) and single letters are names too; login names are kept apart by
  // the commands (login_names.h), not by length.
  for (const char* ok : {"web-1", "calm-otter-42", "abcde", "a1b2c3", "web-pa", "web-p1x",
                         "web-8080", "ppppp", "sbx1", "web", "a", "x-1"}) {
    EXPECT_TRUE(CheckVmName(ok).ok()) << ok;
  }
  std::string longest(kMaxVmNameLength, 'a');
  EXPECT_TRUE(CheckVmName(longest).ok());
  for (std::string bad : {"", "1", "1web-one", "-webone", "webone-", "web--one", "Web-one",
                          "web_one", "web.one", "web-p8080", "my-vm-p1", "web one", "-"}) {
    Status st = CheckVmName(bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(CheckVmName(longest + "a").ok());
  EXPECT_NE(CheckVmName("web-p8080").message().find("-p"), std::string::npos);
}

TEST(VmRulesTest, Ids) {
  EXPECT_TRUE(CheckVmId("abc123def456").ok());
  EXPECT_FALSE(CheckVmId("abc123def45").ok());
  EXPECT_FALSE(CheckVmId("ABC123DEF456").ok());
  EXPECT_TRUE(CheckJobId("0123abcd").ok());
  EXPECT_FALSE(CheckJobId("0123abcg").ok());
  EXPECT_FALSE(CheckJobId("0123abc").ok());
}

}  // namespace
}  // namespace warren
