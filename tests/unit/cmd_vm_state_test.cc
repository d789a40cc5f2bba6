// rm, the state changes (start, stop, restart, pause, resume) and rename through
// Interpreter::Execute: the transition table, partial failures, VMs still being created.
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <thread>

#include "keys/vm_rules.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/image_catalog.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

// --- new ---------------------------------------------------------------------------------

TEST_F(VmCommandTest, RmRemovesDomainRecordAndJobs) {
  New(Alice(), {"--name", "web-one"});
  const std::string id = IdOf("web-one");
  JobRecord job;
  job.job = "0000abcd";
  job.vm_id = id;
  job.owner = "alice";
  ASSERT_TRUE(store_->PutJob(job).ok());
  Outcome o = Exec(Alice(), {"rm", "web-one", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json(), json::parse(R"({"deleted":["web-one"],"failed":[]})"));
  EXPECT_FALSE(host_.Inspect(id).ok());
  EXPECT_FALSE(store_->GetVm(id).ok());
  EXPECT_TRUE(store_->ListJobs(id)->empty());
  std::vector<std::string> disconnected = guests_.disconnected();
  EXPECT_NE(std::find(disconnected.begin(), disconnected.end(), id), disconnected.end());
}

TEST_F(VmCommandTest, RmPartialFailureShape) {
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two"});
  Outcome o = Exec(Alice(), {"rm", "web-one", "nope-vm", "web-two", "--json"});
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_NE(o.exit_status, 0);
  json j = o.Json();
  EXPECT_EQ(j["deleted"], json::array({"web-one", "web-two"}));
  ASSERT_EQ(j["failed"].size(), 1u);
  EXPECT_EQ(j["failed"][0]["name"], "nope-vm");
  EXPECT_TRUE(Has(j["failed"][0]["error"], "no VM named")) << j.dump();
  EXPECT_TRUE(store_->ListVms()->empty());

  // Text: what happened to each.
  New(Alice(), {"--name", "web-one"});
  o = Exec(Alice(), {"rm", "web-one", "nope-vm"});
  EXPECT_TRUE(Has(o.out, "removed web-one")) << o.out;
  EXPECT_TRUE(Has(o.out, "nope-vm")) << o.out;

  // Nothing removed: a plain "not found".
  o = Exec(Alice(), {"rm", "nope-vm"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Alice(), {"rm"}).status.code(), Code::kInvalidArgument);
}

TEST_F(VmCommandTest, RmKeepsTheRecordWhenTheDomainWillNotGo) {
  New(Alice(), {"--name", "web-one"});
  host_.FailNext(Unavailable("injected: libvirt down"));
  Outcome o = Exec(Alice(), {"rm", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  ASSERT_TRUE(store_->GetVmByName("web-one").ok());
  EXPECT_EQ(store_->GetVmByName("web-one")->phase, VmPhase::kReady);  // as it was
  EXPECT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
}

// The record says "removing" before the domain goes, so a warren killed between the two
// leaves what reconcile finishes (reconcile_test), not a record whose domain is gone (crash
// points, issue 16). Meanwhile the VM shows as removing and takes no command.
TEST_F(VmCommandTest, RmMarksTheRecordBeforeTheDomainGoes) {
  New(Alice(), {"--name", "web-one"});
  const std::string id = IdOf("web-one");
  std::optional<VmPhase> phase;
  host_.SetStepHook([&](std::string_view step, std::string_view) {
    if (step != "destroy:before") return;
    phase = store_->GetVm(id)->phase;
  });
  ASSERT_TRUE(Exec(Alice(), {"rm", "web-one"}).status.ok());
  ASSERT_TRUE(phase.has_value());
  EXPECT_EQ(*phase, VmPhase::kRemoving);
  host_.SetStepHook(nullptr);

  // What a kill at that moment leaves: a record removing, its domain still there.
  New(Alice(), {"--name", "web-two"});
  ASSERT_TRUE(store_
                  ->UpdateVm(IdOf("web-two"),
                             [](VmRecord& vm) {
                               vm.phase = VmPhase::kRemoving;
                               return Status::Ok();
                             })
                  .ok());
  EXPECT_EQ(Exec(Alice(), {"stat", "web-two", "--json"}).Json()["state"], "removing");
  Outcome o = Exec(Alice(), {"start", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_TRUE(Has(o.err, "being removed")) << o.err;
  EXPECT_TRUE(Exec(Alice(), {"rm", "web-two"}).status.ok());  // rm finishes it
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

// A guest told to shut down powers off by itself, also should warren die before it records
// anything (crash points, issue 16): `stop` records the desired state before it asks the
// host (and takes it back when the host refuses), `restart` marks the VM restarting while
// the host restarts it (reconcile_test finishes either).
TEST_F(VmCommandTest, StopAndRestartRecordBeforeThePowerButton) {
  New(Alice(), {"--name", "web-one"});
  const std::string id = IdOf("web-one");
  std::vector<std::string> seen;
  host_.SetStepHook([&](std::string_view step, std::string_view) {
    if (step != "stop:before" && step != "restart:before") return;
    VmRecord vm = store_->GetVm(id).value();
    seen.push_back(std::string(step) + " " + std::string(DesiredStateName(vm.desired_state)) +
                   (vm.restarting ? " restarting" : ""));
  });
  ASSERT_TRUE(Exec(Alice(), {"restart", "web-one"}).status.ok());
  EXPECT_FALSE(store_->GetVm(id)->restarting);
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  EXPECT_EQ(seen,
            (std::vector<std::string>{"restart:before running restarting", "stop:before stopped"}));
  EXPECT_EQ(store_->GetVm(id)->desired_state, DesiredState::kStopped);
  host_.SetStepHook(nullptr);

  // Refused by the host: the record is as it was.
  ASSERT_TRUE(Exec(Alice(), {"start", "web-one"}).status.ok());
  host_.FailNext(Unavailable("injected: libvirt down"));
  EXPECT_EQ(Exec(Alice(), {"stop", "web-one"}).status.code(), Code::kUnavailable);
  EXPECT_EQ(store_->GetVm(id)->desired_state, DesiredState::kRunning);
  host_.FailNext(Unavailable("injected: libvirt down"));
  EXPECT_EQ(Exec(Alice(), {"restart", "web-one"}).status.code(), Code::kUnavailable);
  EXPECT_FALSE(store_->GetVm(id)->restarting);
}

TEST_F(VmCommandTest, StateTransitions) {
  New(Alice(), {"--name", "web-one"});
  const std::string id = IdOf("web-one");
  auto state = [&] { return host_.Inspect(id)->state; };
  auto desired = [&] { return store_->GetVm(id)->desired_state; };

  Outcome o = Exec(Alice(), {"stop", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "stopped web-one\n");
  EXPECT_EQ(state(), VmState::kStopped);
  EXPECT_EQ(desired(), DesiredState::kStopped);

  o = Exec(Alice(), {"stop", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kConflict));
  EXPECT_TRUE(Has(o.err, "web-one")) << o.err;
  EXPECT_EQ(Exec(Alice(), {"pause", "web-one"}).status.code(), Code::kConflict);
  EXPECT_EQ(desired(), DesiredState::kStopped);  // a refused change records nothing

  ASSERT_TRUE(Exec(Alice(), {"start", "web-one"}).status.ok());
  EXPECT_EQ(state(), VmState::kRunning);
  EXPECT_EQ(desired(), DesiredState::kRunning);

  json j = Exec(Alice(), {"pause", "web-one", "--json"}).Json();
  EXPECT_EQ(j["state"], "paused");
  EXPECT_EQ(j["desired_state"], "paused");
  EXPECT_EQ(desired(), DesiredState::kPaused);
  EXPECT_EQ(Exec(Alice(), {"ssh", "web-one", "true"}).status.code(), Code::kConflict);

  ASSERT_TRUE(Exec(Alice(), {"resume", "web-one"}).status.ok());
  EXPECT_EQ(state(), VmState::kRunning);
  EXPECT_EQ(desired(), DesiredState::kRunning);

  size_t before = guests_.disconnected().size();
  ASSERT_TRUE(Exec(Alice(), {"restart", "web-one"}).status.ok());
  EXPECT_EQ(state(), VmState::kRunning);
  EXPECT_GT(guests_.disconnected().size(), before);  // the control session does not survive

  EXPECT_EQ(Exec(Alice(), {"start", "nope-vm"}).status.code(), Code::kNotFound);
}

TEST_F(VmCommandTest, AVmStillBeingCreatedRefusesStateChanges) {
  HalfMade("half-made");
  EXPECT_EQ(Exec(Alice(), {"stop", "half-made"}).status.code(), Code::kConflict);
  EXPECT_EQ(Exec(Alice(), {"ssh", "half-made", "true"}).status.code(), Code::kConflict);
  EXPECT_EQ(Exec(Alice(), {"ls", "--json"}).Json()["vms"][0]["state"], "creating");
}

TEST_F(VmCommandTest, Rename) {
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two"});
  const std::string id = IdOf("web-one");
  Outcome o = Exec(Alice(), {"rename", "web-one", "web-new", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["name"], "web-new");
  EXPECT_EQ(o.Json()["old_name"], "web-one");
  EXPECT_EQ(IdOf("web-new"), id);
  EXPECT_EQ(host_.Inspect(id)->name, "web-new");
  EXPECT_FALSE(store_->GetVmByName("web-one").ok());
  EXPECT_EQ(Exec(Alice(), {"rename", "web-new", "web-two"}).status.code(), Code::kConflict);
  EXPECT_EQ(Exec(Alice(), {"rename", "web-new", "X"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"rename", "web-new", "web-p8080"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Bob(), {"rename", "web-new", "bobs-now"}).status.code(), Code::kNotFound);
}

}  // namespace
}  // namespace warren::vmtest
