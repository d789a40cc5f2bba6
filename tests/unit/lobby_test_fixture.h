// The lobby test fixture: the built-in commands run by a real Interpreter over a real
// LmdbStore in a temp dir (wrapped by FaultyStore, which fails on demand), a settable clock
// and a token signer, with users root (admin) and alice. Shared by the interpreter test and
// the tests of each lobby command (cmd_*_test.cc). Single-threaded unless a test says so.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "keys/token.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/session.h"

namespace warren::lobbytest {

using nlohmann::json;

// Real keys from ssh-keygen -t ed25519.
inline constexpr const char* kRootKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";
inline constexpr const char* kAliceKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpiw2c40u05jE00mSRp+vT+DI/HeS0e/0O9x2wN8yM9 "
    "alice@laptop";
inline constexpr const char* kSpareKey1 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDbbPlBfGYaQt+zr9VA/N2mX27hzc2HU3Bzwietym5w5 "
    "alice@desktop";
inline constexpr const char* kSpareKey2 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL9DLbujE4fTFos7+7dZ7vghJC62bX0wB4WdBAXGHAT4 ci key";
inline constexpr const char* kSpareKey3 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOmLQ1xSw+ofsSpTrzqQ4rQXs+kAW07GZyFe/Rq0hEl bob@host";

inline constexpr int64_t kStart = 1'700'000'000;
inline constexpr int64_t kHour = 3600;

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
  Status UpdateUser(std::string_view n, const std::function<Status(User&)>& f) override {
    return real_->UpdateUser(n, f);
  }
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
  Status DeleteVm(std::string_view id, int64_t at_ms) override {
    return real_->DeleteVm(id, at_ms);
  }
  Status MeterVm(std::string_view id, bool running, int64_t at_ms) override {
    return real_->MeterVm(id, running, at_ms);
  }
  Result<std::vector<UsageRow>> ListUsage(std::string_view owner, int64_t since_day) override {
    return real_->ListUsage(owner, since_day);
  }
  Result<std::vector<HostRecord>> ListHosts() override { return real_->ListHosts(); }
  Status PutHost(const HostRecord& host) override { return real_->PutHost(host); }
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
  Status CreateIntegration(const IntegrationRecord& i) override {
    return real_->CreateIntegration(i);
  }
  Result<IntegrationRecord> GetIntegration(std::string_view o, std::string_view n) override {
    return real_->GetIntegration(o, n);
  }
  Result<std::vector<IntegrationRecord>> ListIntegrations(std::string_view o) override {
    return real_->ListIntegrations(o);
  }
  Status UpdateIntegration(std::string_view o, std::string_view n,
                           const std::function<Status(IntegrationRecord&)>& f) override {
    return real_->UpdateIntegration(o, n, f);
  }
  Status RenameIntegration(std::string_view o, std::string_view n, std::string_view nn) override {
    return real_->RenameIntegration(o, n, nn);
  }
  Status DeleteIntegration(std::string_view o, std::string_view n) override {
    return real_->DeleteIntegration(o, n);
  }
  Result<VmShare> GetVmShare(std::string_view id) override { return real_->GetVmShare(id); }
  Status UpdateVmShare(std::string_view id, const std::function<Status(VmShare&)>& f) override {
    return real_->UpdateVmShare(id, f);
  }
  Result<ShareLinkMatch> FindShareLink(std::string_view h) override {
    return real_->FindShareLink(h);
  }
  Status RecordShareLinkUses(std::string_view vm, std::string_view l, int64_t n,
                             int64_t t) override {
    return real_->RecordShareLinkUses(vm, l, n, t);
  }
  Status CreateMagicLink(const MagicLink& l, int64_t now) override {
    return real_->CreateMagicLink(l, now);
  }
  Result<BrowserSession> RedeemMagicLink(
      std::string_view h, int64_t now,
      const std::function<Result<BrowserSession>(const MagicLink&)>& f) override {
    return real_->RedeemMagicLink(h, now, f);
  }
  Result<BrowserSession> GetBrowserSession(std::string_view h, int64_t now) override {
    return real_->GetBrowserSession(h, now);
  }
  Status CreateHostTicket(const HostTicket& t, int64_t now) override {
    return real_->CreateHostTicket(t, now);
  }
  Result<BrowserSession> RedeemHostTicket(
      std::string_view h, std::string_view host, int64_t now,
      const std::function<Result<BrowserSession>(const HostTicket&, const BrowserSession&)>& f)
      override {
    return real_->RedeemHostTicket(h, host, now, f);
  }
  Result<size_t> EndBrowserSignIn(std::string_view h) override {
    return real_->EndBrowserSignIn(h);
  }
  Result<size_t> EndUserBrowserSessions(std::string_view u) override {
    return real_->EndUserBrowserSessions(u);
  }

 private:
  Store* real_;
};

inline std::string Fingerprint(const char* line) {
  Result<PublicKey> pk = ParseAuthorizedKey(line);
  EXPECT_TRUE(pk.ok()) << pk.status().ToString();
  return pk.ok() ? pk->fingerprint : "";
}

inline std::string Blob(const char* line) {
  Result<PublicKey> pk = ParseAuthorizedKey(line);
  return pk.ok() ? pk->blob_base64 : "";
}

inline SshKey KeyRecord(const char* line, const std::string& user, const std::string& name) {
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

class LobbyTest : public ::testing::Test {
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

}  // namespace warren::lobbytest
