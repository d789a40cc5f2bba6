// `warren isolate`: installs warren's isolation rules (vmhost/egress_firewall.h) for the VMs of
// the libvirt on the machine it runs on, and exits — what an operator runs on a remote VM
// host (serve --host NAME=URI), where warren itself cannot reach nftables, before declaring
// it isolated with serve --host-isolated NAME (docs/multi_host.md). The rules last until the
// machine reboots (run it from a unit at boot) or `warren isolate --remove`.
//   warren isolate [--data-dir /var/lib/warren] [--libvirt-uri qemu:///system]
//                  [--vm-egress-allow CIDR]... [--remove]
// main.cc calls AddIsolateSubcommand before parsing and RunIsolateSubcommand after.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace warren {

struct IsolateSubcommand {
  CLI::App* app = nullptr;
  // On a remote host: the data directory warren keeps there (LibvirtHostOptions::data_dir),
  // which names the chain.
  std::string data_dir = "/var/lib/warren";
  std::string libvirt_uri = "qemu:///system";
  std::vector<std::string> egress_allow;
  bool remove = false;
};

void AddIsolateSubcommand(CLI::App& app, IsolateSubcommand& sub);
// Its exit status (0, or 1 with the error on stderr); nullopt when it was not parsed.
std::optional<int> RunIsolateSubcommand(const IsolateSubcommand& sub);

}  // namespace warren
