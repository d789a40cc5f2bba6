// The options of `warren serve` (lobby/serve_flags.h).
#include "lobby/serve_flags.h"

#include <initializer_list>
#include <iterator>
#include <string>
#include <tuple>

#include "vmhost/host_load.h"
#include "vmhost/warm_memory.h"

namespace warren {
namespace {

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

}  // namespace

void AddServeOptions(CLI::App& app, ServeFlags& flags) {
  CLI::App* serve = &app;
  serve->add_option("--data-dir", flags.data_dir, "State directory (store, host key)")
      ->capture_default_str();
  serve->add_option("--ssh", flags.ssh, "SSH lobby address, ADDR:PORT (port 0: any free port)")
      ->capture_default_str();
  AddSshLimitFlags(*serve, flags);
  AddUserLimitFlags(*serve, flags);
  AddCommandLimitFlags(*serve, flags);
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
  serve
      ->add_option("--log-level", flags.log_level,
                   "Least severe log lines written: debug, info, warn or error (re-read from the "
                   "config file on SIGHUP)")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
  serve
      ->add_option("--log-format", flags.log_format,
                   "text: one line per event, \"TIME LEVEL MESSAGE\"; json: one JSON object per "
                   "line, {\"ts\",\"level\",\"msg\"} and an audit line's key=value fields")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  serve->add_option("--admin-key", flags.admin_key_file,
                    "Public key file (FILE.pub) of the first admin; added if not known yet");
  serve->add_option("--admin-name", flags.admin_name, "User name for --admin-key")
      ->capture_default_str();
  serve->add_option("--vms", flags.vms, "Run VMs (on) or only the lobby (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  serve->add_option("--images-dir", flags.vm.images_dir, "Guest images (default DATA/images)");
  serve
      ->add_option("--host", flags.vm.hosts,
                   "A VM host: NAME=URI, its name in `hosts` and `new --host` and its libvirt "
                   "URI (qemu:///system, qemu+ssh://root@h2/system, qemu+tls://h3/system); "
                   "repeatable. The first is the default host; each host that takes new VMs "
                   "keeps its own templates and warm pool")
      ->capture_default_str();
  serve->add_option("--host-isolated", flags.vm.isolated_hosts,
                    "A remote host NAME whose operator has put warren's isolation rules in "
                    "place there (docs/multi_host.md): warren cannot check them over libvirt, "
                    "and places VMs only on hosts that isolate them; repeatable");
  serve->add_option("--host-peer-uri", flags.vm.peer_uris,
                    "NAME=URI: the libvirt URI other hosts' libvirtd reach host NAME by, for "
                    "live moves onto it (their daemon opens it); default: a remote host's "
                    "--host URI, none for a host on this machine; repeatable");
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
                   "(the default image, shape and egress) on each host and restore new VMs "
                   "from it rather than boot them; none: always boot")
      ->check(CLI::IsMember({"default", "none"}))
      ->capture_default_str();
  serve
      ->add_option("--pool", flags.pool,
                   "The warm pool: paused VMs restored from templates ahead of time, which "
                   "`new` takes when it asks for their shape (a fraction of a second). "
                   "IMAGE=N keeps N of the default shape of IMAGE, IMAGE:CPUS,MEMORY,DISK"
                   "[,EGRESS]=N of that shape (repeatable), on each host that takes new VMs; "
                   "default: 1 of the default image; none: no pool. Only with --vm-templates "
                   "default; a VM is refilled only while its host has memory for it and one "
                   "more")
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
      ->add_option("--warm-memory", flags.vm.warm_memory,
                   "MiB of memory kept touched for the next VM started on this machine and freed "
                   "as it starts, or auto: " +
                       std::to_string(kAutoWarmMemoryMib) +
                       " where this machine returns free memory to a hypervisor (virtio-balloon "
                       "free page reporting: such memory costs a fault there when it is handed "
                       "out again, ~0.4 s of a restore), else 0")
      ->check([](const std::string& v) {
        Result<int64_t> parsed = ParseWarmMemory(v, false);
        return parsed.ok() ? std::string() : parsed.status().message();
      })
      ->capture_default_str();
  serve
      ->add_option("--guest-reach-timeout", flags.vm.guest_reach_timeout_s,
                   "Seconds a command waits for a running VM's control connection before "
                   "the VM is reported unavailable")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  serve
      ->add_option("--guest-slowdown-max", flags.vm.guest_slowdown_max,
                   "How many times longer than set a busy host may wait for its guests before "
                   "taking one for dead (the reach and keepalive timeouts, a new VM's answer, "
                   "cp's sync are stretched by the host's load per CPU, up to this); 1: never")
      ->check(CLI::Range(1.0, kGuestSlowdownLimit))
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
      ->check(DomainName("vms.example.org"))
      ->capture_default_str();
  serve
      ->add_option("--web", flags.web,
                   "Address of the web listener serving VMs' pages (HTTPS with --tls-cert and "
                   "--tls-key: a certificate for DOMAIN and *.DOMAIN), ADDR:PORT, or off")
      ->capture_default_str();
  AddCountOptions(
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
      ->check(DomainName("int.example.org"))
      ->capture_default_str();
  AddCountOptions(
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
}

}  // namespace warren
