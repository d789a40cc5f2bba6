// warren: the server binary. `warren serve` wires the store, the interpreter and the SSH
// lobby (and, through the hook below, the HTTP bridge) together and runs in the foreground
// until SIGTERM or SIGINT; `warren version` prints the version.
//
// Threads: main parses flags, starts the servers, then only waits for a signal. SIGINT and
// SIGTERM are blocked in every thread (the mask is set before any thread starts and is
// inherited), so sigwait() in main is the one place they are handled.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "bridge/exec_handler.h"
#include "bridge/http_server.h"
#include "bridge/mcp/mcp_handler.h"
#include "bridge/metrics.h"
#include "bridge/metrics_handler.h"
#include "bridge/oauth/oauth_handler.h"
#include "bridge/sandbox_handler.h"

#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "keys/secret_box.h"
#include "keys/store.h"
#include "keys/token.h"
#include "lobby/backup_command.h"
#include "lobby/base/clock.h"
#include "lobby/base/log.h"
#include "lobby/base/status.h"
#include "lobby/commands/command_runner.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/key_input.h"
#include "lobby/commands/session.h"
#include "lobby/commands/vm_egress.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_quota.h"
#include "lobby/isolate_command.h"
#include "lobby/sandbox_reaper.h"
#include "lobby/sd_notify.h"
#include "lobby/serve_config.h"
#include "lobby/serve_flags.h"
#include "lobby/ssh/ssh_server.h"
#include "lobby/template_keeper.h"
#include "lobby/vm_pool.h"
#include "lobby/vm_runtime.h"
#include "lobby/web_runtime.h"
#include "vmhost/guest/runner_install.h"

#ifndef WARREN_VERSION
#define WARREN_VERSION "0.0.0"
#endif

namespace warren {
namespace {

// The metrics listener is for one scraper or two: small caps.
constexpr int kMetricsMaxConnections = 32;
// Descriptors warren needs besides HTTP and SSH connections: VM control sockets and
// consoles, the store, libvirt, logs, and the children it runs.
constexpr rlim_t kDescriptorsBesideListeners = 2048;

// Every connection is a file descriptor, and the usual soft limit (1024) is below what the
// caps allow: raise it to what they need (never past the hard limit, nor lower than it was;
// not to the hard limit itself, which children such as libvirtd would inherit).
void RaiseOpenFileLimit(rlim_t needed) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t before = rl.rlim_cur;
  if (rl.rlim_cur < needed) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? needed : std::min(needed, rl.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = before;
  }
  const std::string hard = rl.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_max);
  LogInfo("open files limit " + std::to_string(rl.rlim_cur) + " (was " + std::to_string(before) +
          ", hard " + hard + ", the connection caps need " + std::to_string(needed) + ")");
  if (rl.rlim_cur < needed) {
    LogWarn("the open files limit " + std::to_string(rl.rlim_cur) +
            " is below what the connection caps need; raise the hard limit (systemd: "
            "LimitNOFILE=) or lower --http-max-connections");
  }
}

// The operator metrics that are not counted where they happen: sampled at each scrape.
void AddServerGauges(Metrics& metrics, Store& store, const ssh::SshServer& ssh_server) {
  metrics.AddGauge("warren_vms", "VMs by state (as the store records them)", [&store] {
    std::map<std::string, double> by_state = {
        {"creating", 0}, {"running", 0}, {"stopped", 0}, {"paused", 0}};
    if (Result<std::vector<VmRecord>> vms = store.ListVms(); vms.ok()) {
      for (const VmRecord& vm : *vms) {
        by_state[vm.phase == VmPhase::kCreating
                     ? "creating"
                     : std::string(DesiredStateName(vm.desired_state))] += 1;
      }
    }
    std::vector<GaugeSample> out;
    for (const auto& [state, n] : by_state) out.push_back({{{"state", state}}, n});
    return out;
  });
  metrics.AddGauge("warren_ssh_connections", "open SSH connections", [&ssh_server] {
    return std::vector<GaugeSample>{{{}, static_cast<double>(ssh_server.open_connections())}};
  });
}

struct HostPort {
  std::string host;
  int port = 0;
};

// "ADDR:PORT" or "[V6ADDR]:PORT"; port 0 asks for a free one.
Result<HostPort> ParseHostPort(std::string_view flag, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(flag) + " " + text + ": " + why +
                           " (expected ADDR:PORT, e.g. 127.0.0.1:2222 or [::1]:2222)");
  };
  HostPort hp;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("malformed IPv6 address");
    }
    hp.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return bad("no port");
    hp.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (hp.host.find(':') != std::string::npos) return bad("put an IPv6 address in brackets");
  }
  if (hp.host.empty()) return bad("no address");
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos) {
    return bad("the port must be a number");
  }
  hp.port = std::stoi(port_text);
  if (hp.port > 65535) return bad("the port must be at most 65535");
  return hp;
}

// The host name users should type: loopback binds are reached as "localhost", wildcard
// binds by the machine's name.
std::string PublicHostFor(const std::string& bind_host) {
  if (bind_host == "127.0.0.1" || bind_host == "::1" || bind_host == "localhost") {
    return "localhost";
  }
  if (bind_host == "0.0.0.0" || bind_host == "::") {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') return name;
    return "localhost";
  }
  return bind_host;
}

// The base URL of the HTTP bridge as clients reach it, when --public-url is not given:
// the scheme, the bind address (the machine's name for a wildcard bind) and the bound port.
std::string DefaultPublicUrl(const HostPort& bind, int port, bool tls) {
  std::string host = bind.host;
  if (host == "0.0.0.0" || host == "::") {
    host = PublicHostFor(host);
  } else if (host.find(':') != std::string::npos) {
    host = "[" + host + "]";
  }
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port);
}

Status EnsureDir(const std::string& dir) {
  std::string path;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir.front() == '/') path = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    path += part;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return Unavailable("cannot create " + path + ": " + std::strerror(errno));
    }
    path += "/";
  }
  return Status::Ok();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path + ": " + std::strerror(errno));
  std::string data;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<size_t>(in.gcount()));
    if (data.size() > kMaxKeyInputBytes) return TooLarge(path + " is too large for a public key");
  }
  return data;
}

// Makes sure the key in `key_file` belongs to an admin called `admin_name`. Idempotent: a
// key already registered is left as it is; an existing user gets the key added.
Status BootstrapAdmin(Store& store, const Clock& clock, const std::string& key_file,
                      const std::string& admin_name) {
  WARREN_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(key_file));
  EmptyInput no_stdin;
  Result<PublicKey> parsed = ReadPublicKey(text, no_stdin);
  if (!parsed.ok()) return parsed.status().Annotate("--admin-key " + key_file);
  const PublicKey& pk = *parsed;

  if (Result<SshKey> known = store.GetKey(pk.fingerprint); known.ok()) {
    if (known->user != admin_name) {
      LogWarn("admin key " + pk.fingerprint + " already belongs to user " + known->user +
              "; leaving it there");
    }
    return Status::Ok();
  }
  int64_t now = clock.NowUnix();
  SshKey key;
  key.fingerprint = pk.fingerprint;
  key.user = admin_name;
  key.algorithm = pk.algorithm;
  key.blob_base64 = pk.blob_base64;
  key.comment = pk.comment;
  key.added_at = now;

  Result<User> user = store.GetUser(admin_name);
  if (user.ok()) {
    if (!user->admin) LogWarn("user " + admin_name + " exists but is not an admin");
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> existing, store.ListKeys(admin_name));
    key.name = DefaultKeyName(pk.comment, existing);
    WARREN_RETURN_IF_ERROR(store.AddKey(key));
    LogInfo("added key " + pk.fingerprint + " to user " + admin_name);
    return Status::Ok();
  }
  if (user.status().code() != Code::kNotFound) return user.status();
  key.name = DefaultKeyName(pk.comment, {});
  User admin{admin_name, /*admin=*/true, now};
  // The store checks the name.
  WARREN_RETURN_IF_ERROR(store.CreateUser(admin, {key}).Annotate("--admin-name"));
  LogInfo("created admin " + admin_name + " with key " + pk.fingerprint);
  return Status::Ok();
}

int Fail(const Status& st) {
  std::fprintf(stderr, "warren: %s\n", st.ToString().c_str());
  return 1;
}

// SIGHUP: re-reads what can change at run time — the log level from the config file (a
// --log-level flag still wins) and the HTTP and web listeners' TLS certificate and key (from the
// paths the re-read configuration names; when it cannot be read, from the old ones). What cannot be
// re-read keeps its old value and says why.
void Reload(const std::vector<std::string>& args, const ServeFlags& running,
            const SdNotifier& notifier, HttpServer& http_server, WebRuntime* web) {
  (void)notifier.Notify("RELOADING=1\n" + MonotonicUsecField());
  LogInfo("reloading on SIGHUP");
  ServeCli cli;
  const ServeFlags* flags = &running;
  if (Status parsed = cli.ParseForReload(args); !parsed.ok()) {
    LogError("reload: the configuration cannot be read, so the log level stays " +
             std::string(LogLevelName(GetLogLevel())) + ": " + parsed.message());
  } else {
    flags = &cli.flags();
    if (Result<LogLevel> level = ParseLogLevel(flags->log_level); level.ok()) {
      SetLogLevel(*level);
      LogInfo("reload: log level " + flags->log_level);
    }
  }
  if (http_server.tls()) {
    if (Status st = http_server.ReloadTls(flags->tls_cert_file, flags->tls_key_file); st.ok()) {
      LogInfo("reload: TLS certificate " + flags->tls_cert_file + " and key " +
              flags->tls_key_file + " in use for new HTTPS connections");
    } else {
      LogError("reload: keeping the TLS certificate in use: " + st.ToString());
    }
  } else if (!flags->tls_cert_file.empty()) {
    LogWarn("reload: the HTTP listener serves plain HTTP; turning HTTPS on takes a restart");
  }
  if (web != nullptr && web->https()) {
    if (Status st = web->ReloadTls(flags->tls_cert_file, flags->tls_key_file); st.ok()) {
      LogInfo("reload: the web listener's new HTTPS connections use " + flags->tls_cert_file);
    } else {
      LogError("reload: the web listener keeps its TLS certificate: " + st.ToString());
    }
  }
  (void)notifier.Notify("READY=1");
  LogInfo("reloaded");
}

int Serve(const ServeCli& cli, const std::vector<std::string>& args) {
  const ServeFlags& flags = cli.flags();
  // Before any thread exists (it unsets $NOTIFY_SOCKET), so children never inherit it.
  const SdNotifier notifier = SdNotifier::FromEnvironment();
  // Before any thread exists, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished peer is an error return, not a death
  // Both checked by the flags' own rules.
  SetLogFormat(flags.log_format == "json" ? LogFormat::kJson : LogFormat::kText);
  if (Result<LogLevel> level = ParseLogLevel(flags.log_level); level.ok()) SetLogLevel(*level);

  Result<HostPort> ssh_addr = ParseHostPort("--ssh", flags.ssh);
  if (!ssh_addr.ok()) return Fail(ssh_addr.status());
  Result<HostPort> http_addr = ParseHostPort("--http", flags.http);
  if (!http_addr.ok()) return Fail(http_addr.status());
  Result<ssh::StartupRule> startups = ssh::ParseStartupRule(flags.ssh_max_startups);
  if (!startups.ok()) return Fail(startups.status().Annotate("--ssh-max-startups"));
  std::optional<HostPort> metrics_addr;
  if (flags.metrics != "off") {
    Result<HostPort> parsed = ParseHostPort("--metrics", flags.metrics);
    if (!parsed.ok()) return Fail(parsed.status());
    metrics_addr = *parsed;
  }
  if (flags.web != "off") {
    Result<HostPort> parsed = ParseHostPort("--web", flags.web);
    if (!parsed.ok()) return Fail(parsed.status());
  }
  if (!flags.log_file.empty()) {
    if (Status st = OpenLogFile(flags.log_file); !st.ok()) return Fail(st.Annotate("--log-file"));
  }
  // SSH: every unauthenticated connection up to the early drop's "full", plus every login.
  const rlim_t ssh_connections =
      static_cast<rlim_t>(startups->full) + static_cast<rlim_t>(flags.ssh_limits.logins);
  const rlim_t web_connections = flags.web == "off"
                                     ? 0
                                     : static_cast<rlim_t>(flags.web_limits.max_connections) +
                                           static_cast<rlim_t>(flags.web_limits.max_rejecting);
  RaiseOpenFileLimit(static_cast<rlim_t>(flags.http_limits.max_connections) + web_connections +
                     (metrics_addr ? kMetricsMaxConnections : 0) + ssh_connections +
                     kDescriptorsBesideListeners);

  if (Status st = EnsureDir(flags.data_dir); !st.ok()) return Fail(st);
  Result<std::unique_ptr<LmdbStore>> opened = LmdbStore::Open(flags.data_dir + "/store");
  if (!opened.ok()) return Fail(opened.status().Annotate("opening the store"));
  std::unique_ptr<LmdbStore> store = std::move(opened).value();
  const Clock& clock = SystemClock::Get();

  if (!flags.admin_key_file.empty()) {
    if (Status st = BootstrapAdmin(*store, clock, flags.admin_key_file, flags.admin_name);
        !st.ok()) {
      return Fail(st);
    }
  }
  Result<std::vector<User>> users = store->ListUsers();
  if (!users.ok()) return Fail(users.status().Annotate("reading users"));
  if (users->empty()) {
    return Fail(InvalidArgument(
        "the store in " + flags.data_dir +
        " has no users yet: start with --admin-key FILE.pub (your SSH public key) to create "
        "the first admin"));
  }

  // The API token signing secret: made on first start, owner-only, never logged.
  Result<TokenSigner> token_signer =
      TokenSigner::LoadOrCreate(flags.data_dir + "/token-signing.key");
  if (!token_signer.ok()) return Fail(token_signer.status().Annotate("API token signing key"));
  // The key integrations' secrets are sealed with: the same rules; back it up with the store.
  Result<SecretKey> integration_key = SecretKey::LoadOrCreate(flags.data_dir + "/integration.key");
  if (!integration_key.ok()) return Fail(integration_key.status().Annotate("integration key"));

  Services services;
  services.store = store.get();
  services.clock = &clock;
  services.token_signer = &token_signer.value();
  services.integration_key = &integration_key.value();
  services.backup = ServeBackups(flags.data_dir, *store);
  services.oauth = store.get();
  services.info.ssh_host = PublicHostFor(ssh_addr->host);
  services.info.ssh_port = ssh_addr->port;
  services.info.domain = flags.domain;
  services.info.int_domain = flags.int_domain;
  Result<std::string> egress = ParseEgressPolicy("--vm-egress", flags.vm_egress);
  if (!egress.ok()) return Fail(egress.status());
  services.vm_defaults.egress = *egress;
  services.vm_defaults.image = flags.vm_image;  // resolved (and checked) by each `new`
  services.ready_timeout_ms = flags.vm_ready_timeout_s * 1000;
  std::vector<Cidr> egress_allow;
  for (const std::string& range : flags.vm_egress_allow) {
    Result<Cidr> cidr = ParseCidr(range);
    if (!cidr.ok()) return Fail(cidr.status().Annotate("--vm-egress-allow"));
    egress_allow.push_back(*cidr);
  }
  for (size_t i = 0; i < kLimitFields.size(); ++i) {
    if (flags.user_limits[i].empty()) continue;
    const LimitField& f = kLimitFields[i];
    const std::string flag = std::string("--user-") + (f.flag + 2);
    Result<int64_t> limit = ParseUserLimit(f.kind, flag, flags.user_limits[i]);
    if (!limit.ok()) return Fail(limit.status());
    services.vm_defaults.user_limits.*f.limit = *limit;
  }
  for (const std::string& text : flags.sandbox_sizes) {
    Result<SandboxSize> size = ParseSandboxSize(text);
    if (!size.ok()) return Fail(size.status());
    PutSandboxSize(services.sandboxes, std::move(size).value());
  }
  services.sandboxes.reserve_cpus = flags.reserve_cpu;
  Result<int64_t> reserve_memory =
      flags.reserve_memory == "0" ? Result<int64_t>(0) : ParseMemoryMib(flags.reserve_memory);
  if (!reserve_memory.ok()) return Fail(reserve_memory.status().Annotate("--reserve-memory"));
  services.sandboxes.reserve_memory_mib = *reserve_memory;
  services.sandboxes.overcommit = flags.sandbox_overcommit;
  services.sandboxes.price_unit = flags.price_unit;
  Metrics metrics;
  metrics.DeclareHistogram("warren_command_duration_seconds",
                           "lobby command latency by command path, every surface",
                           Metrics::LatencyBuckets());
  metrics.DeclareCounter("warren_commands_total", "lobby commands by path, surface and outcome");
  services.on_command = [&metrics](const CommandEvent& e) {
    const std::string command(e.path);
    metrics.Observe("warren_command_duration_seconds", {{"command", command}}, e.seconds);
    metrics.Inc("warren_commands_total", {{"command", command},
                                          {"surface", std::string(e.surface)},
                                          {"code", std::string(CodeName(e.code))}});
  };
  // VMs come up (and the store is reconciled with libvirt) before any command is served.
  std::unique_ptr<VmRuntime> vm_runtime;
  if (flags.vms == "on") {
    VmRuntimeOptions vm_options = flags.vm;
    vm_options.data_dir = flags.data_dir;
    vm_options.egress_allow = egress_allow;
    bool fatal = false;
    Result<std::unique_ptr<VmRuntime>> started = VmRuntime::Start(vm_options, services, &fatal);
    if (!started.ok() && fatal) return Fail(started.status());
    if (!started.ok()) {
      // The lobby stays useful (keys, users) while the VM host is fixed; say why loudly.
      LogError("VMs unavailable: " + started.status().ToString());
    } else {
      vm_runtime = std::move(started).value();
    }
  }
  // Sandboxes end at their expiry, checked every second (reconcile took those already due).
  std::unique_ptr<SandboxReaper> sandbox_reaper;
  if (vm_runtime) sandbox_reaper = std::make_unique<SandboxReaper>(services);
  // `new` restores VMs of the default shape from a template the keeper saves and keeps current.
  std::unique_ptr<TemplateKeeper> template_keeper;
  // Paused VMs restored ahead of time, which `new` takes (their templates kept too).
  VmPoolOptions pool_options;
  std::unique_ptr<VmPool> pool;
  for (const std::string& text : flags.pool) {
    if (text == "none") continue;
    if (text == "default") {
      PoolTarget t;  // the default shape of the default image, as `new` makes it
      t.image = services.vm_defaults.image;
      t.memory_mib = services.vm_defaults.memory_mib;
      t.disk_gib = services.vm_defaults.disk_gib;
      t.egress = HostEgressFor(services.vm_defaults.egress);
      t.size = 1;
      pool_options.targets.push_back(t);
      continue;
    }
    Result<PoolTarget> t = ParsePoolTarget(text, services.vm_defaults);
    if (!t.ok()) return Fail(t.status());
    pool_options.targets.push_back(*t);
  }
  // Templates and the warm pool are kept on every host that takes new VMs (each its own).
  const bool templates = vm_runtime && flags.vm_templates != "none";
  if (templates) {
    services.restore_templates = true;
    TemplateKeeperOptions keeper;
    keeper.tag = guest::RunnerVersion();
    keeper.more_shapes = [&services, targets = pool_options.targets] {
      return VmPool::Shapes(services, targets);
    };
    template_keeper = std::make_unique<TemplateKeeper>(services, keeper);
  }
  if (!pool_options.targets.empty()) {
    if (!templates) {
      LogInfo("pool: off (the warm pool is refilled from templates: --vm-templates default)");
    } else {
      guest::SshGuestControl& guests = vm_runtime->ssh_guests();
      pool_options.open_channels = [&guests](const std::string& id) {
        return guests.OpenChannels(id);
      };
      pool_options.settle_endpoint = [&guests](const std::string& id) {
        return guests.SettleEndpoint(id);
      };
      services.pool = (pool = std::make_unique<VmPool>(services, pool_options)).get();
    }
  }
  Interpreter interpreter(services);
  // Runs /exec's and MCP's commands: a bounded pool shared fairly between users.
  CommandRunner command_runner(flags.commands);

  ssh::SshServerOptions ssh_options;
  ssh_options.address = ssh_addr->host;
  ssh_options.port = ssh_addr->port;
  ssh_options.data_dir = flags.data_dir;
  ssh_options.version_timeout = std::chrono::seconds(flags.ssh_version_timeout);
  ssh_options.preauth_timeout = std::chrono::seconds(flags.ssh_preauth_timeout);
  ssh_options.limits = flags.ssh_limits;
  ssh_options.limits.startups = *startups;
  ssh_options.on_listening = [&interpreter](int port) {
    interpreter.services().info.ssh_port = port;
  };
  ssh::SshServer ssh_server(ssh_options, interpreter, *store, clock);
  if (Status st = ssh_server.Start(); !st.ok()) return Fail(st.Annotate("starting SSH"));

  // The HTTP bridge: /healthz, OAuth, MCP and POST /exec over the same interpreter.
  AddServerGauges(metrics, *store, ssh_server);
  HttpServerOptions http_options = flags.http_limits;
  http_options.header_timeout = std::chrono::seconds(flags.http_header_timeout_s);
  http_options.idle_timeout = std::chrono::seconds(flags.http_idle_timeout_s);
  http_options.address = http_addr->host;
  http_options.port = http_addr->port;
  http_options.tls_cert_file = flags.tls_cert_file;
  http_options.tls_key_file = flags.tls_key_file;
  http_options.metrics = &metrics;
  HttpServer http_server(http_options);
  // OAuth sign-in for MCP clients, approved over SSH with `authorize CODE`.
  OAuthOptions oauth_options = flags.oauth;
  oauth_options.ssh_host = services.info.ssh_host;
  oauth_options.ssh_port = [&interpreter] { return interpreter.services().info.ssh_port; };
  oauth_options.user_code_seconds = flags.oauth_code_lifetime;
  oauth_options.auth_code_seconds = std::min<int64_t>(60, flags.oauth_code_lifetime);
  if (!flags.public_url.empty()) {
    Result<std::string> base = oauth::NormalizeBaseUrl(flags.public_url);
    if (!base.ok()) {
      ssh_server.Stop();
      return Fail(base.status());
    }
    oauth_options.public_url = *base;
  }
  auto oauth_handler =
      std::make_shared<OAuthHandler>(*store, *store, token_signer.value(), clock, oauth_options);
  http_server.AddHandler(oauth_handler);
  // MCP (/mcp, /mcp/claude, /mcp/openai): each tool call is a command session of
  // `interpreter`, authenticated by an API token on every request.
  mcp::McpOptions mcp_options = flags.mcp;
  mcp_options.server_version = WARREN_VERSION;
  mcp_options.web_domain = flags.domain;
  mcp_options.challenge = [oauth_handler](std::string_view /*path*/) {
    return oauth::WwwAuthenticate(oauth_handler->urls());  // RFC 9728 resource_metadata
  };
  auto mcp_handler = std::make_shared<mcp::McpHandler>(
      interpreter, command_runner,
      [&interpreter, oauth_handler](std::string_view token, std::string_view /*path*/) {
        // An OAuth token must be bound to this server's MCP resource (RFC 8707).
        return interpreter.CallerForToken(token, "mcp", oauth_handler->urls().mcp_resource());
      },
      mcp_options);
  http_server.AddHandler(mcp_handler);
  // A weak reference: the registry outlives the handler, which must not outlive the
  // interpreter it holds.
  metrics.AddGauge(
      "warren_mcp_sessions", "open MCP sessions",
      [mcp = std::weak_ptr<mcp::McpHandler>(mcp_handler)] {
        auto h = mcp.lock();
        return std::vector<GaugeSample>{{{}, h ? static_cast<double>(h->sessions()) : 0.0}};
      });
  auto exec_handler = std::make_shared<ExecHandler>(interpreter, command_runner, flags.exec);
  http_server.AddHandler(exec_handler);
  // The REST sandbox API (/v1): /exec's token check and rate figures, the same runner.
  SandboxHandlerOptions sandbox_api;
  sandbox_api.rate_per_second = flags.exec.rate_per_second;
  sandbox_api.burst = flags.exec.burst;
  sandbox_api.max_body_bytes = flags.exec.max_body_bytes;
  sandbox_api.timeout_seconds = flags.exec.timeout_seconds;
  http_server.AddHandler(
      std::make_shared<SandboxHandler>(interpreter, command_runner, sandbox_api));
  if (Status st = http_server.Start(); !st.ok()) {
    ssh_server.Stop();
    return Fail(st.Annotate("starting HTTP"));
  }
  // GET /metrics for operators, on a listener of its own (loopback by default): the figures
  // need no credential, so they are not served where users and agents reach warren.
  std::unique_ptr<HttpServer> metrics_server;
  if (metrics_addr) {
    HttpServerOptions o;
    o.name = "metrics";
    o.address = metrics_addr->host;
    o.port = metrics_addr->port;
    o.threads = 1;
    o.max_connections = kMetricsMaxConnections;
    o.max_connections_per_source = kMetricsMaxConnections;
    metrics_server = std::make_unique<HttpServer>(o);
    metrics_server->AddHandler(std::make_shared<MetricsHandler>(metrics));
    if (Status st = metrics_server->Start(); !st.ok()) {
      http_server.Stop();
      ssh_server.Stop();
      return Fail(st.Annotate("starting the metrics listener (--metrics)"));
    }
  }
  // The web proxy: VMs' pages, private until shared. Until it listens, commands print no
  // URL; with --web off, never.
  interpreter.services().info.web_port = 0;
  std::unique_ptr<WebRuntime> web_runtime;
  if (flags.web != "off") {
    web::WebServerOptions o = flags.web_limits;
    o.listen = flags.web;
    o.tls_cert_file = flags.tls_cert_file;
    o.tls_key_file = flags.tls_key_file;
    Result<std::unique_ptr<WebRuntime>> started = WebRuntime::Start(o, interpreter);
    if (!started.ok()) {
      if (metrics_server) metrics_server->Stop();
      http_server.Stop();
      ssh_server.Stop();
      return Fail(started.status().Annotate("starting the web listener (--web)"));
    }
    web_runtime = std::move(started).value();
  }
  if (flags.public_url.empty()) {
    oauth_handler->SetPublicUrl(
        DefaultPublicUrl(*http_addr, http_server.port(), http_server.tls()));
  }

  LogInfo("warren " WARREN_VERSION " serving; data in " + flags.data_dir + "; config " +
          (cli.config_file().empty() ? std::string("none") : cli.config_file()));
  // Every listener asked for is up, and reconcile has run (VmRuntime::Start).
  if (Status st = notifier.Notify("READY=1"); !st.ok()) LogWarn(st.ToString());
  int sig = 0;
  while (true) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    Reload(args, flags, notifier, http_server, web_runtime.get());
  }
  (void)notifier.Notify("STOPPING=1");
  LogInfo(std::string("stopping on ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT"));

  // /exec's and MCP's commands end (cancelled) before the listener they answer through
  // stops; new ones are refused (503) meanwhile.
  bool clean = command_runner.Stop();
  const bool mcp_clean = mcp_handler->Shutdown();
  http_server.Stop();
  if (metrics_server) metrics_server->Stop();
  web_runtime.reset();  // its connections cut, its share-link counts written
  clean = ssh_server.Stop() && clean;
  clean = mcp_clean && clean;
  if (!clean) {
    // A command ignored cancellation; its thread still uses the store and interpreter, so
    // leave without destructors rather than pull them away under it.
    LogWarn("exiting with commands still running");
    std::_Exit(0);
  }
  LogInfo("stopped");
  return 0;
}

int ServeMain(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  ServeCli cli;
  try {
    cli.Parse(args);
  } catch (const CLI::ParseError& e) {
    return cli.app().exit(e);
  }
  if (cli.flags().print_config) {
    std::fputs(cli.EffectiveConfig().c_str(), stdout);
    return 0;
  }
  try {
    return Serve(cli, args);
  } catch (const std::exception& e) {
    // Errors are Status values; an exception here is a bug or resource exhaustion.
    std::fprintf(stderr, "warren: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace warren

int main(int argc, char** argv) {
  // `serve` has a command line of its own, with the config file (lobby/serve_config.h).
  if (argc >= 2 && std::string_view(argv[1]) == "serve")
    return warren::ServeMain(argc - 1, argv + 1);
  CLI::App app{"warren: Linux VMs for people and AI agents, SSH-first"};
  app.require_subcommand(1);

  // Dispatched before this parse (ServeMain); declared so --help lists it.
  app.add_subcommand("serve", "Run the server in the foreground (warren serve --help)");
  CLI::App* version = app.add_subcommand("version", "Print the version");
  warren::BackupSubcommands backups;
  warren::AddBackupSubcommands(app, backups);
  warren::IsolateSubcommand isolate;
  warren::AddIsolateSubcommand(app, isolate);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version->parsed()) {
    std::printf("warren %s\n", WARREN_VERSION);
    return 0;
  }
  if (std::optional<int> rc = warren::RunBackupSubcommand(backups)) return *rc;
  if (std::optional<int> rc = warren::RunIsolateSubcommand(isolate)) return *rc;
  return 0;
}
