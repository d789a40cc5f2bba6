// crash_world: warren's command side over a data directory that outlives the process, for
// the crash-point test (crash_points.py). The real interpreter with its built-in commands,
// the real LmdbStore in DATA/store and the real start-up (ExpireSandboxes, Reconcile), over
// FakeVmHost persisted in DATA (tests/fakes: its domains, disks, seeds, control sockets and
// save files are files there) and FakeGuestControl (guests answer at once).
//
//   crash_world run DATA SCRIPT [--kill-at N] [--templates] [--states]
//     starts as `warren serve` does, then runs SCRIPT's commands (JSON lines: {"as": USER,
//     "argv": [...], "stdin": "..."}) one after the other. Prints, unbuffered, one line per
//     event: "E N OP host STEP ID" at each step of the host's changes (fake_vm_host.h
//     StepHook), "E N OP store commit" as a store transaction commits (before its data
//     reaches the file: a kill there loses the transaction), "E N OP ack" once a command
//     finished, just before its answer "A OP CODE EXIT OUTPUT-JSON". OP is the command's
//     1-based index, 0 for start-up. With --kill-at N the process SIGKILLs itself at event
//     N (the count starts after the first start's users are made). With --states, after
//     each answer "S OP STATE-JSON" (see dump).
//   crash_world dump DATA [--known-ids FILE] [--templates]
//     starts (reconcile included), lets guests told to power off before a kill finish doing
//     so (FakeVmHost::SettleShutdowns), then prints one JSON line: {"state": what users and the
//     host have, by name, free of random ids and times; "problems": every broken invariant
//     found: a domain or file no record owns, a record without its domain or not ready, a
//     record and its domain disagreeing, a store record naming a VM id from FILE (one per
//     line: ids that existed) that no longer exists}.
//
// The store's commits are seen by interposing fdatasync, which LMDB calls once per commit
// (its data pages, before the meta page that makes the transaction visible): this program
// defines the symbol, so liblmdb's calls reach it. Test code only, never the product.
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/backup.h"
#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "keys/secret_box.h"
#include "keys/token.h"
#include "lobby/base/clock.h"
#include "lobby/base/log.h"
#include "lobby/base/streams.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/reconcile.h"
#include "lobby/commands/sandbox_expiry.h"
#include "lobby/commands/session.h"
#include "lobby/commands/vm_egress.h"
#include "tests/fakes/fake_guest_control.h"
#include "tests/fakes/fake_vm_host.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace warren::crash {
namespace {

// ---- Events: numbered, printed, and the kill.

int64_t g_events = 0;   // counted once armed
int64_t g_kill_at = 0;  // 0: never
bool g_armed = false;   // false while the first start makes its users
int64_t g_commits = 0;  // every store commit, armed or not (a self-check)
int g_op = 0;           // the command running; 0 at start-up

// One line, in one write: a SIGKILL never leaves half of it in a buffer.
void Print(const std::string& line) {
  std::string l = line + "\n";
  size_t off = 0;
  while (off < l.size()) {
    ssize_t n = ::write(1, l.data() + off, l.size() - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "crash_world: %s\n", why.c_str());
  std::exit(2);
}

void Event(const std::string& what) {
  if (!g_armed) return;
  ++g_events;
  Print("E " + std::to_string(g_events) + " " + std::to_string(g_op) + " " + what);
  if (g_events == g_kill_at) {
    ::raise(SIGKILL);
    std::abort();  // not reached
  }
}

bool IsStoreData(int fd) {
  char link[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
  if (n <= 0) return false;
  return std::string_view(link, n).ends_with("/store/data.mdb");
}

}  // namespace
}  // namespace warren::crash

// LMDB's commit: data pages written, fdatasync, then the meta page. Ours is called instead.
extern "C" int fdatasync(int fd) {
  if (warren::crash::IsStoreData(fd)) {
    ++warren::crash::g_commits;
    warren::crash::Event("store commit");
  }
  return static_cast<int>(::syscall(SYS_fdatasync, fd));
}

namespace warren::crash {
namespace {

// Wall time as it was when the process started: a run's store commits must not depend on
// whether it crossed a second (CallerForKey records a key's use once per second), so the
// same script makes the same events every time.
class StartClock final : public Clock {
 public:
  int64_t NowUnix() const override { return start_; }

 private:
  const int64_t start_ = SystemClock::Get().NowUnix();
};

const Clock& TheClock() {
  static const StartClock clock;
  return clock;
}

// Real ed25519 keys (ssh-keygen), one per user of the world.
const std::map<std::string, std::string> kUserKeys = {
    {"root",
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host"},
    {"alice",
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpiw2c40u05jE00mSRp+vT+DI/HeS0e/0O9x2wN8yM9 "
     "alice@laptop"},
    {"bob",
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOmLQ1xSw+ofsSpTrzqQ4rQXs+kAW07GZyFe/Rq0hEl bob@host"},
};

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what + ": " + r.status().ToString());
  return std::move(r).value();
}

void Must(const Status& st, const std::string& what) {
  if (!st.ok()) Die(what + ": " + st.ToString());
}

SshKey KeyOf(const std::string& user) {
  PublicKey pk = Must(ParseAuthorizedKey(kUserKeys.at(user)), "parsing " + user + "'s key");
  SshKey k;
  k.fingerprint = pk.fingerprint;
  k.user = user;
  k.name = user + "-key";
  k.algorithm = pk.algorithm;
  k.blob_base64 = pk.blob_base64;
  k.added_at = TheClock().NowUnix();
  return k;
}

// The shape `new` makes by default here: what the template (--templates) is of.
VmSpec DefaultShapeSpec() {
  VmSpec spec;
  spec.id = "tpl000000000";
  spec.image = "tiny@3";
  spec.cpus = 1;
  spec.memory_mib = 256;
  spec.disk_gib = 1;
  spec.egress = Egress::kNone;
  return spec;
}

class World {
 public:
  World(const std::string& dir, bool templates) : dir_(dir), templates_(templates) {}

  // What `warren serve` does before it serves, over DATA; the first start makes the users
  // (and the template) first, unarmed.
  void Start() {
    fs::create_directories(dir_);
    store_ = Must(LmdbStore::Open(dir_ + "/store"), "opening the store");
    Must(host_.PersistIn(dir_), "opening the fake host");
    guests_.SetHostnames([this](std::string_view id) {
      Result<VmInfo> info = host_.Inspect(id);
      return info.ok() ? info->name : std::string(id);
    });
    if (Must(store_->ListUsers(), "listing users").empty()) {
      MakeUsers();
      if (g_commits == 0) Die("no store commit was seen: the fdatasync interposer is not reached");
    }
    host_.SetStepHook([](std::string_view step, std::string_view what) {
      Event("host " + std::string(step) + " " + std::string(what));
    });
    g_armed = true;

    Services s;
    s.store = store_.get();
    s.clock = &TheClock();
    s.token_signer = &signer_;
    s.integration_key = &integration_key_;
    s.info.ssh_host = "warren.test";
    s.vms = &host_;
    s.guests = &guests_;
    s.control_authorized_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAcrash warren-control";
    s.ready_timeout_ms = 2000;
    s.restore_templates = templates_;
    s.vm_defaults.image = "tiny";
    s.vm_defaults.cpus = 1;
    s.vm_defaults.memory_mib = 256;
    s.vm_defaults.disk_gib = 1;
    s.vm_defaults.egress = "none";
    s.images.resolve = [](std::string_view name) -> Result<std::string> {
      if (name == "tiny" || name == "tiny@3") return std::string("tiny@3");
      if (name == "debian" || name == "debian@20261129") return std::string("debian@20261129");
      return NotFound("no image named " + std::string(name) + "; available: debian, tiny");
    };
    interpreter_ = std::make_unique<Interpreter>(s);

    // As VmRuntime::Start: expired sandboxes first, then reconcile.
    ExpireSandboxes(interpreter_->services(), TheClock().NowUnix());
    Status reconciled = Reconcile(*store_, host_, &guests_, TheClock(), &report_);
    if (!reconciled.ok()) std::fprintf(stderr, "reconcile: %s\n", reconciled.ToString().c_str());
  }

  // Runs one command of the script; returns the answer line's parts.
  json Run(const json& op) {
    const std::string user = op.at("as");
    StringInput in(op.value("stdin", ""));
    StringSink out, err;
    CommandSession session;
    session.in = &in;
    session.out = &out;
    session.err = &err;
    session.argv = op.at("argv").get<std::vector<std::string>>();
    Result<Caller> caller = CallerForKey(*store_, TheClock(), KeyOf(user).fingerprint, "ssh");
    if (!caller.ok()) {
      session.status = caller.status();
      session.exit_status = -1;
    } else {
      session.caller = *caller;
      interpreter_->Execute(session);
    }
    return {{"code", CodeName(session.status.code())},
            {"exit", session.exit_status},
            {"out", out.str()},
            {"err", session.status.ok() ? "" : session.status.message()}};
  }

  // What users and the host have, by name: what an acknowledged change shows in.
  json State() {
    json users = json::object();
    for (const User& u : Must(store_->ListUsers(), "listing users")) {
      json keys = json::object();
      for (const SshKey& k : Must(store_->ListKeys(u.name), "listing keys")) {
        keys[k.name] = {{"fingerprint", k.fingerprint}, {"scope", k.scope.ToJson()}};
      }
      json labels = json::object();
      for (const TokenLabel& l : Must(store_->ListTokenLabels(u.name), "listing labels")) {
        json scopes = json::array();
        for (const IssuedToken& t : l.tokens) scopes.push_back(t.scope.ToJson());
        labels[l.name] = scopes;
      }
      users[u.name] = {{"admin", u.admin}, {"keys", keys}, {"labels", labels}};
    }
    json vms = json::object();
    for (const VmRecord& vm : Must(store_->ListVms(), "listing VMs")) {
      VmShare share = Must(store_->GetVmShare(vm.id), "reading a share");
      json host = nullptr;
      if (std::optional<FakeVmHost::Definition> d = host_.DefinitionOf(vm.id)) {
        host = {{"name", d->name},         {"state", VmStateName(host_.Inspect(vm.id)->state)},
                {"cpus", d->cpus},         {"memory_mib", d->memory_mib},
                {"disk_gib", d->disk_gib}, {"egress", EgressName(d->egress)}};
      }
      vms[vm.name] = {{"owner", vm.owner},
                      {"image", vm.image},
                      {"cpus", vm.cpus},
                      {"memory_mib", vm.memory_mib},
                      {"disk_gib", vm.disk_gib},
                      {"tags", vm.tags},
                      {"comment", vm.comment},
                      {"egress", vm.egress},
                      {"desired", DesiredStateName(vm.desired_state)},
                      {"phase", VmPhaseName(vm.phase)},
                      {"share",
                       {{"public", share.is_public},
                        {"port", share.port},
                        {"users", share.users},
                        {"links", share.links.size()}}},
                      {"host", host}};
    }
    json templates = json::array();
    for (const TemplateInfo& t : Must(host_.Templates(), "listing templates")) {
      templates.push_back(VmShapeKey(t.shape));
    }
    return {{"users", users}, {"vms", vms}, {"templates", templates}};
  }

  // Every broken invariant between the store, the host and the data directory.
  std::vector<std::string> Problems() {
    std::vector<std::string> p;
    std::map<std::string, VmRecord> records;
    for (VmRecord& vm : Must(store_->ListVms(), "listing VMs")) records[vm.id] = vm;
    std::set<std::string> domains;
    for (const VmInfo& d : Must(host_.List(), "listing domains")) {
      domains.insert(d.id);
      if (!records.count(d.id)) p.push_back("domain " + d.id + " (" + d.name + ") has no record");
    }
    for (const auto& [id, vm] : records) {
      const std::string who = "VM " + vm.name + " (" + id + ")";
      if (vm.phase != VmPhase::kReady) {
        p.push_back(who + " is " + std::string(VmPhaseName(vm.phase)));
      }
      std::optional<FakeVmHost::Definition> d = host_.DefinitionOf(id);
      if (!d) {
        p.push_back(who + " has no domain");
        continue;
      }
      auto differ = [&](const char* what, const std::string& store, const std::string& host) {
        if (store != host) {
          p.push_back(who + ": the store says " + what + " " + store + ", the host " + host);
        }
      };
      differ("name", vm.name, d->name);
      differ("cpus", std::to_string(vm.cpus), std::to_string(d->cpus));
      differ("memory", std::to_string(vm.memory_mib), std::to_string(d->memory_mib));
      differ("disk", std::to_string(vm.disk_gib), std::to_string(d->disk_gib));
      differ("egress", std::string(EgressName(HostEgressFor(vm.egress))),
             std::string(EgressName(d->egress)));
      const VmState state = host_.Inspect(id)->state;
      const VmState want = vm.desired_state == DesiredState::kRunning  ? VmState::kRunning
                           : vm.desired_state == DesiredState::kPaused ? VmState::kPaused
                                                                       : VmState::kStopped;
      differ("state", std::string(VmStateName(want)), std::string(VmStateName(state)));
    }
    // The data directory: nothing but the store, the host's state and files of live things.
    std::set<std::string> template_keys;
    for (const TemplateInfo& t : Must(host_.Templates(), "listing templates")) {
      template_keys.insert(VmShapeKey(t.shape));
    }
    std::set<std::string> top = {"store", "fake-host.json", "vms", "disks", "templates", "tmp"};
    // And the key files `warren serve` makes (a world it has served: the backup test's).
    for (const BackupKeyFile& k : BackupKeyFiles()) top.insert(k.name);
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (!top.count(e.path().filename().string())) p.push_back("stray file " + e.path().string());
    }
    for (const auto& e : fs::directory_iterator(dir_ + "/vms")) {
      const std::string id = e.path().filename().string();
      if (!domains.count(id)) p.push_back("orphaned VM directory " + e.path().string());
    }
    for (const std::string& id : domains) {
      for (const char* f : {"seed.img", "console.log", "control.sock"}) {
        if (!fs::exists(dir_ + "/vms/" + id + "/" + f)) {
          p.push_back("domain " + id + " lacks " + f);
        }
      }
      if (!fs::exists(dir_ + "/disks/" + id + ".qcow2"))
        p.push_back("domain " + id + " lacks a disk");
    }
    for (const auto& e : fs::directory_iterator(dir_ + "/disks")) {
      if (!domains.count(e.path().stem().string())) {
        p.push_back("orphaned disk " + e.path().string());
      }
    }
    for (const auto& e : fs::directory_iterator(dir_ + "/templates")) {
      if (!template_keys.count(e.path().stem().string())) {
        p.push_back("orphaned save file " + e.path().string());
      }
    }
    for (const std::string& key : template_keys) {
      if (!fs::exists(dir_ + "/templates/" + key + ".save")) {
        p.push_back("template " + key + " lacks its save file");
      }
    }
    for (const auto& e : fs::directory_iterator(dir_ + "/tmp")) {
      p.push_back("leftover " + e.path().string());
    }
    return p;
  }

  void SettleShutdowns() { host_.SettleShutdowns(); }

  // The ids of every VM record and domain.
  std::set<std::string> LiveIds() {
    std::set<std::string> ids;
    for (const VmRecord& vm : Must(store_->ListVms(), "listing VMs")) ids.insert(vm.id);
    for (const VmInfo& d : Must(host_.List(), "listing domains")) ids.insert(d.id);
    return ids;
  }

  void Close() {
    interpreter_.reset();
    store_.reset();
  }

  const ReconcileReport& report() const { return report_; }

 private:
  void MakeUsers() {
    const int64_t now = TheClock().NowUnix();
    Must(store_->CreateUser({"root", true, now}, {KeyOf("root")}), "making root");
    Must(store_->CreateUser({"alice", false, now}, {KeyOf("alice")}), "making alice");
    Must(store_->CreateUser({"bob", false, now}, {KeyOf("bob")}), "making bob");
    if (templates_) {
      const VmSpec spec = DefaultShapeSpec();
      Must(host_.Create(spec), "booting the template's VM");
      Must(host_.SaveTemplate(spec.id, "runner-1"), "saving the template");
    }
  }

  const std::string dir_;
  const bool templates_;
  TokenSigner signer_ = Must(TokenSigner::FromSecret(std::string(TokenSigner::kSecretBytes, 'c')),
                             "the token signer");
  SecretKey integration_key_ =
      Must(SecretKey::FromBytes(std::string(SecretKey::kKeyBytes, 'i')), "the integration key");
  std::unique_ptr<LmdbStore> store_;
  FakeVmHost host_;
  FakeGuestControl guests_;
  std::unique_ptr<Interpreter> interpreter_;
  ReconcileReport report_;
};

// Store records that still name a VM that is gone: the raw tables, every key and value, once
// the store is closed. Usage rows outlive their VMs by design.
std::vector<std::string> DanglingReferences(const std::string& store_dir,
                                            const std::set<std::string>& gone) {
  std::vector<std::string> p;
  if (gone.empty()) return p;
  MDB_env* env = nullptr;
  auto check = [&](int rc, const char* what) {
    if (rc != 0) Die(std::string(what) + ": " + mdb_strerror(rc));
  };
  check(mdb_env_create(&env), "mdb_env_create");
  check(mdb_env_set_maxdbs(env, 64), "mdb_env_set_maxdbs");
  check(mdb_env_open(env, store_dir.c_str(), MDB_RDONLY, 0600), "mdb_env_open");
  MDB_txn* txn = nullptr;
  check(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
  MDB_dbi main_dbi;
  check(mdb_dbi_open(txn, nullptr, 0, &main_dbi), "opening the main db");
  std::vector<std::string> tables;
  MDB_cursor* cur = nullptr;
  check(mdb_cursor_open(txn, main_dbi, &cur), "mdb_cursor_open");
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    tables.emplace_back(static_cast<const char*>(k.mv_data), k.mv_size);
  }
  mdb_cursor_close(cur);
  for (const std::string& table : tables) {
    if (table.starts_with("usage") || table == "meta") continue;
    MDB_dbi dbi;
    check(mdb_dbi_open(txn, table.c_str(), 0, &dbi), "opening a table");
    check(mdb_cursor_open(txn, dbi, &cur), "mdb_cursor_open");
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      const std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
      const std::string value(static_cast<const char*>(v.mv_data), v.mv_size);
      for (const std::string& id : gone) {
        if (key.find(id) != std::string::npos || value.find(id) != std::string::npos) {
          p.push_back("table " + table + " still names VM " + id + ": " + value.substr(0, 200));
        }
      }
    }
    mdb_cursor_close(cur);
  }
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return p;
}

int Usage() {
  std::fprintf(stderr,
               "usage: crash_world run DATA SCRIPT [--kill-at N] [--templates] [--states]\n"
               "       crash_world dump DATA [--known-ids FILE] [--templates]\n");
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string mode = argv[1];
  const std::string dir = argv[2];
  std::string script, known_ids;
  bool templates = false, states = false;
  int i = 3;
  if (mode == "run") {
    if (argc < 4) return Usage();
    script = argv[i++];
  }
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kill-at" && i + 1 < argc) {
      g_kill_at = std::stoll(argv[++i]);
    } else if (a == "--known-ids" && i + 1 < argc) {
      known_ids = argv[++i];
    } else if (a == "--templates") {
      templates = true;
    } else if (a == "--states") {
      states = true;
    } else {
      return Usage();
    }
  }
  SetLogLevel(LogLevel::kError);  // audit lines would drown the events

  World world(dir, templates);
  world.Start();
  if (mode == "run") {
    if (states) Print("S 0 " + world.State().dump());
    std::ifstream in(script);
    if (!in) Die("cannot read " + script);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      ++g_op;
      json answer = world.Run(json::parse(line));
      Event("ack");
      Print("A " + std::to_string(g_op) + " " + answer.dump());
      if (states) Print("S " + std::to_string(g_op) + " " + world.State().dump());
    }
    world.Close();
    return 0;
  }
  if (mode != "dump") return Usage();
  // A guest told to power off before the kill does so by now, whatever reconcile saw.
  world.SettleShutdowns();
  json out = {{"state", world.State()}};
  std::vector<std::string> problems = world.Problems();
  const std::set<std::string> live = world.LiveIds();
  const ReconcileReport& r = world.report();
  out["reconcile"] = {{"unfinished_removed", r.unfinished_removed},
                      {"orphans_destroyed", r.orphans_destroyed},
                      {"missing", r.missing},
                      {"started", r.started},
                      {"paused", r.paused},
                      {"stopped", r.stopped},
                      {"disks_removed", r.disks_removed},
                      {"errors", r.errors}};
  world.Close();
  if (!known_ids.empty()) {
    std::set<std::string> gone;
    std::ifstream ids(known_ids);
    for (std::string id; std::getline(ids, id);) {
      if (!id.empty() && !live.count(id)) gone.insert(id);
    }
    for (std::string& d : DanglingReferences(dir + "/store", gone)) problems.push_back(d);
  }
  out["problems"] = problems;
  Print(out.dump());
  return 0;
}

}  // namespace
}  // namespace warren::crash

int main(int argc, char** argv) { return warren::crash::Main(argc, argv); }
