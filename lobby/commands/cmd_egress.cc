// egress: changes what a VM may reach (vm_egress.h). The host gives or takes the VM's
// network device — live on a running VM (a hot-plug or unplug of its NIC, whose time the
// output states), and in its definition for the next boot — and then the store records the
// policy. Between `integrations` and `none` nothing changes on the host: neither has a
// network device.
#include <chrono>

#include <CLI/CLI.hpp>

#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_boot.h"
#include "lobby/commands/vm_egress.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

class EgressCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("POLICY", policy_, "what it may reach")
        ->required()
        ->type_name(EgressPolicyChoices());
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(VmHost * host, RequireVmHost(ctx));
    WARREN_ASSIGN_OR_RETURN(const std::string policy, ParseEgressPolicy("egress", policy_));
    VmRecord vm = *ctx.vm;
    const std::string before = vm.egress;
    const bool device_before = HostEgressFor(before) == Egress::kAll;
    const bool device_after = HostEgressFor(policy) == Egress::kAll;
    bool live = false;
    double seconds = 0;
    if (device_before != device_after || before != policy) {
      const auto start = std::chrono::steady_clock::now();
      Result<bool> changed = host->SetNetwork(vm.id, HostEgressFor(policy));
      if (!changed.ok()) {
        if (changed.status().code() == Code::kNotFound) {
          return NotFound(vm.name + "'s domain is missing; rm it and make a new one");
        }
        return changed.status().Annotate("changing the egress of " + vm.name);
      }
      live = *changed;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      WARREN_RETURN_IF_ERROR(ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
        r.egress = policy;
        vm = r;
        return Status::Ok();
      }));
      // `none` cuts its integrations too (open connections included); leaving it restores them.
      NotifyIntegrations(ctx.services, vm.owner);
    }
    const std::string state = VmStateText(vm, host->Inspect(vm.id));
    CommandResult r;
    r.data = VmJson(vm, state, ctx.services.info);
    r.data["previous_egress"] = before;
    r.data["network_device"] = device_after;
    r.data["live"] = live;
    r.data["downtime_seconds"] = live ? seconds : 0.0;
    if (before == policy) {
      r.text = vm.name + "'s egress is already " + policy + "\n";
      return r;
    }
    r.text = vm.name + ": egress " + before + " -> " + policy + "\n";
    if (device_before == device_after) {
      r.text += "no change to its network device (it has " +
                std::string(device_after ? "one" : "none") + ")\n";
    } else if (live) {
      r.text += std::string(device_after ? "network device plugged in" : "network device removed") +
                " while it runs (" + SecondsText(seconds) + ")" +
                (device_after ? "; the guest configures it as it appears (DHCP)" : "") + "\n";
    } else {
      r.text += std::string(device_after ? "it gets a network device" : "its network device goes") +
                " at its next start\n";
    }
    return r;
  }

 private:
  std::string vm_, policy_;
};

}  // namespace

void RegisterEgressCommand(CommandTable& table) {
  table.Add({
      .path = "egress",
      .summary = "change what a VM may reach",
      .args = "VM all|integrations|none",
      .description = std::string("Sets a VM's egress policy. On a running VM the network "
                                 "device is plugged in or removed at once (the output says "
                                 "how long it took); a stopped VM has it from its next start:\n"
                                 "  egress web-1 none\n"
                                 "  egress web-1 all\n") +
                     kEgressPolicyHelp,
      .target = {"VM", VmNeed::kReady},
      .make = [] { return std::make_unique<EgressCommand>(); },
  });
}

}  // namespace warren
