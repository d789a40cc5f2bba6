// The scope matrix (issue 16): every command of the command table, through one or more sample
// lines, x every kind of credential x every surface, each cell checked for
//   - the expected allow or deny, derived from the command's table entry (admin_only,
//     read_only, always_allowed) and from what its line names (another user's VM, a VM outside
//     the credential's tag, another user's integration, key or label);
//   - the one error model: the code behind the answer, and the answer in its surface's shape
//     (SSH exit status and "error: …", the HTTP status, MCP isError);
//   - no leak: nothing the caller may not see appears in anything it gets back (stdout,
//     stderr, bodies, headers), a refusal naming another user's VM reads exactly as one naming
//     a VM that does not exist, and a refused call changes nothing.
// A command without a sample here fails the test, so a new command is covered the day it is
// added. Credentials are made the product's way (ssh-key add, ssh-key generate-api-key,
// ssh-key remove); VMs live on FakeVmHost / FakeGuestControl. Each cell gets a world of its
// own (LMDB on tmpfs), so no cell sees another's changes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bridge/exec_handler.h"
#include "bridge/mcp/mcp_handler.h"
#include "bridge/sandbox_handler.h"
#include "keys/backup.h"
#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "keys/oauth.h"
#include "keys/public_key.h"
#include "keys/secret_box.h"
#include "keys/token.h"
#include "lobby/base/error_map.h"
#include "lobby/base/event_waker.h"
#include "lobby/base/log.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command.h"
#include "lobby/commands/command_runner.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/tokenizer.h"
#include "lobby/commands/vm_login.h"
#include "lobby/ssh/channel_io.h"
#include "lobby/ssh/lobby_workers.h"
#include "tests/fakes/fake_guest_control.h"
#include "tests/fakes/fake_vm_host.h"
#include "tests/unit/recording_responder.h"
#include "vmhost/host_set.h"

namespace warren::scopematrix {
namespace {

using nlohmann::json;

// ---- The axes -------------------------------------------------------------------------------

// Who calls: the VMs' owner, bob, with each kind of limit, or another user (alice, or root).
enum class Cred {
  kOwner,        // bob, unrestricted
  kOtherUser,    // alice
  kAdmin,        // root: an admin, but not the VMs' owner
  kAdminTag,     // root, limited to the tag "ci"
  kOtherTag,     // bob, limited to the tag "ci" (bob's VMs carry "hidden7q")
  kOwnTag,       // bob, limited to the tag "hidden7q" his VMs carry
  kCmdsWithout,  // bob, limited by --cmds to a list without the command
  kExpired,      // bob, past its --exp
  kRevoked,      // bob, its key or token label removed
};
constexpr Cred kCreds[] = {Cred::kOwner,       Cred::kOtherUser, Cred::kAdmin,
                           Cred::kAdminTag,    Cred::kOtherTag,  Cred::kOwnTag,
                           Cred::kCmdsWithout, Cred::kExpired,   Cred::kRevoked};

const char* CredName(Cred c) {
  switch (c) {
    case Cred::kOwner:
      return "owner";
    case Cred::kOtherUser:
      return "other-user";
    case Cred::kAdmin:
      return "admin";
    case Cred::kAdminTag:
      return "admin-tag";
    case Cred::kOtherTag:
      return "other-tag";
    case Cred::kOwnTag:
      return "own-tag";
    case Cred::kCmdsWithout:
      return "cmds-without";
    case Cred::kExpired:
      return "expired";
    case Cred::kRevoked:
      return "revoked";
  }
  return "?";
}

// Where the call comes from. SSH authenticates with a key; the rest with an API token.
enum class Surface {
  kSsh,          // ssh HOST CMD: the lobby's exec channel (RunExecCommand)
  kExec,         // POST /exec
  kMcpExec,      // /mcp tool exec
  kMcpReadOnly,  // /mcp tool exec_read_only
  kCurated,      // /mcp/claude: list_vms, create_vm, run_vm_command, get_cli_help
  kRest,         // the sandbox API over REST, /v1
  kMcpSandbox,   // the sandbox API over MCP, /mcp/sandbox
};
constexpr Surface kSurfaces[] = {Surface::kSsh,         Surface::kExec,    Surface::kMcpExec,
                                 Surface::kMcpReadOnly, Surface::kCurated, Surface::kRest,
                                 Surface::kMcpSandbox};

const char* SurfaceName(Surface s) {
  switch (s) {
    case Surface::kSsh:
      return "ssh";
    case Surface::kExec:
      return "/exec";
    case Surface::kMcpExec:
      return "mcp-exec";
    case Surface::kMcpReadOnly:
      return "mcp-ro";
    case Surface::kCurated:
      return "curated";
    case Surface::kRest:
      return "rest";
    case Surface::kMcpSandbox:
      return "mcp-sbx";
  }
  return "?";
}

bool IsMcp(Surface s) {
  return s == Surface::kMcpExec || s == Surface::kMcpReadOnly || s == Surface::kCurated ||
         s == Surface::kMcpSandbox;
}

// What a cell should come to.
enum class Verdict { kAllow, kUnauthenticated, kDenied, kNotFound, kNotOffered, kOther };

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllow:
      return "allow";
    case Verdict::kUnauthenticated:
      return "401";
    case Verdict::kDenied:
      return "403";
    case Verdict::kNotFound:
      return "404";
    case Verdict::kNotOffered:
      return "not-offered";
    case Verdict::kOther:
      return "other";
  }
  return "?";
}

// ---- The world's names ----------------------------------------------------------------------

// Bob's things a line may name (World::Fill puts in the real name, or a twin of the same
// form that does not exist: a call naming the real one must read exactly as the same call
// naming the twin).
struct Named {
  const char* placeholder;
  // Who besides other users may not see it.
  enum Reach {
    kAccount,   // bob's account's: every credential of bob's sees it
    kTagged,    // of bob's VMs tagged hidden7q: hidden from his credential limited to ci
    kUntagged,  // of bob's VM without a tag: hidden from every tag-limited credential of his
  } reach;
};
constexpr Named kNamed[] = {
    {"{VM}", Named::kTagged},       // bob's VM secret-vm-7q
    {"{SBX}", Named::kTagged},      // bob's sandbox secret-sbx-7q
    {"{JOB}", Named::kTagged},      // a job running in secret-vm-7q
    {"{INT}", Named::kTagged},      // bob's integration secret-int-7q, attached to
                                    // secret-vm-7q and plain-vm-7q
    {"{LINK}", Named::kTagged},     // a share link of secret-vm-7q
    {"{PLAIN}", Named::kUntagged},  // bob's VM plain-vm-7q, without a tag
    {"{KEY}", Named::kAccount},     // bob's spare SSH key, victim-key
    {"{LABEL}", Named::kAccount},   // bob's spare API token label, victim-label
};

constexpr char kBobVm[] = "secret-vm-7q";
constexpr char kBobSandbox[] = "secret-sbx-7q";
// Bob's VM without his VMs' tag: no tag-limited credential of his may see it.
constexpr char kBobUntaggedVm[] = "plain-vm-7q";
constexpr char kBobComment[] = "classified-7q";
constexpr char kBobTag[] = "hidden7q";
constexpr char kBobIntegration[] = "secret-int-7q";
constexpr char kBobIntegrationTarget[] = "https://bob-only.example.org";
constexpr char kAliceVm[] = "mine-vm-3x";
constexpr char kAliceIntegrationTarget[] = "https://alice-only.example.net";
constexpr char kOAuthClient[] = "wc-matrix7q";
constexpr char kOAuthCode[] = "KQ7MX2PD";

// Real ed25519 keys (ssh-keygen).
constexpr char kAliceKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpiw2c40u05jE00mSRp+vT+DI/HeS0e/0O9x2wN8yM9 "
    "alice@laptop";
constexpr char kBobKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOmLQ1xSw+ofsSpTrzqQ4rQXs+kAW07GZyFe/Rq0hEl bob@host";
constexpr char kRootKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMB5w2LyB75lM5WD8EA8f0X/QABdHKB6FqvxdfdV35PT root@host";
constexpr char kVictimKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGSbJdEEjHjtLC0/wN2B+TB6sWEiuHcBXE7d4yfpsqzH "
    "victim@matrix";
constexpr char kDaveKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAWKsLPz8yXZEomgrO7aOaEZtIilaqyfOGNZuVogwtez dave@matrix";
// The credential under test when it is a key added for it (every limited one).
constexpr char kScopedKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIELtkoa6DV+K3HQz8TzhLItzGgU9jftscZYh32uiZM/Y "
    "scoped@matrix";
// What `ssh-key add` and `user add` add in their cells.
constexpr char kFreshKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICPf3V37we6NTOXoTKDdn+CDYgzvw4bwwr8aJ9AplEPw "
    "fresh@matrix";
constexpr char kNewUserKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAevtDjrBaUofF5+PKPTnisbrwalVP9rtu+OPDZeyVnU "
    "newuser@matrix";

constexpr int64_t kStart = 1'700'000'000;
constexpr int64_t kHour = 3600;

// ---- The samples: the expectations map, keyed by command path --------------------------------

struct Sample {
  std::string path;  // the table's command path this line runs
  std::string line;  // as typed after `ssh HOST`, with kNamed placeholders and {CODE}
  // Lines run by bob (unrestricted) first, for the state the line needs.
  std::vector<std::string> setup = {};
  // What a credential gets where the table's facts and the names the line gives cannot say
  // (a tag-limited credential's own rules), with the reason beside the sample.
  std::map<Cred, Verdict> except = {};
  // The line uses an admin's power (as every admin_only command does): what it shows an
  // unrestricted admin is the admin's to see (product.md: admins manage every account).
  bool admin_power = false;
  // The command writes a byte stream (a backup file), so only SSH runs it; /exec and MCP's
  // exec refuse it as a bad request (invalid_argument) once the credential may run it.
  bool ssh_only = false;
};

bool IsAdmin(Cred c) { return c == Cred::kAdmin || c == Cred::kAdminTag; }

// Refused to every credential limited to a tag, whichever (a rule of such credentials,
// checked before anything the line names is looked up).
const std::map<Cred, Verdict> kTagLimitedDenied = {{Cred::kAdminTag, Verdict::kDenied},
                                                   {Cred::kOtherTag, Verdict::kDenied},
                                                   {Cred::kOwnTag, Verdict::kDenied}};
// Refused to bob's credentials limited to a tag: the line acts on something of his account
// wider than they are.
const std::map<Cred, Verdict> kBobsTagLimitedDenied = {{Cred::kOtherTag, Verdict::kDenied},
                                                       {Cred::kOwnTag, Verdict::kDenied}};

// Every command of the table needs at least one line here (the test fails otherwise). Bob
// (the owner, unrestricted) must be able to run each line unless its `except` says; the other
// cells follow from the command's table entry and from what the line names.
const std::vector<Sample>& Samples() {
  static const auto* samples = new std::vector<Sample>{
      {"help", "help new"},
      {"whoami", "whoami"},
      {"ls", "ls"},
      {"ls", "ls -l"},
      {"stat", "stat {SBX}"},
      {"console", "console {VM}"},
      {"new", "new"},
      // A tag-limited credential gives its VMs its tag and no other.
      {"new", "new --tag extra", {}, kTagLimitedDenied},
      {"images", "images"},
      {"authorize", "authorize {CODE}"},
      {"oauth clients list", "oauth clients list"},
      {"oauth clients remove", std::string("oauth clients remove ") + kOAuthClient},
      {"cp", "cp {VM}"},
      {"resize", "resize {VM} --disk 20"},
      {"egress", "egress {VM} integrations"},
      {"start", "start {VM}", {"stop {VM}"}},
      {"stop", "stop {VM}"},
      {"restart", "restart {VM}"},
      {"pause", "pause {VM}"},
      {"resume", "resume {VM}", {"pause {VM}"}},
      {"rm", "rm {SBX}"},
      {"rename", "rename {VM} renamed-7q"},
      // A tag-limited credential may not change tags (it sees no VM of another tag at all).
      {"tag", "tag {VM} extra", {}, {{Cred::kOwnTag, Verdict::kDenied}}},
      {"comment", "comment {VM} hello"},
      {"extend", "extend {SBX} --minutes 5"},
      {"ssh", "ssh {SBX} echo hi"},
      {"wait", "wait --wait-seconds 0 {JOB}"},
      {"kill", "kill {JOB}"},
      {"jobs", "jobs"},
      {"jobs", "jobs {VM}"},
      {"usage", "usage"},
      {"usage", "usage --vm {VM}"},
      // Every user's VMs: for admins, and not for a credential limited to a tag.
      {"usage",
       "usage --all",
       {},
       {{Cred::kOwner, Verdict::kDenied},
        {Cred::kOtherUser, Verdict::kDenied},
        {Cred::kAdminTag, Verdict::kDenied},
        {Cred::kOtherTag, Verdict::kDenied},
        {Cred::kOwnTag, Verdict::kDenied}},
       /*admin_power=*/true},
      // A tag-limited credential may not add, remove or rename integrations (refused before
      // the name is looked up), sees only those that reach its tag's VMs, and of those only
      // the attachments within its tag.
      {"integrations add",
       "integrations add http-proxy --name new-int --target https://example.com",
       {},
       kTagLimitedDenied},
      {"integrations list", "integrations list"},
      {"integrations show", "integrations show {INT}"},
      {"integrations remove", "integrations remove {INT}", {}, kTagLimitedDenied},
      {"integrations rename", "integrations rename {INT} renamed-int", {}, kTagLimitedDenied},
      // Both users have an integration called shared-int: each may attach only their own to
      // only their own VMs. Bob's reaches no VM, so no tag-limited credential sees it.
      {"integrations attach",
       "integrations attach shared-int vm:{VM}",
       {},
       {{Cred::kOwnTag, Verdict::kNotFound}}},
      {"integrations detach", "integrations detach {INT} vm:{VM}"},
      {"integrations detach", "integrations detach {INT} vm:{PLAIN}"},
      // ...and attaches only within its tag.
      {"integrations attach",
       "integrations attach {INT} tag:extra",
       {},
       {{Cred::kOwnTag, Verdict::kDenied}}},
      {"share show", "share show {VM}"},
      {"share port", "share port {VM} 3000"},
      {"share set-public", "share set-public {VM}"},
      {"share set-private", "share set-private {VM}", {"share set-public {VM}"}},
      {"share add", "share add {VM} alice"},
      {"share remove", "share remove {VM} root", {"share add {VM} root"}},
      {"share add-link", "share add-link {VM}"},
      {"share remove-link", "share remove-link {VM} {LINK}"},
      {"browser", "browser"},
      {"ssh-key list", "ssh-key list"},
      {"ssh-key add", std::string("ssh-key add ") + kFreshKey},
      // victim-key and victim-label are unrestricted: a restricted credential may not touch
      // what is wider than itself.
      {"ssh-key remove", "ssh-key remove {KEY}", {}, kBobsTagLimitedDenied},
      {"ssh-key remove", "ssh-key remove {LABEL}", {}, kBobsTagLimitedDenied},
      {"ssh-key rename", "ssh-key rename {KEY} renamed-key", {}, kBobsTagLimitedDenied},
      {"ssh-key rename", "ssh-key rename {LABEL} renamed-label", {}, kBobsTagLimitedDenied},
      {"ssh-key generate-api-key", "ssh-key generate-api-key --label fresh-label"},
      // A restricted credential makes only narrower ones.
      {"ssh-key generate-api-key",
       "ssh-key generate-api-key --label fresh-label --tag extra",
       {},
       kTagLimitedDenied},
      {"ssh-key add", std::string("ssh-key add --tag extra ") + kFreshKey, {}, kTagLimitedDenied},
      {"authorize", "authorize {CODE} --tag extra", {}, kTagLimitedDenied},
      {"user add", std::string("user add newbie --key '") + kNewUserKey + "'"},
      {"user ls", "user ls"},
      {"user set", "user set dave --max-vms 3"},
      {"user rm", "user rm dave"},
      // The hosts every user's VMs run on: admins'. A drain acts for every user, so not with
      // a credential limited to a tag.
      {"hosts", "hosts", {}, {}, /*admin_power=*/true},
      {"hosts drain", "hosts drain local", {}, {{Cred::kAdminTag, Verdict::kDenied}}, true},
      {"hosts undrain", "hosts undrain local", {}, {{Cred::kAdminTag, Verdict::kDenied}}, true},
      // Moves a VM between the hosts every user's VMs share: admins'. An admin's credential
      // limited to a tag does not see bob's VM (outside its tag: 404, as for any VM it cannot
      // see); one it could see is refused all the same, as a drain is (cmd_migrate.cc).
      {"migrate", "migrate {VM} spare", {}, {{Cred::kAdminTag, Verdict::kNotFound}}, true},
      // Every user's VMs and keys: admins only, not one limited to a tag; SSH only.
      {"backup",
       "backup",
       {},
       {{Cred::kAdminTag, Verdict::kDenied}},
       /*admin_power=*/true,
       /*ssh_only=*/true},
  };
  return *samples;
}

// ---- What each surface offers -----------------------------------------------------------------

// One request a surface makes for a sample, when it offers the command at all.
struct Request {
  // MCP: the tool and its arguments. REST: method, target, body.
  std::string tool = {};
  json arguments = {};
  std::string method = {};
  std::string target = {};
  std::string body = {};
};

// The tools each MCP endpoint lists; checked against tools/list, so a new tool fails the test
// until the matrix knows what it runs.
const std::set<std::string> kFullTools = {"exec", "exec_read_only", "wait"};
const std::set<std::string> kCuratedTools = {"list_vms", "create_vm", "run_vm_command",
                                             "get_cli_help"};
const std::set<std::string> kSandboxTools = {"create_sandbox", "exec", "extend_sandbox",
                                             "destroy_sandbox"};

// The curated endpoint's tool for a line, or nullopt: it runs ls, new, ssh and help only.
std::optional<Request> CuratedRequest(const std::string& path,
                                      const std::vector<std::string>& argv) {
  // list_vms and create_vm take no flags: a line with some is not one of theirs.
  if (path == "ls" && argv.size() == 1) return Request{"list_vms", json::object()};
  if (path == "new" && argv.size() == 1) return Request{"create_vm", json::object()};
  if (path == "help") return Request{"get_cli_help", {{"command", JoinWords(argv, 1)}}};
  if (path == "ssh") {
    return Request{"run_vm_command", {{"vm", argv.at(1)}, {"command", JoinWords(argv, 2)}}};
  }
  return std::nullopt;
}

// The first argument that is not a flag (the sandbox in the lines below).
std::string FirstOperand(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    if (!argv[i].starts_with("-")) return argv[i];
  }
  return "";
}

// The REST request for a line: the sandbox API runs new, ls, stat, ssh, extend, rm and usage.
std::optional<Request> RestRequest(const std::string& path, const std::vector<std::string>& argv) {
  Request r;
  const std::string id = FirstOperand(argv);
  // Creating and listing take none of the lobby's flags.
  if ((path == "new" || path == "ls") && argv.size() > 1) return std::nullopt;
  if (path == "new") {
    r = {"", {}, "POST", "/v1/sandboxes", "{}"};
  } else if (path == "ls") {
    r = {"", {}, "GET", "/v1/sandboxes", ""};
  } else if (path == "stat") {
    r = {"", {}, "GET", "/v1/sandboxes/" + id, ""};
  } else if (path == "rm") {
    r = {"", {}, "DELETE", "/v1/sandboxes/" + id, ""};
  } else if (path == "extend") {
    r = {"", {}, "POST", "/v1/sandboxes/" + id + "/extend", R"({"additional_minutes": 5})"};
  } else if (path == "ssh") {
    r = {"",
         {},
         "POST",
         "/v1/sandboxes/" + id + "/exec",
         json{{"command", JoinWords(argv, 2)}}.dump()};
  } else if (path == "usage") {
    // ?since= and ?vm=; nothing else.
    r = {"", {}, "GET", "/v1/usage", ""};
    if (argv.size() == 3 && argv[1] == "--vm") {
      r.target += "?vm=" + argv[2];
    } else if (argv.size() != 1) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  return r;
}

// The /mcp/sandbox tool for a line: create_sandbox, exec, extend_sandbox, destroy_sandbox.
std::optional<Request> McpSandboxRequest(const std::string& path,
                                         const std::vector<std::string>& argv) {
  const std::string id = FirstOperand(argv);
  if (path == "new" && argv.size() == 1) return Request{"create_sandbox", json::object()};
  if (path == "ssh") {
    return Request{"exec", {{"sandbox_id", id}, {"command", JoinWords(argv, 2)}}};
  }
  if (path == "extend") {
    return Request{"extend_sandbox", {{"sandbox_id", id}, {"additional_minutes", 5}}};
  }
  if (path == "rm") return Request{"destroy_sandbox", {{"sandbox_id", id}}};
  return std::nullopt;
}

// The first flag of a line, without its dashes ("all" for usage --all).
std::string FirstFlag(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i].starts_with("--")) return argv[i].substr(2);
  }
  return "flag";
}

// How a surface that does not offer a command is asked for it anyway: the tool or REST path
// named after the command. It must refuse that cleanly, saying nothing of anyone's VMs.
Request NotOfferedRequest(Surface surface, const std::string& path,
                          const std::vector<std::string>& argv) {
  std::string slug = path;
  std::replace(slug.begin(), slug.end(), ' ', '_');
  if (surface == Surface::kRest) {
    // A flag of usage the API has no parameter for, as a path of its own.
    if (path == "usage") return {"", {}, "GET", "/v1/usage/" + FirstFlag(argv), ""};
    std::string target = "/v1/" + slug;
    if (std::string id = FirstOperand(argv); !id.empty())
      target = "/v1/sandboxes/" + id + "/" + slug;
    return {"", {}, "POST", target, "{}"};
  }
  return {slug, json::object()};
}

// ---- The expectation ------------------------------------------------------------------------

bool Names(const std::string& line, const Named& n) {
  return line.find(n.placeholder) != std::string::npos;
}

// Whether `line` names something of bob's that `cred` must not see.
bool NamesHidden(const std::string& line, Cred cred) {
  for (const Named& n : kNamed) {
    if (!Names(line, n)) continue;
    if (cred == Cred::kOtherUser || IsAdmin(cred)) return true;
    if (cred == Cred::kOtherTag && n.reach != Named::kAccount) return true;
    if (cred == Cred::kOwnTag && n.reach == Named::kUntagged) return true;
  }
  return false;
}

// Whether the command's own checks (admin, --cmds) refuse `cred`.
bool CommandRefuses(const CommandSpec& spec, Cred cred) {
  if (spec.always_allowed) return false;
  return (spec.admin_only && !IsAdmin(cred)) || cred == Cred::kCmdsWithout;
}

// The expected verdict, from the table entry: dispatch checks the credential (expiry,
// revocation), then the command (admin, --cmds), then a read-only session, then the VM the
// line names. A REST path the API does not have is 404 before any token is read. `described`:
// for `help CMD`, CMD's entry (help describes only what the caller may run).
Verdict Expected(const CommandSpec& spec, const CommandSpec* described, const Sample& sample,
                 Cred cred, Surface surface, bool offered) {
  if (!offered && surface == Surface::kRest) return Verdict::kNotOffered;
  if (cred == Cred::kExpired || cred == Cred::kRevoked) return Verdict::kUnauthenticated;
  if (!offered) return Verdict::kNotOffered;
  if (CommandRefuses(spec, cred)) return Verdict::kDenied;
  if (described != nullptr && CommandRefuses(*described, cred)) return Verdict::kDenied;
  if (surface == Surface::kMcpReadOnly && !spec.read_only) return Verdict::kDenied;
  if (auto e = sample.except.find(cred); e != sample.except.end()) return e->second;
  if (sample.ssh_only && surface != Surface::kSsh) return Verdict::kOther;
  if (NamesHidden(sample.line, cred)) return Verdict::kNotFound;
  return Verdict::kAllow;
}

// Whether the verdict is reached before anything the line names is looked up, so it cannot
// depend on whether that exists.
bool RefusedBeforeLookup(const CommandSpec& spec, Verdict want, Cred cred, Surface surface) {
  if (want == Verdict::kUnauthenticated || want == Verdict::kNotOffered) return true;
  if (want != Verdict::kDenied) return false;
  return CommandRefuses(spec, cred) || (surface == Surface::kMcpReadOnly && !spec.read_only);
}

Verdict VerdictOf(Code code) {
  switch (code) {
    case Code::kOk:
      return Verdict::kAllow;
    case Code::kUnauthenticated:
      return Verdict::kUnauthenticated;
    case Code::kPermissionDenied:
      return Verdict::kDenied;
    case Code::kNotFound:
      return Verdict::kNotFound;
    default:
      return Verdict::kOther;
  }
}

std::optional<Code> CodeForHttp(int status) {
  if (status == 200 || status == kHttpCreated) return Code::kOk;
  for (const ErrorMapping& m : ErrorMappings()) {
    if (m.http_status == status && m.code != Code::kOk) return m.code;
  }
  return std::nullopt;
}

std::optional<Code> CodeForJsonRpc(int code) {
  for (const ErrorMapping& m : ErrorMappings()) {
    if (m.jsonrpc_code == code && m.code != Code::kOk) return m.code;
  }
  return std::nullopt;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// ---- One observed call ----------------------------------------------------------------------

struct Observed {
  Code code = Code::kOk;
  bool not_offered = false;
  bool ran = false;     // the interpreter ran a command session for it
  std::string wire;     // everything the client got: the leak scan reads it
  std::string message;  // why it failed, for the failure table
  std::string shape;    // how the answer disagrees with its code in its surface's shape

  Verdict verdict() const { return not_offered ? Verdict::kNotOffered : VerdictOf(code); }
};

// ---- A world: users, bob's VMs and things, one credential, every surface ------------------

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

class TestClock final : public Clock {
 public:
  int64_t NowUnix() const override { return now.load(); }
  std::atomic<int64_t> now{kStart};
};

std::string WorldRoot() {
  static const std::string root = [] {
    std::error_code ec;
    return std::filesystem::is_directory("/dev/shm", ec) ? std::string("/dev/shm")
                                                         : std::string("/tmp");
  }();
  return root;
}

// One cell's world: a store in a temp dir with alice, bob, root and dave; bob's VMs,
// sandbox, job, integrations, share link and spare key and label; alice's VM and integration;
// a pending OAuth sign-in; the interpreter, /exec, REST and MCP handlers on one command
// runner; and the cell's credential. Used by one thread.
class World {
 public:
  // Builds the world for one cell of `sample`: its setup runs as bob before the credential
  // is made.
  World(Cred cred, Surface surface, const Sample& sample);
  ~World();

  // The line with bob's real names put in (for the placeholders in `absent`, their twins).
  std::string Fill(const std::string& line, const std::set<std::string>& absent = {}) const;
  // `text` with bob's real names (or their twins) back to placeholders.
  std::string Unfill(const std::string& text) const;
  // Runs the line (filled in) of command `path` as the cell's credential on its surface.
  Observed Run(const std::string& path, const std::string& line);
  // Everything a refused call, or a read-only command, must leave as it was.
  std::string Digest();
  // What the cell's credential must never be shown.
  enum class Shown {
    kCredential,  // what the credential may see
    kNothing,     // a refused call shows nothing of anyone's
    kAdminPower,  // an admin using an admin's power (Sample::admin_power)
  };
  std::vector<std::string> Secrets(Shown shown) const;
  // tools/list of an MCP endpoint, as the cell's credential.
  json ListTools(const std::string& endpoint);
  // `ssh vm+NAME@HOST` as the cell's (SSH) credential: where the bare login NAME leads (the
  // VM's name, or nullopt for the lobby) and whether the caller may go into VM `name`.
  std::optional<std::string> VmLoginTarget(const std::string& login);
  Observed VmLogin(const std::string& name);

  // What went wrong building the world (a step that should have worked): empty when fine.
  const std::string& broken() const { return broken_; }

 private:
  std::vector<std::pair<std::string, std::string>> Values(
      const std::set<std::string>& absent) const;
  Caller KeyCaller(const char* key_line);
  // Runs `line` as `caller` outside any surface (building the world); a failure breaks it.
  json Do(const Caller& caller, const std::string& line);
  void MakeCredential();
  std::string McpInit(const std::string& endpoint);
  void Break(const std::string& why) {
    if (broken_.empty()) broken_ = why;
  }

  Observed RunSsh(const std::string& line);
  Observed RunExec(const std::string& line);
  Observed RunMcp(const std::string& endpoint, const Request& request);
  Observed RunRest(const Request& request);
  // `jsonrpc`: MCP's transport, whose errors are JSON-RPC errors.
  Observed HttpOutcome(RecordingResponder& r, bool created_ok, bool jsonrpc = false);
  // The code of the command session the call ran, if one ran (Services::on_command).
  std::optional<Code> SessionCode();
  void ClearEvents();
  size_t Events();

  const Cred cred_;
  const Surface surface_;
  const std::string path_;  // the command under test
  std::string broken_;
  std::string dir_;
  TestClock clock_;
  FakeVmHost host_{clock_};
  FakeVmHost spare_host_{clock_};  // where `migrate` moves a VM to
  FakeGuestControl guests_;
  TokenSigner signer_ = TokenSigner::FromSecret(std::string(32, 's')).value();
  SecretKey integration_key_ = SecretKey::FromBytes(std::string(SecretKey::kKeyBytes, 'i')).value();
  // One host, as serve makes it: the interpreter's VMs go through a HostSet.
  std::unique_ptr<HostSet> hosts_;
  std::unique_ptr<LmdbStore> store_;
  std::unique_ptr<Interpreter> interpreter_;
  std::unique_ptr<CommandRunner> runner_;
  std::unique_ptr<ExecHandler> exec_;
  std::unique_ptr<SandboxHandler> rest_;
  std::shared_ptr<mcp::McpHandler> mcp_;

  std::mutex events_mu_;
  std::vector<Code> events_;

  Caller bob_;
  // The cell's credential: a caller for SSH (authenticated before it expired or was
  // revoked, as an open connection), a token for the rest, and an MCP session.
  Caller caller_;
  std::string token_;
  std::string mcp_session_;
  std::string mcp_init_body_;  // its initialize answer: the instructions name the limits

  std::string vm_id_, sandbox_id_, untagged_id_, job_, link_id_, alice_vm_id_;
  std::vector<std::string> bob_account_secrets_;
};

World::World(Cred cred, Surface surface, const Sample& sample)
    : cred_(cred), surface_(surface), path_(sample.path) {
  std::string tmpl = WorldRoot() + "/warren-scope-matrix-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    Break("mkdtemp failed");
    return;
  }
  dir_ = tmpl;
  auto opened = LmdbStore::Open(dir_ + "/store");
  if (!opened.ok()) {
    Break("store: " + opened.status().ToString());
    return;
  }
  store_ = std::move(opened).value();

  Services s;
  s.store = store_.get();
  s.clock = &clock_;
  s.info.ssh_host = "warren.test";
  s.info.ssh_port = 2222;
  s.info.domain = "warren.localhost";
  s.token_signer = &signer_;
  s.oauth = store_.get();
  hosts_ = std::move(HostSet::Make({{"local", &host_, "tcg", [] { return true; }},
                                    {"spare", &spare_host_, "tcg", [] { return true; }}}))
               .value();
  s.vms = hosts_.get();
  s.hosts = hosts_.get();
  s.guests = &guests_;
  s.integration_key = &integration_key_;
  s.control_authorized_key = "ssh-ed25519 AAAAcontrol warren-control";
  s.backup = [this](const BackupWriter& out, const CancelSignal& cancel) {
    return WriteBackup({dir_, store_.get(), "test", kStart, &cancel}, out);
  };
  s.ready_timeout_ms = 2000;
  s.vm_defaults.user_limits = {kNoLimit, kNoLimit, kNoLimit, kNoLimit, 20};
  s.images.resolve = [](std::string_view name) -> Result<std::string> {
    if (name == "debian") return std::string("debian@20261129");
    return NotFound("no image named " + std::string(name) + "; available: debian");
  };
  s.images.list = [] {
    return std::vector<ImageInfo>{{"debian@20261129", "debian", "20261129", 1 << 20, "Debian 12",
                                   "dev", "2026-11-29T14:31:15Z"}};
  };
  guests_.SetHostnames([this](std::string_view id) {
    Result<VmInfo> info = host_.Inspect(id);
    return info.ok() ? info->name : std::string(id);
  });
  s.on_command = [this](const CommandEvent& e) {
    std::lock_guard lock(events_mu_);
    events_.push_back(e.code);
  };
  interpreter_ = std::make_unique<Interpreter>(s);
  runner_ = std::make_unique<CommandRunner>();
  ExecHandlerOptions exec;
  exec.rate_per_second = exec.burst = 1e6;
  exec_ = std::make_unique<ExecHandler>(*interpreter_, *runner_, exec);
  SandboxHandlerOptions rest;
  rest.rate_per_second = rest.burst = 1e6;
  rest_ = std::make_unique<SandboxHandler>(*interpreter_, *runner_, rest);
  mcp_ = std::make_shared<mcp::McpHandler>(
      *interpreter_, *runner_,
      [this](std::string_view token, std::string_view) {
        return interpreter_->CallerForToken(token, "mcp");
      },
      mcp::McpOptions{});

  // Accounts, as `serve --admin-key` and `user add` leave them.
  for (auto [user, admin, keys] :
       {std::tuple<const char*, bool, std::vector<SshKey>>{
            "alice", false, {KeyRecord(kAliceKey, "alice", "laptop")}},
        {"bob",
         false,
         {KeyRecord(kBobKey, "bob", "laptop"), KeyRecord(kVictimKey, "bob", "victim-key")}},
        {"root", true, {KeyRecord(kRootKey, "root", "root-key")}},
        {"dave", false, {KeyRecord(kDaveKey, "dave", "dave-key")}}}) {
    if (Status st = store_->CreateUser({user, admin, kStart}, keys); !st.ok()) {
      Break("user " + std::string(user) + ": " + st.ToString());
    }
  }
  bob_ = KeyCaller(kBobKey);
  Caller alice = KeyCaller(kAliceKey);

  // Bob's VMs and what hangs off them; alice's, whose names bob's credentials must not see.
  vm_id_ = Do(bob_, std::string("new --name ") + kBobVm + " --tag " + kBobTag + " --comment " +
                        kBobComment)
               .value("id", "");
  sandbox_id_ = Do(bob_, std::string("new --sandbox --name ") + kBobSandbox + " --tag " + kBobTag)
                    .value("id", "");
  guests_.SetScript("sleep-7q", {"", "", std::nullopt, /*hold=*/true});
  const std::string job =
      Do(bob_, std::string("ssh --wait-seconds 0 ") + kBobVm + " sleep-7q").value("job", "");
  if (job.find('/') != std::string::npos) job_ = job.substr(job.find('/') + 1);
  untagged_id_ = Do(bob_, std::string("new --name ") + kBobUntaggedVm).value("id", "");
  Do(bob_, std::string("ssh --wait-seconds 0 ") + kBobUntaggedVm + " sleep-7q");
  // Seen by a credential limited to the tag secret-vm-7q carries, but never its attachment to
  // plain-vm-7q.
  Do(bob_, std::string("integrations add http-proxy --name ") + kBobIntegration +
               " --target https://example.com --attach vm:" + kBobVm +
               " --attach vm:" + kBobUntaggedVm);
  Do(bob_, std::string("integrations add http-proxy --name shared-int --target ") +
               kBobIntegrationTarget);
  link_id_ = Do(bob_, std::string("share add-link ") + kBobVm).value("id", "");
  json label = Do(bob_, "ssh-key generate-api-key --label victim-label");
  alice_vm_id_ = Do(alice, std::string("new --name ") + kAliceVm).value("id", "");
  Do(alice, std::string("integrations add http-proxy --name shared-int --target ") +
                kAliceIntegrationTarget);
  if (job_.empty() || link_id_.empty()) Break("no job or no share link for bob");
  bob_account_secrets_ = {"victim-key",
                          "victim-label",
                          label.value("label_id", "?"),
                          kBobIntegrationTarget,
                          KeyRecord(kVictimKey, "", "").fingerprint,
                          KeyRecord(kBobKey, "", "").fingerprint};

  // A client waiting for approval, as the sign-in page leaves it.
  if (Status st = store_->CreateOAuthClient(
          {kOAuthClient, "Matrix Client", {"http://127.0.0.1:9/cb"}, kStart, ""});
      !st.ok()) {
    Break("oauth client: " + st.ToString());
  }
  OAuthRequest pending;
  pending.id = HashSecret("page-secret");
  pending.user_code_hash = HashSecret(kOAuthCode);
  pending.client_id = kOAuthClient;
  pending.redirect_uri = "http://127.0.0.1:9/cb";
  pending.code_challenge = std::string(43, 'c');
  pending.resource = "https://warren.test/mcp";
  pending.created_at = kStart;
  pending.expires_at = kStart + kOAuthRequestSeconds;
  if (Status st = store_->CreateOAuthRequest(pending, kStart); !st.ok()) {
    Break("oauth request: " + st.ToString());
  }

  for (const std::string& line : sample.setup) Do(bob_, Fill(line));
  MakeCredential();
}

World::~World() {
  if (mcp_ != nullptr) mcp_->Shutdown();
  if (runner_ != nullptr) runner_->Stop();
  mcp_.reset();
  exec_.reset();
  rest_.reset();
  runner_.reset();
  interpreter_.reset();
  store_.reset();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

Caller World::KeyCaller(const char* key_line) {
  Result<Caller> c = CallerForKey(*store_, clock_, KeyRecord(key_line, "", "").fingerprint, "ssh");
  if (!c.ok()) {
    Break("authenticating " + std::string(key_line).substr(0, 40) + ": " + c.status().ToString());
    return {};
  }
  return *c;
}

json World::Do(const Caller& caller, const std::string& line) {
  StringSink out, err;
  CommandSession s;
  s.caller = caller;
  s.out = &out;
  s.err = &err;
  s.json = true;
  interpreter_->ExecuteLine(s, line);
  if (!s.status.ok()) {
    Break("\"" + line + "\" as " + caller.user + ": " + s.status.ToString());
    return json::object();
  }
  json j = json::parse(out.str(), nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

std::string World::McpInit(const std::string& endpoint) {
  HttpRequest req;
  req.method = "POST";
  req.path = req.target = endpoint;
  req.headers = {{"authorization", "Bearer " + token_},
                 {"content-type", "application/json"},
                 {"accept", "application/json"}};
  req.body = json{{"jsonrpc", "2.0"},
                  {"id", 1},
                  {"method", "initialize"},
                  {"params",
                   {{"protocolVersion", "2025-11-25"},
                    {"capabilities", json::object()},
                    {"clientInfo", {{"name", "matrix"}, {"version", "1"}}}}}}
                 .dump();
  auto r = std::make_shared<RecordingResponder>();
  mcp_->Handle(std::move(req), r);
  r->Await();
  if (r->status() != 200) Break("MCP initialize on " + endpoint + ": " + r->body());
  mcp_init_body_ = r->body();
  return r->header("Mcp-Session-Id");
}

json World::ListTools(const std::string& endpoint) {
  const std::string session = McpInit(endpoint);
  HttpRequest req;
  req.method = "POST";
  req.path = req.target = endpoint;
  req.headers = {{"authorization", "Bearer " + token_},
                 {"content-type", "application/json"},
                 {"accept", "application/json"},
                 {"mcp-session-id", session}};
  req.body = json{{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/list"}}.dump();
  auto r = std::make_shared<RecordingResponder>();
  mcp_->Handle(std::move(req), r);
  r->Await();
  json body = json::parse(r->body(), nullptr, false);
  if (body.is_discarded()) return json::array();
  return body.value("result", json::object()).value("tools", json::array());
}

std::optional<std::string> World::VmLoginTarget(const std::string& login) {
  return warren::VmLoginTarget(*store_, caller_, login);
}

Observed World::VmLogin(const std::string& name) {
  Caller caller = caller_;
  Result<VmRecord> vm = AuthorizeVmLogin(*interpreter_, caller, name);
  Observed o;
  o.ran = true;
  o.code = vm.ok() ? Code::kOk : vm.status().code();
  o.message = vm.ok() ? "" : vm.status().message();
  o.wire = o.message;
  return o;
}

// The cell's credential, made as a user makes one: bob adds a key or mints a token with the
// limits, then (expired) time passes or (revoked) he removes it again.
void World::MakeCredential() {
  const bool ssh = surface_ == Surface::kSsh;
  std::string endpoint = "/mcp";
  if (surface_ == Surface::kCurated) endpoint = "/mcp/claude";
  if (surface_ == Surface::kMcpSandbox) endpoint = "/mcp/sandbox";

  Caller owner = bob_;
  std::string flags;
  switch (cred_) {
    case Cred::kOwner:
      break;
    case Cred::kOtherUser:
      owner = KeyCaller(kAliceKey);
      break;
    case Cred::kAdmin:
      owner = KeyCaller(kRootKey);
      break;
    case Cred::kAdminTag:
      owner = KeyCaller(kRootKey);
      flags = " --tag ci";
      break;
    case Cred::kOtherTag:
      flags = " --tag ci";
      break;
    case Cred::kOwnTag:
      flags = std::string(" --tag ") + kBobTag;
      break;
    case Cred::kCmdsWithout:
      // A list without the command under test: whoami, or for whoami itself images.
      flags = path_ == "whoami" ? " --cmds images" : " --cmds whoami";
      break;
    case Cred::kExpired:
      clock_.now = kStart - 2 * kHour;  // made two hours ago, for one hour
      flags = " --exp 1h";
      break;
    case Cred::kRevoked:
      break;
  }

  // A credential with limits is a key or token made for it; the others are the user's own.
  const bool own_key = cred_ != Cred::kOwner && cred_ != Cred::kOtherUser && cred_ != Cred::kAdmin;
  if (ssh) {
    if (own_key) {
      Do(owner, std::string("ssh-key add --name scoped-key") + flags + " " + kScopedKey);
      caller_ = KeyCaller(kScopedKey);
    } else {
      caller_ = owner;
    }
  } else {
    const std::string label = own_key ? "scoped-token" : "cell-token";
    token_ = Do(owner, "ssh-key generate-api-key --label " + label + flags).value("token", "");
    if (token_.empty()) Break("no token minted");
    if (IsMcp(surface_)) mcp_session_ = McpInit(endpoint);
  }

  if (cred_ == Cred::kExpired) clock_.now = kStart;
  if (cred_ == Cred::kRevoked)
    Do(bob_, ssh ? "ssh-key remove scoped-key" : "ssh-key remove scoped-token");
  if (cred_ == Cred::kExpired || cred_ == Cred::kRevoked) {
    // Refused at authentication from now on; an open connection is refused at its next command.
    bool refused =
        ssh ? !CallerForKey(*store_, clock_, KeyRecord(kScopedKey, "", "").fingerprint, "ssh").ok()
            : !interpreter_->CallerForToken(token_, "exec").ok();
    if (!refused) Break("the " + std::string(CredName(cred_)) + " credential still authenticates");
  }
}

// Each placeholder's value: bob's real name, or for the placeholders in `absent` a twin of the
// same form that names nothing.
std::vector<std::pair<std::string, std::string>> World::Values(
    const std::set<std::string>& absent) const {
  const std::vector<std::tuple<std::string, std::string, std::string>> values = {
      {"{VM}", kBobVm, "absent-vm-7q"},
      {"{SBX}", kBobSandbox, "absent-sbx-7q"},
      {"{JOB}", std::string(kBobVm) + "/" + job_, "absent-vm-7q/" + job_},
      {"{INT}", kBobIntegration, "absent-int-7q"},
      {"{LINK}", link_id_, std::string(link_id_.size(), '0')},
      {"{PLAIN}", kBobUntaggedVm, "absent-plain-7q"},
      {"{KEY}", "victim-key", "absent-key"},
      {"{LABEL}", "victim-label", "absent-label"},
      {"{CODE}", kOAuthCode, kOAuthCode}};
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [placeholder, real, twin] : values) {
    out.emplace_back(placeholder, absent.count(placeholder) ? twin : real);
  }
  return out;
}

std::string World::Fill(const std::string& line, const std::set<std::string>& absent) const {
  std::string out = line;
  for (const auto& [placeholder, value] : Values(absent)) out = Replace(out, placeholder, value);
  return out;
}

// The text with bob's names and their twins back to their placeholders, for comparing a call
// naming real things with the same call naming absent ones.
std::string World::Unfill(const std::string& text) const {
  std::set<std::string> all;
  for (const Named& n : kNamed) all.insert(n.placeholder);
  auto values = Values({});
  for (auto& v : Values(all)) values.push_back(std::move(v));
  // Longest first: the job's name holds the VM's.
  std::sort(values.begin(), values.end(),
            [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string out = text;
  for (const auto& [placeholder, value] : values) out = Replace(out, value, placeholder);
  return out;
}

std::vector<std::string> World::Secrets(Shown shown) const {
  std::vector<std::string> untagged = {kBobUntaggedVm, untagged_id_};
  std::vector<std::string> bob_vms = {kBobVm,      vm_id_,  kBobSandbox,    sandbox_id_,
                                      kBobComment, kBobTag, kBobIntegration};
  bob_vms.insert(bob_vms.end(), untagged.begin(), untagged.end());
  std::vector<std::string> alice = {kAliceVm, alice_vm_id_, kAliceIntegrationTarget,
                                    KeyRecord(kAliceKey, "", "").fingerprint};
  std::vector<std::string> out;
  auto add = [&](const std::vector<std::string>& v) { out.insert(out.end(), v.begin(), v.end()); };
  if (shown == Shown::kAdminPower) {
    // An unrestricted admin sees every account; one limited to a tag still no VM outside it.
    if (cred_ == Cred::kAdminTag) {
      add(bob_vms);
      add({kAliceVm, alice_vm_id_});
    }
    return out;
  }
  if (shown == Shown::kNothing) {
    add(bob_vms);
    add(bob_account_secrets_);
    add(alice);
    // Except what the credential holds itself: its own tag.
    if (cred_ == Cred::kOwnTag) std::erase(out, std::string(kBobTag));
    return out;
  }
  switch (cred_) {
    case Cred::kOwner:
    case Cred::kCmdsWithout:
      add(alice);
      break;
    case Cred::kOwnTag:
      add(alice);
      add(untagged);
      break;
    case Cred::kOtherTag:
      add(alice);
      add(bob_vms);
      break;
    case Cred::kOtherUser:
      add(bob_vms);
      add(bob_account_secrets_);
      break;
    case Cred::kAdmin:
    case Cred::kAdminTag:
    case Cred::kExpired:
    case Cred::kRevoked:
      add(bob_vms);
      add(bob_account_secrets_);
      add(alice);
      break;
  }
  return out;
}

std::string World::Digest() {
  std::ostringstream d;
  auto line = [&](const std::string& what, const json& j) { d << what << " " << j.dump() << "\n"; };
  auto without_use = [](json j) {
    j.erase("last_used_at");
    return j;
  };
  Result<std::vector<User>> users = store_->ListUsers();
  for (const User& u : users.ok() ? *users : std::vector<User>{}) {
    line("user", lmdb::Codec<User>::Encode(u));
    if (auto keys = store_->ListKeys(u.name); keys.ok()) {
      for (const SshKey& k : *keys) line("key", without_use(lmdb::Codec<SshKey>::Encode(k)));
    }
    if (auto labels = store_->ListTokenLabels(u.name); labels.ok()) {
      for (const TokenLabel& l : *labels) {
        line("label", without_use(lmdb::Codec<TokenLabel>::Encode(l)));
      }
    }
    if (auto integrations = store_->ListIntegrations(u.name); integrations.ok()) {
      for (const IntegrationRecord& i : *integrations) {
        line("integration", lmdb::Codec<IntegrationRecord>::Encode(i));
      }
    }
  }
  Result<std::vector<VmRecord>> vms = store_->ListVms();
  for (const VmRecord& vm : vms.ok() ? *vms : std::vector<VmRecord>{}) {
    line("vm", lmdb::Codec<VmRecord>::Encode(vm));
    if (auto jobs = store_->ListJobs(vm.id); jobs.ok()) {
      for (const JobRecord& j : *jobs) line("job", lmdb::Codec<JobRecord>::Encode(j));
    }
    if (auto share = store_->GetVmShare(vm.id); share.ok()) {
      json links = json::array();
      for (const ShareLink& l : share->links) links.push_back(l.id);
      line("share", {{"vm", vm.id},
                     {"public", share->is_public},
                     {"port", share->port},
                     {"users", share->users},
                     {"links", links}});
    }
  }
  if (auto domains = host_.List(); domains.ok()) {
    for (const VmInfo& info : *domains) {
      line("domain",
           {{"id", info.id}, {"name", info.name}, {"state", static_cast<int>(info.state)}});
    }
  }
  if (auto clients = store_->ListOAuthClients(); clients.ok()) {
    for (const OAuthClient& c : *clients) line("oauth-client", c.id);
  }
  if (auto pending = store_->GetOAuthRequest(HashSecret("page-secret")); pending.ok()) {
    line("oauth-request", {{"phase", static_cast<int>(pending->phase)}, {"user", pending->user}});
  }
  return d.str();
}

std::optional<Code> World::SessionCode() {
  std::lock_guard lock(events_mu_);
  if (events_.empty()) return std::nullopt;
  return events_.back();
}

void World::ClearEvents() {
  std::lock_guard lock(events_mu_);
  events_.clear();
}

size_t World::Events() {
  std::lock_guard lock(events_mu_);
  return events_.size();
}

// The SSH lobby's exec channel: the line as the client sent it, on a worker as the server
// runs it, output drained as the connection thread drains it.
Observed World::RunSsh(const std::string& line) {
  ssh::ChannelIo io(std::make_shared<EventWaker>());
  io.SetStdinEof();
  std::thread worker(
      [&] { io.Finish(ssh::RunExecCommand(io, *interpreter_, caller_, line, /*pty=*/false)); });
  std::string out, err;
  int exit_status = -1;
  for (;;) {
    std::string bytes;
    bool is_err = false;
    while (io.PeekOutput(64 * 1024, &bytes, &is_err)) {
      (is_err ? err : out) += bytes;
      io.ConsumeOutput(bytes.size());
    }
    if (io.Drained(&exit_status)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  worker.join();
  Observed o;
  o.wire = out + err;
  std::optional<Code> code = SessionCode();
  if (!code.has_value()) {
    o.code = Code::kInternal;
    o.shape = "no command session ran";
    return o;
  }
  o.ran = true;
  o.code = *code;
  if (o.code != Code::kOk) o.message = err;
  const bool exit_ok =
      o.code == Code::kCommandFailed ? exit_status != 0 : exit_status == ExitStatusFor(o.code);
  if (!exit_ok) {
    o.shape =
        "exit status " + std::to_string(exit_status) + " for " + std::string(CodeName(o.code));
  } else if (o.code != Code::kOk && o.code != Code::kCommandFailed &&
             err.rfind("error: ", 0) != 0) {
    o.shape = "stderr does not start with \"error: \"";
  }
  return o;
}

// Reads a JSON answer of an HTTP surface: its status as a code, checked against the code of
// the command session behind it when one ran.
Observed World::HttpOutcome(RecordingResponder& r, bool created_ok, bool jsonrpc) {
  Observed o;
  const int status = r.status();
  o.wire = r.body() + r.header("Location");
  json body = json::parse(r.body(), nullptr, false);
  std::optional<Code> wire_code = CodeForHttp(status);
  std::optional<Code> session = SessionCode();
  o.ran = session.has_value();
  o.code = session.value_or(wire_code.value_or(Code::kInternal));
  if (!wire_code.has_value()) {
    o.shape = "HTTP " + std::to_string(status) + " is no code's";
  } else if (*wire_code != o.code && !(o.code == Code::kCommandFailed && status == 200)) {
    o.shape = "HTTP " + std::to_string(status) + " for " + std::string(CodeName(o.code));
  } else if (status == kHttpCreated && !created_ok) {
    o.shape = "201 for a request that makes nothing";
  } else if (body.is_discarded()) {
    o.shape = "the body is not JSON";
  } else if (o.code != Code::kOk && o.code != Code::kCommandFailed) {
    // /exec and REST answer {"error": "…"}; MCP's transport a JSON-RPC error with the code's
    // number.
    const json error = body.value("error", json());
    if (jsonrpc && error.is_object() && error.value("code", 0) == JsonRpcCodeFor(o.code) &&
        error.contains("message") && error["message"].is_string()) {
      o.message = error["message"];
    } else if (!jsonrpc && error.is_string()) {
      o.message = error;
    } else {
      o.shape = "an error not in the surface's shape";
    }
    if (o.code == Code::kUnauthenticated && r.header("WWW-Authenticate").empty()) {
      o.shape = "401 without WWW-Authenticate";
    }
  }
  return o;
}

Observed World::RunExec(const std::string& line) {
  HttpRequest req;
  req.method = "POST";
  req.path = req.target = "/exec";
  req.headers = {{"authorization", "Bearer " + token_}, {"content-type", "application/json"}};
  req.body = json{{"command", line}}.dump();
  auto r = std::make_shared<RecordingResponder>();
  exec_->Handle(std::move(req), r);
  r->Await();
  return HttpOutcome(*r, /*created_ok=*/false);
}

Observed World::RunRest(const Request& request) {
  HttpRequest req;
  req.method = request.method;
  req.target = request.target;
  req.path = request.target.substr(0, request.target.find('?'));
  req.headers = {{"authorization", "Bearer " + token_}, {"content-type", "application/json"}};
  req.body = request.body;
  auto r = std::make_shared<RecordingResponder>();
  rest_->Handle(std::move(req), r);
  r->Await();
  Observed o = HttpOutcome(*r, request.method == "POST" && request.target == "/v1/sandboxes");
  // A path the API does not have: its router's 404, before any token or command.
  o.not_offered = !o.ran && r->status() == 404 && o.message.rfind("no such endpoint", 0) == 0;
  return o;
}

Observed World::RunMcp(const std::string& endpoint, const Request& request) {
  HttpRequest req;
  req.method = "POST";
  req.path = req.target = endpoint;
  req.headers = {{"authorization", "Bearer " + token_},
                 {"content-type", "application/json"},
                 {"accept", "application/json"},
                 {"mcp-session-id", mcp_session_},
                 {"mcp-protocol-version", "2025-11-25"}};
  req.body = json{{"jsonrpc", "2.0"},
                  {"id", 2},
                  {"method", "tools/call"},
                  {"params", {{"name", request.tool}, {"arguments", request.arguments}}}}
                 .dump();
  auto r = std::make_shared<RecordingResponder>();
  mcp_->Handle(std::move(req), r);
  r->Await();
  if (r->status() != 200) return HttpOutcome(*r, false, true);  // refused before any tool

  Observed o;
  // What the client was told when it connected is the call's too (its instructions describe
  // the credential's limits).
  o.wire = mcp_init_body_ + r->body();
  json body = json::parse(r->body(), nullptr, false);
  std::optional<Code> session = SessionCode();
  o.ran = session.has_value();
  if (body.is_discarded() || !body.is_object()) {
    o.code = Code::kInternal;
    o.shape = "the body is not a JSON-RPC message";
    return o;
  }
  if (body.contains("error")) {
    const json& e = body["error"];
    o.message = e.value("message", "");
    o.code = CodeForJsonRpc(e.value("code", 0)).value_or(Code::kInternal);
    o.not_offered = !o.ran && o.message.rfind("unknown tool", 0) == 0;
    return o;
  }
  const json result = body.value("result", json::object());
  const bool is_error = result.value("isError", false);
  if (result.contains("content") && result["content"].is_array() && !result["content"].empty()) {
    if (is_error) o.message = result["content"][0].value("text", "");
  }
  if (!o.ran) {
    o.code = is_error ? Code::kInvalidArgument : Code::kInternal;
    o.shape = "no command session ran";
    return o;
  }
  o.code = *session;
  if (is_error != (o.code != Code::kOk)) {
    o.shape = std::string("isError ") + (is_error ? "true" : "false") + " for " +
              std::string(CodeName(o.code));
  } else if (is_error && o.code != Code::kCommandFailed && o.message.rfind("error: ", 0) != 0) {
    o.shape = "a tool error whose text does not start with \"error: \"";
  }
  return o;
}

// The request a surface makes for a line; nullopt when the surface does not offer the command.
// SSH, /exec and /mcp's exec tools take any line.
std::optional<Request> SurfaceRequest(Surface surface, const std::string& path,
                                      const std::vector<std::string>& argv) {
  switch (surface) {
    case Surface::kSsh:
    case Surface::kExec:
    case Surface::kMcpExec:
    case Surface::kMcpReadOnly:
      return Request{};
    case Surface::kCurated:
      return CuratedRequest(path, argv);
    case Surface::kRest:
      return RestRequest(path, argv);
    case Surface::kMcpSandbox:
      return McpSandboxRequest(path, argv);
  }
  return std::nullopt;
}

Observed World::Run(const std::string& path, const std::string& line) {
  ClearEvents();
  Result<std::vector<std::string>> argv = Tokenize(line);
  if (!argv.ok()) {
    Observed o;
    o.code = Code::kInternal;
    o.shape = "the sample does not tokenize: " + argv.status().ToString();
    return o;
  }
  std::optional<Request> request = SurfaceRequest(surface_, path, *argv);
  if (!request.has_value()) request = NotOfferedRequest(surface_, path, *argv);
  Observed o;
  switch (surface_) {
    case Surface::kSsh:
      o = RunSsh(line);
      break;
    case Surface::kExec:
      o = RunExec(line);
      break;
    case Surface::kMcpExec:
      o = RunMcp("/mcp", {"exec", {{"command", line}}});
      break;
    case Surface::kMcpReadOnly:
      o = RunMcp("/mcp", {"exec_read_only", {{"command", line}}});
      break;
    case Surface::kCurated:
      o = RunMcp("/mcp/claude", *request);
      break;
    case Surface::kRest:
      o = RunRest(*request);
      break;
    case Surface::kMcpSandbox:
      o = RunMcp("/mcp/sandbox", *request);
      break;
  }
  if (Events() > 1) o.shape = "more than one command session ran";
  return o;
}

// ---- The matrix -----------------------------------------------------------------------------

struct Failure {
  std::string line;
  Cred cred;
  Surface surface;
  Verdict expected;
  Observed got;
  std::string why;
};

struct Tally {
  size_t cells = 0;
  size_t compared = 0;  // cells also run naming absent things (A/B)
  std::map<Verdict, size_t> verdicts;
  std::vector<Failure> failures;
};

bool Offered(Surface surface, const Sample& sample) {
  Result<std::vector<std::string>> argv = Tokenize(sample.line);
  return argv.ok() && SurfaceRequest(surface, sample.path, *argv).has_value();
}

// For `help CMD`, CMD's table entry; null otherwise.
const CommandSpec* Described(const CommandTable& table, const CommandSpec& spec,
                             const Sample& sample) {
  if (spec.path != "help") return nullptr;
  Result<std::vector<std::string>> argv = Tokenize(sample.line);
  if (!argv.ok() || argv->size() < 2) return nullptr;
  return table.Find(JoinWords(*argv, 1));
}

void RunCell(const CommandTable& table, const CommandSpec& spec, const Sample& sample, Cred cred,
             Surface surface, Tally& tally) {
  ++tally.cells;
  const Verdict want = Expected(spec, Described(table, spec, sample), sample, cred, surface,
                                Offered(surface, sample));
  ++tally.verdicts[want];
  auto fail = [&](const Observed& got, const std::string& why) {
    tally.failures.push_back({sample.line, cred, surface, want, got, why});
  };
  World world(cred, surface, sample);
  if (!world.broken().empty()) return fail({}, "world: " + world.broken());

  const std::string line = world.Fill(sample.line);
  // What must not change: everything, for a refusal or a read-only command.
  const bool unchanged = want != Verdict::kAllow || spec.read_only;
  const std::string before = unchanged ? world.Digest() : "";
  Observed got = world.Run(sample.path, line);
  if (got.verdict() != want) return fail(got, "");
  if (!got.shape.empty()) return fail(got, got.shape);

  // Nothing the caller may not see, except what its own line said (compared below).
  World::Shown shown = World::Shown::kCredential;
  if (want != Verdict::kAllow) shown = World::Shown::kNothing;
  if (want == Verdict::kAllow && IsAdmin(cred) && (spec.admin_only || sample.admin_power)) {
    shown = World::Shown::kAdminPower;
  }
  for (const std::string& secret : world.Secrets(shown)) {
    if (secret.empty() || line.find(secret) != std::string::npos) continue;
    if (got.wire.find(secret) != std::string::npos) return fail(got, "leaks \"" + secret + "\"");
  }
  if (want == Verdict::kAllow) {
    // What exec_read_only may run changes nothing, as its table entry says.
    if (spec.read_only && world.Digest() != before) {
      return fail(got, "a read-only command changed something");
    }
    return;
  }
  if (world.Digest() != before) return fail(got, "a refused call changed something");

  // A refusal naming bob's things the caller may not see (or reached before anything named is
  // looked up) must read as the same refusal naming things that do not exist: it tells
  // nothing of their existence.
  // Made absent: what the caller may not see, or everything named when nothing is looked up.
  std::set<std::string> twins;
  const bool before_lookup = RefusedBeforeLookup(spec, want, cred, surface);
  for (const Named& n : kNamed) {
    if (Names(sample.line, n) && (before_lookup || NamesHidden(n.placeholder, cred))) {
      twins.insert(n.placeholder);
    }
  }
  if (twins.empty()) return;
  ++tally.compared;
  Observed absent = world.Run(sample.path, world.Fill(sample.line, twins));
  if (absent.verdict() != got.verdict() || absent.code != got.code) {
    return fail(got,
                "naming absent things gives " + std::string(CodeName(absent.code)) + " instead");
  }
  const std::string real_text = world.Unfill(got.wire);
  const std::string absent_text = world.Unfill(absent.wire);
  if (real_text != absent_text) {
    return fail(got, "answers differ from naming absent things: \"" + real_text.substr(0, 160) +
                         "\" vs \"" + absent_text.substr(0, 160) + "\"");
  }
  if (world.Digest() != before) return fail(got, "a refused call changed something");
}

std::string Cut(std::string s, size_t n) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.size() > n ? s.substr(0, n - 1) + "…" : s;
}

std::string FailureTable(const std::vector<Failure>& failures) {
  std::ostringstream t;
  t << "LINE | CREDENTIAL | SURFACE | WANT | GOT | WHY / MESSAGE\n";
  for (const Failure& f : failures) {
    std::string got = f.got.not_offered ? "not-offered" : std::string(CodeName(f.got.code));
    t << f.line << " | " << CredName(f.cred) << " | " << SurfaceName(f.surface) << " | "
      << VerdictName(f.expected) << " | " << got << " | "
      << Cut(f.why.empty() ? f.got.message : f.why + " — " + f.got.message, 200) << "\n";
  }
  return t.str();
}

class ScopeMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override { SetLogLevel(LogLevel::kError); }
  void TearDown() override { SetLogLevel(LogLevel::kInfo); }
};

// The expectations cover the table: every command has a sample, every sample runs the command
// it says, and every command that acts on a VM has a sample naming bob's VM.
TEST_F(ScopeMatrixTest, EveryCommandOfTheTableHasASample) {
  CommandTable table;
  RegisterBuiltinCommands(table);
  std::set<std::string> sampled;
  for (const Sample& s : Samples()) {
    const CommandSpec* spec = table.Find(s.path);
    ASSERT_NE(spec, nullptr) << "a sample for a command the table does not have: " << s.path;
    Result<std::vector<std::string>> argv = Tokenize(s.line);
    ASSERT_TRUE(argv.ok()) << s.line;
    CommandTable::Match m = table.Lookup(*argv);
    ASSERT_EQ(m.spec, spec) << "\"" << s.line << "\" does not run " << s.path;
    sampled.insert(s.path);
  }
  for (const CommandSpec& spec : table.commands()) {
    EXPECT_TRUE(sampled.count(spec.path))
        << "\"" << spec.path
        << "\" has no sample in the scope matrix (tests/unit/scope_matrix_test.cc, Samples()): "
           "add a line its owner can run";
    if (spec.target.need == VmNeed::kNone) continue;
    bool names_vm = false;
    for (const Sample& s : Samples()) {
      if (s.path != spec.path) continue;
      for (const Named& n : kNamed) {
        names_vm = names_vm || (n.reach != Named::kAccount && Names(s.line, n));
      }
    }
    EXPECT_TRUE(names_vm) << "\"" << spec.path << "\" acts on a VM but no sample names bob's";
  }
}

// The surfaces' own lists of what they offer are what the matrix knows.
TEST_F(ScopeMatrixTest, EndpointsOfferWhatTheMatrixKnows) {
  World world(Cred::kOwner, Surface::kMcpExec, Samples().front());
  ASSERT_EQ(world.broken(), "");
  for (auto [endpoint, known] :
       {std::pair{"/mcp", &kFullTools}, std::pair{"/mcp/claude", &kCuratedTools},
        std::pair{"/mcp/sandbox", &kSandboxTools}}) {
    std::set<std::string> listed;
    for (const json& tool : world.ListTools(endpoint)) listed.insert(tool.value("name", ""));
    EXPECT_EQ(listed, *known) << endpoint;
  }
}

// The scans are not blind: what the owner is shown holds the names the others must not see,
// and a credential limited to a tag is shown its VMs and not the rest.
TEST_F(ScopeMatrixTest, TheAnswersScannedHoldWhatTheCallerMaySee) {
  struct Case {
    Cred cred;
    Surface surface;
    std::string path, line;
    std::vector<std::string> shown, hidden;
  };
  const std::vector<Case> cases = {
      {Cred::kOwner, Surface::kExec, "ls", "ls", {kBobVm, kBobSandbox, kBobUntaggedVm}, {kAliceVm}},
      {Cred::kOwner,
       Surface::kSsh,
       "integrations show",
       "integrations show {INT}",
       {kBobVm, kBobUntaggedVm},
       {}},
      {Cred::kOwnTag,
       Surface::kMcpExec,
       "integrations show",
       "integrations show {INT}",
       {kBobVm},
       {kBobUntaggedVm}},
      {Cred::kOwnTag, Surface::kCurated, "ls", "ls", {kBobVm, kBobSandbox}, {kBobUntaggedVm}},
      {Cred::kOwnTag, Surface::kExec, "jobs", "jobs", {kBobVm}, {kBobUntaggedVm}},
      {Cred::kOwner, Surface::kExec, "jobs", "jobs", {kBobVm, kBobUntaggedVm}, {}},
      {Cred::kOwner, Surface::kRest, "ls", "ls", {kBobSandbox}, {kBobVm}},
      {Cred::kOtherUser, Surface::kExec, "ls", "ls", {kAliceVm}, {kBobVm}},
      {Cred::kOtherUser,
       Surface::kMcpReadOnly,
       "integrations list",
       "integrations list",
       {"alice-only"},
       {"bob-only"}},
  };
  for (const Case& c : cases) {
    World world(c.cred, c.surface, {c.path, c.line});
    ASSERT_EQ(world.broken(), "");
    Observed o = world.Run(c.path, world.Fill(c.line));
    ASSERT_EQ(o.code, Code::kOk) << c.line << ": " << o.message;
    for (const std::string& s : c.shown) {
      EXPECT_NE(o.wire.find(s), std::string::npos)
          << c.line << " as " << CredName(c.cred) << " should show " << s << ":\n"
          << o.wire;
    }
    for (const std::string& s : c.hidden) {
      EXPECT_EQ(o.wire.find(s), std::string::npos)
          << c.line << " as " << CredName(c.cred) << " shows " << s << ":\n"
          << o.wire;
    }
  }
}

// `ssh vm+NAME@HOST` (the SSH VM route) is allowed exactly when the lobby's `ssh NAME CMD` is,
// and a bare login NAME leads into a VM only the caller can see (else to the lobby), so a
// login name reveals nothing.
TEST_F(ScopeMatrixTest, VmLoginsFollowTheSshRow) {
  CommandTable table;
  RegisterBuiltinCommands(table);
  const Sample* ssh_row = nullptr;
  for (const Sample& s : Samples()) {
    if (s.path == "ssh") ssh_row = &s;
  }
  ASSERT_NE(ssh_row, nullptr);
  for (Cred cred : kCreds) {
    World world(cred, Surface::kSsh, *ssh_row);
    ASSERT_EQ(world.broken(), "") << CredName(cred);
    const Verdict want = Expected(*table.Find("ssh"), nullptr, *ssh_row, cred, Surface::kSsh, true);
    Observed got = world.VmLogin(kBobSandbox);
    EXPECT_EQ(got.verdict(), want) << CredName(cred) << ": " << got.message;
    Observed absent = world.VmLogin("absent-sbx-7q");
    if (want != Verdict::kAllow) {
      EXPECT_EQ(absent.code, got.code) << CredName(cred);
      EXPECT_EQ(Replace(absent.message, "absent-sbx-7q", kBobSandbox), got.message);
    }
    // Routing is decided once, after authentication (which refuses an expired or removed
    // key): an expired or revoked credential routed while it was valid, and is refused on
    // each channel (above).
    const bool sees = !NamesHidden("{SBX}", cred);
    EXPECT_EQ(world.VmLoginTarget(kBobSandbox).has_value(), sees) << CredName(cred);
    EXPECT_EQ(world.VmLoginTarget(kBobUntaggedVm).has_value(), !NamesHidden("{PLAIN}", cred))
        << CredName(cred);
  }
}

TEST_F(ScopeMatrixTest, EveryCommandCredentialAndSurface) {
  CommandTable table;
  RegisterBuiltinCommands(table);
  const auto start = std::chrono::steady_clock::now();
  Tally tally;
  for (const Sample& sample : Samples()) {
    const CommandSpec* spec = table.Find(sample.path);
    ASSERT_NE(spec, nullptr) << sample.path;
    for (Cred cred : kCreds) {
      for (Surface surface : kSurfaces) RunCell(table, *spec, sample, cred, surface, tally);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream summary;
  summary << "scope matrix: " << table.commands().size() << " commands in " << Samples().size()
          << " samples x " << std::size(kCreds) << " credentials x " << std::size(kSurfaces)
          << " surfaces = " << tally.cells << " cells (";
  for (const auto& [v, n] : tally.verdicts) summary << VerdictName(v) << " " << n << ", ";
  summary << tally.compared << " also compared with absent names), " << tally.failures.size()
          << " failed, " << seconds << " s";
  std::cout << summary.str() << "\n";
  RecordProperty("cells", static_cast<int>(tally.cells));
  RecordProperty("failures", static_cast<int>(tally.failures.size()));
  EXPECT_TRUE(tally.failures.empty()) << summary.str() << "\n" << FailureTable(tally.failures);
}

}  // namespace
}  // namespace warren::scopematrix
