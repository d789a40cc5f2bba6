// `new` through Interpreter::Execute on a real LmdbStore with FakeVmHost and
// FakeGuestControl: names (made up, refused, reserved), sizes, image, tags, env, the setup
// script, host and boot failures and their cleanup, cancellation, and the image listing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "keys/vm_rules.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/image_catalog.h"
#include "lobby/commands/vm_boot.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

// --- new ---------------------------------------------------------------------------------

TEST_F(VmCommandTest, NewRestoresAVmOfATemplatesShapeAndGivesItItsOwnIdentity) {
  restore_templates_ = true;
  MakeInterpreter();
  SaveDefaultTemplate(host_);
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.err, "restored from a template")) << o.err;
  VmRecord vm = store_->GetVmByName("web-one").value();
  EXPECT_EQ(vm.phase, VmPhase::kReady);
  EXPECT_EQ(vm.made, "template");
  EXPECT_GE(vm.made_ms, 1);
  EXPECT_TRUE(host_.WasRestored(vm.id));
  // Its identity applied in the guest, and its own host key pinned from then on.
  EXPECT_EQ(guests_.identities_applied(), std::vector<std::string>{vm.id});
  EXPECT_TRUE(guests_.PinnedHostKey(vm.id).starts_with("ssh-ed25519 ")) << vm.id;
  // The identity was the first and only thing asked of it (no `true` to wait for it), and
  // the runner version its report named spares its connection the runner check.
  EXPECT_TRUE(guests_.commands().empty());
  EXPECT_EQ(guests_.NotedRunnerVersion(vm.id), FakeGuestControl::kRunnerVersion);
  json stat = Exec(Alice(), {"stat", "web-one", "--json"}).Json();
  EXPECT_EQ(stat["made"], "template");
  EXPECT_EQ(stat["made_ms"], vm.made_ms);

  // Another shape boots, as does every VM when the server restores none.
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "web-two", "--disk", "20"}).status.ok());
  VmRecord two = store_->GetVmByName("web-two").value();
  EXPECT_EQ(two.made, "boot");
  EXPECT_FALSE(host_.WasRestored(two.id));
  restore_templates_ = false;
  MakeInterpreter();
  ASSERT_TRUE(Exec(Alice(), {"new", "--name", "web-three"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-three")->made, "boot");
  EXPECT_EQ(guests_.identities_applied().size(), 1u);
}

TEST_F(VmCommandTest, NewBootsWhenATemplateCannotBeRestoredAndRemovesIt) {
  restore_templates_ = true;
  MakeInterpreter();
  SaveDefaultTemplate(host_);
  host_.FailNext(Unavailable("the save image has another magic"));  // the restore
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.err, "booting")) << o.err;
  EXPECT_EQ(store_->GetVmByName("web-one")->made, "boot");
  EXPECT_TRUE(host_.Templates()->empty());
  // The host's room is the host's room either way: no boot behind a refused restore.
  SaveDefaultTemplate(host_);
  host_.SetHostLimits(1024, 1000);
  Outcome full = Exec(Alice(), {"new", "--name", "web-two"});
  EXPECT_EQ(full.status.code(), Code::kLimitExceeded) << full.err;
  EXPECT_FALSE(store_->GetVmByName("web-two").ok());
}

TEST_F(VmCommandTest, NewWithDefaultsIsReadyAndPrintsHowToReachIt) {
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.err, "creating web-one")) << o.err;
  EXPECT_TRUE(Has(o.err, "booting")) << o.err;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("^Ready in [0-9]+\\.[0-9]s\n"))) << o.out;
  EXPECT_TRUE(Has(o.out, "ssh -p 2222 web-one@warren.test\n")) << o.out;
  EXPECT_TRUE(Has(o.out, "http://web-one.warren.localhost:8081/")) << o.out;

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
  // Readiness is the guest running a command: with a network device, one that finds its
  // default route.
  std::vector<std::string> cmds = guests_.commands();
  ASSERT_FALSE(cmds.empty());
  EXPECT_EQ(cmds.back(), kGuestNetworkReadyCommand);
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
  EXPECT_EQ(j["url"], "http://" + name + ".warren.localhost:8081/");
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

// A key limited to the tag "ci" gives its VMs "ci" and no other tag: a VM tagged "prod" too
// would reach what is attached to tag:prod and be seen by keys limited to "prod" (found by
// the scope matrix, issue 16: `new --tag prod` made such a VM).
TEST_F(VmCommandTest, ATagLimitedKeyGivesItsVmsOnlyItsTag) {
  Outcome o = Exec(AliceCi(), {"new", "--name", "ci-one", "--tag", "prod"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;
  EXPECT_TRUE(Has(o.err, "limited to the tag \"ci\"")) << o.err;
  o = Exec(AliceCi(), {"new", "--sandbox", "--name", "ci-sbx", "--tag", "ci,prod"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());

  New(AliceCi(), {"--name", "ci-two", "--tag", "ci"});
  New(AliceCi(), {"--name", "ci-three"});
  EXPECT_EQ(store_->GetVmByName("ci-two")->tags, (std::vector<std::string>{"ci"}));
  EXPECT_EQ(store_->GetVmByName("ci-three")->tags, (std::vector<std::string>{"ci"}));
  // An unrestricted key gives any tags, and a copy keeps its source's.
  New(Alice(), {"--name", "both-one", "--tag", "ci,prod"});
  ASSERT_TRUE(Exec(AliceCi(), {"cp", "both-one", "both-two"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("both-two")->tags, (std::vector<std::string>{"ci", "prod"}));
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

// A guest booting on a busy host: the ready wait runs out (300 ms), is stretched by the
// host's slowdown (4x: 1.2 s) and the guest, answering from 600 ms on, is kept. The same
// guest with no slowdown is given up on (BootTimeoutCarriesConsoleAndCleansUp).
TEST_F(VmCommandTest, ASlowGuestOnABusyHostGetsTheReadyWaitStretched) {
  ready_timeout_ms_ = 300;
  std::atomic<int> asked{0};
  guest_slowdown_ = [&asked] {
    ++asked;
    return 4.0;
  };
  MakeInterpreter();
  guests_.SetReachable(false);
  std::thread answer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    guests_.SetReachable(true);
  });
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  answer.join();
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetVmByName("web-one")->phase, VmPhase::kReady);
  EXPECT_EQ(asked.load(), 1);
}

TEST_F(VmCommandTest, ASlowGuestIsGivenUpOnAtTheStretchedWait) {
  ready_timeout_ms_ = 300;
  guest_slowdown_ = [] { return 3.0; };
  MakeInterpreter();
  guests_.SetReachable(false);
  auto t0 = std::chrono::steady_clock::now();
  Outcome o = Exec(Alice(), {"new", "--name", "web-one"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.status.code(), Code::kTimeout) << o.err;
  EXPECT_GE(seconds, 0.9);
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(VmCommandTest, NewRetriesUntilTheGuestAnswers) {
  guests_.UnreachableFor(3);
  New(Alice(), {"--name", "web-one"});
  EXPECT_EQ(store_->GetVmByName("web-one")->phase, VmPhase::kReady);
  EXPECT_GE(guests_.commands().size(), 4u);
}

// A booted VM with a network device (egress "all", the fixture's default) is ready once its
// guest has a default route, not as soon as its control port answers: a Debian guest loads
// virtio_net and asks DHCP after that. One without a device is ready at `true`.
TEST_F(VmCommandTest, AVmWithANetworkDeviceIsReadyOnceItsNetworkIsUp) {
  auto probes = [this] {
    const std::vector<std::string> all = guests_.commands();
    return std::count(all.begin(), all.end(), std::string(kGuestNetworkReadyCommand));
  };
  guests_.SetScript(kGuestNetworkReadyCommand, {"", "", kNoDefaultRouteExit});
  std::thread up([&] {
    // Bounded: a `new` that stopped probing early fails the assertions below, not by hanging.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (probes() < 3 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    guests_.SetScript(kGuestNetworkReadyCommand, {"", "", 0});
  });
  New(Alice(), {"--name", "net-one"});
  up.join();
  EXPECT_EQ(store_->GetVmByName("net-one")->phase, VmPhase::kReady);
  EXPECT_GE(probes(), 4);
  std::vector<std::string> ran = guests_.commands();
  EXPECT_EQ(std::count(ran.begin(), ran.end(), std::string(kGuestReadyCommand)), 0);

  New(Alice(), {"--name", "cut-one", "--egress", "integrations"});
  ran = guests_.commands();
  EXPECT_EQ(ran.back(), kGuestReadyCommand);
  EXPECT_GE(probes(), 4);
}

TEST_F(VmCommandTest, AVmWhoseNetworkNeverComesUpIsRemovedSayingSo) {
  ready_timeout_ms_ = 300;
  MakeInterpreter();
  guests_.SetScript(kGuestNetworkReadyCommand, {"", "", kNoDefaultRouteExit});
  Outcome o = Exec(Alice(), {"new", "--name", "net-one"});
  EXPECT_EQ(o.status.code(), Code::kTimeout) << o.err;
  EXPECT_TRUE(Has(o.err, "net-one was not ready within ")) << o.err;
  EXPECT_TRUE(Has(o.err, "no IPv4 default route")) << o.err;
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
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
