// egress (lobby/commands/cmd_egress.cc), and --egress of new and cp, end to end through
// Interpreter::Execute on a real LmdbStore with FakeVmHost: the three policies and the old
// name "full", what the host is asked (a network device only for `all`), live changes with
// their stated downtime, stopped VMs, refusals, and what stat, ls -l and --json show.
#include "lobby/base/error_map.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using EgressCommandTest = VmCommandTest;

Egress HostEgress(FakeVmHost& host, const std::string& id) {
  std::optional<VmSpec> spec = host.SpecOf(id);
  EXPECT_TRUE(spec.has_value());
  return spec ? spec->egress : Egress::kAll;
}

TEST_F(EgressCommandTest, NewTakesEachPolicyAndTheServersDefault) {
  New(Alice(), {"--name", "net-one"});
  EXPECT_EQ(store_->GetVmByName("net-one")->egress, "all");
  EXPECT_EQ(HostEgress(host_, IdOf("net-one")), Egress::kAll);
  New(Alice(), {"--name", "int-one", "--egress", "integrations"});
  EXPECT_EQ(store_->GetVmByName("int-one")->egress, "integrations");
  EXPECT_EQ(HostEgress(host_, IdOf("int-one")), Egress::kNone);
  New(Alice(), {"--name", "sealed-one", "--egress", "none"});
  EXPECT_EQ(HostEgress(host_, IdOf("sealed-one")), Egress::kNone);
  New(Alice(), {"--name", "old-one", "--egress", "full"});  // the old name of all
  EXPECT_EQ(store_->GetVmByName("old-one")->egress, "all");
  Outcome o = Exec(Alice(), {"new", "--name", "bad-one", "--egress", "some"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(o.err, "all|integrations|none")) << o.err;
  EXPECT_FALSE(store_->GetVmByName("bad-one").ok());

  vm_defaults_.egress = "none";
  MakeInterpreter();
  New(Alice(), {"--name", "default-none"});
  EXPECT_EQ(store_->GetVmByName("default-none")->egress, "none");
  EXPECT_EQ(HostEgress(host_, IdOf("default-none")), Egress::kNone);
  New(Alice(), {"--name", "asked-all", "--egress", "all"});  // a default, not a ceiling
  EXPECT_EQ(HostEgress(host_, IdOf("asked-all")), Egress::kAll);
}

TEST_F(EgressCommandTest, CopyKeepsOrSetsTheSourcesPolicy) {
  New(Alice(), {"--name", "net-one"});
  ASSERT_TRUE(Exec(Alice(), {"cp", "net-one", "same-one"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("same-one")->egress, "all");
  Outcome o = Exec(Alice(), {"cp", "net-one", "cut-one", "--egress", "integrations", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.Json()["egress"], "integrations");
  EXPECT_EQ(HostEgress(host_, IdOf("cut-one")), Egress::kNone);
  EXPECT_EQ(HostEgress(host_, IdOf("net-one")), Egress::kAll);  // the source keeps it
  EXPECT_EQ(store_->GetVmByName("net-one")->egress, "all");
  ASSERT_TRUE(Exec(Alice(), {"cp", "cut-one", "back-one", "--egress", "all"}).status.ok());
  EXPECT_EQ(HostEgress(host_, IdOf("back-one")), Egress::kAll);
  EXPECT_EQ(Exec(Alice(), {"cp", "net-one", "x-one", "--egress", "nat"}).status.code(),
            Code::kInvalidArgument);
}

TEST_F(EgressCommandTest, ChangesARunningVmLiveAndSaysHowLongItTook) {
  New(Alice(), {"--name", "net-one"});
  Outcome o = Exec(Alice(), {"egress", "net-one", "none"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "net-one: egress all -> none")) << o.out;
  EXPECT_TRUE(Has(o.out, "network device removed while it runs (")) << o.out;
  EXPECT_EQ(HostEgress(host_, IdOf("net-one")), Egress::kNone);
  EXPECT_EQ(store_->GetVmByName("net-one")->egress, "none");

  o = Exec(Alice(), {"egress", "net-one", "all", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  nlohmann::json j = o.Json();
  EXPECT_EQ(j["egress"], "all");
  EXPECT_EQ(j["previous_egress"], "none");
  EXPECT_EQ(j["live"], true);
  EXPECT_EQ(j["network_device"], true);
  EXPECT_GE(j["downtime_seconds"].get<double>(), 0.0);
  EXPECT_EQ(HostEgress(host_, IdOf("net-one")), Egress::kAll);

  o = Exec(Alice(), {"egress", "net-one", "all"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "already all")) << o.out;
}

TEST_F(EgressCommandTest, IntegrationsAndNoneShareTheHostsAnswer) {
  New(Alice(), {"--name", "int-one", "--egress", "integrations"});
  Outcome o = Exec(Alice(), {"egress", "int-one", "none"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "no change to its network device (it has none)")) << o.out;
  EXPECT_EQ(store_->GetVmByName("int-one")->egress, "none");
}

TEST_F(EgressCommandTest, AStoppedVmHasItFromItsNextStart) {
  New(Alice(), {"--name", "net-one"});
  ASSERT_TRUE(Exec(Alice(), {"stop", "net-one"}).status.ok());
  Outcome o = Exec(Alice(), {"egress", "net-one", "integrations"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "its network device goes at its next start")) << o.out;
  EXPECT_EQ(HostEgress(host_, IdOf("net-one")), Egress::kNone);
}

TEST_F(EgressCommandTest, Refusals) {
  New(Alice(), {"--name", "net-one"});
  EXPECT_EQ(Exec(Alice(), {"egress", "net-one", "open"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"egress", "net-one"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"egress", "nosuch-vm", "none"}).status.code(), Code::kNotFound);
  // Another user's VM, and one outside a tag-scoped key's tag, do not exist for them.
  EXPECT_EQ(Exec(Bob(), {"egress", "net-one", "none"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(AliceCi(), {"egress", "net-one", "none"}).status.code(), Code::kNotFound);
  // The host failing changes nothing in the store.
  host_.FailNext(Unavailable("libvirt went away"));
  Outcome o = Exec(Alice(), {"egress", "net-one", "none"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_EQ(store_->GetVmByName("net-one")->egress, "all");
  // A VM still being made is not ready for it.
  HalfMade("half-one");
  EXPECT_NE(Exec(Alice(), {"egress", "half-one", "none"}).status.code(), Code::kOk);
  EXPECT_EQ(store_->GetVmByName("half-one")->egress, "all");
}

TEST_F(EgressCommandTest, StatLsAndJsonShowIt) {
  New(Alice(), {"--name", "net-one"});
  New(Alice(), {"--name", "int-one", "--egress", "integrations"});
  Outcome o = Exec(Alice(), {"stat", "int-one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "egress:   integrations\n")) << o.out;
  EXPECT_EQ(Exec(Alice(), {"stat", "net-one", "--json"}).Json()["egress"], "all");
  o = Exec(Alice(), {"ls", "-l"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(Has(o.out, "EGRESS")) << o.out;
  EXPECT_TRUE(Has(o.out, "integrations")) << o.out;
  nlohmann::json ls = Exec(Alice(), {"ls", "--json"}).Json();
  ASSERT_EQ(ls["vms"].size(), 2u);
  for (const auto& vm : ls["vms"]) EXPECT_TRUE(vm.contains("egress")) << vm.dump();
}

TEST_F(EgressCommandTest, HelpExplainsThePolicies) {
  for (const char* cmd : {"new", "cp", "egress"}) {
    Outcome o = Exec(Alice(), {"help", cmd});
    ASSERT_TRUE(o.status.ok()) << o.err;
    for (const char* word : {"all ", "integrations ", "none "}) {
      EXPECT_TRUE(Has(o.out, word)) << cmd << ": " << o.out;
    }
    EXPECT_TRUE(Has(o.out, "never this host itself")) << cmd << ": " << o.out;
  }
}

}  // namespace
}  // namespace warren::vmtest
