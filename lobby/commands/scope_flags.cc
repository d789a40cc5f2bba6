#include "lobby/commands/scope_flags.h"

#include <CLI/CLI.hpp>

#include "lobby/commands/command_table.h"

namespace warren {

void ScopeFlags::Declare(CLI::App& app, const ScopeFlagsHelp& help) {
  cmds_opt_ = app.add_option("--cmds", cmds_, help.cmds)->type_name("LIST");
  tag_opt_ = app.add_option("--tag", tag_, help.tag)->type_name("TAG");
  exp_opt_ = app.add_option("--exp", exp_, help.exp)->type_name("WHEN");
}

Result<Scope> ScopeFlags::Apply(const CommandContext& ctx) const {
  Scope scope = ctx.caller().scope;  // inherited unless the command line says otherwise
  if (cmds_opt_->count() > 0) {
    WARREN_ASSIGN_OR_RETURN(scope.cmds, ParseCommandList(cmds_));
    for (const std::string& c : scope.cmds) {
      if (ctx.table.Find(c) == nullptr && !ctx.table.IsGroup(c)) {
        return InvalidArgument("--cmds: unknown command \"" + c + "\"; see help");
      }
    }
  }
  if (tag_opt_->count() > 0) {
    WARREN_RETURN_IF_ERROR(ValidateTag(tag_));
    scope.tag = tag_;
  }
  if (exp_opt_->count() > 0) {
    WARREN_ASSIGN_OR_RETURN(scope.expires_at, ParseExpiry(exp_, ctx.now));
  }
  return scope;
}

}  // namespace warren
