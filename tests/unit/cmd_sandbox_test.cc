// Sandboxes through the interpreter: `new --sandbox` (sizes, lifetime, names, the per-user
// limit, the host's room), `extend`, how ls/stat/resize/start treat them, expiry, and `ssh
// --timeout/--cwd/--env` (what the sandbox API's exec runs).
#include <gtest/gtest.h>

#include "lobby/commands/sandbox.h"
#include "lobby/commands/sandbox_expiry.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

class SandboxTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    vm_defaults_.user_limits = {kNoLimit, kNoLimit, kNoLimit, kNoLimit, 20};
    PutSandboxSize(sandboxes_, *ParseSandboxSize("test=1,512M,2G"));
    MakeInterpreter();
  }

  nlohmann::json NewSandbox(const Caller& caller, std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {"new", "--sandbox", "--json"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Outcome o = Exec(caller, argv);
    EXPECT_TRUE(o.status.ok()) << o.status.ToString() << o.out;
    return o.status.ok() ? o.Json() : nlohmann::json();
  }
};

TEST_F(SandboxTest, NewSandboxHasASizeALifetimeAndAnSbxName) {
  nlohmann::json j = NewSandbox(Alice());
  EXPECT_EQ(j["kind"], "sandbox");
  EXPECT_EQ(j["size"], "small");
  EXPECT_EQ(j["cpus"], 2);
  EXPECT_EQ(j["memory_mib"], 4096);
  EXPECT_EQ(j["expires_at"], kStart + 15 * 60);
  const std::string name = j["name"];
  EXPECT_EQ(name.rfind("sbx-", 0), 0u) << name;
  EXPECT_EQ(host_.SpecOf(j["id"].get<std::string>())->cpus, 2);

  nlohmann::json t = NewSandbox(Alice(), {"--name=sbx1", "--size", "test", "--timeout", "2h"});
  EXPECT_EQ(t["name"], "sbx1");
  EXPECT_EQ(t["cpus"], 1);
  EXPECT_EQ(t["memory_mib"], 512);
  EXPECT_EQ(t["disk_gib"], 2);   // the size's own disk
  EXPECT_EQ(j["disk_gib"], 10);  // small has none: the server's default
  EXPECT_EQ(t["expires_at"], kStart + 7200);

  // An ordinary VM says what it is too.
  New(Alice(), {"--name", "plain-vm"});
  Outcome stat = Exec(Alice(), {"stat", "plain-vm", "--json"});
  EXPECT_EQ(stat.Json()["kind"], "vm");
  EXPECT_TRUE(stat.Json()["expires_at"].is_null());
  EXPECT_TRUE(stat.Json()["size"].is_null());
}

TEST_F(SandboxTest, BadSandboxFlagsAreRefusedBeforeAnythingIsMade) {
  struct Case {
    std::vector<std::string> argv;
    const char* says;
  };
  const Case cases[] = {
      {{"new", "--sandbox", "--size", "huge"}, "no sandbox size \"huge\""},
      {{"new", "--sandbox", "--cpu", "4"}, "come from its --size"},
      {{"new", "--sandbox", "--memory", "8G"}, "come from its --size"},
      {{"new", "--sandbox", "--timeout", "25h"}, "1m to 24h"},
      {{"new", "--sandbox", "--timeout", "30"}, "a duration such as"},
      {{"new", "--size", "small"}, "add --sandbox"},
      {{"new", "--timeout", "15m"}, "add --sandbox"},
  };
  for (const Case& c : cases) {
    Outcome o = Exec(Alice(), c.argv);
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << c.argv.back();
    EXPECT_TRUE(Has(o.status.message(), c.says)) << o.status.message();
  }
  EXPECT_TRUE(store_->ListVms()->empty());
  EXPECT_TRUE(host_.List()->empty());
}

TEST_F(SandboxTest, TheTwentyFirstSandboxIsRefusedWithTheCount) {
  for (int i = 0; i < 20; ++i) NewSandbox(Alice(), {"--size", "test"});
  Outcome o = Exec(Alice(), {"new", "--sandbox", "--size", "test"});
  ASSERT_EQ(o.status.code(), Code::kLimitExceeded) << o.status.ToString();
  EXPECT_TRUE(Has(o.status.message(), "have at most 20 sandboxes at once (20 held now"))
      << o.status.message();
  // Ordinary VMs are not sandboxes, and bob has his own twenty.
  New(Alice(), {"--name", "plain-vm"});
  NewSandbox(Bob(), {"--size", "test"});
  // A per-user limit from an admin.
  ASSERT_TRUE(Exec(Root(), {"user", "set", "bob", "--max-sandboxes", "1"}).status.ok());
  EXPECT_EQ(Exec(Bob(), {"new", "--sandbox", "--size", "test"}).status.code(),
            Code::kLimitExceeded);
}

TEST_F(SandboxTest, ASandboxThatWouldOvercommitTheHostIsRefusedWithTheFigures) {
  host_.SetHostCores(2);
  nlohmann::json first = NewSandbox(Alice());  // small: both cores
  Outcome o = Exec(Bob(), {"new", "--sandbox"});
  ASSERT_EQ(o.status.code(), Code::kLimitExceeded) << o.status.ToString();
  EXPECT_TRUE(Has(o.status.message(),
                  "sandboxes may reserve 2 vCPUs on this host (1 sandboxes "
                  "reserve 2 vCPUs"))
      << o.status.message();
  // Ordinary VMs may still overcommit, as before.
  New(Bob(), {"--name", "bob-vm"});
  // A stopped sandbox reserves nothing; starting it again is admitted like a new one.
  const std::string name = first["name"];
  ASSERT_TRUE(Exec(Alice(), {"stop", name}).status.ok());
  NewSandbox(Bob());
  Outcome start = Exec(Alice(), {"start", name});
  EXPECT_EQ(start.status.code(), Code::kLimitExceeded) << start.status.ToString();
  // Larger than the host: refused cleanly, nothing left.
  ASSERT_TRUE(Exec(Alice(), {"rm", name}).status.ok());
  const size_t before = store_->ListVms()->size();
  EXPECT_EQ(Exec(Alice(), {"new", "--sandbox", "--size", "large"}).status.code(),
            Code::kLimitExceeded);
  EXPECT_EQ(store_->ListVms()->size(), before);
}

TEST_F(SandboxTest, ExtendMovesTheExpiryAndOnlyForSandboxes) {
  NewSandbox(Alice(), {"--name=sbx1"});
  clock_.now += 600;
  Outcome o = Exec(Alice(), {"extend", "sbx1", "--minutes", "30", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.Json()["expires_at"], kStart + 900 + 1800);
  EXPECT_EQ(o.Json()["capped"], false);
  EXPECT_EQ(store_->GetVmByName("sbx1")->expires_at, kStart + 900 + 1800);
  o = Exec(Alice(), {"extend", "sbx1", "--minutes", "1440", "--json"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.Json()["expires_at"], clock_.now + 24 * 3600);
  EXPECT_EQ(o.Json()["capped"], true);
  EXPECT_EQ(Exec(Alice(), {"extend", "sbx1", "--minutes", "0"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"extend", "sbx1"}).status.code(), Code::kInvalidArgument);
  New(Alice(), {"--name", "plain-vm"});
  Outcome vm = Exec(Alice(), {"extend", "plain-vm", "--minutes", "5"});
  EXPECT_EQ(vm.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(vm.status.message(), "not a sandbox"));
  EXPECT_EQ(Exec(Bob(), {"extend", "sbx1", "--minutes", "5"}).status.code(), Code::kNotFound);
}

TEST_F(SandboxTest, LsSandboxListsOnlySandboxesWithTheirExpiry) {
  NewSandbox(Alice(), {"--name=sbx1"});
  New(Alice(), {"--name", "plain-vm"});
  Outcome o = Exec(Alice(), {"ls", "--sandbox", "--json"});
  ASSERT_TRUE(o.status.ok());
  ASSERT_EQ(o.Json()["vms"].size(), 1u);
  EXPECT_EQ(o.Json()["vms"][0]["name"], "sbx1");
  Outcome text = Exec(Alice(), {"ls"});
  EXPECT_TRUE(Has(text.out, "EXPIRES")) << text.out;
  EXPECT_TRUE(Has(text.out, "in 15m")) << text.out;
  Outcome stat = Exec(Alice(), {"stat", "sbx1"});
  EXPECT_TRUE(Has(stat.out, "sandbox:  small, expires in 15m")) << stat.out;
}

TEST_F(SandboxTest, RmSandboxRemovesOnlySandboxes) {
  NewSandbox(Alice(), {"--name=sbx1"});
  New(Alice(), {"--name", "plain-vm"});
  Outcome o = Exec(Alice(), {"rm", "--sandbox", "plain-vm"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(Has(o.status.message(), "no sandbox named \"plain-vm\"")) << o.status.message();
  EXPECT_TRUE(store_->GetVmByName("plain-vm").ok());
  EXPECT_TRUE(Exec(Alice(), {"rm", "--sandbox", "sbx1"}).status.ok());
  EXPECT_FALSE(store_->GetVmByName("sbx1").ok());
}

TEST_F(SandboxTest, ASandboxKeepsItsSize) {
  NewSandbox(Alice(), {"--name=sbx1"});
  Outcome o = Exec(Alice(), {"resize", "sbx1", "--cpu", "4"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(o.status.message(), "is a sandbox of size small")) << o.status.message();
  EXPECT_TRUE(Exec(Alice(), {"resize", "sbx1", "--disk", "20G"}).status.ok());
}

TEST_F(SandboxTest, ExpiredSandboxesAreDestroyedEarliestFirst) {
  NewSandbox(Alice(), {"--name=late", "--timeout", "20m"});
  NewSandbox(Alice(), {"--name=early", "--timeout", "5m"});
  NewSandbox(Bob(), {"--name=bobs", "--timeout", "10m"});
  New(Alice(), {"--name", "plain-vm"});
  const std::string late_id = IdOf("late");
  Services& services = interpreter_->services();
  EXPECT_TRUE(ExpireSandboxes(services, clock_.now).empty());
  clock_.now += 15 * 60;
  EXPECT_EQ(ExpireSandboxes(services, clock_.now), (std::vector<std::string>{"early", "bobs"}));
  EXPECT_FALSE(store_->GetVmByName("early").ok());
  EXPECT_FALSE(store_->GetVmByName("bobs").ok());
  EXPECT_TRUE(store_->GetVmByName("late").ok());
  EXPECT_TRUE(store_->GetVmByName("plain-vm").ok());
  clock_.now += 10 * 60;
  EXPECT_EQ(ExpireSandboxes(services, clock_.now), std::vector<std::string>{"late"});
  EXPECT_EQ(host_.Inspect(late_id).status().code(), Code::kNotFound);  // disk and all
  EXPECT_TRUE(store_->GetVmByName("plain-vm").ok());
}

TEST_F(SandboxTest, SshTimeoutKillsTheCommandAndReportsIt) {
  NewSandbox(Alice(), {"--name=sbx1"});
  const std::string id = IdOf("sbx1");
  guests_.SetScript("sleep 100", {"started\n", "", std::nullopt, /*hold=*/true});
  const std::string job = guests_.next_job();
  Outcome o = Exec(Alice("exec"), {"ssh", "--timeout", "200ms", "--json", "sbx1", "sleep 100"});
  EXPECT_EQ(o.exit_status, 124) << o.out;
  nlohmann::json j = o.Json();
  EXPECT_EQ(j["timed_out"], true);
  EXPECT_EQ(j["exit_code"], 124);
  EXPECT_EQ(j["finished"], true);
  EXPECT_FALSE(j.contains("job"));
  EXPECT_TRUE(j["duration_ms"].is_number_integer());
  EXPECT_TRUE(Has(j["stdout"].get<std::string>(), "started"));
  EXPECT_EQ(guests_.killed(), 1);
  EXPECT_TRUE(guests_.finished(job));
  EXPECT_TRUE(store_->ListJobs(id)->empty());  // never a job
  // --timeout and --wait-seconds contradict each other; the limit is ten minutes.
  EXPECT_EQ(Exec(Alice(), {"ssh", "--timeout", "1s", "--wait-seconds", "5", "sbx1", "true"})
                .status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"ssh", "--timeout", "11m", "sbx1", "true"}).status.code(),
            Code::kInvalidArgument);
}

TEST_F(SandboxTest, SshCwdAndEnvApplyToThatCommand) {
  NewSandbox(Alice(), {"--name=sbx1"});
  Outcome o = Exec(Alice("exec"), {"ssh", "--cwd", "/tmp", "--env", "A=1", "--env", "B=two",
                                   "--json", "sbx1", "pwd"});
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  std::optional<GuestCommand> last = guests_.last_command();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->command, "pwd");
  EXPECT_EQ(last->cwd, "/tmp");
  EXPECT_EQ(last->env,
            (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "two"}}));
  // One value per --env: the words after it are the VM and its command.
  Outcome one = Exec(Alice("exec"), {"ssh", "--env", "C=3", "sbx1", "env"});
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  EXPECT_EQ(guests_.last_command()->command, "env");
  EXPECT_EQ(guests_.last_command()->env,
            (std::vector<std::pair<std::string, std::string>>{{"C", "3"}}));
  EXPECT_EQ(Exec(Alice(), {"ssh", "--env", "1A=x", "sbx1", "true"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"ssh", "--cwd", "a\nb", "sbx1", "true"}).status.code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace warren::vmtest
