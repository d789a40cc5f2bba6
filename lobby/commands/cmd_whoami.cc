// whoami: the caller's user, whether it is an admin, the limits of the credential in use,
// and the user's keys with the one in use marked — for a credential limited by --cmds or
// --tag only the user, that credential and its limits.
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/key_view.h"

namespace warren {
namespace {

// A credential held to some commands or to one tag speaks for a part of the account only:
// it is not shown the account's admin flag or its other keys (an agent's token need not
// learn what else the account could do).
bool Limited(const Scope& scope) { return !scope.cmds.empty() || !scope.tag.empty(); }

class WhoamiCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    const bool limited = Limited(caller.scope);
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(caller.user));
    if (limited) {
      std::erase_if(keys, [&](const SshKey& k) { return k.fingerprint != caller.key_fingerprint; });
    }

    nlohmann::json key_list = nlohmann::json::array();
    std::string credential = caller.credential;
    for (const SshKey& k : keys) {
      key_list.push_back(KeyJson(k, caller.key_fingerprint));
      if (k.fingerprint == caller.key_fingerprint) {
        credential = "key " + k.name + " (" + caller.key_fingerprint + ")";
      }
    }
    CommandResult r;
    r.data = {{"user", caller.user},
              {"credential", caller.credential},
              {"limited", limited},
              {"limits", caller.scope.ToJson()},
              {"keys", std::move(key_list)}};
    if (!caller.token_label_id.empty()) {
      Result<TokenLabel> label = ctx.store().GetTokenLabel(caller.token_label_id);
      if (label.ok()) {
        r.data["token_label"] = label->name;
        credential = "API token " + label->name + " (label " + label->id + ")";
      }
    }
    if (!limited) r.data["admin"] = caller.admin;
    r.text = "user:   " + caller.user + (!limited && caller.admin ? " (admin)" : "") + "\n" +
             "using:  " + credential + "\n" + "limits: " + DescribeScope(caller.scope) + "\n";
    if (!limited) {
      r.text += "\n" + KeyTableText(keys, caller.key_fingerprint);
    } else {
      r.text +=
          "(" + CredentialNoun(caller) + " is limited, so the rest of the account is not shown)\n";
    }
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
                     "account; the key in use is marked with * (\"in_use\": true under --json). "
                     "A credential limited to some commands or to a tag sees only itself: "
                     "not the admin flag, not the account's other keys.\n",
      .read_only = true,
      .make = [] { return std::make_unique<WhoamiCommand>(); },
  });
}

}  // namespace warren
