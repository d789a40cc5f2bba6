// extend VM --minutes N: more life for a sandbox. The new expiry counts from the later of
// now and the current one, and never lies more than 24 hours ahead (sandbox.h).
#include <CLI/CLI.hpp>

#include "lobby/base/time_format.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/vm_view.h"

namespace warren {
namespace {

constexpr int64_t kMaxExtendMinutes = kMaxSandboxSeconds / 60;

class ExtendCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the sandbox")->required();
    app.add_option("--minutes", minutes_, "how many minutes more (1-1440)")
        ->type_name("N")
        ->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    if (minutes_ < 1 || minutes_ > kMaxExtendMinutes) {
      return InvalidArgument("--minutes must be 1 to " + std::to_string(kMaxExtendMinutes));
    }
    const VmRecord& vm = *ctx.vm;
    if (!IsSandbox(vm)) {
      return InvalidArgument(vm.name + " is a VM, not a sandbox: it has no lifetime to extend");
    }
    ExtendedExpiry e;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
      if (!IsSandbox(r)) return Conflict(vm.name + " is no longer a sandbox");
      e = ExtendExpiry(ctx.now, r.expires_at, minutes_);
      r.expires_at = e.expires_at;
      return Status::Ok();
    }));
    CommandResult r;
    r.data = {{"name", vm.name}, {"expires_at", e.expires_at}, {"capped", e.capped}};
    r.text = vm.name + " now expires at " + FormatTime(e.expires_at) + " (in " +
             FormatDuration(e.expires_at - ctx.now) + ")" +
             (e.capped ? "; a sandbox lives at most 24 hours ahead" : "") + "\n";
    return r;
  }

 private:
  std::string vm_;
  int64_t minutes_ = 0;
};

}  // namespace

void RegisterExtendCommand(CommandTable& table) {
  table.Add({
      .path = "extend",
      .summary = "give a sandbox more time",
      .args = "VM --minutes N",
      .description =
          "Pushes a sandbox's expiry out by N minutes, counted from its current expiry (or "
          "from now, if that is later), and never more than 24 hours from now. At its expiry "
          "warren destroys the sandbox and its disk.\n"
          "  extend sbx-1a2b3c4d --minutes 30\n",
      .target = {"VM", VmNeed::kExists},
      .make = [] { return std::make_unique<ExtendCommand>(); },
  });
}

}  // namespace warren
