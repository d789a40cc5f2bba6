// The store's usage metering on a real LmdbStore in a temp dir: MeterVm across start, pause,
// resume and stop with exact amounts, DeleteVm's last accrual, a meter UpdateVm cannot move,
// the retention prune, the fold past the per-day cap, ListUsage's order and ranges, the
// sandbox fields and limit on the records, and the upgrade from schema 7.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/usage.h"
#include "tests/unit/store_rollback.h"

namespace warren {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 20'000;
constexpr int64_t kMidnight = kDay * kMsPerDay;
constexpr int64_t kT0 = kMidnight + 8 * kHour;  // 08:00 on kDay: the VMs' creation

class UsageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/store-usage-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/data";
    Reopen();
    for (const char* name : {"alice", "al", "bob"}) {
      ASSERT_TRUE(store_->CreateUser({name, false, 1}, {}).ok());
    }
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  void Reopen(size_t max_rows_per_day = kMaxUsageRowsPerUserDay) {
    store_.reset();
    LmdbStore::Options options;
    options.max_usage_rows_per_user_day = max_rows_per_day;
    auto s = LmdbStore::Open(dir_, options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  // A VM of 2 vCPUs, 4 GiB and a 10 GiB disk created (disk mark) at `created_ms`.
  static VmRecord Vm(const std::string& id, const std::string& name,
                     const std::string& owner = "alice", int64_t created_ms = kT0) {
    VmRecord vm;
    vm.id = id;
    vm.name = name;
    vm.owner = owner;
    vm.image = "debian@1";
    vm.cpus = 2;
    vm.memory_mib = 4096;
    vm.disk_gib = 10;
    vm.created_at = created_ms / 1000;
    vm.meter.disk_since_ms = created_ms;
    return vm;
  }
  void Meter(const std::string& id, bool running, int64_t at_ms) {
    Status st = store_->MeterVm(id, running, at_ms);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::vector<UsageRow> Rows(const std::string& owner = "", int64_t since_day = 0) {
    Result<std::vector<UsageRow>> rows = store_->ListUsage(owner, since_day);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<UsageRow>{};
  }

  std::string root_, dir_;
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(UsageStoreTest, CreateStoresTheMeterAsGiven) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web")).ok());
  Result<VmRecord> vm = store_->GetVm("aaaaaaaaaaaa");
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->meter.disk_since_ms, kT0);
  EXPECT_EQ(vm->meter.running_since_ms, 0);
  EXPECT_EQ(vm->kind, "vm");
  EXPECT_TRUE(Rows().empty());  // nothing accrues until a mark moves
}

TEST_F(UsageStoreTest, StartPauseResumeStopGivesExactAmounts) {
  VmRecord web = Vm("aaaaaaaaaaaa", "web");
  web.tags = {"ci"};
  ASSERT_TRUE(store_->CreateVm(web).ok());
  Meter(web.id, true, kT0 + 1'000);                       // booted a second after creation
  Meter(web.id, false, kT0 + 1'000 + kHour);              // paused after an hour
  Meter(web.id, true, kT0 + 1'000 + 2 * kHour);           // resumed an hour later
  Meter(web.id, false, kT0 + 1'000 + 2 * kHour + 1'500);  // stopped 1.5 s later

  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 1u);
  const UsageRow& r = rows[0];
  EXPECT_EQ(r.owner, "alice");
  EXPECT_EQ(r.day, kDay);
  EXPECT_EQ(r.vm_id, "aaaaaaaaaaaa");
  EXPECT_EQ(r.vm_name, "web");
  EXPECT_EQ(r.kind, "vm");
  EXPECT_EQ(r.tags, std::vector<std::string>{"ci"});
  const int64_t ran = kHour + 1'500;
  EXPECT_EQ(r.amounts.running_ms, ran);
  EXPECT_EQ(r.amounts.vcpu_ms, 2 * ran);
  EXPECT_EQ(r.amounts.memory_mib_ms, 4096 * ran);
  EXPECT_EQ(r.amounts.disk_gib_ms, 10 * (1'000 + 2 * kHour + 1'500));

  Result<VmRecord> vm = store_->GetVm(web.id);
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->meter.running_since_ms, 0);
  EXPECT_EQ(vm->meter.disk_since_ms, kT0 + 1'000 + 2 * kHour + 1'500);

  // A stopped VM's disk still accrues, and the record survives a reopen.
  Reopen();
  Meter(web.id, false, kT0 + 3 * kHour);
  rows = Rows("alice");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].amounts.running_ms, ran);
  EXPECT_EQ(rows[0].amounts.disk_gib_ms, 10 * 3 * kHour);
}

TEST_F(UsageStoreTest, RunningAcrossMidnightMakesARowPerDay) {
  VmRecord web = Vm("aaaaaaaaaaaa", "web", "alice", kMidnight - kHour);
  ASSERT_TRUE(store_->CreateVm(web).ok());
  Meter(web.id, true, kMidnight - kHour);
  Meter(web.id, false, kMidnight + 2 * kHour);
  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].day, kDay - 1);
  EXPECT_EQ(rows[0].amounts.running_ms, kHour);
  EXPECT_EQ(rows[1].day, kDay);
  EXPECT_EQ(rows[1].amounts.running_ms, 2 * kHour);
  EXPECT_EQ(Rows("alice", kDay).size(), 1u);  // since_day is a range, not a full scan
  EXPECT_EQ(Rows("alice", kDay + 1).size(), 0u);
}

TEST_F(UsageStoreTest, ResizeWhileRunningMetersAsStartedUntilTheNextStart) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web")).ok());
  Meter("aaaaaaaaaaaa", true, kT0);
  ASSERT_TRUE(store_
                  ->UpdateVm("aaaaaaaaaaaa",
                             [](VmRecord& vm) {
                               vm.cpus = 8;
                               vm.memory_mib = 16384;
                               return Status::Ok();
                             })
                  .ok());
  Meter("aaaaaaaaaaaa", true, kT0 + kHour);  // a reconcile while running
  Meter("aaaaaaaaaaaa", false, kT0 + 2 * kHour);
  Meter("aaaaaaaaaaaa", true, kT0 + 3 * kHour);
  Meter("aaaaaaaaaaaa", false, kT0 + 4 * kHour);
  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].amounts.running_ms, 3 * kHour);
  EXPECT_EQ(rows[0].amounts.vcpu_ms, 2 * 2 * kHour + 8 * kHour);
  EXPECT_EQ(rows[0].amounts.memory_mib_ms, 4096 * 2 * kHour + 16384 * kHour);
  EXPECT_DOUBLE_EQ(UsageUnits(rows[0].amounts), 6.0);  // 12 vCPU-h / 2, 24 GiB-h / 4
}

TEST_F(UsageStoreTest, UpdateVmCannotMoveTheMeter) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web")).ok());
  Meter("aaaaaaaaaaaa", true, kT0 + kHour);
  ASSERT_TRUE(store_
                  ->UpdateVm("aaaaaaaaaaaa",
                             [](VmRecord& vm) {
                               vm.meter = VmMeter{};
                               vm.comment = "changed";
                               return Status::Ok();
                             })
                  .ok());
  Result<VmRecord> vm = store_->GetVm("aaaaaaaaaaaa");
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->comment, "changed");
  EXPECT_EQ(vm->meter.running_since_ms, kT0 + kHour);
  EXPECT_EQ(vm->meter.running_cpus, 2);
  EXPECT_EQ(vm->meter.disk_since_ms, kT0 + kHour);
}

TEST_F(UsageStoreTest, DeleteAccruesThenDeletesAndTheRowsRemain) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web")).ok());
  Meter("aaaaaaaaaaaa", true, kT0);
  ASSERT_TRUE(store_->DeleteVm("aaaaaaaaaaaa", kT0 + kHour).ok());
  EXPECT_EQ(store_->GetVm("aaaaaaaaaaaa").status().code(), Code::kNotFound);
  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].vm_name, "web");
  EXPECT_EQ(rows[0].amounts.running_ms, kHour);
  EXPECT_EQ(rows[0].amounts.disk_gib_ms, 10 * kHour);
  EXPECT_DOUBLE_EQ(UsageUnits(rows[0].amounts), 1.0);

  // The name is free again; a new VM of that name has rows of its own.
  ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "web", "alice", kT0 + kHour)).ok());
  ASSERT_TRUE(store_->DeleteVm("bbbbbbbbbbbb", kT0 + 2 * kHour).ok());
  EXPECT_EQ(Rows("alice").size(), 2u);
}

TEST_F(UsageStoreTest, BadCallsAreRefused) {
  EXPECT_EQ(store_->MeterVm("zzzzzzzzzzzz", true, kT0).code(), Code::kNotFound);
  EXPECT_EQ(store_->DeleteVm("zzzzzzzzzzzz", kT0).code(), Code::kNotFound);
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web")).ok());
  EXPECT_EQ(store_->MeterVm("aaaaaaaaaaaa", true, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->MeterVm("aaaaaaaaaaaa", true, -5).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->MeterVm("aaaaaaaaaaaa", true, int64_t{1} << 62).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->DeleteVm("aaaaaaaaaaaa", 0).code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->GetVm("aaaaaaaaaaaa").ok());  // nothing happened

  // Time that runs backward accrues nothing and moves no mark back.
  Meter("aaaaaaaaaaaa", true, kT0 + kHour);
  Meter("aaaaaaaaaaaa", true, kT0);
  EXPECT_EQ(store_->GetVm("aaaaaaaaaaaa")->meter.running_since_ms, kT0 + kHour);
  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].amounts.running_ms, 0);
  EXPECT_EQ(rows[0].amounts.disk_gib_ms, 10 * kHour);
}

TEST_F(UsageStoreTest, ListUsageSortsByOwnerDayAndVmAndKeepsOwnersApart) {
  ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "b-vm", "alice")).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "a-vm", "alice")).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("cccccccccccc", "al-vm", "al")).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("dddddddddddd", "bob-vm", "bob")).ok());
  for (const char* id : {"bbbbbbbbbbbb", "aaaaaaaaaaaa", "cccccccccccc", "dddddddddddd"}) {
    Meter(id, false, kT0 + kHour);
    Meter(id, false, kT0 + kMsPerDay);
  }
  std::vector<UsageRow> all = Rows();
  ASSERT_EQ(all.size(), 8u);
  std::vector<std::string> order;
  for (const UsageRow& r : all)
    order.push_back(r.owner + "/" + std::to_string(r.day) + "/" + r.vm_id);
  const std::string d0 = std::to_string(kDay), d1 = std::to_string(kDay + 1);
  EXPECT_EQ(order, (std::vector<std::string>{
                       "al/" + d0 + "/cccccccccccc", "al/" + d1 + "/cccccccccccc",
                       "alice/" + d0 + "/aaaaaaaaaaaa", "alice/" + d0 + "/bbbbbbbbbbbb",
                       "alice/" + d1 + "/aaaaaaaaaaaa", "alice/" + d1 + "/bbbbbbbbbbbb",
                       "bob/" + d0 + "/dddddddddddd", "bob/" + d1 + "/dddddddddddd"}));
  EXPECT_EQ(Rows("al").size(), 2u);  // not alice's
  EXPECT_EQ(Rows("alice", kDay + 1).size(), 2u);
  EXPECT_EQ(Rows("", kDay + 1).size(), 4u);
  EXPECT_TRUE(Rows("carol").empty());
}

TEST_F(UsageStoreTest, RowsTakeTheRecordsNameKindAndSizeAsTheyAreNow) {
  VmRecord sbx = Vm("aaaaaaaaaaaa", "sbx-one");
  sbx.kind = "sandbox";
  sbx.size = "small";
  sbx.expires_at = kT0 / 1000 + 900;
  ASSERT_TRUE(store_->CreateVm(sbx).ok());
  Meter(sbx.id, true, kT0);
  ASSERT_TRUE(store_->RenameVm(sbx.id, "sbx-two").ok());
  Meter(sbx.id, false, kT0 + kHour);
  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].vm_name, "sbx-two");
  EXPECT_EQ(rows[0].kind, "sandbox");
  EXPECT_EQ(rows[0].size, "small");
}

TEST_F(UsageStoreTest, RowsOlderThanTheRetentionArePruned) {
  // alice: rows on kDay and kDay + 1; bob: one on kDay.
  ASSERT_TRUE(
      store_->CreateVm(Vm("aaaaaaaaaaaa", "old", "alice", kMidnight + kMsPerDay - kHour)).ok());
  ASSERT_TRUE(store_->DeleteVm("aaaaaaaaaaaa", kMidnight + kMsPerDay + kHour).ok());
  ASSERT_TRUE(store_->CreateVm(Vm("bbbbbbbbbbbb", "bobs", "bob")).ok());
  ASSERT_TRUE(store_->DeleteVm("bbbbbbbbbbbb", kT0 + kHour).ok());
  ASSERT_EQ(Rows("alice").size(), 2u);

  // A VM metered kUsageRetentionDays + 1 days after kDay prunes alice's kDay row only (the
  // one on kDay + 1 is exactly kUsageRetentionDays old, and kept).
  const int64_t later = kT0 + (kUsageRetentionDays + 1) * kMsPerDay;
  ASSERT_TRUE(store_->CreateVm(Vm("cccccccccccc", "new", "alice", later)).ok());
  Meter("cccccccccccc", true, later + kHour);
  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].day, kDay + 1);
  EXPECT_EQ(rows[0].vm_id, "aaaaaaaaaaaa");
  EXPECT_EQ(rows[1].day, kDay + kUsageRetentionDays + 1);
  EXPECT_EQ(Rows("bob").size(), 1u);  // another owner's rows wait for that owner's metering
}

// A VM unmetered for years (or a clock that jumped) accrues only the days still kept.
TEST_F(UsageStoreTest, TimeBeforeTheRetentionIsNotWalked) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "ancient", "al", kT0)).ok());
  Meter("aaaaaaaaaaaa", true, kT0);
  Meter("aaaaaaaaaaaa", false, kT0 + 1000 * kMsPerDay);
  std::vector<UsageRow> rows = Rows("al");
  ASSERT_EQ(rows.size(), static_cast<size_t>(kUsageRetentionDays) + 1);
  EXPECT_EQ(rows.front().day, kDay + 1000 - kUsageRetentionDays);
  EXPECT_EQ(rows.front().amounts.running_ms, kMsPerDay);
  EXPECT_EQ(rows.back().day, kDay + 1000);
  EXPECT_EQ(rows.back().amounts.running_ms, 8 * kHour);
}

TEST_F(UsageStoreTest, VmsPastTheDailyCapFoldIntoOneRow) {
  Reopen(/*max_rows_per_day=*/2);
  const std::vector<std::string> ids = {"aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc",
                                        "dddddddddddd"};
  for (size_t i = 0; i < ids.size(); ++i) {
    VmRecord vm = Vm(ids[i], "vm-" + std::to_string(i));
    vm.tags = {"ci"};
    ASSERT_TRUE(store_->CreateVm(vm).ok());
    Meter(ids[i], true, kT0);
  }
  for (const std::string& id : ids) Meter(id, false, kT0 + kHour);

  std::vector<UsageRow> rows = Rows("alice");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].vm_id, kOtherVmsId);  // "*" sorts first within the day
  EXPECT_EQ(rows[0].vm_name, "(other VMs)");
  EXPECT_EQ(rows[0].kind, "");
  EXPECT_TRUE(rows[0].tags.empty());
  EXPECT_EQ(rows[0].amounts.running_ms, 2 * kHour);  // vm-2 and vm-3
  EXPECT_EQ(rows[0].amounts.disk_gib_ms, 2 * 10 * kHour);
  EXPECT_EQ(rows[1].vm_id, "aaaaaaaaaaaa");
  EXPECT_EQ(rows[1].amounts.running_ms, kHour);
  EXPECT_EQ(rows[2].vm_id, "bbbbbbbbbbbb");

  // The next day counts afresh: the first VMs metered then get rows of their own.
  Meter("dddddddddddd", false, kT0 + kMsPerDay);
  rows = Rows("alice", kDay + 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].vm_id, "dddddddddddd");
  EXPECT_EQ(rows[0].amounts.disk_gib_ms, 10 * 8 * kHour);  // midnight to 08:00
}

TEST_F(UsageStoreTest, SandboxFieldsAndLimitRoundTrip) {
  VmRecord sbx = Vm("aaaaaaaaaaaa", "sbx-one");
  sbx.kind = "sandbox";
  sbx.size = "medium";
  sbx.expires_at = 1'700'000'900;
  ASSERT_TRUE(store_->CreateVm(sbx).ok());
  ASSERT_TRUE(store_
                  ->UpdateUser("alice",
                               [](User& u) {
                                 u.limits.max_sandboxes = 3;
                                 return Status::Ok();
                               })
                  .ok());
  ASSERT_TRUE(store_
                  ->UpdateUser("bob",
                               [](User& u) {
                                 u.limits.max_sandboxes = kNoLimit;
                                 return Status::Ok();
                               })
                  .ok());
  Reopen();
  Result<VmRecord> got = store_->GetVm("aaaaaaaaaaaa");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, "sandbox");
  EXPECT_EQ(got->size, "medium");
  EXPECT_EQ(got->expires_at, 1'700'000'900);
  EXPECT_EQ(got->meter.disk_since_ms, kT0);
  EXPECT_EQ(store_->GetUser("alice")->limits.max_sandboxes, 3);
  EXPECT_EQ(store_->GetUser("bob")->limits.max_sandboxes, kNoLimit);
  EXPECT_FALSE(store_->GetUser("al")->limits.max_sandboxes.has_value());
  EXPECT_EQ(store_
                ->UpdateUser("al",
                             [](User& u) {
                               u.limits.max_sandboxes = -2;
                               return Status::Ok();
                             })
                .code(),
            Code::kInvalidArgument);
}

TEST_F(UsageStoreTest, RecordsWithBadSandboxFieldsAreRefused) {
  VmRecord pod = Vm("aaaaaaaaaaaa", "pod");
  pod.kind = "pod";
  EXPECT_EQ(store_->CreateVm(pod).code(), Code::kInvalidArgument);
  VmRecord sized = Vm("aaaaaaaaaaaa", "sized");
  sized.size = "small";  // a VM has no size
  EXPECT_EQ(store_->CreateVm(sized).code(), Code::kInvalidArgument);
  VmRecord expiring = Vm("aaaaaaaaaaaa", "expiring");
  expiring.expires_at = 5;  // nor an expiry
  EXPECT_EQ(store_->CreateVm(expiring).code(), Code::kInvalidArgument);
  VmRecord negative = Vm("aaaaaaaaaaaa", "negative");
  negative.meter.disk_since_ms = -1;
  EXPECT_EQ(store_->CreateVm(negative).code(), Code::kInvalidArgument);
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "fine")).ok());
  EXPECT_EQ(store_
                ->UpdateVm("aaaaaaaaaaaa",
                           [](VmRecord& vm) {
                             vm.kind = "pod";
                             return Status::Ok();
                           })
                .code(),
            Code::kInvalidArgument);
}

// A store as schema version 7 left it (no usage table, VM records without kind or meter)
// gains the table on open; its VMs read as kind "vm" with no marks, and metering starts at
// their first mark.
TEST_F(UsageStoreTest, UpgradesAVersionSevenStore) {
  ASSERT_TRUE(store_->CreateVm(Vm("aaaaaaaaaaaa", "web")).ok());
  store_.reset();
  // No usage table, and the record as schema 7 wrote it.
  ASSERT_NO_FATAL_FAILURE(RollBackStore(
      dir_, 7, {"usage"},
      {{"vms", "aaaaaaaaaaaa",
        R"({"id":"aaaaaaaaaaaa","name":"web","owner":"alice","image":"debian@1","cpus":2,)"
        R"("memory_mib":4096,"disk_gib":10,"tags":[],"comment":"","env":[],"egress":"all",)"
        R"("created_at":100,"desired_state":"running","phase":"ready"})"}}));

  Reopen();
  Result<VmRecord> vm = store_->GetVm("aaaaaaaaaaaa");
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  EXPECT_EQ(vm->kind, "vm");
  EXPECT_EQ(vm->size, "");
  EXPECT_EQ(vm->expires_at, 0);
  EXPECT_EQ(vm->meter.disk_since_ms, 0);
  EXPECT_TRUE(Rows().empty());
  Meter("aaaaaaaaaaaa", true, kT0);  // reconcile at start: nothing before it is known
  EXPECT_TRUE(Rows().empty());
  Meter("aaaaaaaaaaaa", false, kT0 + kHour);
  std::vector<UsageRow> rows = Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].amounts.running_ms, kHour);
  EXPECT_EQ(rows[0].amounts.disk_gib_ms, 10 * kHour);
}

}  // namespace
}  // namespace warren
