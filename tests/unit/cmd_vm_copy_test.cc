// cp (lobby/commands/cmd_vm_copy.cc) end to end through Interpreter::Execute on a real
// LmdbStore with FakeVmHost and FakeGuestControl: the copy's identity, tags and sync; every
// refusal (existing name, unknown or invisible VM, host limits, a failing sync or host)
// leaving nothing behind; rm of the source while it is being copied; reconcile after a cp
// cut short.
#include <chrono>
#include <thread>

#include "lobby/base/error_map.h"
#include "lobby/commands/reconcile.h"
#include "lobby/commands/vm_boot.h"
#include "tests/unit/vm_test_fixture.h"
#include "vmhost/guest/identity.h"

namespace warren::vmtest {
namespace {

using VmCopyTest = VmCommandTest;

TEST_F(VmCopyTest, CpCopiesARunningVmWithItsOwnIdentity) {
  New(Alice(), {"--name", "web-one", "--tag", "prod", "--env", "K=V", "--cpu", "3"});
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_TRUE(Has(o.out, "Copied web-one to web-two")) << o.out;
  EXPECT_TRUE(Has(o.out, "ssh -p 2222 web-two@warren.test")) << o.out;
  EXPECT_TRUE(Has(o.err, "syncing web-one")) << o.err;
  EXPECT_TRUE(Ran(guests_, "sync"));

  Result<VmRecord> copy = store_->GetVmByName("web-two");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->phase, VmPhase::kReady);
  EXPECT_EQ(copy->tags, std::vector<std::string>{"prod"});
  EXPECT_EQ(copy->cpus, 3);
  EXPECT_EQ(copy->env.size(), 1u);
  EXPECT_NE(copy->id, IdOf("web-one"));
  // Its own identity reached the host: name (the hostname), the id prepare_vm saw.
  std::optional<VmSpec> spec = host_.SpecOf(copy->id);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->name, "web-two");
  EXPECT_EQ(last_spec_.id, copy->id);
  EXPECT_EQ(spec->authorized_keys, "ssh-ed25519 AAAAcontrol warren-control");
  // Both run; the source is one layer deeper.
  EXPECT_EQ(host_.Inspect(copy->id)->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->disk_layers, 2);
}

TEST_F(VmCopyTest, CpMakesUpANameAndCanDropTags) {
  New(Alice(), {"--name", "web-one", "--tag", "prod"});
  Outcome o = Exec(Alice(), {"cp", "web-one", "--no-copy-tags", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  nlohmann::json j = o.Json();
  EXPECT_EQ(j["source"], "web-one");
  EXPECT_EQ(j["synced"], true);
  EXPECT_TRUE(j["copy_seconds"].is_number());
  EXPECT_TRUE(j["tags"].empty());
  EXPECT_TRUE(o.err.empty()) << o.err;  // --json: no progress lines
  Result<VmRecord> copy = store_->GetVmByName(j["name"].get<std::string>());
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->made, "copy");  // stat --json says how a VM was made
  EXPECT_GE(copy->made_ms, 1);
}

TEST_F(VmCopyTest, CpOntoAnExistingNameIsAConflict) {
  New(Alice(), {"--name", "web-one"});
  New(Bob(), {"--name", "bobs-vm"});
  Outcome o = Exec(Alice(), {"cp", "web-one", "bobs-vm"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kConflict));
  EXPECT_EQ(store_->ListVms()->size(), 2u);
  EXPECT_EQ(host_.List()->size(), 2u);
  EXPECT_FALSE(Ran(guests_, "sync"));  // refused before touching the source
}

TEST_F(VmCopyTest, CpOfAnUnknownOrInvisibleVmIsNotFound) {
  New(Bob(), {"--name", "bobs-vm"});
  New(Alice(), {"--name", "web-one"});
  EXPECT_EQ(Exec(Alice(), {"cp", "nosuch-vm", "web-two"}).status.code(), Code::kNotFound);
  Outcome o = Exec(Alice(), {"cp", "bobs-vm", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "no VM named \"bobs-vm\"")) << o.err;
  // A tag-scoped key sees only its tag.
  EXPECT_EQ(Exec(AliceCi(), {"cp", "web-one", "web-two"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Alice(), {"cp", "web-one", "Bad_Name"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->ListVms()->size(), 2u);
  EXPECT_EQ(host_.List()->size(), 2u);
}

TEST_F(VmCopyTest, CpOfAStoppedVmForksItWithoutASync) {
  New(Alice(), {"--name", "web-one"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_EQ(o.Json()["synced"], false);
  EXPECT_EQ(o.Json()["source_state"], "stopped");
  EXPECT_FALSE(Ran(guests_, "sync"));
  EXPECT_EQ(host_.Inspect(IdOf("web-two"))->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kStopped);
}

TEST_F(VmCopyTest, FailuresLeaveNothingAndTheSourceUntouched) {
  New(Alice(), {"--name", "web-one"});
  const std::string src = IdOf("web-one");
  // The host refuses.
  host_.FailNext(Unavailable("injected: libvirt went away"));
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable) << o.err;
  // The guest cannot sync.
  guests_.SetScript("sync", {"", "sync: I/O error\n", 1});
  o = Exec(Alice(), {"cp", "web-one", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable) << o.err;
  EXPECT_TRUE(Has(o.err, "nothing was copied")) << o.err;
  guests_.SetScript("sync", {});
  // Beyond the host's memory.
  host_.SetHostLimits(1024, 1000);
  o = Exec(Alice(), {"cp", "web-one", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kLimitExceeded) << o.err;
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kLimitExceeded));
  // prepare_vm fails.
  host_.SetHostLimits(INT64_MAX, INT64_MAX);
  prepare_status_ = Internal("injected: no host key");
  EXPECT_EQ(Exec(Alice(), {"cp", "web-one", "web-two"}).status.code(), Code::kInternal);
  // The copy never booting.
  prepare_status_ = Status::Ok();
  ready_timeout_ms_ = 300;
  MakeInterpreter();
  guests_.SetReachable(false);
  o = Exec(Alice(), {"cp", "web-one", "web-two"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable) << o.err;  // the sync could not run

  ASSERT_EQ(store_->ListVms()->size(), 1u);
  ASSERT_EQ(host_.List()->size(), 1u);
  EXPECT_EQ(host_.Inspect(src)->state, VmState::kRunning);
  // And the name is free.
  guests_.SetReachable(true);
  EXPECT_TRUE(Exec(Alice(), {"cp", "web-one", "web-two"}).status.ok());
}

TEST_F(VmCopyTest, RmOfTheSourceWhileItIsBeingCopied) {
  New(Alice(), {"--name", "web-one"});
  // The sync holds until the test lets it go, with the rm done in between.
  guests_.SetScript("sync", {"", "", 0, /*hold=*/true});
  const std::string sync_job = guests_.next_job();
  Outcome rm;
  std::thread remover([&] {
    while (!Ran(guests_, "sync")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    rm = Exec(Alice(), {"rm", "web-one"});
    guests_.Release(sync_job, 0);
  });
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two"});
  remover.join();
  EXPECT_TRUE(rm.status.ok()) << rm.err;
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_TRUE(Has(o.err, "web-one was removed while it was being copied")) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

// What a real guest does: `rm` drops the source's control connection, so the sync in it
// fails rather than finishing. The cp still answers "removed while copied", not a guest error.
TEST_F(VmCopyTest, RmOfTheSourceDuringItsSync) {
  New(Alice(), {"--name", "web-one"});
  guests_.SetScript("sync", {"", "", 0, /*hold=*/true});
  Outcome rm;
  std::thread remover([&] {
    while (!Ran(guests_, "sync")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    rm = Exec(Alice(), {"rm", "web-one"});  // drops the connection, then the record
  });
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two"});
  remover.join();
  EXPECT_TRUE(rm.status.ok()) << rm.err;
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_TRUE(Has(o.err, "web-one was removed while it was being copied")) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCopyTest, RmOfTheCopyWhileItBoots) {
  New(Alice(), {"--name", "web-one"});
  ready_timeout_ms_ = 10'000;
  MakeInterpreter();
  guests_.SetScript(kGuestNetworkReadyCommand, {"", "", 1});  // the copy never answers
  Outcome rm;
  std::thread remover([&] {
    while (!store_->GetVmByName("web-two").ok() || host_.List()->size() < 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    rm = Exec(Alice(), {"rm", "web-two"});
  });
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two"});
  remover.join();
  EXPECT_TRUE(rm.status.ok()) << rm.err;
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_EQ(store_->ListVms()->size(), 1u);
  EXPECT_EQ(host_.List()->size(), 1u);
}

TEST_F(VmCopyTest, ReconcileRemovesACopyCutShort) {
  New(Alice(), {"--name", "web-one"});
  // What a SIGKILL after the fork and before "ready" leaves: a creating record and a domain.
  VmRecord half;
  half.id = "halfcopy0001";
  half.name = "web-two";
  half.owner = "alice";
  half.image = "debian@20261129";
  half.cpus = 2;
  half.memory_mib = 2048;
  half.disk_gib = 10;
  half.phase = VmPhase::kCreating;
  ASSERT_TRUE(store_->CreateVm(half).ok());
  VmSpec spec;
  spec.id = half.id;
  spec.name = half.name;
  spec.image = half.image;
  ASSERT_TRUE(host_.Copy(IdOf("web-one"), spec).ok());
  ReconcileReport r;
  ASSERT_TRUE(Reconcile(*store_, host_, &guests_, clock_, &r).ok());
  EXPECT_EQ(r.unfinished_removed, std::vector<std::string>{"web-two"});
  EXPECT_EQ(host_.List()->size(), 1u);
  EXPECT_EQ(store_->ListVms()->size(), 1u);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kRunning);
}

// cp --live: the host copies the running source with its memory (no sync in the guest), and
// the copy takes its own identity in the guest, as a VM restored from a template does.
TEST_F(VmCopyTest, CpLiveCopiesARunningVmWithItsMemoryAndItsOwnIdentity) {
  New(Alice(), {"--name", "web-one", "--tag", "prod"});
  const size_t commands_before = guests_.commands().size();
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two", "--live", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  nlohmann::json j = o.Json();
  EXPECT_EQ(j["live"], true);
  EXPECT_EQ(j["synced"], false);
  EXPECT_EQ(j["made"], "live-copy");
  EXPECT_EQ(j["source_state"], "running");
  EXPECT_FALSE(Ran(guests_, "sync"));  // memory and disk are of one instant: nothing to flush
  // The copy runs already: its identity is the only thing asked of it (no `true` first),
  // and the runner version its report names spares its connection the runner check.
  EXPECT_EQ(guests_.commands().size(), commands_before);

  VmRecord copy = store_->GetVmByName("web-two").value();
  EXPECT_EQ(copy.phase, VmPhase::kReady);
  EXPECT_EQ(copy.made, "live-copy");
  EXPECT_GE(copy.made_ms, 1);
  EXPECT_EQ(copy.tags, std::vector<std::string>{"prod"});
  EXPECT_TRUE(host_.WasLiveCopied(copy.id));
  EXPECT_FALSE(host_.WasLiveCopied(IdOf("web-one")));
  std::optional<VmSpec> spec = host_.SpecOf(copy.id);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->name, "web-two");
  // Its identity applied in the guest, and its own host key pinned from then on: asked at
  // the socket of a root process its source may have had waiting, then (none here) of sudo.
  EXPECT_EQ(guests_.identities_applied(), std::vector<std::string>{copy.id});
  // A hand-out (the name and key in the request, no seed read): its seed holds no more.
  EXPECT_EQ(guests_.handouts_applied(), std::vector<std::string>{copy.id});
  std::vector<GuestChannelRequest> asked = guests_.channel_requests();
  ASSERT_GE(asked.size(), 2u);
  EXPECT_EQ(asked[asked.size() - 2].kind, GuestChannelRequest::Kind::kUnix);
  EXPECT_EQ(asked[asked.size() - 2].path, kGuestIdentitySocket);
  EXPECT_EQ(asked.back().kind, GuestChannelRequest::Kind::kExec);
  EXPECT_EQ(asked.back().command, kGuestIdentityCommand);
  EXPECT_TRUE(guests_.PinnedHostKey(copy.id).starts_with("ssh-ed25519 ")) << copy.id;
  EXPECT_EQ(guests_.NotedRunnerVersion(copy.id), FakeGuestControl::kRunnerVersion);
  nlohmann::json stat = Exec(Alice(), {"stat", "web-two", "--json"}).Json();
  EXPECT_EQ(stat["made"], "live-copy");
  EXPECT_EQ(stat["made_ms"], copy.made_ms);
  // Both run; the source is one layer deeper, as after a plain cp.
  EXPECT_EQ(host_.Inspect(copy.id)->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->disk_layers, 2);

  // In text: what was copied and how, with progress on stderr.
  o = Exec(Alice(), {"cp", "web-one", "web-three", "--live"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_TRUE(Has(o.out, "Copied web-one to web-three (memory and disk copied in")) << o.out;
  EXPECT_TRUE(Has(o.out, "its processes running")) << o.out;
  EXPECT_TRUE(Has(o.err, "copying web-one to web-three with its memory")) << o.err;
  EXPECT_EQ(guests_.identities_applied().size(), 2u);
  EXPECT_EQ(guests_.handouts_applied().size(), 2u);
  // A copy whose seed holds env (its source's) reads its seed: a whole identity.
  New(Alice(), {"--name", "env-one", "--env", "GREETING=hi"});
  ASSERT_TRUE(Exec(Alice(), {"cp", "env-one", "env-two", "--live"}).status.ok());
  EXPECT_EQ(guests_.identities_applied().size(), 3u);
  EXPECT_EQ(guests_.handouts_applied().size(), 2u);
  // A plain cp still boots its copy: no identity step.
  ASSERT_TRUE(Exec(Alice(), {"cp", "web-one", "web-four"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-four")->made, "copy");
  EXPECT_FALSE(host_.WasLiveCopied(IdOf("web-four")));
  EXPECT_EQ(guests_.identities_applied().size(), 3u);
}

// A source made from a template or the pool keeps a root process waiting
// (runner/identity_wait.c), and its memory brings it to the copy: the copy's identity goes
// straight to it, no sudo.
TEST_F(VmCopyTest, CpLiveHandsTheCopysIdentityToTheWaiterItsSourceHad) {
  guests_.ClonesStartWaiting();
  New(Alice(), {"--name", "web-one"});
  const size_t asked_before = guests_.channel_requests().size();
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two", "--live"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  const std::string copy = IdOf("web-two");
  EXPECT_EQ(guests_.identities_applied().back(), copy);
  // At its identity port (the copy has its source's devices), while its control connection
  // was made beside it.
  std::vector<GuestChannelRequest> asked = guests_.channel_requests();
  ASSERT_EQ(asked.size(), asked_before + 1);
  EXPECT_EQ(asked.back().kind, GuestChannelRequest::Kind::kIdentityPort);
  std::vector<std::string> connects = guests_.connects();
  EXPECT_EQ(std::count(connects.begin(), connects.end(), copy), 1);
  EXPECT_TRUE(guests_.PinnedHostKey(copy).starts_with("ssh-ed25519 ")) << copy;
}

// A source that is not running has no processes to copy: --live copies its disk, and says so.
TEST_F(VmCopyTest, CpLiveOfAStoppedOrPausedVmCopiesItsDisk) {
  New(Alice(), {"--name", "web-one"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two", "--live"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_TRUE(Has(o.out, "web-one was stopped, not running: copied its disk")) << o.out;
  VmRecord copy = store_->GetVmByName("web-two").value();
  EXPECT_EQ(copy.made, "copy");
  EXPECT_FALSE(host_.WasLiveCopied(copy.id));
  EXPECT_EQ(host_.Inspect(copy.id)->state, VmState::kRunning);
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kStopped);

  ASSERT_TRUE(Exec(Alice(), {"start", "web-one"}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"pause", "web-one"}).status.ok());
  o = Exec(Alice(), {"cp", "web-one", "web-three", "--live", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  EXPECT_EQ(o.Json()["live"], false);
  EXPECT_EQ(o.Json()["made"], "copy");
  EXPECT_EQ(o.Json()["source_state"], "paused");
  EXPECT_FALSE(host_.WasLiveCopied(IdOf("web-three")));
  EXPECT_TRUE(guests_.identities_applied().empty());
  EXPECT_EQ(host_.Inspect(IdOf("web-one"))->state, VmState::kPaused);
}

// The copy runs the source's machine, network device included: an egress that would need
// another is refused before anything is made; one on the same side of it is fine.
TEST_F(VmCopyTest, CpLiveKeepsTheSourcesNetworkDevice) {
  New(Alice(), {"--name", "web-one"});  // egress all: a network device
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two", "--live", "--egress", "none"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << o.err;
  EXPECT_TRUE(Has(o.err, "egress web-two none")) << o.err;
  EXPECT_EQ(store_->ListVms()->size(), 1u);
  EXPECT_EQ(host_.List()->size(), 1u);
  // Without --live the disk is copied and the copy boots with the device it asks for.
  EXPECT_TRUE(Exec(Alice(), {"cp", "web-one", "web-two", "--egress", "none"}).status.ok());
  // No device either side: integrations and none are alike to the host.
  New(Alice(), {"--name", "cut-off", "--egress", "none"});
  o = Exec(Alice(), {"cp", "cut-off", "cut-off-2", "--live", "--egress", "integrations"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetVmByName("cut-off-2")->egress, "integrations");
  EXPECT_TRUE(host_.WasLiveCopied(IdOf("cut-off-2")));
}

TEST_F(VmCopyTest, CpLiveFailuresLeaveNothingAndTheSourceRunning) {
  New(Alice(), {"--name", "web-one"});
  const std::string src = IdOf("web-one");
  host_.FailNext(Unavailable("injected: the snapshot failed"));
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-two", "--live"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable) << o.err;
  EXPECT_TRUE(Has(o.err, "injected: the snapshot failed")) << o.err;
  // The copy never answering after its restore (its identity is the first thing asked of
  // it; nothing is asked of the source).
  ready_timeout_ms_ = 300;
  MakeInterpreter();
  guests_.SetReachable(false);
  o = Exec(Alice(), {"cp", "web-one", "web-two", "--live"});
  EXPECT_FALSE(o.status.ok()) << o.out;
  guests_.SetReachable(true);
  ASSERT_EQ(store_->ListVms()->size(), 1u);
  ASSERT_EQ(host_.List()->size(), 1u);
  EXPECT_EQ(host_.Inspect(src)->state, VmState::kRunning);
  EXPECT_TRUE(guests_.identities_applied().empty());
  EXPECT_TRUE(Exec(Alice(), {"cp", "web-one", "web-two", "--live"}).status.ok());
}

}  // namespace
}  // namespace warren::vmtest
