// Interpreter: the one command interpreter every surface uses. Execute() is the only way
// in: look up the command -> check the caller's permissions -> parse flags (a fresh
// CLI::App per call) -> refuse a change in a read-only session -> resolve the VM the table
// entry names (CommandSpec::target) -> run the handler -> render text or --json, keep the
// result on the session -> one audit line.
// Thread-safe: many sessions may Execute concurrently on one Interpreter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "keys/backup.h"
#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/session.h"

namespace warren {

// How users reach this server; used in help text and connection hints.
struct ServerInfo {
  std::string ssh_host = "localhost";
  int ssh_port = 2222;
  std::string domain = "warren.localhost";
  // The web listener VMs' pages are served on (serve --web, --tls-cert/--tls-key): its
  // scheme and the port browsers reach it on; web_port 0 when there is none (serve --web
  // off), and then no command prints a VM's URL. web_url.h builds the URLs.
  std::string web_scheme = "http";  // "https" with a certificate
  int web_port = 8081;
  // Where VMs reach their integrations: http(s)://NAME.int_domain/ (serve --int-domain).
  std::string int_domain = "int.warren.internal";
};

class VmHost;
class HostSet;
class GuestControl;
class WarmPool;
class LiveSessions;
class IntegrationEvents;
class SecretKey;
class TokenSigner;
class OAuthStore;
struct VmSpec;

// What the interpreter reports about every command it finished (Services::on_command), for
// metrics. `path` is the command path ("ssh-key add"), or "-" when none was identified.
struct CommandEvent {
  std::string_view path;
  std::string_view surface;
  Code code = Code::kOk;
  double seconds = 0;
};

// What `new` gives a VM when the command line does not say, and the most it may ask for.
struct VmDefaults {
  std::string image = "debian";  // a name (newest version) or NAME@VERSION
  int cpus = 2;
  int64_t memory_mib = 2048;
  int64_t disk_gib = 10;
  // What new guests may reach unless `new --egress` says: a policy of vm_egress.h.
  std::string egress = "all";
  int max_cpus = 16;
  int64_t max_memory_mib = 64 * 1024;
  int64_t max_disk_gib = 1024;
  // What each user's VMs may hold unless the user's record says otherwise (vm_quota.h):
  // 10 VMs, 16 vCPUs and 64 GiB running, 1 TiB of disk (by default one user may hold what
  // one largest VM may have). Each set; kNoLimit for none. serve --user-max-*.
  UserLimits user_limits = {10, 16, 64 * 1024, 1024, kDefaultMaxSandboxes};
};

// One installed guest image, as its image.json describes it.
struct ImageInfo {
  std::string ref;  // "debian@20261129"
  std::string name;
  std::string version;
  int64_t size_bytes = 0;    // its files (kernel, initrd, base disk)
  std::string description;   // one line; empty when image.json has none
  std::string default_user;  // who commands in its VMs run as
  std::string built_at;      // "2026-11-29T14:31:15Z"; may be empty
};

// The guest images VMs are made from, kept apart from how they are stored (image_catalog.h
// has the one over packaging/images' directory layout), so the commands never see libvirt
// or file paths. Both functions must be thread-safe.
struct ImageCatalog {
  // "debian" -> its newest "debian@VERSION"; "debian@VERSION" -> itself if present.
  // NotFound (listing the images there are, one line each) or InvalidArgument for a
  // malformed name.
  std::function<Result<std::string>(std::string_view name)> resolve;
  // Every image available, by name then version, for `images`, help and error messages;
  // may be empty.
  std::function<std::vector<ImageInfo>()> list;
};

struct Services {
  Store* store = nullptr;
  const Clock* clock = nullptr;
  ServerInfo info;
  // Signs and checks API tokens (keys/token.h). Null: `ssh-key generate-api-key` answers
  // Unavailable and every token is refused.
  const TokenSigner* token_signer = nullptr;
  // Pending OAuth sign-ins (keys/oauth.h), for `authorize CODE`. Null: it answers
  // Unavailable.
  OAuthStore* oauth = nullptr;
  // Called once per finished command on the thread that ran it (after the audit line).
  // Must be cheap and thread-safe; optional.
  std::function<void(const CommandEvent&)> on_command;
  // Every credential in use right now (live_sessions.h): Execute registers each session
  // there, connections register themselves, and removing a credential ends them. Null: the
  // interpreter makes one (shared, so Services copied to another interpreter share it).
  std::shared_ptr<LiveSessions> live_sessions;
  // Seals and opens integrations' secrets (keys/secret_box.h, DATA/integration.key). Null:
  // an integration with a header or a bearer cannot be added (Unavailable).
  const SecretKey* integration_key = nullptr;
  // Told after every change to what an owner's VMs may reach through integrations
  // (integration_events.h), for the proxy. Null: the interpreter makes one (shared, as
  // live_sessions).
  std::shared_ptr<IntegrationEvents> integration_events;

  // ---- VMs. When `vms` or `guests` is null this server runs no VMs and the VM commands
  // answer Unavailable; the other commands work as before.
  VmHost* vms = nullptr;
  GuestControl* guests = nullptr;
  // The hosts behind `vms` by name, when it is a HostSet (serve always makes one; tests may
  // not): `hosts`, placement (vm_placement.h), `new --host`, `migrate`. Null: one host.
  HostSet* hosts = nullptr;
  VmDefaults vm_defaults;
  // Sandboxes' sizes, the host's room for them and the price of usage (sandbox.h).
  SandboxPolicy sandboxes;
  // When `resolve` is empty, an image name is taken as given ("debian" stays "debian").
  ImageCatalog images;
  // The OpenSSH public key line of warren's own control key, seeded into every new VM as
  // its user's authorized key (users reach VMs through warren, never directly).
  std::string control_authorized_key;
  // How long `new` waits for a fresh guest to run a command before giving up on it.
  int ready_timeout_ms = 180'000;
  // How much slower than alone guests answer now (vmhost/host_load.h's GuestSlowdown): the
  // waits that give up on a guest (ready_timeout_ms, cp's in-guest sync) are stretched by
  // it when they run out, so a guest starved of CPU is not taken for a broken one. Empty: 1.
  std::function<double()> guest_slowdown;
  // Whether `new` restores a VM from the host's saved template of its shape when there is
  // one (VmHost::CreateFromTemplate), rather than booting it (serve --vm-templates).
  bool restore_templates = false;
  // Paused VMs restored ahead of time (warm_pool.h), which `new` takes when one of its
  // shape is idle (serve --pool). Null: no pool.
  WarmPool* pool = nullptr;
  // Writes a backup of this server's data directory (keys/backup.h) to `out`, checking
  // `cancel` between chunks, for the admin command `backup`. Null: it answers Unavailable.
  std::function<Result<BackupManifest>(const BackupWriter& out, const CancelSignal& cancel)> backup;
  // Optional: completes a VmSpec just before `new` creates it with what the command layer
  // does not know (e.g. a pinned SSH host key the guest control connection will expect).
  // Called without locks; an error aborts the creation.
  std::function<Status(VmSpec& spec)> prepare_vm;
};

// services.guest_slowdown(), or 1 without one.
double GuestSlowdownNow(const Services& services);

class CommandTable;

class Interpreter {
 public:
  // With the built-in commands (builtin_commands.h).
  explicit Interpreter(Services services);
  // With the commands in `table` instead: tests and test-only builds register fixture
  // commands this way. The table must not change afterwards.
  Interpreter(Services services, std::unique_ptr<CommandTable> table);
  ~Interpreter();

  // Runs session.argv. Sets session.status, exit_status, result and help; writes the
  // command's output (text, or JSON under --json) to session.out and errors to session.err
  // (or, under --json, {"error": "..."} to session.out).
  void Execute(CommandSession& session);

  // Splits `line` with shell-like quoting (never a shell) into session.argv, then Execute.
  void ExecuteLine(CommandSession& session, std::string_view line);

  // Authenticates an API token (the bridge's bearer header) with this interpreter's store,
  // clock and signer: see CallerForToken below. `surface`: "exec", "mcp", ...; `audience`:
  // the surface's own resource URL (MCP: "BASE/mcp"), empty for surfaces without one.
  Result<Caller> CallerForToken(std::string_view token, std::string surface,
                                std::string_view audience = {});

  const CommandTable& table() const { return *table_; }
  Services& services() { return services_; }
  LiveSessions& live_sessions() { return *services_.live_sessions; }

 private:
  Services services_;
  std::unique_ptr<CommandTable> table_;
};

// Authenticates a public key: the key must be registered and not expired; records its use.
// Returns the caller with the key's limits. Unauthenticated otherwise.
Result<Caller> CallerForKey(Store& store, const Clock& clock, std::string_view fingerprint,
                            std::string surface);

// Authenticates an API token: signature, expiry, its label still present and its user's
// (keys/token.h CheckToken); records the label's use at most once a minute. Returns the
// caller with the token's limits; Unauthenticated for a malformed, forged, altered,
// expired or revoked token, and for a token bound to an audience (OAuth, RFC 8707) other
// than `audience`.
Result<Caller> CallerForToken(Store& store, const Clock& clock, const TokenSigner& signer,
                              std::string_view token, std::string surface,
                              std::string_view audience = {});

// Re-reads the caller's credential from the store, as Execute does before every command:
// Unauthenticated when it was removed, its user is gone or it expired; otherwise refreshes
// its scope and admin flag. For surfaces that act without a command (a VM login's channels).
Status RevalidateCaller(Caller& caller, Store& store, int64_t now);

}  // namespace warren
