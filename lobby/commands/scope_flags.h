// ScopeFlags: --cmds, --tag and --exp on the commands that make a credential (ssh-key add,
// ssh-key generate-api-key, authorize). The limits it gets are the caller's own with each
// flag given replacing its part, so leaving a flag out never widens anything. Apply checks
// their form; whether the result is narrower than the caller's is the command's own check
// (its message names what it makes). One per handler, used by the thread running it.
#pragma once

#include <string>
#include <string_view>

#include "keys/scope.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace warren {

struct ScopeFlagsHelp {
  std::string cmds;
  std::string tag;
  std::string exp;
};

class ScopeFlags {
 public:
  void Declare(CLI::App& app, const ScopeFlagsHelp& help);
  // The caller's scope with the flags given applied: InvalidArgument for a malformed list,
  // an unknown command, a bad tag or expiry.
  Result<Scope> Apply(const CommandContext& ctx) const;

 private:
  std::string cmds_, tag_, exp_;
  CLI::Option* cmds_opt_ = nullptr;
  CLI::Option* tag_opt_ = nullptr;
  CLI::Option* exp_opt_ = nullptr;
};

}  // namespace warren
