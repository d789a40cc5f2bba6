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
#include "lobby/sandbox_reaper.h"
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

struct ServeFlags {
  std::string data_dir = "/var/lib/warren";
  std::string ssh = "127.0.0.1:2222";
  std::string http = "127.0.0.1:8080";
  std::string admin_key_file;
  std::string admin_name = "admin";
  std::string domain = "warren.localhost";
  // The web proxy's listener (VMs' pages at NAME.domain), or "off"; its limits and
  // deadlines (the rest of WebServerOptions comes from --web, --domain and --tls-*).
  std::string web = "127.0.0.1:8081";
  web::WebServerOptions web_limits;
  std::string int_domain = "int.warren.internal";
  std::string vms = "on";
  std::string vm_image = VmDefaults{}.image;    // what `new` makes without --image
  std::string vm_templates = "default";         // lobby/template_keeper.h
  std::vector<std::string> pool = {"default"};  // lobby/vm_pool.h
  int vm_ready_timeout_s = Services{}.ready_timeout_ms / 1000;
  std::string vm_egress = "all";             // new VMs' egress policy (lobby/commands/vm_egress.h)
  std::vector<std::string> vm_egress_allow;  // CIDRs the isolation rules open
  // Sandboxes (lobby/commands/sandbox.h): sizes NAME=CPU,MEM added or replaced, the host's
  // own share kept from them, how far they may overcommit it, and the price of a unit.
  std::vector<std::string> sandbox_sizes;
  int reserve_cpu = 0;
  std::string reserve_memory = "0";
  double sandbox_overcommit = 1.0;
  double price_unit = 0;
  VmRuntimeOptions vm;
  mcp::McpOptions mcp;
  // HTTPS on the --http listener when both are given.
  std::string tls_cert_file;
  std::string tls_key_file;
  ExecHandlerOptions exec;
  // The one runner of /exec's and MCP's commands (lobby/commands/command_runner.h).
  CommandRunnerOptions commands;
  // OAuth sign-in: the base URL clients reach the HTTP bridge at (default: from --http),
  // and how long a sign-in code lives.
  std::string public_url;
  int64_t oauth_code_lifetime = 600;
  // The SSH listener's timeouts (seconds) and admission limits (lobby/ssh/ssh_admission.h).
  int ssh_version_timeout = 5;
  int ssh_preauth_timeout = 20;
  std::string ssh_max_startups = ssh::StartupRuleText(ssh::StartupRule{});
  ssh::AdmissionLimits ssh_limits;
  OAuthOptions oauth;  // its per-source rates; the rest is set in Serve
  // HTTP connection caps and deadlines (the rest of HttpServerOptions comes from --http).
  HttpServerOptions http_limits;
  int http_header_timeout_s = SecondsOf(HttpServerOptions{}.header_timeout);
  int http_idle_timeout_s = SecondsOf(HttpServerOptions{}.idle_timeout);
  // GET /metrics has a listener of its own, loopback by default; "off" for none.
  std::string metrics = "127.0.0.1:9464";
  // The log (stderr) goes to this file, mode 0640, when given.
  std::string log_file;
  // --user-max-vms, -cpu, -memory, -disk, -sandboxes (vm_quota.h's kLimitFields order); empty keeps
  // VmDefaults' own.
  std::array<std::string, kLimitFields.size()> user_limits;

  static int SecondsOf(std::chrono::milliseconds d) {
    return static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  }
};

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

// A --domain or --int-domain: a lowercase DNS name; `example` is shown when it is not one.
CLI::Validator DomainName(std::string example) {
  return CLI::Validator(
      [example](const std::string& d) -> std::string {
        bool ok = !d.empty() && d.size() <= 200 && d.front() != '.' && d.back() != '.' &&
                  d.find("..") == std::string::npos;
        for (char c : d) {
          ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
        }
        return ok ? "" : "a lowercase DNS name (a-z, 0-9, - and dots), e.g. " + example;
      },
      "DOMAIN");
}

// The SSH listener's flags: timeouts before authentication and the admission limits.
// Integer options that are counts from 1 to `max`, each with its default shown in --help.
using CountOption = std::tuple<const char*, int*, const char*>;
void AddCountOptions(CLI::App& serve, std::initializer_list<CountOption> counts, int max) {
  for (const auto& [name, value, help] : counts) {
    serve.add_option(name, *value, help)->check(CLI::Range(1, max))->capture_default_str();
  }
}

void AddSshLimitFlags(CLI::App& serve, ServeFlags& flags) {
  serve
      .add_option("--ssh-version-timeout", flags.ssh_version_timeout,
                  "Seconds a new SSH connection may stay silent before sending its "
                  "identification line (it holds no thread meanwhile)")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  serve
      .add_option("--ssh-preauth-timeout", flags.ssh_preauth_timeout,
                  "Seconds for key exchange plus authentication")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  serve
      .add_option("--ssh-max-startups", flags.ssh_max_startups,
                  "BEGIN:RATE:FULL as OpenSSH's MaxStartups: from BEGIN unauthenticated "
                  "connections on, drop new ones with RATE% probability, rising to all at FULL "
                  "(a connection that has sent nothing yet is displaced instead)")
      ->capture_default_str();
  ssh::AdmissionLimits& l = flags.ssh_limits;
  AddCountOptions(serve,
                  {
                      {"--ssh-max-startups-per-source", &l.startups_per_source,
                       "Unauthenticated SSH connections one address may hold"},
                      {"--ssh-max-handshakes", &l.handshakes,
                       "SSH key exchanges running at once (a thread each); more wait without one"},
                      {"--ssh-max-handshakes-per-source", &l.handshakes_per_source,
                       "SSH key exchanges one address may run at once"},
                      {"--ssh-max-connections-per-source", &l.connections_per_source,
                       "SSH connections (authenticated or not) one address may hold"},
                      {"--ssh-max-logins", &l.logins, "Authenticated SSH connections in all"},
                      {"--ssh-max-logins-per-user", &l.logins_per_user,
                       "Authenticated SSH connections per user"},
                  },
                  1000000);
}

// The one command runner's shares (/exec and MCP tools/call), and MCP's session table.
void AddCommandLimitFlags(CLI::App& serve, ServeFlags& flags) {
  CommandRunnerOptions& c = flags.commands;
  AddCountOptions(
      serve,
      {
          {"--command-threads", &c.threads,
           "Commands from /exec and MCP running at once, all users together (a thread each)"},
          {"--command-threads-per-user", &c.threads_per_user,
           "Commands from /exec and MCP one user may run at once; more wait their turn"},
          {"--command-queue", &c.queue,
           "Commands from /exec and MCP waiting for a thread, all users together; past it: 429"},
          {"--command-queue-per-user", &c.queue_per_user,
           "Commands one user may have waiting for a thread; past it: 429"},
      },
      100000);
  serve
      .add_option("--mcp-max-sessions", flags.mcp.max_sessions,
                  "Open MCP sessions at most, all users together")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
  serve
      .add_option("--mcp-max-sessions-per-user", flags.mcp.max_sessions_per_user,
                  "Open MCP sessions per user; one more replaces that user's oldest idle one")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
}

// Every user's limits unless `user set` gives them their own.
void AddUserLimitFlags(CLI::App& serve, ServeFlags& flags) {
  const UserLimits built_in = VmDefaults{}.user_limits;
  const char* what[] = {"VMs", "vCPUs of running VMs", "memory of running VMs (a size)",
                        "disk of all VMs (a size)", "sandboxes at once"};
  static_assert(std::size(what) == kLimitFields.size());
  for (size_t i = 0; i < kLimitFields.size(); ++i) {
    const LimitField& f = kLimitFields[i];
    std::string names = std::string("--user-") + (f.flag + 2);
    // The and seed's own name for it, too.
    if (f.kind == LimitKind::kSandboxes) names += "," + std::string(f.flag);
    serve.add_option(names, flags.user_limits[i],
                     std::string("What each user may have at most: ") + what[i] +
                         "; N, 0 or none; `user set` overrides it per user (default " +
                         FormatUserLimit(f.kind, *(built_in.*f.limit)) + ")");
  }
}

int Fail(const Status& st) {
  std::fprintf(stderr, "warren: %s\n", st.ToString().c_str());
  return 1;
}

int Serve(const ServeFlags& flags) {
  // Before any thread exists, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished peer is an error return, not a death

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
  if (vm_runtime && flags.vm_templates != "none") {
    services.restore_templates = true;
    TemplateKeeperOptions keeper;
    keeper.tag = guest::RunnerVersion();
    keeper.more_shapes = [&services, targets = pool_options.targets] {
      return VmPool::Shapes(services, targets);
    };
    template_keeper = std::make_unique<TemplateKeeper>(services, keeper);
  }
  if (!pool_options.targets.empty()) {
    if (!vm_runtime || flags.vm_templates == "none") {
      LogInfo("pool: off (the warm pool is refilled from templates: --vm-templates default)");
    } else {
      guest::SshGuestControl& guests = vm_runtime->ssh_guests();
      pool_options.open_channels = [&guests](const std::string& id) {
        return guests.OpenChannels(id);
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

  LogInfo("warren " WARREN_VERSION " serving; data in " + flags.data_dir);
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
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

}  // namespace
}  // namespace warren

int main(int argc, char** argv) {
  CLI::App app{"warren: Linux VMs for people and AI agents, SSH-first"};
  app.require_subcommand(1);

  warren::ServeFlags flags;
  CLI::App* serve = app.add_subcommand("serve", "Run the server in the foreground");
  serve->add_option("--data-dir", flags.data_dir, "State directory (store, host key)")
      ->capture_default_str();
  serve->add_option("--ssh", flags.ssh, "SSH lobby address, ADDR:PORT (port 0: any free port)")
      ->capture_default_str();
  warren::AddSshLimitFlags(*serve, flags);
  warren::AddUserLimitFlags(*serve, flags);
  warren::AddCommandLimitFlags(*serve, flags);
  serve->add_option("--http", flags.http, "HTTP bridge address, ADDR:PORT")->capture_default_str();
  serve
      ->add_option("--http-max-connections", flags.http_limits.max_connections,
                   "Open HTTP connections at most; past it new ones get 503")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  serve
      ->add_option("--http-max-connections-per-source",
                   flags.http_limits.max_connections_per_source,
                   "Open HTTP connections at most from one IPv4 address or IPv6 /64 (behind a "
                   "reverse proxy: every connection is the proxy's)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  serve
      ->add_option("--http-header-timeout", flags.http_header_timeout_s,
                   "Seconds a client has to send a request's whole header (slow ones are "
                   "dropped)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  serve
      ->add_option("--http-idle-timeout", flags.http_idle_timeout_s,
                   "Seconds a kept-alive HTTP connection may wait for its next request, and a "
                   "request body may take")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  serve
      ->add_option("--metrics", flags.metrics,
                   "Address of the GET /metrics listener (Prometheus, no credential), "
                   "ADDR:PORT, or off")
      ->capture_default_str();
  serve->add_option("--log-file", flags.log_file,
                    "Append the log to this file (made 0640; a looser one is narrowed) "
                    "instead of stderr");
  serve->add_option("--admin-key", flags.admin_key_file,
                    "Public key file (FILE.pub) of the first admin; added if not known yet");
  serve->add_option("--admin-name", flags.admin_name, "User name for --admin-key")
      ->capture_default_str();
  serve->add_option("--vms", flags.vms, "Run VMs (on) or only the lobby (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  serve->add_option("--images-dir", flags.vm.images_dir, "Guest images (default DATA/images)");
  serve->add_option("--libvirt-uri", flags.vm.libvirt_uri, "libvirt connection URI")
      ->capture_default_str();
  serve->add_option("--accel", flags.vm.accel, "Guest accelerator: kvm or tcg (default: probe)")
      ->check(CLI::IsMember({"", "kvm", "tcg"}));
  serve
      ->add_option("--vm-image", flags.vm_image,
                   "The image `new` makes VMs and sandboxes from without --image: NAME or "
                   "NAME@VERSION")
      ->capture_default_str();
  serve
      ->add_option("--vm-ready-timeout", flags.vm_ready_timeout_s,
                   "Seconds `new` and `cp` wait for a fresh guest to run a command before "
                   "they give up on it and remove it")
      ->check(CLI::Range(10, 3600))
      ->capture_default_str();
  serve
      ->add_option("--vm-templates", flags.vm_templates,
                   "default: keep a saved, booted template of the VMs `new` makes by default "
                   "(the default image, shape and egress) and restore new VMs from it rather "
                   "than boot them; none: always boot")
      ->check(CLI::IsMember({"default", "none"}))
      ->capture_default_str();
  serve
      ->add_option("--pool", flags.pool,
                   "The warm pool: paused VMs restored from templates ahead of time, which "
                   "`new` takes when it asks for their shape (a fraction of a second). "
                   "IMAGE=N keeps N of the default shape of IMAGE, IMAGE:CPUS,MEMORY,DISK"
                   "[,EGRESS]=N of that shape (repeatable); default: 1 of the default image; "
                   "none: no pool. Only with --vm-templates default; a VM is refilled only "
                   "while the host has memory for it and one more")
      ->capture_default_str();
  serve
      ->add_option("--vm-egress", flags.vm_egress,
                   "What new VMs may reach unless `new --egress` says: all (outbound NAT, "
                   "never this host nor private ranges), integrations or none (no network "
                   "device); full is an old name of all")
      ->capture_default_str();  // checked by ParseEgressPolicy, the names' one home
  serve->add_option(
      "--sandbox-size", flags.sandbox_sizes,
      "A sandbox size NAME=CPU,MEMORY[,DISK] (e.g. test=1,512M,2G), added or replacing one "
      "of small=2,4G medium=4,8G large=8,16G (repeatable)");
  serve
      ->add_option("--reserve-cpu", flags.reserve_cpu,
                   "vCPUs of this host kept for itself: sandboxes reserve from the rest")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  serve
      ->add_option("--reserve-memory", flags.reserve_memory,
                   "Memory of this host kept for itself (a size): sandboxes reserve from the rest")
      ->capture_default_str();
  serve
      ->add_option("--sandbox-overcommit", flags.sandbox_overcommit,
                   "How many times this host's vCPUs and memory sandboxes may reserve in all "
                   "(1: never more than it has)")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  serve
      ->add_option("--price-unit", flags.price_unit,
                   "The price of a unit of usage (2 vCPUs and 4 GiB for an hour), shown by "
                   "usage and GET /v1/usage; unset: units only")
      ->check(CLI::Range(0.0, 1e9));
  serve->add_option("--vm-egress-allow", flags.vm_egress_allow,
                    "A range (CIDR, IPv4 or IPv6) VMs with egress all may reach although the "
                    "host's isolation rules close it, e.g. a private network (repeatable). The "
                    "rules are nftables matched on QEMU's user: they act on every QEMU of this "
                    "host; a range covering this host's own addresses opens them too");
  serve
      ->add_option("--vm-tb-cache", flags.vm.tb_cache_mib,
                   "MiB of translated code each TCG guest may keep (QEMU's cache; most of an "
                   "idle TCG VM's memory); 0: QEMU's own default of 1024")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  serve
      ->add_option("--guest-reach-timeout", flags.vm.guest_reach_timeout_s,
                   "Seconds a command waits for a running VM's control connection before "
                   "the VM is reported unavailable")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  serve->add_option("--mcp-allow-origin", flags.mcp.allowed_origins,
                    "An Origin (scheme://host[:port]) that may call /mcp besides loopback "
                    "ones (repeatable)");
  serve->add_flag("--mcp-conformance-fixtures", flags.mcp.conformance_fixtures,
                  "TEST-ONLY: add the MCP conformance suite's fixture tools to /mcp; never "
                  "in production");
  serve->add_option("--runner", flags.vm.runner_path,
                    "The guest runner binary (default: warren-run next to warren)");
  serve
      ->add_option("--domain", flags.domain,
                   "Domain VMs' pages are served under: http(s)://NAME.DOMAIN[:PORT]/ on --web "
                   "(*.localhost resolves to loopback with no DNS; else point *.DOMAIN here)")
      ->check(warren::DomainName("vms.example.org"))
      ->capture_default_str();
  serve
      ->add_option("--web", flags.web,
                   "Address of the web listener serving VMs' pages (HTTPS with --tls-cert and "
                   "--tls-key: a certificate for DOMAIN and *.DOMAIN), ADDR:PORT, or off")
      ->capture_default_str();
  warren::AddCountOptions(
      *serve,
      {
          {"--web-max-connections", &flags.web_limits.max_connections,
           "Connections to the web listener at once, all visitors together (a thread "
           "each); past it: 503"},
          {"--web-max-connections-per-source", &flags.web_limits.max_connections_per_source,
           "Connections to the web listener from one address; past it: 503"},
          {"--web-max-connections-per-vm", &flags.web_limits.max_connections_per_site,
           "Connections to one VM's pages at once; past it: 503"},
      },
      100000);
  serve
      ->add_option("--int-domain", flags.int_domain,
                   "Domain under which VMs reach their integrations: http(s)://NAME.DOMAIN/ "
                   "(resolved inside the guest by warren, never by outside DNS)")
      ->check(warren::DomainName("int.example.org"))
      ->capture_default_str();
  warren::AddCountOptions(
      *serve,
      {
          {"--int-max-connections", &flags.vm.integrations.proxy.max_connections,
           "Connections to the integrations proxy at once, all VMs together (a "
           "thread each); past it: 503"},
          {"--int-max-connections-per-vm", &flags.vm.integrations.proxy.max_connections_per_vm,
           "Connections to the integrations proxy one VM may hold; past it: 503"},
          {"--int-max-connections-per-user", &flags.vm.integrations.proxy.max_connections_per_user,
           "Connections to the integrations proxy one user's VMs may hold together; past it: "
           "503"},
      },
      100000);
  serve->add_option(
      "--tls-cert", flags.tls_cert_file,
      "PEM certificate (chain) for HTTPS on --http and --web (for the host names of both: "
      "DOMAIN and *.DOMAIN for --web); needs --tls-key");
  serve->add_option("--tls-key", flags.tls_key_file, "PEM private key for --tls-cert");
  serve->add_option("--public-url", flags.public_url,
                    "Base URL clients reach --http at, e.g. https://warren.example (OAuth "
                    "metadata and token audience; default: from --http)");
  serve
      ->add_option("--oauth-code-lifetime", flags.oauth_code_lifetime,
                   "Seconds an OAuth sign-in code waits for `authorize CODE`")
      ->check(CLI::Range(2, 3600))
      ->capture_default_str();
  serve
      ->add_option("--oauth-register-rate", flags.oauth.registrations_per_minute,
                   "OAuth client registrations a minute per source (IPv4 address or IPv6 /64)")
      ->check(CLI::Range(0.1, 100000.0))
      ->capture_default_str();
  serve
      ->add_option("--oauth-signin-rate", flags.oauth.sign_ins_per_minute,
                   "OAuth sign-in pages opened a minute per source (each a pending sign-in)")
      ->check(CLI::Range(0.1, 100000.0))
      ->capture_default_str();
  serve
      ->add_option("--exec-rate", flags.exec.rate_per_second,
                   "POST /exec: requests a second per API token label, on average")
      ->check(CLI::Range(0.01, 100000.0))
      ->capture_default_str();
  serve
      ->add_option("--exec-burst", flags.exec.burst,
                   "POST /exec: requests per API token label allowed at once")
      ->check(CLI::Range(1.0, 100000.0))
      ->capture_default_str();
  serve
      ->add_option("--exec-timeout", flags.exec.timeout_seconds,
                   "POST /exec: seconds before a still-running command is answered 504 (it "
                   "goes on)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  CLI::App* version = app.add_subcommand("version", "Print the version");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version->parsed()) {
    std::printf("warren %s\n", WARREN_VERSION);
    return 0;
  }
  try {
    return warren::Serve(flags);
  } catch (const std::exception& e) {
    // Errors are Status values; an exception here is a bug or resource exhaustion.
    std::fprintf(stderr, "warren: internal error: %s\n", e.what());
    return 1;
  }
}
