#include "lobby/isolate_command.h"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "vmhost/egress_firewall.h"
#include "vmhost/libvirt_host.h"

namespace warren {
namespace {

int Failed(const Status& st) {
  std::fprintf(stderr, "warren isolate: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

void AddIsolateSubcommand(CLI::App& app, IsolateSubcommand& sub) {
  sub.app = app.add_subcommand(
      "isolate",
      "Install warren's isolation rules for the VMs of this machine's libvirt (on a remote VM "
      "host; see docs/multi_host.md), or --remove them");
  sub.app->add_option("--data-dir", sub.data_dir, "warren's data directory on this host")
      ->capture_default_str();
  sub.app
      ->add_option("--libvirt-uri", sub.libvirt_uri, "this host's libvirt (to learn QEMU's user)")
      ->capture_default_str();
  sub.app->add_option("--vm-egress-allow", sub.egress_allow,
                      "A range VMs may reach although the rules close it (as serve's)");
  sub.app->add_flag("--remove", sub.remove, "Remove this data directory's rules instead");
}

std::optional<int> RunIsolateSubcommand(const IsolateSubcommand& sub) {
  if (sub.app == nullptr || !sub.app->parsed()) return std::nullopt;
  EgressFirewallConfig config;
  config.data_dir = sub.data_dir;
  while (config.data_dir.size() > 1 && config.data_dir.back() == '/') config.data_dir.pop_back();
  if (config.data_dir.empty() || config.data_dir[0] != '/') {
    return Failed(InvalidArgument("--data-dir must be an absolute path"));
  }
  for (const std::string& range : sub.egress_allow) {
    Result<Cidr> cidr = ParseCidr(range);
    if (!cidr.ok()) return Failed(cidr.status().Annotate("--vm-egress-allow"));
    config.allow.push_back(*cidr);
  }
  if (!sub.remove) {
    LibvirtHostOptions options;
    options.uri = sub.libvirt_uri;
    LibvirtHost host(options);
    const QemuUser user = host.qemu_user();
    if (!user.known()) {
      return Failed(Unavailable("cannot tell which user QEMU runs as on " + sub.libvirt_uri +
                                ": the rules match that user"));
    }
    config.qemu_uid = user.uid;
  }
  EgressFirewall firewall(config);
  Status st = sub.remove ? firewall.Remove() : firewall.Apply();
  if (!st.ok()) return Failed(st);
  std::fprintf(stderr, "warren isolate: %s the chain %s for the VMs of %s (data dir %s)\n",
               sub.remove ? "removed" : "installed", firewall.chain().c_str(),
               sub.libvirt_uri.c_str(), config.data_dir.c_str());
  return 0;
}

}  // namespace warren
