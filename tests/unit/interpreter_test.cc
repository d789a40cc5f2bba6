// The interpreter end to end: dispatch, permissions, parsing, rendering, exit statuses and
// the audit line, with the built-in commands running against a real LmdbStore in a temp dir.
#include "lobby/commands/interpreter.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "keys/token.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/session.h"

namespace warren {
namespace {

using nlohmann::json;

// Real keys from ssh-keygen -t ed25519.
constexpr const char* kRootKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";
constexpr const char* kAliceKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpiw2c40u05jE00mSRp+vT+DI/HeS0e/0O9x2wN8yM9 "
    "alice@laptop";
constexpr const char* kSpareKey1 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDbbPlBfGYaQt+zr9VA/N2mX27hzc2HU3Bzwietym5w5 "
    "alice@desktop";
constexpr const char* kSpareKey2 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 ci key";
constexpr const char* kSpareKey3 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOmLQ1xSw+ofsSpTrzqQ4rQXs+kAW07GZyFe/Rq0hEl bob@host";

constexpr int64_t kStart = 1'700'000'000;
constexpr int64_t kHour = 3600;

class FakeClock final : public Clock {
 public:
  int64_t NowUnix() const override { return now.load(); }
  std::atomic<int64_t> now{kStart};
};

// Wraps the real store and fails on demand, as leveldb's SpecialEnv does for files.
class FaultyStore final : public Store {
 public:
  explicit FaultyStore(Store* real) : real_(real) {}
  bool throw_on_list_keys = false;
  bool unavailable_on_list_keys = false;

  Status CreateUser(const User& u, const std::vector<SshKey>& k) override {
    return real_->CreateUser(u, k);
  }
  Result<User> GetUser(std::string_view n) override { return real_->GetUser(n); }
  Result<std::vector<User>> ListUsers() override { return real_->ListUsers(); }
  Status DeleteUser(std::string_view n) override { return real_->DeleteUser(n); }
  Status AddKey(const SshKey& k) override { return real_->AddKey(k); }
  Result<SshKey> GetKey(std::string_view fp) override { return real_->GetKey(fp); }
  Result<std::vector<SshKey>> ListKeys(std::string_view u) override {
    if (throw_on_list_keys) throw std::runtime_error("injected failure");
    if (unavailable_on_list_keys) return Unavailable("injected: store offline");
    return real_->ListKeys(u);
  }
  Status RemoveKey(std::string_view u, std::string_view fp) override {
    return real_->RemoveKey(u, fp);
  }
  Status RenameKey(std::string_view u, std::string_view fp, std::string_view n) override {
    return real_->RenameKey(u, fp, n);
  }
  Status TouchKey(std::string_view fp, int64_t t) override { return real_->TouchKey(fp, t); }
  Result<TokenLabel> RecordToken(std::string_view u, std::string_view n, std::string_view id,
                                 const IssuedToken& t, int64_t now) override {
    return real_->RecordToken(u, n, id, t, now);
  }
  Result<TokenLabel> GetTokenLabel(std::string_view id) override {
    return real_->GetTokenLabel(id);
  }
  Result<std::vector<TokenLabel>> ListTokenLabels(std::string_view u) override {
    return real_->ListTokenLabels(u);
  }
  Status RemoveTokenLabel(std::string_view u, std::string_view id) override {
    return real_->RemoveTokenLabel(u, id);
  }
  Status RenameTokenLabel(std::string_view u, std::string_view id, std::string_view n) override {
    return real_->RenameTokenLabel(u, id, n);
  }
  Status TouchTokenLabel(std::string_view id, int64_t t) override {
    return real_->TouchTokenLabel(id, t);
  }
  Status CreateVm(const VmRecord& vm) override { return real_->CreateVm(vm); }
  Result<VmRecord> GetVm(std::string_view id) override { return real_->GetVm(id); }
  Result<VmRecord> GetVmByName(std::string_view n) override { return real_->GetVmByName(n); }
  Result<std::vector<VmRecord>> ListVms() override { return real_->ListVms(); }
  Status UpdateVm(std::string_view id, const std::function<Status(VmRecord&)>& f) override {
    return real_->UpdateVm(id, f);
  }
  Status RenameVm(std::string_view id, std::string_view n) override {
    return real_->RenameVm(id, n);
  }
  Status DeleteVm(std::string_view id) override { return real_->DeleteVm(id); }
  Status PutJob(const JobRecord& j) override { return real_->PutJob(j); }
  Result<JobRecord> GetJob(std::string_view vm, std::string_view j) override {
    return real_->GetJob(vm, j);
  }
  Result<std::vector<JobRecord>> ListJobs(std::string_view vm) override {
    return real_->ListJobs(vm);
  }
  Status UpdateJob(std::string_view vm, std::string_view j,
                   const std::function<Status(JobRecord&)>& f) override {
    return real_->UpdateJob(vm, j, f);
  }
  Status DeleteJob(std::string_view vm, std::string_view j) override {
    return real_->DeleteJob(vm, j);
  }

 private:
  Store* real_;
};

std::string Fingerprint(const char* line) {
  Result<PublicKey> pk = ParseAuthorizedKey(line);
  EXPECT_TRUE(pk.ok()) << pk.status().ToString();
  return pk.ok() ? pk->fingerprint : "";
}

std::string Blob(const char* line) {
  Result<PublicKey> pk = ParseAuthorizedKey(line);
  return pk.ok() ? pk->blob_base64 : "";
}

SshKey KeyRecord(const char* line, const std::string& user, const std::string& name) {
  PublicKey pk = ParseAuthorizedKey(line).value();
  SshKey k;
  k.fingerprint = pk.fingerprint;
  k.user = user;
  k.name = name;
  k.algorithm = pk.algorithm;
  k.blob_base64 = pk.blob_base64;
  k.comment = pk.comment;
  k.added_at = kStart;
  return k;
}

struct Outcome {
  std::string out;
  std::string err;
  Status status;
  int exit_status = -1;

  json Json() const { return json::parse(out); }
};

class InterpreterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-commands-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto opened = LmdbStore::Open(dir_ + "/store");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    real_store_ = std::move(opened).value();
    store_ = std::make_unique<FaultyStore>(real_store_.get());
    Services services;
    services.store = store_.get();
    services.clock = &clock_;
    services.info.ssh_host = "warren.test";
    services.info.ssh_port = 2222;
    services.token_signer = &signer_;
    services.on_command = [this](const CommandEvent& e) {
      std::lock_guard lock(events_mu_);
      events_.push_back(std::string(e.path) + "/" + std::string(e.surface) + "/" +
                        std::string(CodeName(e.code)));
    };
    interpreter_ = std::make_unique<Interpreter>(services);

    ASSERT_TRUE(
        real_store_->CreateUser({"root", true, kStart}, {KeyRecord(kRootKey, "root", "root-key")})
            .ok());
    ASSERT_TRUE(
        real_store_->CreateUser({"alice", false, kStart}, {KeyRecord(kAliceKey, "alice", "laptop")})
            .ok());
  }

  void TearDown() override {
    interpreter_.reset();
    store_.reset();
    real_store_.reset();
    std::filesystem::remove_all(dir_);
  }

  Caller As(const char* key_line, const std::string& surface = "ssh") {
    Result<Caller> c = CallerForKey(*store_, clock_, Fingerprint(key_line), surface);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? c.value() : Caller{};
  }

  Outcome Exec(const Caller& caller, std::vector<std::string> argv, std::string in = "") {
    return Run(
        caller,
        [&](CommandSession& s) {
          s.argv = std::move(argv);
          interpreter_->Execute(s);
        },
        std::move(in));
  }

  Outcome Line(const Caller& caller, std::string_view line, std::string in = "") {
    return Run(
        caller, [&](CommandSession& s) { interpreter_->ExecuteLine(s, line); }, std::move(in));
  }

  template <typename F>
  Outcome Run(const Caller& caller, F body, std::string in) {
    StringInput input(std::move(in));
    StringSink out, err;
    CommandSession s;
    s.caller = caller;
    s.in = &input;
    s.out = &out;
    s.err = &err;
    body(s);
    return {out.str(), err.str(), s.status, s.exit_status};
  }

  // Adds a key to alice's account through the command itself and returns a caller for it.
  Caller AliceKeyWith(const char* key_line, std::vector<std::string> flags) {
    std::vector<std::string> argv = {"ssh-key", "add", key_line};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Outcome o = Exec(As(kAliceKey), argv);
    EXPECT_TRUE(o.status.ok()) << o.err;
    return As(key_line);
  }

  // Mints an API token as `caller` with `flags`; "" (and a test failure) when refused.
  std::string MintToken(const Caller& caller, std::vector<std::string> flags) {
    std::vector<std::string> argv = {"ssh-key", "generate-api-key"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--json");
    Outcome o = Exec(caller, argv);
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    return o.status.ok() ? o.Json()["token"].get<std::string>() : "";
  }

  // A session writing to `out` and `err`, as a surface builds one.
  static CommandSession Session(const Caller& caller, StringSink& out, StringSink& err) {
    CommandSession s;
    s.caller = caller;
    s.out = &out;
    s.err = &err;
    return s;
  }

  Caller ForToken(const std::string& token) {
    Result<Caller> c = interpreter_->CallerForToken(token, "exec");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? c.value() : Caller{};
  }

  std::string dir_;
  FakeClock clock_;
  TokenSigner signer_ = TokenSigner::FromSecret(std::string(32, 's')).value();
  std::mutex events_mu_;
  std::vector<std::string> events_;
  std::unique_ptr<LmdbStore> real_store_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<Interpreter> interpreter_;
};

// --- dispatch, parsing, rendering ------------------------------------------------------

TEST_F(InterpreterTest, WhoamiShowsUserAndKeyInUse) {
  Outcome o = Exec(As(kAliceKey), {"whoami"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.exit_status, 0);
  EXPECT_EQ(o.err, "");
  EXPECT_NE(o.out.find("alice"), std::string::npos);
  EXPECT_NE(o.out.find("laptop"), std::string::npos);
  EXPECT_NE(o.out.find(Fingerprint(kAliceKey)), std::string::npos);
  EXPECT_EQ(o.out.back(), '\n');
}

TEST_F(InterpreterTest, WhoamiJsonMarksTheKeyInUse) {
  Caller desktop = AliceKeyWith(kSpareKey1, {});
  Outcome o = Exec(desktop, {"whoami", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["admin"], false);
  EXPECT_EQ(j["credential"], "key:" + Fingerprint(kSpareKey1));
  ASSERT_EQ(j["keys"].size(), 2u);
  for (const json& k : j["keys"]) {
    EXPECT_EQ(k["in_use"], k["fingerprint"] == Fingerprint(kSpareKey1)) << k.dump();
    EXPECT_FALSE(k.contains("blob_base64"));
  }
}

TEST_F(InterpreterTest, EmptyArgvIsInvalid) {
  Outcome o = Exec(As(kAliceKey), {});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kInvalidArgument));
  EXPECT_NE(o.err.find("error: no command given"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, UnknownCommandIsNotFoundWithHint) {
  Outcome o = Exec(As(kAliceKey), {"frobnicate"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kNotFound));
  EXPECT_EQ(o.err, "error: unknown command \"frobnicate\"; try help\n");
  EXPECT_EQ(o.out, "");
}

TEST_F(InterpreterTest, UnknownCommandSuggestsACloseName) {
  Outcome o = Exec(As(kAliceKey), {"whomai"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_NE(o.err.find("did you mean \"whoami\""), std::string::npos) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "lst"});
  EXPECT_NE(o.err.find("unknown command \"ssh-key lst\""), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("did you mean \"ssh-key list\""), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("try help ssh-key"), std::string::npos) << o.err;
  // Hidden commands are not suggested to those who cannot run them.
  o = Exec(As(kAliceKey), {"user", "lss"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(o.err.find("did you mean"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, UnknownFlagIsInvalidArgument) {
  Outcome o = Exec(As(kAliceKey), {"whoami", "--frob"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(o.exit_status, 2);
  EXPECT_NE(o.err.find("--frob"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("whoami --help"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, ExtraPositionalsAreInvalid) {
  for (std::vector<std::string> argv : {std::vector<std::string>{"whoami", "extra"},
                                        {"ssh-key", "list", "x"},
                                        {"ssh-key", "remove", "a", "b"},
                                        {"ssh-key", "rename", "a", "b", "c"}}) {
    Outcome o = Exec(As(kAliceKey), argv);
    EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << argv[0] << " " << o.err;
  }
}

TEST_F(InterpreterTest, MissingRequiredArgumentIsInvalid) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "remove"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("KEY"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, HelpFlagPrintsTheCommandsHelp) {
  Outcome flag = Exec(As(kAliceKey), {"ssh-key", "add", "--help"});
  ASSERT_TRUE(flag.status.ok()) << flag.err;
  EXPECT_EQ(flag.exit_status, 0);
  EXPECT_NE(flag.out.find("usage: ssh-key add [KEY…] [flags]"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("--name NAME"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("--cmds LIST"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("--json"), std::string::npos) << flag.out;
  Outcome shorter = Exec(As(kAliceKey), {"ssh-key", "add", "-h"});
  EXPECT_EQ(shorter.out, flag.out);
  Outcome help = Exec(As(kAliceKey), {"help", "ssh-key", "add"});
  EXPECT_EQ(help.out, flag.out);
  // --help wins over missing required arguments.
  Outcome rm = Exec(As(kAliceKey), {"ssh-key", "remove", "--help"});
  EXPECT_TRUE(rm.status.ok()) << rm.err;
}

TEST_F(InterpreterTest, HelpListsCommandsGrouped) {
  Outcome o = Exec(As(kRootKey), {"help"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  for (const char* s : {"whoami", "ssh-key list", "ssh-key add", "ssh-key remove", "ssh-key rename",
                        "user add", "user ls", "user rm", "ssh-key: ", "ssh -p 2222 warren.test"}) {
    EXPECT_NE(o.out.find(s), std::string::npos) << s << "\n" << o.out;
  }
}

TEST_F(InterpreterTest, HelpHidesAdminCommandsFromOthers) {
  Outcome o = Exec(As(kAliceKey), {"help"});
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.out.find("user add"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ssh-key add"), std::string::npos);
  Outcome one = Exec(As(kAliceKey), {"help", "user", "add"});
  EXPECT_EQ(one.status.code(), Code::kPermissionDenied);
}

TEST_F(InterpreterTest, HelpJsonDescribesCommandsAndFlags) {
  Outcome o = Exec(As(kRootKey), {"help", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  ASSERT_TRUE(j["commands"].is_array());
  bool saw_add = false, saw_user_add = false;
  for (const json& c : j["commands"]) {
    for (const char* field : {"path", "summary", "usage", "read_only", "admin_only", "flags"}) {
      EXPECT_TRUE(c.contains(field)) << field << " in " << c.dump();
    }
    if (c["path"] == "ssh-key add") {
      saw_add = true;
      EXPECT_EQ(c["read_only"], false);
      std::vector<std::string> names;
      for (const json& f : c["flags"]) {
        EXPECT_TRUE(f.contains("description"));
        names.push_back(f["name"]);
      }
      for (const char* want : {"--name", "--cmds", "--tag", "--exp", "--json", "--help"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
      }
    }
    if (c["path"] == "user add") {
      saw_user_add = true;
      EXPECT_EQ(c["admin_only"], true);
    }
    if (c["path"] == "ssh-key list") {
      EXPECT_EQ(c["read_only"], true);
    }
  }
  EXPECT_TRUE(saw_add);
  EXPECT_TRUE(saw_user_add);

  json alice = Exec(As(kAliceKey), {"help", "--json"}).Json();
  for (const json& c : alice["commands"]) EXPECT_EQ(c["admin_only"], false) << c["path"];
}

TEST_F(InterpreterTest, HelpJsonCarriesTheErrorModel) {
  Outcome o = Exec(As(kAliceKey), {"help", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  json errors = o.Json()["errors"];
  ASSERT_TRUE(errors.is_array());
  EXPECT_EQ(errors.size(), ErrorMappings().size());
  bool found = false;
  for (const json& e : errors) {
    if (e["code"] != "not_found") continue;
    found = true;
    EXPECT_EQ(e["exit_status"], ExitStatusFor(Code::kNotFound));
    EXPECT_EQ(e["http_status"], 404);
  }
  EXPECT_TRUE(found) << errors.dump();
}

TEST_F(InterpreterTest, GroupWordAloneShowsGroupHelp) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("ssh-key list"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ssh-key rename"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("whoami"), std::string::npos) << o.out;
  json j = Exec(As(kAliceKey), {"ssh-key", "--json"}).Json();
  EXPECT_EQ(j["commands"].size(), 5u);  // list, add, remove, rename, generate-api-key
  // A non-admin asking for the user group learns it is closed to them.
  EXPECT_EQ(Exec(As(kAliceKey), {"user"}).status.code(), Code::kPermissionDenied);
}

TEST_F(InterpreterTest, JsonErrorShape) {
  Outcome o = Exec(As(kAliceKey), {"frob", "--json"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(o.err, "");
  json j = o.Json();
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 1u);
  EXPECT_NE(j["error"].get<std::string>().find("unknown command"), std::string::npos);

  // Even a parse failure answers in JSON when --json was asked for.
  o = Exec(As(kAliceKey), {"whoami", "--json", "--bogus"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(o.Json().contains("error"));

  o = Exec(As(kAliceKey), {"user", "ls", "--json"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kPermissionDenied));
  EXPECT_TRUE(o.Json().contains("error"));
}

TEST_F(InterpreterTest, ExitStatusesComeFromTheErrorMap) {
  Caller alice = As(kAliceKey);
  struct Case {
    std::vector<std::string> argv;
    Code code;
  };
  std::vector<Case> cases = {
      {{"whoami"}, Code::kOk},
      {{"whoami", "--nope"}, Code::kInvalidArgument},
      {{"user", "ls"}, Code::kPermissionDenied},
      {{"nope"}, Code::kNotFound},
      {{"ssh-key", "remove", "laptop"}, Code::kConflict},
  };
  for (const Case& c : cases) {
    Outcome o = Exec(alice, c.argv);
    EXPECT_EQ(o.status.code(), c.code) << c.argv[0] << ": " << o.err;
    EXPECT_EQ(o.exit_status, ExitStatusFor(c.code)) << c.argv[0];
  }
  Outcome big = Line(alice, std::string(1 << 20, 'a'));
  EXPECT_EQ(big.status.code(), Code::kTooLarge);
  EXPECT_EQ(big.exit_status, ExitStatusFor(Code::kTooLarge));
}

TEST_F(InterpreterTest, ExecuteLineTokenizes) {
  Caller alice = As(kAliceKey);
  Outcome o = Line(alice, "ssh-key rename laptop 'work laptop'");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("key name \"work laptop\" is not valid"), std::string::npos) << o.err;
  o = Line(alice, "ssh-key rename \"laptop\" work-laptop");
  EXPECT_TRUE(o.status.ok()) << o.err;
  o = Line(alice, "whoami 'unterminated");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("unterminated single quote"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, MegabyteLineIsTooLarge) {
  Outcome o = Line(As(kAliceKey), "ssh-key add " + std::string(1 << 20, 'A'));
  EXPECT_EQ(o.status.code(), Code::kTooLarge);
  EXPECT_EQ(o.exit_status, 8);
  EXPECT_LT(o.err.size(), 200u);
}

TEST_F(InterpreterTest, HandlerExceptionBecomesInternal) {
  store_->throw_on_list_keys = true;
  Outcome o = Exec(As(kAliceKey), {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kInternal);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kInternal));
  EXPECT_NE(o.err.find("internal error"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("injected"), std::string::npos) << "internals leak: " << o.err;
}

TEST_F(InterpreterTest, StoreErrorsKeepTheirCode) {
  store_->unavailable_on_list_keys = true;
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "list"});
  EXPECT_EQ(o.status.code(), Code::kUnavailable);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kUnavailable));
}

TEST_F(InterpreterTest, CancelledSessionDoesNotRun) {
  StringInput in("");
  StringSink out, err;
  CommandSession s;
  s.caller = As(kAliceKey);
  s.in = &in;
  s.out = &out;
  s.err = &err;
  s.argv = {"whoami"};
  s.cancel->Cancel();
  interpreter_->Execute(s);
  EXPECT_EQ(s.status.code(), Code::kCancelled);
  EXPECT_EQ(out.str(), "");
}

TEST_F(InterpreterTest, NullStreamsAreTolerated) {
  CommandSession s;
  s.caller = As(kAliceKey);
  s.argv = {"ssh-key", "add"};  // reads stdin: there is none, so no key
  interpreter_->Execute(s);
  EXPECT_EQ(s.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.in, nullptr);
}

// --- credentials and permissions -------------------------------------------------------

TEST_F(InterpreterTest, CallerForKeyChecksAndTouches) {
  Result<Caller> unknown = CallerForKey(*store_, clock_, Fingerprint(kSpareKey3), "ssh");
  EXPECT_EQ(unknown.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(unknown.status().message(), "unknown key");

  clock_.now = kStart + 50;
  Caller root = As(kRootKey, "repl");
  EXPECT_EQ(root.user, "root");
  EXPECT_TRUE(root.admin);
  EXPECT_EQ(root.credential, "key:" + Fingerprint(kRootKey));
  EXPECT_EQ(root.key_fingerprint, Fingerprint(kRootKey));
  EXPECT_EQ(root.surface, "repl");
  EXPECT_TRUE(root.scope.Unrestricted());
  EXPECT_EQ(store_->GetKey(Fingerprint(kRootKey))->last_used_at, kStart + 50);
}

TEST_F(InterpreterTest, AdminOnlyCommandsAreRefused) {
  for (std::vector<std::string> argv : {std::vector<std::string>{"user", "ls"},
                                        {"user", "add", "bob", "--key", kSpareKey3},
                                        {"user", "rm", "root"}}) {
    Outcome o = Exec(As(kAliceKey), argv);
    EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << o.err;
    EXPECT_NE(o.err.find("admins only"), std::string::npos) << o.err;
  }
  EXPECT_FALSE(store_->GetUser("bob").ok());
}

TEST_F(InterpreterTest, ExpiredKeyIsRefused) {
  Caller shortlived = AliceKeyWith(kSpareKey1, {"--exp", "1h"});
  EXPECT_TRUE(Exec(shortlived, {"whoami"}).status.ok());
  clock_.now = kStart + 2 * kHour;
  // An open session notices on its next command...
  Outcome o = Exec(shortlived, {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kUnauthenticated));
  EXPECT_NE(o.err.find("expired"), std::string::npos) << o.err;
  // ...and a new one is refused at authentication.
  Result<Caller> again = CallerForKey(*store_, clock_, Fingerprint(kSpareKey1), "ssh");
  EXPECT_EQ(again.status().code(), Code::kUnauthenticated);
  // help is no way around expiry.
  EXPECT_EQ(Exec(shortlived, {"help"}).status.code(), Code::kUnauthenticated);
}

TEST_F(InterpreterTest, RemovedKeyIsRefusedOnTheNextCommand) {
  Caller laptop = As(kAliceKey);
  Caller desktop = AliceKeyWith(kSpareKey1, {"--name", "desktop"});
  ASSERT_TRUE(Exec(desktop, {"whoami"}).status.ok());
  Outcome rm = Exec(laptop, {"ssh-key", "remove", "desktop"});
  ASSERT_TRUE(rm.status.ok()) << rm.err;
  Outcome o = Exec(desktop, {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated);
  EXPECT_NE(o.err.find("removed"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, RemovedUserIsRefusedOnTheNextCommand) {
  ASSERT_TRUE(Exec(As(kRootKey), {"user", "add", "bob", "--key", kSpareKey3}).status.ok());
  Caller bob = As(kSpareKey3);
  ASSERT_TRUE(Exec(bob, {"whoami"}).status.ok());
  ASSERT_TRUE(Exec(As(kRootKey), {"user", "rm", "bob"}).status.ok());
  EXPECT_EQ(Exec(bob, {"whoami"}).status.code(), Code::kUnauthenticated);
}

TEST_F(InterpreterTest, CmdsRestrictedCallerRunsOnlyItsCommands) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--cmds", "whoami,ssh-key add"});
  EXPECT_TRUE(Exec(agent, {"whoami"}).status.ok());
  Outcome o = Exec(agent, {"ssh-key", "list"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("whoami, ssh-key add"), std::string::npos) << o.err;
  EXPECT_EQ(Exec(agent, {"ssh-key", "remove", "laptop"}).status.code(), Code::kPermissionDenied);
  // help always runs, and lists only what the key may do.
  Outcome help = Exec(agent, {"help"});
  ASSERT_TRUE(help.status.ok()) << help.err;
  EXPECT_NE(help.out.find("may run only: whoami, ssh-key add"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("ssh-key list"), std::string::npos) << help.out;
  json j = Exec(agent, {"help", "--json"}).Json();
  std::vector<std::string> paths;
  for (const json& c : j["commands"]) paths.push_back(c["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"help", "whoami", "ssh-key add"}));
}

TEST_F(InterpreterTest, RestrictedCallerCannotAddAWiderKey) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--cmds", "whoami,ssh-key add"});
  // Wider commands.
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--cmds", "whoami,ssh-key list"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("a restricted key can only add narrower keys"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("ssh-key list"), std::string::npos) << o.err;
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey2)).ok());
  // Narrower commands are fine.
  o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--cmds", "whoami"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey2))->scope.cmds,
            (std::vector<std::string>{"whoami"}));
}

TEST_F(InterpreterTest, RestrictedCallerWithoutFlagsInheritsItsLimits) {
  Caller agent =
      AliceKeyWith(kSpareKey1, {"--cmds", "whoami,ssh-key", "--tag", "ci", "--exp", "30d"});
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2});
  ASSERT_TRUE(o.status.ok()) << o.err;
  Scope child = store_->GetKey(Fingerprint(kSpareKey2))->scope;
  EXPECT_EQ(child, agent.scope);
  EXPECT_EQ(child.tag, "ci");
  EXPECT_EQ(child.expires_at, kStart + 30 * 24 * kHour);
}

TEST_F(InterpreterTest, TagRestrictedCallerCannotDropOrChangeItsTag) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--tag", "ci"});
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--tag", "prod"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("keep the tag \"ci\""), std::string::npos) << o.err;
  // A tag-limited key cannot remove its owner's unrestricted key either.
  o = Exec(agent, {"ssh-key", "remove", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  EXPECT_NE(o.err.find("narrower"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, ExpiringCallerCannotAddALongerLivedKey) {
  Caller agent = AliceKeyWith(kSpareKey1, {"--exp", "7d"});
  for (const char* exp : {"never", "30d", "1y"}) {
    Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--exp", exp});
    EXPECT_EQ(o.status.code(), Code::kPermissionDenied) << exp;
    EXPECT_NE(o.err.find("must expire by"), std::string::npos) << o.err;
  }
  Outcome o = Exec(agent, {"ssh-key", "add", kSpareKey2, "--exp", "1d"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey2))->scope.expires_at, kStart + 24 * kHour);
}

TEST_F(InterpreterTest, RestrictedAdminCannotCreateAnAdmin) {
  Outcome add = Exec(As(kRootKey), {"ssh-key", "add", kSpareKey1, "--cmds", "user"});
  ASSERT_TRUE(add.status.ok()) << add.err;
  Caller limited = As(kSpareKey1);
  Outcome o = Exec(limited, {"user", "add", "bob", "--admin", "--key", kSpareKey3});
  EXPECT_EQ(o.status.code(), Code::kPermissionDenied);
  o = Exec(limited, {"user", "add", "bob", "--key", kSpareKey3});
  EXPECT_TRUE(o.status.ok()) << o.err;
}

// --- ssh-key ---------------------------------------------------------------------------

TEST_F(InterpreterTest, SshKeyAddFromSplitArgumentWords) {
  // `ssh HOST ssh-key add ssh-ed25519 AAAA… alice@desktop` arrives as separate words.
  Outcome o = Line(As(kAliceKey), std::string("ssh-key add ") + kSpareKey1);
  ASSERT_TRUE(o.status.ok()) << o.err;
  Result<SshKey> key = store_->GetKey(Fingerprint(kSpareKey1));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->user, "alice");
  EXPECT_EQ(key->name, "alice@desktop");  // from the comment
  EXPECT_EQ(key->comment, "alice@desktop");
  EXPECT_EQ(key->algorithm, "ssh-ed25519");
  EXPECT_EQ(key->added_at, kStart);
  EXPECT_TRUE(key->scope.Unrestricted());
  EXPECT_NE(o.out.find("added key alice@desktop"), std::string::npos) << o.out;
}

TEST_F(InterpreterTest, SshKeyAddFromStdin) {
  std::string in = std::string("# my CI key\n\n") + kSpareKey2 + "\n";
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "add", "--json"}, in);
  ASSERT_TRUE(o.status.ok()) << o.out;
  json j = o.Json();
  EXPECT_EQ(j["key"]["fingerprint"], Fingerprint(kSpareKey2));
  // "ci key" is not a valid name, so the key gets the first free key-N.
  EXPECT_EQ(j["key"]["name"], "key-2");
  EXPECT_EQ(j["key"]["in_use"], false);
}

TEST_F(InterpreterTest, SshKeyAddValidates) {
  Caller alice = As(kAliceKey);
  Outcome o = Exec(alice, {"ssh-key", "add", "ssh-ed25519", "AAAAnotakey"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_GT(o.err.size(), std::string("error: \n").size()) << o.err;

  o = Exec(alice, {"ssh-key", "add"}, "");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("no key given"), std::string::npos) << o.err;

  o = Exec(alice, {"ssh-key", "add"},
           "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
           "-----END OPENSSH PRIVATE KEY-----\n");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("private key"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("b3BlbnNzaC1"), std::string::npos) << o.err;

  o = Exec(alice, {"ssh-key", "add"}, std::string(kSpareKey1) + "\n" + kSpareKey2 + "\n");
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("one key at a time"), std::string::npos) << o.err;

  o = Exec(alice, {"ssh-key", "add"}, std::string(20 * 1024, 'A'));
  EXPECT_EQ(o.status.code(), Code::kTooLarge);

  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "bad name!"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "-x"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--cmds", "lss"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_NE(o.err.find("unknown command \"lss\""), std::string::npos) << o.err;
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--tag", "Bad"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--exp", "soon"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->ListKeys("alice")->size(), 1u);
}

TEST_F(InterpreterTest, SshKeyAddConflicts) {
  Caller alice = As(kAliceKey);
  Outcome o = Exec(alice, {"ssh-key", "add", kAliceKey});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_NE(o.err.find("already on your account as \"laptop\""), std::string::npos) << o.err;
  o = Exec(alice, {"ssh-key", "add", kRootKey});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(o.err.find("root"), std::string::npos) << "names another account: " << o.err;
  o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kConflict));
}

TEST_F(InterpreterTest, SshKeyListShowsKeys) {
  Caller alice = As(kAliceKey);
  clock_.now = kStart + 10;  // listed by time added
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "ci", "--cmds", "whoami",
                           "--exp", "30d"})
                  .status.ok());
  Outcome o = Exec(alice, {"ssh-key", "list"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("laptop"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("cmds: whoami; expires"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("* the key you are using"), std::string::npos) << o.out;
  json j = Exec(alice, {"ssh-key", "list", "--json"}).Json();
  ASSERT_EQ(j["keys"].size(), 2u);
  EXPECT_EQ(j["keys"][0]["name"], "laptop");
  EXPECT_EQ(j["keys"][0]["in_use"], true);
  EXPECT_EQ(j["keys"][1]["name"], "ci");
  EXPECT_EQ(j["keys"][1]["restrictions"]["cmds"], json::array({"whoami"}));
  EXPECT_EQ(j["keys"][1]["restrictions"]["expires_at"], kStart + 10 + 30 * 24 * kHour);
  EXPECT_EQ(j["keys"][0]["last_used_at"], kStart);  // touched by As()
  // Only the caller's own keys.
  json root = Exec(As(kRootKey), {"ssh-key", "list", "--json"}).Json();
  ASSERT_EQ(root["keys"].size(), 1u);
  EXPECT_EQ(root["keys"][0]["name"], "root-key");
}

TEST_F(InterpreterTest, SshKeyRemoveByNameOrFingerprint) {
  Caller alice = As(kAliceKey);
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "one"}).status.ok());
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey2, "--name", "two"}).status.ok());
  Outcome o = Exec(alice, {"ssh-key", "remove", "one"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey1)).ok());
  o = Exec(alice, {"ssh-key", "remove", Fingerprint(kSpareKey2), "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["removed"]["name"], "two");
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey2)).ok());
  o = Exec(alice, {"ssh-key", "remove", "nope"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  // Another user's key is "not found", not removable.
  o = Exec(alice, {"ssh-key", "remove", Fingerprint(kRootKey)});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetKey(Fingerprint(kRootKey)).ok());
}

TEST_F(InterpreterTest, SshKeyRemoveRefusesTheKeyInUse) {
  Caller alice = As(kAliceKey);
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1}).status.ok());
  Outcome o = Exec(alice, {"ssh-key", "remove", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_NE(o.err.find("the key you are using"), std::string::npos) << o.err;
  EXPECT_TRUE(store_->GetKey(Fingerprint(kAliceKey)).ok());
}

TEST_F(InterpreterTest, SshKeyRemoveRefusesTheLastKey) {
  // A caller without a key in use (a token, later) must not lock the account either.
  Caller token = As(kAliceKey);
  token.key_fingerprint.clear();
  token.credential = "token:test";
  Outcome o = Exec(token, {"ssh-key", "remove", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  EXPECT_NE(o.err.find("last key"), std::string::npos) << o.err;
}

TEST_F(InterpreterTest, SshKeyRename) {
  Caller alice = As(kAliceKey);
  ASSERT_TRUE(Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "old"}).status.ok());
  Outcome o = Exec(alice, {"ssh-key", "rename", "old", "new.name@x", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["key"]["name"], "new.name@x");
  EXPECT_EQ(o.Json()["old_name"], "old");
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey1))->name, "new.name@x");
  // By fingerprint, and the key in use may be renamed.
  o = Exec(alice, {"ssh-key", "rename", Fingerprint(kAliceKey), "work"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(store_->GetKey(Fingerprint(kAliceKey))->name, "work");
  o = Exec(alice, {"ssh-key", "rename", "work", "new.name@x"});
  EXPECT_EQ(o.status.code(), Code::kConflict);
  o = Exec(alice, {"ssh-key", "rename", "missing", "x"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  o = Exec(alice, {"ssh-key", "rename", "work", "bad/name"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument);
}

// --- user ------------------------------------------------------------------------------

TEST_F(InterpreterTest, UserAddLsRm) {
  Caller root = As(kRootKey);
  Outcome o = Exec(root, {"user", "add", "bob", "--key", kSpareKey3});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("ssh -p 2222 warren.test"), std::string::npos) << o.out;
  Result<User> bob = store_->GetUser("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_FALSE(bob->admin);
  EXPECT_EQ(bob->created_at, kStart);
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3))->user, "bob");
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3))->name, "bob@host");
  EXPECT_EQ(As(kSpareKey3).user, "bob");

  o = Exec(root, {"user", "add", "carol", "--admin"}, std::string(kSpareKey2) + "\n");
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_TRUE(store_->GetUser("carol")->admin);

  o = Exec(root, {"user", "ls", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  json users = o.Json()["users"];
  ASSERT_EQ(users.size(), 4u);
  EXPECT_EQ(users[0]["name"], "alice");
  EXPECT_EQ(users[1]["name"], "bob");
  EXPECT_EQ(users[1]["keys"], 1);
  EXPECT_EQ(users[2]["admin"], true);
  EXPECT_EQ(users[2]["created_at"], kStart);
  Outcome text = Exec(root, {"user", "ls"});
  EXPECT_NE(text.out.find("NAME"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("carol"), std::string::npos) << text.out;

  o = Exec(root, {"user", "rm", "bob"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(o.out.find("removed user bob and 1 key"), std::string::npos) << o.out;
  EXPECT_FALSE(store_->GetUser("bob").ok());
  EXPECT_EQ(store_->GetKey(Fingerprint(kSpareKey3)).status().code(), Code::kNotFound);
}

TEST_F(InterpreterTest, UserCommandsValidate) {
  Caller root = As(kRootKey);
  EXPECT_EQ(Exec(root, {"user", "add", "Bob", "--key", kSpareKey3}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "1bob", "--key", kSpareKey3}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", std::string(33, 'b'), "--key", kSpareKey3}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "bob"}).status.code(), Code::kInvalidArgument);  // no key
  EXPECT_EQ(Exec(root, {"user", "add", "bob", "--key", "ssh-ed25519 junk"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(root, {"user", "add", "alice", "--key", kSpareKey3}).status.code(),
            Code::kConflict);
  EXPECT_EQ(Exec(root, {"user", "add", "bob", "--key", kAliceKey}).status.code(), Code::kConflict);
  EXPECT_FALSE(store_->GetUser("bob").ok());

  Outcome self = Exec(root, {"user", "rm", "root"});
  EXPECT_EQ(self.status.code(), Code::kConflict);
  EXPECT_NE(self.err.find("yourself"), std::string::npos) << self.err;
  EXPECT_EQ(Exec(root, {"user", "rm", "nobody"}).status.code(), Code::kNotFound);
  EXPECT_EQ(Exec(root, {"user", "rm", "alice", "extra"}).status.code(), Code::kInvalidArgument);
}

// --- concurrency ---------------------------------------------------------------------

TEST_F(InterpreterTest, ConcurrentSessionsShareOneInterpreter) {
  Caller alice = As(kAliceKey);
  Caller root = As(kRootKey);
  std::atomic<int> failures{0};
  testing::internal::CaptureStderr();  // 400 audit lines
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        Outcome o = t % 2 ? Exec(alice, {"whoami", "--json"}) : Exec(root, {"help", "--json"});
        if (!o.status.ok() || !json::accept(o.out)) ++failures;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(failures.load(), 0);
}

// --- fixture commands: results only future commands produce ----------------------------

// Stands in for `ssh VM CMD`: output, then the remote command's exit status.
class ExitCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    ctx.audit_vm = "web-1";
    if (!ctx.json) ctx.session.out->Write("progress: starting\n");
    CommandResult r;
    r.text = "remote output";
    r.data = {{"stdout", "remote output"}, {"exit_code", 3}};
    r.exit_status = 3;
    return r;
  }
};

class ThrowCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext&) override { throw std::logic_error("boom"); }
};

class FixtureTest : public InterpreterTest {
 protected:
  void SetUp() override {
    InterpreterTest::SetUp();
    auto table = std::make_unique<CommandTable>();
    RegisterBuiltinCommands(*table);
    table->Add({.path = "fixture exit", .summary = "exits 3", .make = [] {
                  return std::make_unique<ExitCommand>();
                }});
    table->Add({.path = "fixture throw", .summary = "throws", .make = [] {
                  return std::make_unique<ThrowCommand>();
                }});
    Services services;
    services.store = store_.get();
    services.clock = &clock_;
    interpreter_ = std::make_unique<Interpreter>(services, std::move(table));
  }
};

TEST_F(FixtureTest, CommandFailedCarriesItsOwnExitStatusAndOutput) {
  testing::internal::CaptureStderr();
  Outcome o = Exec(As(kAliceKey), {"fixture", "exit"});
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.status.code(), Code::kCommandFailed);
  EXPECT_EQ(o.exit_status, 3);
  EXPECT_EQ(o.out, "progress: starting\nremote output\n");
  EXPECT_EQ(o.err, "");
  EXPECT_NE(log.find("audit cmd=\"fixture exit\" vm=web-1 "), std::string::npos) << log;
  EXPECT_NE(log.find("code=command_failed"), std::string::npos) << log;

  o = Exec(As(kAliceKey), {"fixture", "exit", "--json"});
  EXPECT_EQ(o.exit_status, 3);
  EXPECT_EQ(o.Json()["exit_code"], 3);
}

TEST_F(FixtureTest, ThrowingHandlerBecomesInternal) {
  Outcome o = Exec(As(kAliceKey), {"fixture", "throw", "--json"});
  EXPECT_EQ(o.status.code(), Code::kInternal);
  EXPECT_EQ(o.exit_status, ExitStatusFor(Code::kInternal));
  EXPECT_TRUE(o.Json().contains("error"));
  EXPECT_EQ(o.out.find("boom"), std::string::npos) << o.out;
}

// --- audit -----------------------------------------------------------------------------

TEST_F(InterpreterTest, AuditLineNamesTheCommandButNeverTheKey) {
  Caller alice = As(kAliceKey, "mcp");
  testing::internal::CaptureStderr();
  Outcome o = Exec(alice, {"ssh-key", "add", kSpareKey1, "--name", "desk"});
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_NE(log.find("audit cmd=\"ssh-key add\" caller=key:" + Fingerprint(kAliceKey) +
                     " user=alice surface=mcp code=ok dur_ms="),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(Blob(kSpareKey1)), std::string::npos) << log;
  EXPECT_EQ(log.find("desk"), std::string::npos) << "argv leaked: " << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;

  testing::internal::CaptureStderr();
  Exec(alice, {"user", "add", "bob", "--key", kSpareKey3});
  Line(alice, std::string("wr1.secret-token-pasted-as-a-command"));
  log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("audit cmd=\"user add\""), std::string::npos) << log;
  EXPECT_NE(log.find("code=permission_denied"), std::string::npos) << log;
  EXPECT_NE(log.find("audit cmd=- "), std::string::npos) << log;
  EXPECT_NE(log.find("code=not_found"), std::string::npos) << log;
  EXPECT_EQ(log.find(Blob(kSpareKey3)), std::string::npos) << log;
  EXPECT_EQ(log.find("secret-token"), std::string::npos) << log;
}

// --- API tokens ----------------------------------------------------------------------

TEST_F(InterpreterTest, GenerateApiKeyPrintsATokenThatAuthenticates) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "generate-api-key", "--label", "ci"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  std::string token = o.out.substr(0, o.out.find('\n'));
  EXPECT_TRUE(token.starts_with("wr1.")) << o.out;
  EXPECT_EQ(o.out, token + "\n");  // stdout is the token alone; the note is on stderr
  EXPECT_NE(o.err.find("ssh-key remove ci"), std::string::npos) << o.err;

  Caller caller = ForToken(token);
  EXPECT_EQ(caller.user, "alice");
  EXPECT_FALSE(caller.admin);
  EXPECT_TRUE(caller.credential.starts_with("token:")) << caller.credential;
  EXPECT_EQ(caller.credential, "token:" + caller.token_label_id);
  EXPECT_TRUE(caller.key_fingerprint.empty());
  Outcome who = Exec(caller, {"whoami", "--json"});
  ASSERT_TRUE(who.status.ok()) << who.out;
  EXPECT_EQ(who.Json()["user"], "alice");

  Outcome list = Exec(caller, {"ssh-key", "list", "--json"});
  ASSERT_TRUE(list.status.ok()) << list.out;
  json labels = list.Json()["api_tokens"];
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(labels[0]["label"], "ci");
  EXPECT_EQ(labels[0]["in_use"], true);
  EXPECT_EQ(list.out.find(token), std::string::npos);  // listings never show a token
}

TEST_F(InterpreterTest, TokensCarryTheirLimitsAndRestrictedCallersMintNarrowerOnly) {
  std::string token = MintToken(
      As(kAliceKey), {"--label", "ro", "--cmds", "whoami,ssh-key", "--tag", "ci", "--exp", "12h"});
  Caller caller = ForToken(token);
  EXPECT_EQ(caller.scope.cmds, (std::vector<std::string>{"whoami", "ssh-key"}));
  EXPECT_EQ(caller.scope.tag, "ci");
  EXPECT_EQ(caller.scope.expires_at, kStart + 12 * kHour);
  EXPECT_EQ(Exec(caller, {"ls"}).status.code(), Code::kPermissionDenied);

  // Leaving a flag out inherits it; asking for more is refused with the reason.
  std::string child = MintToken(caller, {"--label", "child"});
  Caller child_caller = ForToken(child);
  EXPECT_EQ(child_caller.scope, caller.scope);
  Outcome wider = Exec(caller, {"ssh-key", "generate-api-key", "--label", "w", "--cmds", "ls"});
  EXPECT_EQ(wider.status.code(), Code::kPermissionDenied);
  EXPECT_NE(wider.err.find("it would allow \"ls\""), std::string::npos) << wider.err;
  EXPECT_EQ(
      Exec(caller, {"ssh-key", "generate-api-key", "--label", "w", "--tag", "other"}).status.code(),
      Code::kPermissionDenied);
  EXPECT_EQ(
      Exec(caller, {"ssh-key", "generate-api-key", "--label", "w", "--exp", "never"}).status.code(),
      Code::kPermissionDenied);
  // A restricted token cannot remove a wider label; the owner's key can.
  MintToken(As(kAliceKey), {"--label", "wide"});
  EXPECT_EQ(Exec(caller, {"ssh-key", "remove", "wide"}).status.code(), Code::kPermissionDenied);
  EXPECT_TRUE(Exec(caller, {"ssh-key", "remove", "child"}).status.ok());
}

TEST_F(InterpreterTest, RemovingALabelRevokesItsTokensAtOnceAndANewOneRevivesNone) {
  std::string t1 = MintToken(As(kAliceKey), {"--label", "ci"});
  std::string t2 = MintToken(As(kAliceKey), {"--label", "ci"});
  Caller open_session = ForToken(t1);  // a caller built before the removal
  ASSERT_TRUE(Exec(open_session, {"whoami"}).status.ok());

  Outcome removed = Exec(As(kAliceKey), {"ssh-key", "remove", "ci", "--json"});
  ASSERT_TRUE(removed.status.ok()) << removed.out;
  EXPECT_EQ(removed.Json()["revoked_tokens"], 2);
  Outcome after = Exec(open_session, {"whoami"});
  EXPECT_EQ(after.status.code(), Code::kUnauthenticated);
  EXPECT_NE(after.err.find("revoked"), std::string::npos) << after.err;
  EXPECT_FALSE(interpreter_->CallerForToken(t2, "exec").ok());

  std::string t3 = MintToken(As(kAliceKey), {"--label", "ci"});
  EXPECT_TRUE(interpreter_->CallerForToken(t3, "exec").ok());
  EXPECT_FALSE(interpreter_->CallerForToken(t1, "exec").ok());
  EXPECT_FALSE(interpreter_->CallerForToken(t2, "exec").ok());
}

TEST_F(InterpreterTest, TokenExpiryTakesEffectAtOnce) {
  std::string token = MintToken(As(kAliceKey), {"--label", "short", "--exp", "1h"});
  Caller caller = ForToken(token);
  ASSERT_TRUE(Exec(caller, {"whoami"}).status.ok());
  clock_.now += kHour;
  Outcome o = Exec(caller, {"whoami"});
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated);
  EXPECT_NE(o.err.find("this token expired"), std::string::npos) << o.err;
  auto fresh = interpreter_->CallerForToken(token, "exec");
  ASSERT_FALSE(fresh.ok());
  EXPECT_NE(fresh.status().message().find("expired"), std::string::npos);
}

TEST_F(InterpreterTest, TokenOfARemovedUserIsRefused) {
  std::string token = MintToken(As(kAliceKey), {"--label", "ci"});
  Caller caller = ForToken(token);
  ASSERT_TRUE(Exec(As(kRootKey), {"user", "rm", "alice"}).status.ok());
  EXPECT_EQ(Exec(caller, {"whoami"}).status.code(), Code::kUnauthenticated);
  EXPECT_FALSE(interpreter_->CallerForToken(token, "exec").ok());
}

TEST_F(InterpreterTest, LabelsAndKeyNamesShareANamespace) {
  Outcome o = Exec(As(kAliceKey), {"ssh-key", "generate-api-key", "--label", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  MintToken(As(kAliceKey), {"--label", "ci"});
  o = Exec(As(kAliceKey), {"ssh-key", "add", "--name", "ci", kSpareKey1});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "rename", "ci", "laptop"});
  EXPECT_EQ(o.status.code(), Code::kConflict) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "rename", "ci", "ci2"});
  EXPECT_TRUE(o.status.ok()) << o.err;
  o = Exec(As(kAliceKey), {"ssh-key", "remove", "nothing-here"});
  EXPECT_EQ(o.status.code(), Code::kNotFound);
  EXPECT_EQ(
      Exec(As(kAliceKey), {"ssh-key", "generate-api-key", "--label", "bad label"}).status.code(),
      Code::kInvalidArgument);
  EXPECT_EQ(Exec(As(kAliceKey), {"ssh-key", "generate-api-key"}).status.code(),
            Code::kInvalidArgument);  // --label is required
}

TEST_F(InterpreterTest, ForgedAndMalformedTokensAreUnauthenticated) {
  std::string token = MintToken(As(kAliceKey), {"--label", "ci"});
  TokenSigner other = TokenSigner::FromSecret(std::string(32, 'o')).value();
  TokenClaims claims = signer_.Verify(token).value();
  claims.user = "root";  // alice's label, root's name: signed by the server, still refused
  for (const std::string& bad :
       {std::string(""), std::string("wr1."), token.substr(0, token.size() - 1),
        other.Sign(signer_.Verify(token).value()).value(), signer_.Sign(claims).value()}) {
    auto r = interpreter_->CallerForToken(bad, "exec");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  }
}

TEST_F(InterpreterTest, SessionJsonAndTheCommandObserver) {
  StringSink out, err;
  CommandSession s = Session(As(kAliceKey, "exec"), out, err);
  s.json = true;  // as /exec does: JSON without --json in argv
  interpreter_->ExecuteLine(s, "whoami");
  ASSERT_TRUE(s.status.ok()) << err.str();
  EXPECT_EQ(json::parse(out.str())["user"], "alice");
  StringSink out2;
  s.out = &out2;
  interpreter_->ExecuteLine(s, "nope");
  EXPECT_EQ(json::parse(out2.str())["error"].get<std::string>().rfind("unknown command", 0), 0u);
  std::lock_guard lock(events_mu_);
  ASSERT_GE(events_.size(), 2u);
  EXPECT_EQ(events_[events_.size() - 2], "whoami/exec/ok");
  EXPECT_EQ(events_.back(), "-/exec/not_found");
}

TEST_F(InterpreterTest, SessionKeepsTheResultAsDataAndWhetherItWasHelp) {
  StringSink out, err;
  CommandSession s = Session(As(kAliceKey, "mcp"), out, err);
  s.json = true;  // as MCP does; it then reads the result from the session
  interpreter_->ExecuteLine(s, "whoami");
  ASSERT_TRUE(s.status.ok()) << err.str();
  ASSERT_TRUE(s.result.has_value());
  EXPECT_EQ(s.result->data["user"], "alice");
  EXPECT_FALSE(s.help);
  // Help, asked in words or with --help, is text for people even when JSON is wanted...
  for (const char* line : {"help", "help whoami", "whoami --help", "ssh-key", "ssh-key -h"}) {
    interpreter_->ExecuteLine(s, line);
    ASSERT_TRUE(s.status.ok()) << line;
    EXPECT_TRUE(s.help) << line;
    ASSERT_TRUE(s.result.has_value()) << line;
    EXPECT_FALSE(s.result->text.empty()) << line;
  }
  // ...unless the line itself says --json.
  interpreter_->ExecuteLine(s, "help --json");
  EXPECT_FALSE(s.help);
  EXPECT_TRUE(s.result->data.contains("commands"));
  // A failure leaves no result, only the status.
  interpreter_->ExecuteLine(s, "nope");
  EXPECT_EQ(s.status.code(), Code::kNotFound);
  EXPECT_FALSE(s.result.has_value());
  EXPECT_FALSE(s.help);
}

TEST_F(InterpreterTest, ReadOnlySessionRunsOnlyReadOnlyCommandsAndHelp) {
  StringSink out, err;
  CommandSession s = Session(As(kAliceKey, "mcp"), out, err);
  s.read_only = true;
  interpreter_->ExecuteLine(s, "whoami");
  EXPECT_TRUE(s.status.ok()) << err.str();
  interpreter_->ExecuteLine(s, "ssh-key add '" + std::string(kSpareKey1) + "'");
  EXPECT_EQ(s.status.code(), Code::kPermissionDenied);
  // The refusal names the command and what may run instead, from the table.
  EXPECT_NE(s.status.message().find("\"ssh-key add\""), std::string::npos) << s.status.message();
  EXPECT_NE(s.status.message().find("runs only commands that change nothing"), std::string::npos);
  EXPECT_NE(s.status.message().find("whoami"), std::string::npos);
  EXPECT_FALSE(store_->GetKey(Fingerprint(kSpareKey1)).ok());
  // Help for a command that changes things is still help.
  interpreter_->ExecuteLine(s, "ssh-key add --help");
  EXPECT_TRUE(s.status.ok());
  EXPECT_TRUE(s.help);
}

TEST_F(InterpreterTest, NoSignerMeansNoTokens) {
  Services services;
  services.store = store_.get();
  services.clock = &clock_;
  Interpreter bare(services);
  EXPECT_EQ(bare.CallerForToken("wr1.a.b", "exec").status().code(), Code::kUnauthenticated);
  StringSink out, err;
  CommandSession s;
  s.caller = As(kAliceKey);
  s.out = &out;
  s.err = &err;
  bare.ExecuteLine(s, "ssh-key generate-api-key --label x");
  EXPECT_EQ(s.status.code(), Code::kUnavailable);
}

}  // namespace
}  // namespace warren
