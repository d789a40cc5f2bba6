#include "tests/fuzz/command_world.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "keys/public_key.h"
#include "lobby/base/log.h"

namespace warren::fuzz {
namespace {

// ssh-keygen -t ed25519: the admin's key.
constexpr const char* kRootKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";
constexpr const char* kAgentLabelId = "0123456789abcdef0123456789abcdef";

// What the agent's token may run: commands that read, and commands that act on a VM (none
// exists, so they stop at dispatch). Nothing here writes to the store without a VM.
const std::vector<std::string> kAgentCommands = {"help",
                                                 "whoami",
                                                 "ls",
                                                 "stat",
                                                 "console",
                                                 "jobs",
                                                 "images",
                                                 "usage",
                                                 "new",
                                                 "ssh",
                                                 "wait",
                                                 "kill",
                                                 "extend",
                                                 "rm",
                                                 "cp",
                                                 "resize",
                                                 "tag",
                                                 "comment",
                                                 "rename",
                                                 "start",
                                                 "stop",
                                                 "egress",
                                                 "share show",
                                                 "ssh-key list",
                                                 "integrations list",
                                                 "integrations show"};

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
  static CommandWorld* world =
      new CommandWorld();  // never destroyed: libFuzzer exits from anywhere
  return *world;
}

CommandWorld::CommandWorld()
    : signer_(Must(TokenSigner::FromSecret(std::string(TokenSigner::kSecretBytes, 'f')),
                   "token signer")) {
  // Audit lines (info) for every input would drown libFuzzer's own output; warnings and
  // errors (a command that threw) still show.
  SetLogLevel(LogLevel::kWarn);
  Reset();
}

void CommandWorld::Reset() {
  interpreter_.reset();
  store_.reset();
  std::string dir = TempDir();
  store_ = Must(LmdbStore::Open(dir + "/store"), "opening the store");
  std::filesystem::remove_all(dir);  // LMDB holds its files open; nothing is left behind

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
  claims.scope.cmds = kAgentCommands;
  claims.issued_at = kNow;
  Must(store_->RecordToken("agent", "fuzz", kAgentLabelId, {claims.scope, kNow}, kNow).status(),
       "recording the agent's token");
  agent_token_ = Must(signer_.Sign(claims), "signing the agent's token");

  Services services;
  services.store = store_.get();
  services.clock = &clock_;
  services.token_signer = &signer_;
  services.oauth = store_.get();
  services.info.ssh_host = "warren.test";
  interpreter_ = std::make_unique<Interpreter>(services);
  admin_ = Must(CallerForKey(*store_, clock_, root.fingerprint, "ssh"), "the admin caller");
  agent_ = Must(interpreter_->CallerForToken(agent_token_, "mcp"), "the agent caller");
}

}  // namespace warren::fuzz
