// The VM commands end to end through Interpreter::Execute: new (names, defaults, sizes,
// setup script, failure and timeout cleanup), ls/stat/console, rm, state changes, rename,
// tag, comment, and tag-scoped callers — on a real LmdbStore with FakeVmHost and
// FakeGuestControl.
#include <filesystem>
#include <fstream>
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

TEST_F(VmCommandTest, NewWithDefaultsIsReadyAndPrintsHowToReachIt) {
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.err, "creating web-one")) << o.err;
  EXPECT_TRUE(Has(o.err, "booting")) << o.err;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("^Ready in [0-9]+\\.[0-9]s\n"))) << o.out;
  EXPECT_TRUE(Has(o.out, "ssh -p 2222 web-one@warren.test\n")) << o.out;
  EXPECT_TRUE(Has(o.out, "https://web-one.warren.localhost/")) << o.out;

  VmRecord vm = store_->GetVmByName("web-one").value();
  EXPECT_EQ(vm.phase, VmPhase::kReady);
  EXPECT_EQ(vm.owner, "alice");
  EXPECT_EQ(vm.image, "debian@20261129");
  EXPECT_EQ(vm.cpus, 2);
  EXPECT_EQ(vm.memory_mib, 2048);
  EXPECT_EQ(vm.disk_gib, 10);
  EXPECT_EQ(vm.desired_state, DesiredState::kRunning);
  EXPECT_EQ(vm.created_at, kStart);
  EXPECT_TRUE(CheckVmId(vm.id).ok());

  VmInfo info = host_.Inspect(vm.id).value();
  EXPECT_EQ(info.state, VmState::kRunning);
  EXPECT_EQ(info.name, "web-one");
  EXPECT_EQ(info.image, "debian@20261129");
  // The seed carries warren's control key, and the spec the record's id.
  EXPECT_EQ(last_spec_.id, vm.id);
  EXPECT_EQ(last_spec_.authorized_keys, "ssh-ed25519 AAAAcontrol warren-control");
  // Readiness is the guest running a command.
  std::vector<std::string> cmds = guests_.commands();
  ASSERT_FALSE(cmds.empty());
  EXPECT_EQ(cmds.back(), "true");
}

TEST_F(VmCommandTest, NewMakesUpAFriendlyNameAndQuietJson) {
  Outcome o = Exec(Alice(), {"new", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.err, "");  // no progress under --json
  json j = o.Json();
  std::string name = j["name"];
  EXPECT_TRUE(std::regex_match(name, std::regex("[a-z]+-[a-z]+-[0-9]{1,2}"))) << name;
  EXPECT_TRUE(CheckVmName(name).ok());
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["ssh"], "ssh -p 2222 " + name + "@warren.test");
  EXPECT_EQ(j["url"], "https://" + name + ".warren.localhost/");
  EXPECT_TRUE(j["ready_seconds"].is_number());
  EXPECT_TRUE(store_->GetVmByName(name).ok());
}

TEST_F(VmCommandTest, NewRefusesBadAndTakenNames) {
  New(Alice(), {"--name", "web-one"});
  // Taken, by anyone: names are unique on the server.
  Outcome o = Exec(Bob(), {"new", "--name", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_TRUE(Has(o.err, "web-one")) << o.err;
  for (const char* bad :
       {"Web-one", "", "web--one", "web-one-", "1web", "web_one", "web-p8080", "api-p3000"}) {
    o = Exec(Alice(), {"new", "--name", bad});
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(o.exit_status, 2);
  }
  o = Exec(Alice(), {"new", "--name", "web-p8080"});
  EXPECT_TRUE(Has(o.err, "-p")) << o.err;
  EXPECT_EQ(store_->ListVms()->size(), 1u);
  EXPECT_EQ(host_.List()->size(), 1u);
}

// VM names are 1-52 characters (seed 002's "sbx1"); login names are kept apart by an
// explicit rule instead of by length: root, dev, lobby and users' names never name a VM,
// and no user is named like a VM, so `ssh NAME@HOST` has one meaning.
TEST_F(VmCommandTest, ShortNamesAreVmNamesButLoginNamesAreNot) {
  New(Alice(), {"--name", "sbx1"});
  New(Alice(), {"--name", "a"});
  for (const char* login : {"root", "dev", "lobby", "alice", "bob"}) {
    Outcome o = Exec(Alice(), {"new", "--name", login});
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << login;
    EXPECT_TRUE(Has(o.err, "is reserved for logins")) << o.err;
    EXPECT_TRUE(Has(o.err, std::string("ssh ") + login + "@HOST reaches the lobby")) << o.err;
  }
  EXPECT_EQ(Exec(Alice(), {"rename", "sbx1", "dev"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"rename", "sbx1", "bob"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"cp", "sbx1", "lobby"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"cp", "sbx1", "root"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->ListVms()->size(), 2u);
  EXPECT_TRUE(Exec(Alice(), {"rename", "sbx1", "sbx2"}).status.ok());

  // A user may not take a VM's name either.
  constexpr const char* kNewKey =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 new@host";
  Outcome o = Exec(Root(), {"user", "add", "sbx2", "--key", kNewKey});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_TRUE(Has(o.err, "a VM is named \"sbx2\"")) << o.err;
  EXPECT_FALSE(store_->GetUser("sbx2").ok());
  ASSERT_TRUE(Exec(Root(), {"user", "add", "carol", "--key", kNewKey}).status.ok());
  EXPECT_EQ(Exec(Alice(), {"new", "--name", "carol"}).status.code(), Code::kInvalidArgument);
}

TEST_F(VmCommandTest, NewSizes) {
  New(Alice(), {"--name", "big-one", "--cpu", "4", "--memory", "8G", "--disk", "40G"});
  VmRecord vm = store_->GetVmByName("big-one").value();
  EXPECT_EQ(vm.cpus, 4);
  EXPECT_EQ(vm.memory_mib, 8192);
  EXPECT_EQ(vm.disk_gib, 40);
  EXPECT_EQ(host_.Inspect(vm.id)->memory_mib, 8192);

  New(Alice(), {"--name", "small-one", "--memory", "512M", "--disk", "2"});
  vm = store_->GetVmByName("small-one").value();
  EXPECT_EQ(vm.memory_mib, 512);
  EXPECT_EQ(vm.disk_gib, 2);
  New(Alice(), {"--name", "plain-one", "--memory", "1024"});
  EXPECT_EQ(store_->GetVmByName("plain-one")->memory_mib, 1024);

  for (std::vector<std::string> bad : {std::vector<std::string>{"--cpu", "0"},
                                       {"--cpu", "17"},
                                       {"--memory", "2X"},
                                       {"--memory", "100M"},
                                       {"--memory", "999G"},
                                       {"--disk", "0"},
                                       {"--disk", "512M"},
                                       {"--disk", "5000G"},
                                       {"--memory", "-1"},
                                       {"--cpu", "two"}}) {
    std::vector<std::string> argv = {"new", "--name", "bad-size"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    Outcome o = Exec(Alice(), argv);
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << bad[0] << " " << bad[1] << ": " << o.err;
  }
  EXPECT_FALSE(store_->GetVmByName("bad-size").ok());
}

TEST_F(VmCommandTest, NewImageTagsCommentAndEnv) {
  New(Alice(), {"--name", "web-one", "--image", "tiny", "--tag", "web,prod", "--tag", "prod",
                "--comment", "front end", "--env", "A=1", "--env", "B_2=two words"});
  VmRecord vm = store_->GetVmByName("web-one").value();
  EXPECT_EQ(vm.image, "tiny@3");
  EXPECT_EQ(vm.tags, (std::vector<std::string>{"prod", "web"}));
  EXPECT_EQ(vm.comment, "front end");
  EXPECT_EQ(vm.env,
            (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B_2", "two words"}}));
  EXPECT_EQ(last_spec_.env, vm.env);

  Outcome o = Exec(Alice(), {"new", "--image", "nope"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "available")) << o.err;
  EXPECT_EQ(Exec(Alice(), {"new", "--env", "1A=x"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"new", "--env", "NOEQUALS"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"new", "--tag", "Bad"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"new", "--comment", std::string(201, 'x')}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->ListVms()->size(), 1u);
}

TEST_F(VmCommandTest, NewSetupScriptComesFromStdinOnly) {
  Outcome o = Exec(Alice(), {"new", "--name", "web-one", "--setup-script", "/dev/stdin"},
                   "#!/bin/sh\necho hi\n");
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(last_spec_.setup_script, "#!/bin/sh\necho hi\n");

  // A path on the client's machine is out of reach; the error says how to send it.
  o = Exec(Alice(), {"new", "--setup-script", "./setup.sh"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(o.err, "/dev/stdin")) << o.err;
  EXPECT_TRUE(Has(o.err, "< ./setup.sh")) << o.err;

  o = Exec(Alice(), {"new", "--setup-script", "/dev/stdin"}, std::string(10 * 1024 + 1, 'x'));
  EXPECT_EQ(o.status.code(), Code::kTooLarge) << o.err;
  o = Exec(Alice(), {"new", "--setup-script", "/dev/stdin"}, "");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << o.err;
  EXPECT_EQ(store_->ListVms()->size(), 1u);
}

TEST_F(VmCommandTest, HostFailureLeavesNoRecordAndNoDomain) {
  host_.FailNext(Unavailable("injected: out of disk"));
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_TRUE(Has(o.err, "out of disk")) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
  // The name is free again.
  New(Alice(), {"--name", "web-one"});
}

TEST_F(VmCommandTest, PrepareFailureLeavesNoRecord) {
  prepare_status_ = Internal("injected: no host key");
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kInternal);
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCommandTest, BootTimeoutCarriesConsoleAndCleansUp) {
  ready_timeout_ms_ = 300;
  MakeInterpreter();
  guests_.SetReachable(false);
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  EXPECT_EQ(o.status.code(), Code::kTimeout) << o.err;
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kTimeout));
  EXPECT_TRUE(Has(o.err, "did not answer")) << o.err;
  EXPECT_TRUE(Has(o.err, "fake boot of debian@20261129")) << o.err;  // the console's lines
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
  EXPECT_FALSE(guests_.disconnected().empty());
}

TEST_F(VmCommandTest, NewRetriesUntilTheGuestAnswers) {
  guests_.UnreachableFor(3);
  New(Alice(), {"--name", "web-one"});
  EXPECT_EQ(store_->GetVmByName("web-one")->phase, VmPhase::kReady);
  EXPECT_GE(guests_.commands().size(), 4u);
}

TEST_F(VmCommandTest, CancelWhileBootingRemovesTheVm) {
  guests_.SetReachable(false);
  auto cancel = std::make_shared<CancelSignal>();
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel->Cancel();
  });
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"}, "", cancel);
  canceller.join();
  EXPECT_EQ(o.status.code(), Code::kCancelled) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCommandTest, RmWhileBootingEndsTheNewAtOnce) {
  ready_timeout_ms_ = 10'000;
  MakeInterpreter();
  guests_.SetReachable(false);
  Outcome rm;
  std::thread remover([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    rm = Exec(Alice(), {"rm", "web-one"});
  });
  const auto start = std::chrono::steady_clock::now();
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  remover.join();
  EXPECT_TRUE(rm.status.ok()) << rm.err;
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCommandTest, WithoutAVmHostVmCommandsAreUnavailable) {
  Services s;
  s.store = store_.get();
  s.clock = &clock_;
  interpreter_ = std::make_unique<Interpreter>(s);
  EXPECT_EQ(Exec(Alice(), {"new"}).status.code(), Code::kUnavailable);
  EXPECT_EQ(Exec(Alice(), {"ssh", "web-one", "true"}).status.code(), Code::kUnavailable);
  EXPECT_TRUE(Exec(Alice(), {"ls"}).status.ok());
  EXPECT_TRUE(Exec(Alice(), {"whoami"}).status.ok());
}

// --- scope -------------------------------------------------------------------------------

TEST_F(VmCommandTest, TagScopedCallerSeesOnlyItsTagAndTagsWhatItMakes) {
  New(Alice(), {"--name", "web-one"});
  New(AliceCi(), {"--name", "ci-box", "--tag", "build"});
  EXPECT_EQ(store_->GetVmByName("ci-box")->tags, (std::vector<std::string>{"build", "ci"}));

  json ls = Exec(AliceCi(), {"ls", "--json"}).Json();
  ASSERT_EQ(ls["vms"].size(), 1u);
  EXPECT_EQ(ls["vms"][0]["name"], "ci-box");
  for (std::vector<std::string> argv : {std::vector<std::string>{"stat", "web-one"},
                                        {"rm", "web-one"},
                                        {"stop", "web-one"},
                                        {"ssh", "web-one", "true"},
                                        {"console", "web-one"},
                                        {"comment", "web-one", "x"}}) {
    Outcome o = Exec(AliceCi(), argv);
    EXPECT_EQ(o.status.code(), Code::kNotFound) << argv[0];
    EXPECT_TRUE(Has(o.err, "no VM named \"web-one\"")) << o.err;
  }
  // Exactly as a VM that does not exist.
  EXPECT_EQ(Exec(AliceCi(), {"stat", "web-one"}).err,
            "error: no VM named \"web-one\"; see \"ls\"\n");
  EXPECT_EQ(Exec(AliceCi(), {"stat", "nope-vm"}).err,
            "error: no VM named \"nope-vm\"; see \"ls\"\n");
  EXPECT_EQ(Exec(Alice(), {"ls", "--json"}).Json()["vms"].size(), 2u);

  // It may not change tags, not even on its own VMs.
  Outcome o = Exec(AliceCi(), {"tag", "ci-box", "more"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  o = Exec(AliceCi(), {"tag", "-d", "ci-box", "ci"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_TRUE(Exec(AliceCi(), {"comment", "ci-box", "mine"}).status.ok());
}

TEST_F(VmCommandTest, OwnersSeeOnlyTheirOwnVms) {
  New(Alice(), {"--name", "web-one"});
  EXPECT_TRUE(Exec(Bob(), {"ls", "--json"}).Json()["vms"].empty());
  EXPECT_EQ(Exec(Bob(), {"stat", "web-one"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"rm", "web-one"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(Bob(), {"ssh", "web-one", "id"}).status.code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetVmByName("web-one").ok());
}

// --- ls, stat, console ---------------------------------------------------------------------

TEST_F(VmCommandTest, LsPatternsAndTags) {
  EXPECT_EQ(Exec(Alice(), {"ls"}).out, "no VMs yet; make one with: new\n");
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two", "--tag", "prod"});
  New(Alice(), {"--name", "db-one", "--comment", "the data"});

  auto names = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), "ls");
    argv.push_back("--json");
    std::vector<std::string> out;
    json result = Exec(Alice(), argv).Json();
    for (const json& vm : result["vms"]) out.push_back(vm["name"]);
    return out;
  };
  EXPECT_EQ(names({}), (std::vector<std::string>{"db-one", "web-one", "web-two"}));
  EXPECT_EQ(names({"web-*"}), (std::vector<std::string>{"web-one", "web-two"}));
  EXPECT_EQ(names({"prod"}), (std::vector<std::string>{"web-two"}));
  EXPECT_EQ(names({"db-one", "prod"}), (std::vector<std::string>{"db-one", "web-two"}));
  EXPECT_EQ(names({"*-one"}), (std::vector<std::string>{"db-one", "web-one"}));
  EXPECT_TRUE(names({"nothing"}).empty());
  EXPECT_EQ(Exec(Alice(), {"ls", "nothing"}).out, "no VMs match\n");

  Outcome text = Exec(Alice(), {"ls"});
  EXPECT_TRUE(Has(text.out, "NAME")) << text.out;
  EXPECT_TRUE(Has(text.out, "ssh -p 2222 web-two@warren.test")) << text.out;
  EXPECT_FALSE(Has(text.out, "debian@20261129")) << text.out;
  Outcome long_text = Exec(Alice(), {"ls", "-l"});
  EXPECT_TRUE(Has(long_text.out, "debian@20261129")) << long_text.out;
  EXPECT_TRUE(Has(long_text.out, "2 GiB")) << long_text.out;
  EXPECT_TRUE(Has(long_text.out, "the data")) << long_text.out;

  json all = Exec(Alice(), {"ls", "--json"}).Json();
  json web_two = all["vms"][2];
  EXPECT_EQ(web_two["state"], "running");
  EXPECT_EQ(web_two["tags"], json::array({"prod"}));
  EXPECT_EQ(web_two["cpus"], 2);
  EXPECT_EQ(web_two["memory_mib"], 2048);
  EXPECT_EQ(web_two["created_at"], kStart);
}

TEST_F(VmCommandTest, LsShowsHypervisorStatesAndMissingDomains) {
  New(Alice(), {"--name", "web-one"});
  New(Alice(), {"--name", "web-two"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "web-one"}).status.ok());
  ASSERT_TRUE(host_.Destroy(IdOf("web-two")).ok());  // gone behind warren's back
  json ls = Exec(Alice(), {"ls", "--json"}).Json();
  EXPECT_EQ(ls["vms"][0]["state"], "stopped");
  EXPECT_EQ(ls["vms"][1]["state"], "missing");
  EXPECT_EQ(Exec(Alice(), {"stat", "web-two", "--json"}).Json()["state"], "missing");
  // A missing VM can still be removed.
  EXPECT_TRUE(Exec(Alice(), {"rm", "web-two"}).status.ok());
}

TEST_F(VmCommandTest, StatAndConsole) {
  New(Alice(), {"--name", "web-one", "--tag", "prod"});
  clock_.now += 3600 + 120;
  Outcome o = Exec(Alice(), {"stat", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "state:    running")) << o.out;
  EXPECT_TRUE(Has(o.out, "uptime:   1h 2m")) << o.out;
  EXPECT_TRUE(Has(o.out, "memory:   2 GiB")) << o.out;
  EXPECT_TRUE(Has(o.out, "tags:     prod")) << o.out;
  json j = Exec(Alice(), {"stat", "web-one", "--json"}).Json();
  EXPECT_EQ(j["uptime_seconds"], 3720);
  EXPECT_EQ(j["disk_gib"], 10);

  o = Exec(Alice(), {"console", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "fake boot of debian@20261129")) << o.out;
  o = Exec(Alice(), {"console", "web-one", "--lines", "1", "--json"});
  EXPECT_EQ(o.Json()["console"], "login:\n");
  EXPECT_EQ(Exec(Alice(), {"console", "web-one", "--lines", "0"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"stat"}).status.code(), Code::kInvalidArgument);
}

// --- rm ------------------------------------------------------------------------------------

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
  EXPECT_TRUE(store_->GetVmByName("web-one").ok());
}

// --- state changes ---------------------------------------------------------------------------

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

// --- rename, tag, comment ------------------------------------------------------------------

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

TEST_F(VmCommandTest, TagAndComment) {
  New(Alice(), {"--name", "web-one", "--tag", "a"});
  Outcome o = Exec(Alice(), {"tag", "web-one", "prod", "b,c"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "web-one tags: a,b,c,prod\n");
  EXPECT_EQ(store_->GetVmByName("web-one")->tags,
            (std::vector<std::string>{"a", "b", "c", "prod"}));
  o = Exec(Alice(), {"tag", "-d", "web-one", "a", "c", "absent", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["tags"], json::array({"b", "prod"}));
  EXPECT_EQ(Exec(Alice(), {"tag", "web-one", "Bad"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"tag", "web-one"}).status.code(), Code::kInvalidArgument);

  ASSERT_TRUE(Exec(Alice(), {"comment", "web-one", "the", "front", "end"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-one")->comment, "the front end");
  EXPECT_EQ(Exec(Alice(), {"comment", "web-one", std::string(201, 'x')}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"comment", "web-one", "line\nbreak"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(Exec(Alice(), {"comment", "web-one", std::string(200, 'x')}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"comment", "web-one", ""}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-one")->comment, "");
}

TEST_F(VmCommandTest, RemovingAUserRemovesTheirVms) {
  New(Bob(), {"--name", "bobs-box"});
  New(Alice(), {"--name", "web-one"});
  const std::string bobs = IdOf("bobs-box");
  Outcome o = Exec(Root(), {"user", "rm", "bob"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "removed user bob and 1 key and 1 VM\n");
  EXPECT_FALSE(host_.Inspect(bobs).ok());
  EXPECT_FALSE(store_->GetVmByName("bobs-box").ok());
  EXPECT_TRUE(store_->GetVmByName("web-one").ok());
  // A VM that will not go keeps the user, so the removal can be run again.
  host_.FailNext(Unavailable("injected: libvirt down"));
  o = Exec(Root(), {"user", "rm", "alice"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_TRUE(store_->GetUser("alice").ok());
  EXPECT_TRUE(Exec(Root(), {"user", "rm", "alice"}).status.ok());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCommandTest, VmsSurviveAStoreRestart) {
  New(Alice(), {"--name", "web-one", "--tag", "prod"});
  interpreter_.reset();
  OpenStore();
  MakeInterpreter();
  json ls = Exec(Alice(), {"ls", "--json"}).Json();
  ASSERT_EQ(ls["vms"].size(), 1u);
  EXPECT_EQ(ls["vms"][0]["name"], "web-one");
  EXPECT_EQ(ls["vms"][0]["state"], "running");
  EXPECT_EQ(ls["vms"][0]["tags"], json::array({"prod"}));
}

TEST_F(VmCommandTest, HelpListsTheVmCommands) {
  Outcome o = Exec(Alice(), {"help"});
  for (const char* c : {"new", "ls", "rm VM…", "ssh VM CMD…", "wait JOB", "jobs [VM]"}) {
    EXPECT_TRUE(Has(o.out, c)) << c << "\n" << o.out;
  }
  o = Exec(Alice(), {"ssh", "--help"});
  EXPECT_TRUE(Has(o.out, "--wait-seconds")) << o.out;
}

}  // namespace
}  // namespace warren::vmtest

namespace warren {
namespace {

// An image directory as packaging/images lays it out, with a minimal qcow2 header.
void MakeImage(const std::string& dir, const std::string& ref, bool complete = true) {
  std::filesystem::create_directories(dir + "/" + ref);
  for (const char* f : {"vmlinuz", "initrd.img"}) {
    std::ofstream(dir + "/" + ref + "/" + f) << "x";
  }
  if (!complete) return;
  std::string header("QFI\xfb", 4);
  header.resize(32, '\0');
  header[29] = 0x40;  // virtual size 0x40000000 = 1 GiB, big-endian at offset 24
  std::ofstream(dir + "/" + ref + "/rootfs.qcow2", std::ios::binary) << header;
}

TEST(ImageCatalogTest, ResolvesNamesToTheNewestCompleteVersion) {
  char tmpl[] = "/tmp/warren-images-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  MakeImage(dir, "debian@20250101");
  MakeImage(dir, "debian@20261129");
  MakeImage(dir, "debian@20270101", /*complete=*/false);  // still being built
  MakeImage(dir, "tiny@9");
  MakeImage(dir, "tiny@10");
  std::filesystem::create_directories(dir + "/not-an-image");

  ImageCatalog catalog = DirectoryImageCatalog(dir);
  EXPECT_EQ(catalog.resolve("debian").value(), "debian@20261129");
  EXPECT_EQ(catalog.resolve("tiny").value(), "tiny@10");  // 10 is newer than 9
  EXPECT_EQ(catalog.resolve("debian@20250101").value(), "debian@20250101");
  Result<std::string> missing = catalog.resolve("alpine");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("debian@20261129"), std::string::npos)
      << missing.status().message();
  EXPECT_EQ(catalog.resolve("debian@20270101").status().code(), Code::kNotFound);
  std::vector<std::string> refs;
  for (const ImageInfo& image : catalog.list()) refs.push_back(image.ref);
  EXPECT_EQ(refs,
            (std::vector<std::string>{"debian@20250101", "debian@20261129", "tiny@9", "tiny@10"}));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(DirectoryImageCatalog(dir).resolve("debian").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace warren

namespace warren::vmtest {
namespace {

using nlohmann::json;

// A catalog directory with two images described by their image.json, as packaging/images
// writes them.
std::string ImagesWithDescriptions() {
  char tmpl[] = "/tmp/warren-images-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  MakeImage(dir, "debian@20261129");
  MakeImage(dir, "tiny@7");
  std::ofstream(dir + "/debian@20261129/image.json")
      << R"({"name": "debian", "version": "20261129", "default_user": "dev",
             "description": "Debian 12 with systemd and docker", "size": 918618112})";
  std::ofstream(dir + "/tiny@7/image.json")
      << R"({"name": "tiny", "version": "7", "default_user": "dev",
             "description": "busybox and OpenSSH, for tests", "size": 38130112})";
  return dir;
}

// `images`, `help new` and an unknown --image list the installed images one line each:
// NAME@VERSION, size, description.
TEST_F(VmCommandTest, ImagesHelpNewAndUnknownImagesListTheImagesOneLineEach) {
  const std::string dir = ImagesWithDescriptions();
  interpreter_->services().images = DirectoryImageCatalog(dir);
  const std::regex debian_line("\n  debian@20261129  876 MiB  Debian 12 with systemd and docker\n");
  const std::regex tiny_line("\n  tiny@7            36 MiB  busybox and OpenSSH, for tests\n");

  Outcome o = Exec(Alice(), {"images"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(std::regex_search("\n" + o.out, debian_line)) << o.out;
  EXPECT_TRUE(std::regex_search("\n" + o.out, tiny_line)) << o.out;
  o = Exec(Alice(), {"images", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  ASSERT_EQ(j["images"].size(), 2u) << j.dump();
  EXPECT_EQ(j["images"][0]["ref"], "debian@20261129");
  EXPECT_EQ(j["images"][0]["size_bytes"], 918618112);
  EXPECT_EQ(j["images"][0]["description"], "Debian 12 with systemd and docker");
  EXPECT_EQ(j["images"][0]["default"], true);
  EXPECT_EQ(j["images"][1]["default"], false);
  // It changes nothing: exec_read_only may run it.
  EXPECT_TRUE(interpreter_->table().Find("images")->read_only);

  o = Exec(Alice(), {"help", "new"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(std::regex_search(o.out, debian_line)) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, tiny_line)) << o.out;
  EXPECT_TRUE(std::regex_search(Exec(Alice(), {"new", "--help"}).out, tiny_line));

  o = Exec(Alice(), {"new", "--image", "alpine"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.err, "no image named alpine")) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, debian_line)) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, tiny_line)) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace warren::vmtest
