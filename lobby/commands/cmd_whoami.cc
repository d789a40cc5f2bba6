// whoami: the caller's user, whether it is an admin, the limits of the credential in use,
// and the user's keys with the one in use marked.
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/key_view.h"

namespace warren {
namespace {

class WhoamiCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(caller.user));

    nlohmann::json key_list = nlohmann::json::array();
    std::string in_use_name;
    for (const SshKey& k : keys) {
      key_list.push_back(KeyJson(k, caller.key_fingerprint));
      if (k.fingerprint == caller.key_fingerprint) in_use_name = k.name;
    }

    CommandResult r;
    r.data = {{"user", caller.user},
              {"admin", caller.admin},
              {"credential", caller.credential},
              {"limits", caller.scope.ToJson()},
              {"keys", std::move(key_list)}};
    std::string credential = caller.credential;
    if (!in_use_name.empty())
      credential = "key " + in_use_name + " (" + caller.key_fingerprint + ")";
    r.text = "user:   " + caller.user + (caller.admin ? " (admin)" : "") + "\n" +
             "using:  " + credential + "\n" + "limits: " + DescribeScope(caller.scope) + "\n\n" +
             KeyTableText(keys, caller.key_fingerprint);
    return r;
  }
};

}  // namespace

void RegisterWhoamiCommand(CommandTable& table) {
  table.Add({
      .path = "whoami",
      .summary = "show your user, your keys and the key in use",
      .description = "Shows your user name, whether you are an admin, the credential you are "
                     "using and its limits (commands, tag, expiry), and every SSH key on your "
                     "account; the key in use is marked with * (\"in_use\": true under --json).\n",
      .read_only = true,
      .make = [] { return std::make_unique<WhoamiCommand>(); },
  });
}

}  // namespace warren
