// wait, kill and jobs through Interpreter::Execute with FakeGuestControl: a command handed
// back as a job and read back, kill, job names and scope, listing, expiry, a forgotten job,
// renames and store restarts.
#include <thread>

#include "keys/base64.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/head_tail.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

TEST_F(JobCommandTest, HandBackAsAJobThenWaitUntilItEnds) {
  const std::string job = Hold("long build", "step 1\n", "warn 1\n");
  const std::string name = "web-one/" + job;
  Outcome o =
      Exec(Alice("mcp"), {"ssh", "--json", "--wait-seconds", "0", "web-one", "long", "build"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.exit_status, 0);
  json j = o.Json();
  EXPECT_EQ(j["stdout"], "step 1\n");
  EXPECT_EQ(j["stderr"], "warn 1\n");
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["job"], name);
  JobRecord rec = store_->GetJob(id_, job).value();
  EXPECT_EQ(rec.command, "long build");
  EXPECT_EQ(rec.owner, "alice");
  EXPECT_EQ(rec.stdout_offset, 7u);
  EXPECT_EQ(rec.stderr_offset, 7u);
  EXPECT_FALSE(rec.finished);

  // Only what is new since the last read.
  guests_.Append(job, "step 2\n");
  o = Exec(Alice("mcp"), {"wait", "--json", "--wait-seconds", "0", name});
  ASSERT_TRUE(o.status.ok()) << o.out;
  j = o.Json();
  EXPECT_EQ(j["stdout"], "step 2\n");
  EXPECT_EQ(j["stderr"], "");
  EXPECT_EQ(j["finished"], false);
  EXPECT_EQ(j["job"], name);
  EXPECT_EQ(store_->GetJob(id_, job)->stdout_offset, 14u);

  // It ends while we wait.
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    guests_.Release(job, 4, "done\n");
  });
  o = Exec(Alice("mcp"), {"wait", "--json", "--wait-seconds", "5", name});
  finisher.join();
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_EQ(o.exit_status, 4);
  j = o.Json();
  EXPECT_EQ(j["stdout"], "done\n");
  EXPECT_EQ(j["finished"], true);
  EXPECT_EQ(j["exit_code"], 4);
  rec = store_->GetJob(id_, job).value();
  EXPECT_TRUE(rec.finished);
  EXPECT_EQ(rec.exit_code, 4);
  EXPECT_EQ(rec.ended_at, kStart);

  // Waiting again: nothing new, the same status.
  o = Exec(Alice("mcp"), {"wait", "--json", name});
  EXPECT_EQ(o.exit_status, 4);
  EXPECT_EQ(o.Json()["stdout"], "");
}

TEST_F(JobCommandTest, KillEndsTheJob) {
  const std::string job = Hold("sleep 1000");
  const std::string name = "web-one/" + job;
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  Outcome o = Exec(Alice(), {"kill", name});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "killed " + name + "\n");
  o = Exec(Alice("mcp"), {"wait", "--json", name});
  json j = o.Json();
  EXPECT_EQ(j["finished"], true);
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["signal"], 9);
  EXPECT_EQ(o.exit_status, 128 + 9);
  o = Exec(Alice(), {"kill", name});
  EXPECT_TRUE(o.status.ok());
  EXPECT_TRUE(Has(o.out, "already ended")) << o.out;
}

TEST_F(JobCommandTest, JobNamesAreCheckedAndScoped) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one/xyz"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one/0000ffff"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"wait", "web-one/" + job}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"kill", "web-one/" + job}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(AliceCi(), {"wait", "web-one/" + job}).status.code(), Code::kNotFound);
  EXPECT_FALSE(guests_.finished(job));
}

TEST_F(JobCommandTest, JobsListsAndRefreshesFromTheGuest) {
  EXPECT_EQ(Exec(Alice(), {"jobs"}).out, "no jobs\n");
  const std::string a = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  const std::string b = Hold("make");
  ASSERT_TRUE(Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "make"}).status.ok());
  guests_.Release(b, 0);

  json j = Exec(Alice(), {"jobs", "--json"}).Json();
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][0]["job"], "web-one/" + a);
  EXPECT_EQ(j["jobs"][0]["command"], "sleep 1000");
  EXPECT_EQ(j["jobs"][0]["finished"], false);
  EXPECT_EQ(j["jobs"][1]["job"], "web-one/" + b);
  EXPECT_EQ(j["jobs"][1]["finished"], true);  // learned from the guest
  EXPECT_EQ(j["jobs"][1]["exit_code"], 0);
  EXPECT_TRUE(store_->GetJob(id_, b)->finished);

  Outcome text = Exec(Alice(), {"jobs", "web-one"});
  EXPECT_TRUE(Has(text.out, "running")) << text.out;
  EXPECT_TRUE(Has(text.out, "exited 0")) << text.out;
  EXPECT_TRUE(Exec(Bob(), {"jobs", "--json"}).Json()["jobs"].empty());
  EXPECT_EQ(Exec(Bob(), {"jobs", "web-one"}).status.code(), Code::kNotFound);
}

TEST_F(JobCommandTest, JobsEndWithTheirVmAndExpireAfterADay) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  json j = Exec(Alice(), {"jobs", "--json"}).Json();
  ASSERT_EQ(j["jobs"].size(), 1u);
  EXPECT_EQ(j["jobs"][0]["finished"], true);
  EXPECT_TRUE(j["jobs"][0]["exit_code"].is_null());
  Outcome o = Exec(Alice("mcp"), {"wait", "--json", "web-one/" + job});
  EXPECT_EQ(o.Json()["finished"], true);
  EXPECT_EQ(o.exit_status, 255);  // no status came back

  clock_.now += 24 * 3600 + 1;
  o = Exec(Alice(), {"wait", "web-one/" + job});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "more than a day ago")) << o.err;
  EXPECT_TRUE(Exec(Alice(), {"jobs", "--json"}).Json()["jobs"].empty());
  EXPECT_TRUE(store_->ListJobs(id_)->empty());
}

TEST_F(JobCommandTest, AJobTheGuestForgotIsGone) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  guests_.Forget(job);
  Outcome o = Exec(Alice(), {"wait", "web-one/" + job});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetJob(id_, job)->finished);
}

TEST_F(JobCommandTest, JobFollowsItsVmThroughARename) {
  const std::string job = Hold("sleep 1000");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"rename", "web-one", "web-new"}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"jobs", "--json"}).Json()["jobs"][0]["job"], "web-new/" + job);
  EXPECT_TRUE(Exec(Alice(), {"wait", "--wait-seconds", "0", "web-new/" + job}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"wait", "web-one/" + job}).status.code(), Code::kNotFound);
}

TEST_F(JobCommandTest, JobsSurviveAStoreRestart) {
  const std::string job = Hold("sleep 1000", "a\n");
  ASSERT_TRUE(
      Exec(Alice("mcp"), {"ssh", "--wait-seconds", "0", "web-one", "sleep", "1000"}).status.ok());
  interpreter_.reset();
  OpenStore();
  MakeInterpreter();
  guests_.Release(job, 0, "b\n");
  Outcome o = Exec(Alice("mcp"), {"wait", "--json", "web-one/" + job});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["stdout"], "b\n");  // resumes where the last read stopped
  EXPECT_EQ(o.Json()["exit_code"], 0);
}

}  // namespace
}  // namespace warren::vmtest
