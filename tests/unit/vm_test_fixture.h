// A test bed for the VM commands: the real interpreter with its built-in commands, a real
// LmdbStore in a temp dir, FakeVmHost and FakeGuestControl, a settable clock, an integration
// key, and three callers — alice, alice through a key limited to the tag "ci", and bob.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "keys/secret_box.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/session.h"
#include "tests/fakes/fake_guest_control.h"
#include "tests/fakes/fake_vm_host.h"
#include "vmhost/host_set.h"
#include "vmhost/vm_host.h"

namespace warren::vmtest {

inline bool Has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Whether the guest was asked to run `command`.
inline bool Ran(const FakeGuestControl& guests, const std::string& command) {
  for (const std::string& c : guests.commands()) {
    if (c == command) return true;
  }
  return false;
}

// Real keys from ssh-keygen -t ed25519.
inline constexpr const char* kAliceKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpiw2c40u05jE00mSRp+vT+DI/HeS0e/0O9x2wN8yM9 "
    "alice@laptop";
inline constexpr const char* kAliceCiKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDbbPlBfGYaQt+zr9VA/N2mX27hzc2HU3Bzwietym5w5 "
    "alice@ci";
inline constexpr const char* kBobKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOmLQ1xSw+ofsSpTrzqQ4rQXs+kAW07GZyFe/Rq0hEl bob@host";

inline constexpr const char* kRootKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";

// A template of the shape `new` makes by default (debian, 2 vCPU, 2 GiB, 10 GiB, a NIC).
inline void SaveDefaultTemplate(FakeVmHost& host) {
  VmSpec spec;
  spec.id = "tplaaaabbbbcccc";
  spec.image = "debian@20261129";
  spec.cpus = 2;
  spec.memory_mib = 2048;
  spec.disk_gib = 10;
  spec.egress = Egress::kAll;
  ASSERT_TRUE(host.Create(spec).ok());
  ASSERT_TRUE(host.SaveTemplate(spec.id, "runner-1").ok());
}

// The VMs the warm pool made on `host` (lobby/vm_pool.h names them "pool-ID" until `new`
// gives them a name of their own).
inline std::vector<VmInfo> PooledVms(FakeVmHost& host) {
  std::vector<VmInfo> out;
  const std::vector<VmInfo> all = host.List().value();
  for (const VmInfo& info : all) {
    if (info.name.starts_with("pool-")) out.push_back(info);
  }
  return out;
}

// Polls `done` every 10 ms until it holds, for up to `within`; its last answer.
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds within = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

inline constexpr int64_t kStart = 1'700'000'000;

class TestClock final : public Clock {
 public:
  int64_t NowUnix() const override { return now.load(); }
  std::atomic<int64_t> now{kStart};
};

struct Outcome {
  std::string out;
  std::string err;
  Status status;
  int exit_status = -1;

  nlohmann::json Json() const {
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << out;
    return j;
  }
};

inline SshKey KeyRecord(const char* line, const std::string& user, const std::string& name,
                        Scope scope = {}) {
  PublicKey pk = ParseAuthorizedKey(line).value();
  SshKey k;
  k.fingerprint = pk.fingerprint;
  k.user = user;
  k.name = name;
  k.algorithm = pk.algorithm;
  k.blob_base64 = pk.blob_base64;
  k.added_at = kStart;
  k.scope = std::move(scope);
  return k;
}

class VmCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-vmcmd-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    OpenStore();
    Scope ci;
    ci.tag = "ci";
    ASSERT_TRUE(
        store_
            ->CreateUser({"alice", false, kStart}, {KeyRecord(kAliceKey, "alice", "laptop"),
                                                    KeyRecord(kAliceCiKey, "alice", "ci", ci)})
            .ok());
    ASSERT_TRUE(store_->CreateUser({"bob", false, kStart}, {KeyRecord(kBobKey, "bob", "b")}).ok());
    ASSERT_TRUE(
        store_->CreateUser({"root", true, kStart}, {KeyRecord(kRootKey, "root", "r")}).ok());
    MakeInterpreter();
  }

  void TearDown() override {
    interpreter_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void OpenStore() {
    store_.reset();
    auto opened = LmdbStore::Open(dir_ + "/store");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
  }

  // A fresh interpreter over the current store (after a reopen, or changed services).
  void MakeInterpreter() {
    Services s;
    s.store = store_.get();
    s.clock = &clock_;
    s.info.ssh_host = "warren.test";
    s.info.ssh_port = 2222;
    s.info.domain = "warren.localhost";
    s.vms = hosts_ != nullptr ? static_cast<VmHost*>(hosts_) : &host_;
    s.hosts = hosts_;
    s.guests = &guests_;
    s.control_authorized_key = "ssh-ed25519 AAAAcontrol warren-control";
    s.ready_timeout_ms = ready_timeout_ms_;
    s.guest_slowdown = guest_slowdown_;
    s.restore_templates = restore_templates_;
    // The guest of a VM restored from a template reports its name as its seed says.
    guests_.SetHostnames([this](std::string_view id) {
      Result<VmInfo> info = hosts_ != nullptr ? hosts_->Inspect(id) : host_.Inspect(id);
      return info.ok() ? info->name : std::string(id);
    });
    s.vm_defaults = vm_defaults_;
    s.sandboxes = sandboxes_;
    s.integration_key = &integration_key_;
    s.prepare_vm = [this](VmSpec& spec) {
      last_spec_ = spec;
      return prepare_status_;
    };
    s.images.resolve = [](std::string_view name) -> Result<std::string> {
      if (name == "debian") return std::string("debian@20261129");
      if (name == "tiny") return std::string("tiny@3");
      if (name.find('@') != std::string_view::npos) return std::string(name);
      return NotFound("no image named " + std::string(name) + "; available: debian, tiny");
    };
    interpreter_ = std::make_unique<Interpreter>(s);
  }

  Caller As(const char* key_line, const std::string& surface = "ssh") {
    Result<Caller> c =
        CallerForKey(*store_, clock_, ParseAuthorizedKey(key_line)->fingerprint, surface);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? c.value() : Caller{};
  }
  Caller Alice(const std::string& surface = "ssh") { return As(kAliceKey, surface); }
  Caller AliceCi(const std::string& surface = "ssh") { return As(kAliceCiKey, surface); }
  Caller Bob(const std::string& surface = "ssh") { return As(kBobKey, surface); }
  Caller Root(const std::string& surface = "ssh") { return As(kRootKey, surface); }

  Outcome Exec(const Caller& caller, std::vector<std::string> argv, std::string in = "",
               std::shared_ptr<CancelSignal> cancel = nullptr) {
    StringInput input(std::move(in));
    StringSink out, err;
    CommandSession s;
    s.caller = caller;
    s.argv = std::move(argv);
    s.in = &input;
    s.out = &out;
    s.err = &err;
    // What the surface the caller names would set: the SSH channel and the REPL stream.
    s.streams_output = caller.surface == "ssh" || caller.surface == "repl";
    if (cancel != nullptr) s.cancel = cancel;
    interpreter_->Execute(s);
    return {out.str(), err.str(), s.status, s.exit_status};
  }

  // Makes a VM through `new`, asserting success.
  void New(const Caller& caller, std::vector<std::string> flags) {
    std::vector<std::string> argv = {"new"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Outcome o = Exec(caller, argv);
    ASSERT_TRUE(o.status.ok()) << o.err << o.out;
  }

  // A VM record of alice's still "creating", as `new` leaves it half-way.
  void HalfMade(const std::string& name) {
    VmRecord vm;
    vm.id = "aaaaaaaaaaaa";
    vm.name = name;
    vm.owner = "alice";
    ASSERT_TRUE(store_->CreateVm(vm).ok());  // phase creating
  }

  std::string IdOf(const std::string& name) {
    Result<VmRecord> vm = store_->GetVmByName(name);
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    return vm.ok() ? vm->id : "";
  }

  std::string dir_;
  TestClock clock_;
  FakeVmHost host_{clock_};
  // Several hosts (cmd_hosts_test.cc): the interpreter's vms and hosts when set.
  HostSet* hosts_ = nullptr;
  FakeGuestControl guests_;
  int ready_timeout_ms_ = 2000;
  std::function<double()> guest_slowdown_;  // services.guest_slowdown (empty: waits as set)
  bool restore_templates_ = false;          // services.restore_templates
  VmDefaults vm_defaults_;                  // what `serve` would set (sizes, egress, users' limits)
  SandboxPolicy sandboxes_;
  VmSpec last_spec_;       // what `new` last handed to prepare_vm
  Status prepare_status_;  // what prepare_vm answers
  SecretKey integration_key_ = SecretKey::FromBytes(std::string(SecretKey::kKeyBytes, 'i')).value();
  std::unique_ptr<LmdbStore> store_;
  std::unique_ptr<Interpreter> interpreter_;
};

// The job tests' fixture (cmd_vm_ssh_test.cc, cmd_jobs_test.cc): a running VM web-one.
class JobCommandTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    New(Alice(), {"--name", "web-one"});
    id_ = IdOf("web-one");
  }

  // A command that prints `out` and keeps running; returns the job id it will get.
  std::string Hold(const std::string& command, const std::string& out = "",
                   const std::string& err = "") {
    guests_.SetScript(command, {out, err, std::nullopt, /*hold=*/true});
    return guests_.next_job();
  }

  std::string id_;
};

}  // namespace warren::vmtest
