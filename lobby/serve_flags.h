// The options of `warren serve`: what each one sets (ServeFlags) and how it is declared to
// CLI11 (AddServeOptions). The same declarations read the config file (lobby/serve_config.h),
// so every flag is also a key there.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bridge/exec_handler.h"
#include "bridge/http_server.h"
#include "bridge/mcp/mcp_handler.h"
#include "bridge/oauth/oauth_handler.h"
#include "lobby/commands/command_runner.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_quota.h"
#include "lobby/ssh/ssh_server.h"
#include "lobby/vm_runtime.h"
#include "lobby/web/web_server.h"

namespace warren {

struct ServeFlags {
  // The config file (lobby/serve_config.h): every key is a flag below without its "--".
  std::string config_file;
  // Print the effective configuration (file, flags and defaults) and exit.
  bool print_config = false;
  // The log: its threshold and line format (lobby/base/log.h).
  std::string log_level = "info";
  std::string log_format = "text";

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

// Declares every option of `serve` on `serve`, bound to `flags` (which must outlive it).
// --config and --print-config are declared by UseConfigFile (lobby/serve_config.h).
void AddServeOptions(CLI::App& serve, ServeFlags& flags);

}  // namespace warren
