// integrations add|list|show|remove|rename|attach|detach and new --integration through
// Interpreter::Execute on VmCommandTest (real store, FakeVmHost); the access API the proxy
// calls (integration_access.h) and the change events (integration_events.h); and that no
// command's output, nor the log, ever carries a secret.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "keys/integration.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/integration_access.h"
#include "lobby/commands/integration_events.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

constexpr const char kBearer[] = "sk_live_BEARERSECRET77";
constexpr const char kKeyValue[] = "hv_HEADERSECRET88";
// A key of alice's limited to two commands.
constexpr const char kAliceListKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 list";

// Sends fd 2 (the log) to a file while alive, so a test can read what was logged.
class CapturedLog {
 public:
  explicit CapturedLog(std::string path) : path_(std::move(path)) {
    fflush(stderr);
    saved_ = dup(2);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  ~CapturedLog() { Restore(); }
  std::string Text() {
    Restore();
    std::ifstream in(path_);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

class IntegrationCommandTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    New(Alice(), {"--name", "web-one"});
    New(Alice(), {"--name", "ci-one", "--tag", "ci"});
    New(Bob(), {"--name", "bobs-vm"});
    events_ = interpreter_->services().integration_events;
    subscription_ = events_->Subscribe([this](std::string_view owner) {
      std::lock_guard lock(mu_);
      notified_.emplace_back(owner);
    });
  }
  void TearDown() override {
    subscription_.Reset();
    VmCommandTest::TearDown();
  }

  // Every output a command made, for the "no secret anywhere" checks.
  Outcome Run(const Caller& caller, std::vector<std::string> argv) {
    Outcome o = Exec(caller, std::move(argv));
    all_output_ += o.out + o.err;
    return o;
  }
  void AddStripe(std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {"integrations",
                                     "add",
                                     "http-proxy",
                                     "--name",
                                     "stripe",
                                     "--target",
                                     "https://api.stripe.com",
                                     "--bearer",
                                     kBearer,
                                     "--header",
                                     std::string("X-Key:") + kKeyValue};
    argv.insert(argv.end(), more.begin(), more.end());
    Outcome o = Run(Alice(), argv);
    ASSERT_TRUE(o.status.ok()) << o.err;
  }
  std::vector<std::string> Notified() {
    std::lock_guard lock(mu_);
    return std::exchange(notified_, {});
  }
  IntegrationRecord Stored(const std::string& name, const std::string& owner = "alice") {
    Result<IntegrationRecord> r = store_->GetIntegration(owner, name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : IntegrationRecord{};
  }
  Caller AliceLimitedTo(const std::string& cmds) {
    Scope scope;
    scope.cmds = ParseCommandList(cmds).value();
    EXPECT_TRUE(store_->AddKey(KeyRecord(kAliceListKey, "alice", "limited", scope)).ok());
    return As(kAliceListKey);
  }
  void ExpectNoSecret(const std::string& text) {
    EXPECT_EQ(text.find(kBearer), std::string::npos) << text;
    EXPECT_EQ(text.find(kKeyValue), std::string::npos) << text;
    EXPECT_EQ(text.find("SECRET"), std::string::npos) << text;
  }

  std::shared_ptr<IntegrationEvents> events_;
  IntegrationEvents::Subscription subscription_;
  std::mutex mu_;
  std::vector<std::string> notified_;
  std::string all_output_;
};

// ---- add, list, show --------------------------------------------------------------------

TEST_F(IntegrationCommandTest, AddShowsNoSecretAndSealsIt) {
  Outcome o = Run(Alice(), {"integrations", "add", "http-proxy", "--name", "stripe", "--target",
                            "HTTPS://api.stripe.com/", "--bearer", kBearer, "--header",
                            std::string("X-Key: ") + kKeyValue, "--attach", "vm:web-one",
                            "--attach", "tag:sandbox"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  const IntegrationRecord rec = Stored("stripe");
  EXPECT_NE(o.out.find("added integration stripe (http-proxy)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("target:      https://api.stripe.com\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Authorization: Bearer ****, X-Key: ****"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("fingerprint: " + rec.fingerprint), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("attached to: tag:sandbox, vm:web-one"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("http://stripe.int.warren.internal/"), std::string::npos) << o.out;
  ExpectNoSecret(o.out + o.err);
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});

  EXPECT_EQ(rec.target, "https://api.stripe.com");
  EXPECT_EQ(rec.header_names, std::vector<std::string>{"X-Key"});
  EXPECT_TRUE(rec.bearer);
  EXPECT_EQ(rec.attachments, (std::vector<std::string>{"tag:sandbox", "vm:" + IdOf("web-one")}));
  ExpectNoSecret(rec.sealed);
  Result<IntegrationSecrets> secrets = OpenIntegrationSecrets(integration_key_, rec);
  ASSERT_TRUE(secrets.ok());
  EXPECT_EQ(secrets->bearer, kBearer);
  EXPECT_EQ(secrets->headers[0].second, kKeyValue);  // "X-Key: v": the space after ':' dropped
}

TEST_F(IntegrationCommandTest, ListAndShowInTextAndJson) {
  Outcome empty = Run(Alice(), {"integrations", "list"});
  EXPECT_EQ(empty.out, "no integrations\n");
  AddStripe({"--attach", "vm:web-one"});
  ASSERT_TRUE(Run(Alice(), {"integrations", "add", "http-proxy", "--name", "open", "--target",
                            "http://127.0.0.1:9000/api"})
                  .status.ok());
  Outcome list = Run(Alice(), {"integrations", "list"});
  ASSERT_TRUE(list.status.ok()) << list.err;
  EXPECT_NE(list.out.find("NAME    KIND        TARGET"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("open    http-proxy  http://127.0.0.1:9000/api  nothing"),
            std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("vm:web-one"), std::string::npos) << list.out;

  Outcome j = Run(Alice(), {"integrations", "list", "--json"});
  ASSERT_TRUE(j.status.ok());
  json all = j.Json()["integrations"];
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["name"], "open");
  EXPECT_EQ(all[0]["bearer"], nullptr);
  EXPECT_EQ(all[1]["name"], "stripe");
  EXPECT_EQ(all[1]["bearer"], "****");
  EXPECT_EQ(all[1]["headers"], json({{"X-Key", "****"}}));
  EXPECT_EQ(all[1]["attachments"], json::array({"vm:web-one"}));
  EXPECT_EQ(all[1]["url"], "http://stripe.int.warren.internal/");
  EXPECT_EQ(all[1]["https_url"], "https://stripe.int.warren.internal/");
  EXPECT_EQ(all[1]["fingerprint"], Stored("stripe").fingerprint);

  // A VM rename shows through: attachments are by id.
  ASSERT_TRUE(Exec(Alice(), {"rename", "web-one", "web-two"}).status.ok());
  Outcome show = Run(Alice(), {"integrations", "show", "stripe", "--json"});
  ASSERT_TRUE(show.status.ok()) << show.out;
  EXPECT_EQ(show.Json()["attachments"], json::array({"vm:web-two"}));
  Outcome text = Run(Alice(), {"integrations", "show", "stripe"});
  EXPECT_NE(text.out.find("attached to: vm:web-two"), std::string::npos) << text.out;
  EXPECT_EQ(Run(Alice(), {"integrations", "show", "nope"}).status.code(), Code::kNotFound);
  // Names are per owner: bob has none.
  EXPECT_EQ(Run(Bob(), {"integrations", "show", "stripe"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Run(Bob(), {"integrations", "list", "--json"}).Json()["integrations"], json::array());
  ExpectNoSecret(all_output_);
}

TEST_F(IntegrationCommandTest, BadInputIsRefusedWithTheReasonAndLeavesNothing) {
  auto add = [&](std::vector<std::string> more) {
    std::vector<std::string> argv = {"integrations", "add", "http-proxy"};
    argv.insert(argv.end(), more.begin(), more.end());
    return Run(Alice(), argv);
  };
  struct Case {
    std::vector<std::string> flags;
    Code code;
    const char* says;
  };
  const std::string t = "https://api.example.com";
  for (const Case& c : std::vector<Case>{
           {{"--name", "Bad_Name", "--target", t}, Code::kInvalidArgument, "integration name"},
           {{"--name", "x", "--target", "ftp://h"}, Code::kInvalidArgument, "http or https"},
           {{"--name", "x", "--target", "https://u:SECRETPW@h"},
            Code::kInvalidArgument,
            "user:password@"},
           {{"--name", "x", "--target", t, "--header", "NoColonSECRET"},
            Code::kInvalidArgument,
            "NAME:VALUE"},
           {{"--name", "x", "--target", t, "--header", "Host:h"},
            Code::kInvalidArgument,
            "sets Host itself"},
           {{"--name", "x", "--target", t, "--header", "X:"}, Code::kInvalidArgument, "is empty"},
           {{"--name", "x", "--target", t, "--header", "X:a\x01SECRET"},
            Code::kInvalidArgument,
            "visible ASCII"},
           {{"--name", "x", "--target", t, "--header", "X:1", "--header", "x:2"},
            Code::kInvalidArgument,
            "given twice"},
           {{"--name", "x", "--target", t, "--bearer", ""}, Code::kInvalidArgument, "empty"},
           {{"--name", "x", "--target", t, "--bearer", "two SECRETwords"},
            Code::kInvalidArgument,
            "bearer token"},
           {{"--name", "x", "--target", t, "--header", "Authorization:Basic SECRET", "--bearer",
             "b"},
            Code::kInvalidArgument,
            "--bearer sets Authorization"},
           {{"--name", "x", "--target", t, "--attach", "vm:nope"},
            Code::kNotFound,
            "no VM named \"nope\""},
           {{"--name", "x", "--target", t, "--attach", "vm:bobs-vm"},
            Code::kNotFound,
            "no VM named \"bobs-vm\""},
           {{"--name", "x", "--target", t, "--attach", "tag:Bad"}, Code::kInvalidArgument, "tag"},
           {{"--name", "x", "--target", t, "--attach", "everyone"},
            Code::kInvalidArgument,
            "vm:NAME, tag:TAG or all"},
           {{"--name", "x"}, Code::kInvalidArgument, "--target"},
       }) {
    Outcome o = add(c.flags);
    EXPECT_EQ(o.status.code(), c.code) << c.says << ": " << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << o.err;
  }
  Outcome kind = Run(Alice(), {"integrations", "add", "smtp", "--name", "x", "--target", t});
  EXPECT_EQ(kind.status.code(), Code::kInvalidArgument);
  EXPECT_NE(kind.err.find("http-proxy"), std::string::npos);
  EXPECT_TRUE(store_->ListIntegrations("alice")->empty());  // nothing half-made

  AddStripe();
  Outcome dup = add({"--name", "stripe", "--target", t});
  EXPECT_EQ(dup.status.code(), Code::kConflict);
  EXPECT_NE(dup.err.find("already have an integration named \"stripe\""), std::string::npos);
  EXPECT_EQ(Stored("stripe").target, "https://api.stripe.com");  // untouched
  ExpectNoSecret(all_output_);
}

// ---- attach, detach, rename, remove -----------------------------------------------------

TEST_F(IntegrationCommandTest, AttachAndDetachAreAllOrNothing) {
  AddStripe();
  Notified();
  const std::string web = "vm:" + IdOf("web-one");
  Outcome o = Run(Alice(), {"integrations", "attach", "stripe", "vm:web-one", "tag:ci", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["attached"], json::array({"vm:web-one", "tag:ci"}));
  EXPECT_EQ(Stored("stripe").attachments, (std::vector<std::string>{"tag:ci", web}));
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});

  o = Run(Alice(), {"integrations", "attach", "stripe", "tag:ci", "all"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "attached stripe to all\nstripe was already attached to tag:ci\n");
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});
  ASSERT_TRUE(Run(Alice(), {"integrations", "attach", "stripe", "all"}).status.ok());
  EXPECT_TRUE(Notified().empty());  // nothing changed, nothing to tell

  // One not attached: nothing is detached.
  o = Run(Alice(), {"integrations", "detach", "stripe", "all", "tag:prod"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_NE(o.err.find("stripe is not attached to tag:prod"), std::string::npos) << o.err;
  EXPECT_EQ(Stored("stripe").attachments, (std::vector<std::string>{"all", "tag:ci", web}));
  EXPECT_TRUE(Notified().empty());

  o = Run(Alice(), {"integrations", "detach", "stripe", "all", "vm:web-one", "all"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "detached stripe from all\ndetached stripe from vm:web-one\n");
  EXPECT_EQ(Stored("stripe").attachments, std::vector<std::string>{"tag:ci"});
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});

  EXPECT_EQ(Run(Alice(), {"integrations", "attach", "nope", "all"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Run(Alice(), {"integrations", "attach", "stripe", "vm:bobs-vm"}).status.code(),
            Code::kNotFound);
  EXPECT_EQ(Run(Alice(), {"integrations", "attach", "stripe"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Run(Alice(), {"integrations", "detach", "stripe", "bogus"}).status.code(),
            Code::kInvalidArgument);
}

TEST_F(IntegrationCommandTest, RenameAndRemove) {
  AddStripe({"--attach", "vm:web-one"});
  ASSERT_TRUE(Run(Alice(), {"integrations", "add", "http-proxy", "--name", "llm", "--target",
                            "https://api.anthropic.com"})
                  .status.ok());
  Notified();
  Outcome o = Run(Alice(), {"integrations", "rename", "stripe", "llm"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(Run(Alice(), {"integrations", "rename", "stripe", "Pay"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Run(Alice(), {"integrations", "rename", "nope", "pay"}).status.code(), Code::kNotFound);
  EXPECT_TRUE(Notified().empty());
  o = Run(Alice(), {"integrations", "rename", "stripe", "pay"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("http://pay.int.warren.internal/"), std::string::npos) << o.out;
  EXPECT_EQ(Stored("pay").attachments, std::vector<std::string>{"vm:" + IdOf("web-one")});
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});

  o = Run(Alice(), {"integrations", "remove", "pay", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["removed"], "pay");
  EXPECT_EQ(store_->GetIntegration("alice", "pay").status().code(), Code::kNotFound);
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});
  EXPECT_EQ(Run(Alice(), {"integrations", "remove", "pay"}).status.code(), Code::kNotFound);
}

TEST_F(IntegrationCommandTest, RemovingAVmOrAUserLeavesNoAttachment) {
  AddStripe({"--attach", "vm:web-one", "--attach", "vm:ci-one"});
  ASSERT_TRUE(Exec(Alice(), {"rm", "web-one"}).status.ok());
  EXPECT_EQ(Stored("stripe").attachments, std::vector<std::string>{"vm:" + IdOf("ci-one")});
  ASSERT_TRUE(Exec(Root(), {"user", "rm", "alice"}).status.ok());
  EXPECT_TRUE(store_->ListIntegrations("alice")->empty());
}

// ---- who may do what ----------------------------------------------------------------------

TEST_F(IntegrationCommandTest, ATagLimitedKeyManagesOnlyItsTagsAttachments) {
  AddStripe({"--attach", "vm:ci-one", "--attach", "vm:web-one", "--attach", "tag:prod"});
  ASSERT_TRUE(Run(Alice(), {"integrations", "add", "http-proxy", "--name", "private", "--target",
                            "https://internal.example.com", "--attach", "vm:web-one"})
                  .status.ok());
  ASSERT_TRUE(Run(Alice(), {"integrations", "add", "http-proxy", "--name", "shared", "--target",
                            "https://shared.example.com", "--attach", "tag:ci"})
                  .status.ok());
  const Caller ci = AliceCi();

  // It sees the integrations its VMs use, and of them only its own attachments.
  Outcome list = Run(ci, {"integrations", "list", "--json"});
  ASSERT_TRUE(list.status.ok()) << list.out;
  json all = list.Json()["integrations"];
  ASSERT_EQ(all.size(), 2u) << all;
  EXPECT_EQ(all[0]["name"], "shared");
  EXPECT_EQ(all[1]["name"], "stripe");
  EXPECT_EQ(all[1]["attachments"], json::array({"vm:ci-one"}));  // not web-one, not tag:prod
  EXPECT_EQ(all[1]["bearer"], "****");
  Outcome text = Run(ci, {"integrations", "list"});
  EXPECT_EQ(text.out.find("web-one"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("prod"), std::string::npos) << text.out;
  EXPECT_EQ(Run(ci, {"integrations", "show", "private"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Run(ci, {"integrations", "show", "private"}).err,
            "error: you have no integration named \"private\"; see integrations list\n");

  // It cannot add, remove or rename.
  for (std::vector<std::string> argv :
       {std::vector<std::string>{"integrations", "add", "http-proxy", "--name", "mine", "--target",
                                 "https://x.example.com"},
        {"integrations", "remove", "stripe"},
        {"integrations", "rename", "stripe", "pay"}}) {
    Outcome o = Run(ci, argv);
    EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << argv[1];
    EXPECT_NE(o.err.find("limited to the tag \"ci\""), std::string::npos) << o.err;
  }

  // It attaches and detaches only its VMs and its tag, on what it sees.
  New(AliceCi(), {"--name", "ci-two"});
  EXPECT_TRUE(Run(ci, {"integrations", "attach", "stripe", "vm:ci-two"}).status.ok());
  EXPECT_TRUE(Run(ci, {"integrations", "attach", "stripe", "tag:ci"}).status.ok());
  EXPECT_EQ(Run(ci, {"integrations", "attach", "stripe", "vm:web-one"}).status.code(),
            Code::kNotFound);
  EXPECT_EQ(Run(ci, {"integrations", "attach", "stripe", "all"}).status.code(),
            Code::kPermissionDenied);
  EXPECT_EQ(Run(ci, {"integrations", "attach", "stripe", "tag:prod"}).status.code(),
            Code::kPermissionDenied);
  EXPECT_EQ(Run(ci, {"integrations", "detach", "stripe", "tag:prod"}).status.code(),
            Code::kPermissionDenied);
  EXPECT_EQ(Run(ci, {"integrations", "detach", "stripe", "vm:web-one"}).status.code(),
            Code::kNotFound);
  EXPECT_EQ(Run(ci, {"integrations", "attach", "private", "vm:ci-one"}).status.code(),
            Code::kNotFound);  // it may not give its VMs an integration they could not use
  EXPECT_TRUE(Run(ci, {"integrations", "detach", "stripe", "vm:ci-one", "vm:ci-two"}).status.ok());
  EXPECT_EQ(Stored("stripe").attachments,
            (std::vector<std::string>{"tag:ci", "tag:prod", "vm:" + IdOf("web-one")}));
  // new --integration is held to the same rule.
  EXPECT_EQ(Exec(ci, {"new", "--name", "ci-three", "--integration", "private"}).status.code(),
            Code::kNotFound);
  EXPECT_EQ(store_->GetVmByName("ci-three").status().code(), Code::kNotFound);
  ExpectNoSecret(all_output_);
}

TEST_F(IntegrationCommandTest, CmdsLimitsAndReadOnlySessions) {
  AddStripe();
  const Caller lister = AliceLimitedTo("integrations list,integrations show");
  EXPECT_TRUE(Run(lister, {"integrations", "list"}).status.ok());
  EXPECT_TRUE(Run(lister, {"integrations", "show", "stripe"}).status.ok());
  Outcome o = Run(lister, {"integrations", "attach", "stripe", "all"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;

  for (const char* path : {"integrations list", "integrations show"}) {
    EXPECT_TRUE(interpreter_->table().Find(path)->read_only) << path;
  }
  for (const char* path : {"integrations add", "integrations remove", "integrations rename",
                           "integrations attach", "integrations detach"}) {
    const CommandSpec* spec = interpreter_->table().Find(path);
    ASSERT_NE(spec, nullptr) << path;
    EXPECT_FALSE(spec->read_only) << path;
    EXPECT_FALSE(spec->admin_only) << path;
    EXPECT_NE(spec->description.find("limited to a tag"), std::string::npos) << path;
  }
  StringSink out, err;
  CommandSession s;
  s.caller = Alice();
  s.argv = {"integrations", "remove", "stripe"};
  s.out = &out;
  s.err = &err;
  s.read_only = true;
  interpreter_->Execute(s);
  EXPECT_EQ(s.status.code(), Code::kPermissionDenied);
  EXPECT_TRUE(store_->GetIntegration("alice", "stripe").ok());

  Outcome help = Run(Alice(), {"help", "integrations", "add"});
  ASSERT_TRUE(help.status.ok()) << help.err;
  for (const char* flag : {"--name", "--target", "--header", "--bearer", "--attach", "--json"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
  Outcome group = Run(Alice(), {"help", "integrations"});
  for (const char* verb : {"add", "list", "show", "remove", "rename", "attach", "detach"}) {
    EXPECT_NE(group.out.find("integrations " + std::string(verb)), std::string::npos) << verb;
  }
}

// ---- new --integration --------------------------------------------------------------------

TEST_F(IntegrationCommandTest, NewAttachesAndAFailedNewLeavesNothing) {
  AddStripe();
  Notified();
  Outcome o = Exec(Alice(), {"new", "--name", "with-int", "--integration", "stripe",
                             "--integration", "stripe", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["integrations"], json::array({"stripe"}));
  EXPECT_EQ(Stored("stripe").attachments, std::vector<std::string>{"vm:" + IdOf("with-int")});
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});

  o = Exec(Alice(), {"new", "--name", "no-int", "--integration", "nope"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_NE(o.err.find("no integration named \"nope\""), std::string::npos) << o.err;
  EXPECT_EQ(store_->GetVmByName("no-int").status().code(), Code::kNotFound);

  // The VM fails after it was recorded and attached: the attachment goes with it.
  host_.FailNext(Internal("injected: no room"));
  o = Exec(Alice(), {"new", "--name", "doomed", "--integration", "stripe"});
  EXPECT_FALSE(o.status.ok());
  EXPECT_EQ(store_->GetVmByName("doomed").status().code(), Code::kNotFound);
  EXPECT_EQ(Stored("stripe").attachments, std::vector<std::string>{"vm:" + IdOf("with-int")});
}

// cp carries the source's attachments by id (by tag they follow the tags), and a copy that
// fails leaves none behind.
TEST_F(IntegrationCommandTest, CpCarriesAttachmentsById) {
  AddStripe({"--attach", "vm:web-one"});
  ASSERT_TRUE(Exec(Alice(), {"integrations", "add", "http-proxy", "--name", "other", "--target",
                             "https://other.example.com", "--attach", "tag:ci"})
                  .status.ok());
  Notified();
  Outcome o = Exec(Alice(), {"cp", "web-one", "web-copy", "--egress", "integrations"});
  ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  std::vector<std::string> both = {"vm:" + IdOf("web-copy"), "vm:" + IdOf("web-one")};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(Stored("stripe").attachments, both);
  EXPECT_EQ(Stored("other").attachments, std::vector<std::string>{"tag:ci"});
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});
  EXPECT_TRUE(ResolveIntegration(*store_, integration_key_, IdOf("web-copy"), "stripe").ok());

  host_.FailNext(Internal("injected: no room"));
  EXPECT_FALSE(Exec(Alice(), {"cp", "web-one", "doomed"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("doomed").status().code(), Code::kNotFound);
  EXPECT_EQ(Stored("stripe").attachments, both);
}

// ---- the proxy's side -----------------------------------------------------------------------

TEST_F(IntegrationCommandTest, ResolveByIdTagOrAllAndNothingElse) {
  AddStripe({"--attach", "vm:web-one"});
  const std::string web = IdOf("web-one");
  const std::string ci = IdOf("ci-one");
  const std::string bobs = IdOf("bobs-vm");

  Result<ResolvedIntegration> r = ResolveIntegration(*store_, integration_key_, web, "stripe");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->target.ToString(), "https://api.stripe.com");
  EXPECT_EQ(r->target.EffectivePort(), 443);
  EXPECT_TRUE(r->sets_authorization);
  EXPECT_EQ(r->headers,
            (std::vector<std::pair<std::string, std::string>>{
                {"X-Key", kKeyValue}, {"Authorization", std::string("Bearer ") + kBearer}}));
  EXPECT_EQ(r->fingerprint, Stored("stripe").fingerprint);

  Result<ResolvedIntegration> no = ResolveIntegration(*store_, integration_key_, ci, "stripe");
  EXPECT_EQ(no.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(no.status().message(), "integration stripe is not attached to VM ci-one");
  // Another owner's VM asking the same name finds nothing of alice's.
  no = ResolveIntegration(*store_, integration_key_, bobs, "stripe");
  EXPECT_EQ(no.status().code(), Code::kNotFound);
  EXPECT_EQ(no.status().message(), "no integration stripe for this VM's owner");
  EXPECT_EQ(ResolveIntegration(*store_, integration_key_, web, "Bad!").status().code(),
            Code::kNotFound);
  EXPECT_EQ(ResolveIntegration(*store_, integration_key_, "zzzzzzzzzzzz", "stripe").status().code(),
            Code::kNotFound);
  EXPECT_EQ(IntegrationNamesFor(*store_, web), std::vector<std::string>{"stripe"});
  EXPECT_TRUE(IntegrationNamesFor(*store_, ci).empty());
  EXPECT_TRUE(IntegrationNamesFor(*store_, bobs).empty());

  // By a tag the VM carries now: tagging gives it, untagging takes it away, and the proxy
  // is told each time.
  ASSERT_TRUE(Run(Alice(), {"integrations", "attach", "stripe", "tag:ci"}).status.ok());
  EXPECT_TRUE(ResolveIntegration(*store_, integration_key_, ci, "stripe").ok());
  ASSERT_TRUE(Exec(Alice(), {"tag", "web-one", "ci"}).status.ok());
  ASSERT_TRUE(Run(Alice(), {"integrations", "detach", "stripe", "vm:web-one"}).status.ok());
  EXPECT_TRUE(ResolveIntegration(*store_, integration_key_, web, "stripe").ok());
  Notified();
  ASSERT_TRUE(Exec(Alice(), {"tag", "-d", "web-one", "ci"}).status.ok());
  EXPECT_EQ(Notified(), std::vector<std::string>{"alice"});
  EXPECT_EQ(ResolveIntegration(*store_, integration_key_, web, "stripe").status().code(),
            Code::kPermissionDenied);

  // To all: every VM of the owner's, and still none of bob's.
  ASSERT_TRUE(Run(Alice(), {"integrations", "attach", "stripe", "all"}).status.ok());
  EXPECT_TRUE(ResolveIntegration(*store_, integration_key_, web, "stripe").ok());
  EXPECT_EQ(ResolveIntegration(*store_, integration_key_, bobs, "stripe").status().code(),
            Code::kNotFound);

  // A name of bob's own resolves for bob's VM only.
  ASSERT_TRUE(Run(Bob(), {"integrations", "add", "http-proxy", "--name", "stripe", "--target",
                          "http://localhost:9", "--attach", "all"})
                  .status.ok());
  Result<ResolvedIntegration> bob = ResolveIntegration(*store_, integration_key_, bobs, "stripe");
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(bob->target.ToString(), "http://localhost:9");
  EXPECT_FALSE(bob->sets_authorization);
  EXPECT_TRUE(bob->headers.empty());

  // Sealed under another key: refused, not guessed.
  SecretKey other = SecretKey::FromBytes(std::string(SecretKey::kKeyBytes, 'o')).value();
  EXPECT_EQ(ResolveIntegration(*store_, other, web, "stripe").status().code(), Code::kInternal);
}

TEST_F(IntegrationCommandTest, NoSecretInAnyOutputOrTheLog) {
  const std::string log_path = dir_ + "/captured.log";
  std::string log;
  {
    CapturedLog captured(log_path);
    AddStripe({"--attach", "vm:web-one", "--json"});
    all_output_ += Exec(Alice(), {"integrations", "add", "http-proxy", "--name", "stripe",
                                  "--target", "https://h", "--bearer", kBearer})
                       .err;  // a conflict, whose message names the integration only
    for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
             {"integrations", "list"},
             {"integrations", "list", "--json"},
             {"integrations", "show", "stripe"},
             {"integrations", "show", "stripe", "--json"},
             {"integrations", "attach", "stripe", "tag:ci", "--json"},
             {"integrations", "detach", "stripe", "tag:ci"},
             {"integrations", "rename", "stripe", "pay", "--json"},
             {"integrations", "add", "http-proxy", "--name", "x", "--target",
              std::string("https://u:") + kBearer + "@h"},
             {"integrations", "add", "http-proxy", "--name", "x", "--target", "https://h",
              "--header", std::string("X-Key") + kKeyValue},
             {"integrations", "add", "http-proxy", "--name", "x", "--target", "https://h",
              "--bearer", std::string("two ") + kBearer},
             {"integrations", "add", "http-proxy", "--name", "x", "--target", "https://h",
              "--header", std::string("X:\x01") + kKeyValue},
             {"help", "integrations", "add"},
             {"integrations", "remove", "pay"},
         }) {
      Run(Alice(), argv);
    }
    ASSERT_TRUE(Run(Alice(), {"integrations", "add", "http-proxy", "--name", "again", "--target",
                              "https://h", "--bearer", kBearer, "--attach", "all"})
                    .status.ok());
    ASSERT_TRUE(ResolveIntegration(*store_, integration_key_, IdOf("web-one"), "again").ok());
    log = captured.Text();
  }
  EXPECT_NE(log.find("audit cmd=\"integrations add\""), std::string::npos) << log;
  ExpectNoSecret(log);
  ExpectNoSecret(all_output_);
}

TEST_F(IntegrationCommandTest, EventsStopAfterUnsubscribing) {
  IntegrationEvents events;
  std::vector<std::string> seen;
  {
    IntegrationEvents::Subscription sub =
        events.Subscribe([&](std::string_view owner) { seen.emplace_back(owner); });
    IntegrationEvents::Subscription moved = std::move(sub);
    events.Notify("alice");
    EXPECT_EQ(events.size(), 1u);
  }
  events.Notify("bob");
  EXPECT_EQ(seen, std::vector<std::string>{"alice"});
  EXPECT_EQ(events.size(), 0u);
}

}  // namespace
}  // namespace warren::vmtest
