#include "tests/fuzz/command_world.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "keys/public_key.h"
#include "keys/scope.h"
#include "lobby/base/log.h"
#include "lobby/base/streams.h"
#include "lobby/commands/session.h"

namespace warren::fuzz {
namespace {

// ssh-keygen -t ed25519: the admin's key.
constexpr const char* kRootKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";
constexpr const char* kAgentLabelId = "0123456789abcdef0123456789abcdef";

// What the agent's token may run: the VM commands, sandboxes' and those that read; nothing
// that manages users, keys, OAuth clients or integrations.
constexpr const char* kAgentCommands =
    "help,whoami,ls,stat,console,jobs,images,usage,new,ssh,wait,kill,extend,rm,cp,resize,tag,"
    "comment,rename,start,stop,restart,egress,share show,ssh-key list,integrations list,"
    "integrations show";

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) Fail(std::string(what) + ": " + r.status().ToString());
  return std::move(r).value();
}

void Must(const Status& st, const char* what) {
  if (!st.ok()) Fail(std::string(what) + ": " + st.ToString());
}

// A directory on tmpfs when there is one: LMDB syncs every write transaction.
std::string TempDir() {
  const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string tmpl = std::string(base) + "/warren-fuzz-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) Fail("mkdtemp " + tmpl);
  return tmpl;
}

}  // namespace

CommandWorld& CommandWorld::Get() {
  static CommandWorld* world = new CommandWorld();  // never destroyed: libFuzzer exits anywhere
  return *world;
}

CommandWorld::CommandWorld()
    : signer_(Must(TokenSigner::FromSecret(std::string(TokenSigner::kSecretBytes, 'f')),
                   "token signer")),
      integration_key_(
          Must(SecretKey::FromBytes(std::string(SecretKey::kKeyBytes, 'i')), "integration key")) {
  // Audit lines (info) for every input would drown libFuzzer's own output; warnings and
  // errors (a command that threw) still show.
  SetLogLevel(LogLevel::kWarn);
  Reset();
}

bool CommandWorld::Due() { return ++inputs_ % kInputsPerWorld == 0; }

void CommandWorld::Reset() {
  interpreter_.reset();
  guests_.reset();
  host_.reset();
  store_.reset();
  std::string dir = TempDir();
  store_ = Must(LmdbStore::Open(dir + "/store"), "opening the store");
  std::filesystem::remove_all(dir);  // LMDB holds its files open; nothing is left behind
  host_ = std::make_unique<FakeVmHost>(clock_);
  guests_ = std::make_unique<FakeGuestControl>();

  PublicKey root = Must(ParseAuthorizedKey(kRootKey), "the admin's key");
  SshKey key;
  key.fingerprint = root.fingerprint;
  key.user = "root";
  key.name = "root-key";
  key.algorithm = root.algorithm;
  key.blob_base64 = root.blob_base64;
  key.added_at = kNow;
  Must(store_->CreateUser({"root", true, kNow}, {key}), "making root");
  Must(store_->CreateUser({"agent", false, kNow}, {}), "making agent");

  TokenClaims claims;
  claims.user = "agent";
  claims.label_id = kAgentLabelId;
  claims.scope.cmds = Must(ParseCommandList(kAgentCommands), "the agent's commands");
  claims.issued_at = kNow;
  Must(store_->RecordToken("agent", "fuzz", kAgentLabelId, {claims.scope, kNow}, kNow).status(),
       "recording the agent's token");
  agent_token_ = Must(signer_.Sign(claims), "signing the agent's token");

  Services services;
  services.store = store_.get();
  services.clock = &clock_;
  services.token_signer = &signer_;
  services.oauth = store_.get();
  services.integration_key = &integration_key_;
  services.info.ssh_host = "warren.test";
  services.vms = host_.get();
  services.guests = guests_.get();
  services.control_authorized_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAfuzz warren-control";
  // Two installed images, as packaging/images' catalog would list them.
  services.images.resolve = [](std::string_view name) -> Result<std::string> {
    if (name == "debian" || name == "debian@20261129") return std::string("debian@20261129");
    if (name == "tiny" || name == "tiny@3") return std::string("tiny@3");
    return NotFound("no image named " + std::string(name) + "; available: debian, tiny");
  };
  services.images.list = [] {
    return std::vector<ImageInfo>{
        {"debian@20261129", "debian", "20261129", 1 << 30, "Debian 12", "dev", ""},
        {"tiny@3", "tiny", "3", 1 << 20, "BusyBox", "root", ""}};
  };
  interpreter_ = std::make_unique<Interpreter>(services);
  admin_ = Must(CallerForKey(*store_, clock_, root.fingerprint, "ssh"), "the admin caller");
  agent_ = Must(interpreter_->CallerForToken(agent_token_, "mcp"), "the agent caller");
  MakeVm(admin_, "web-1");
  MakeVm(agent_, "agent-1");
}

void CommandWorld::MakeVm(const Caller& caller, const std::string& name) {
  StringSink out, err;
  CommandSession session;
  session.caller = caller;
  session.argv = {"new", "--name", name};
  session.out = &out;
  session.err = &err;
  interpreter_->Execute(session);
  Must(session.status, "making a VM");
}

}  // namespace warren::fuzz
