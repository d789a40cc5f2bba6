// ssh-key list|add|remove|rename: the caller's own SSH keys. Every command acts on the
// caller's user only.
//
// Restrictions (--cmds, --tag, --exp) on a new key must be covered by the caller's own
// limits: a restricted credential can only make narrower ones. A limit the caller carries
// and the command line leaves out is inherited — a key restricted to "--tag ci" that adds a
// key without --tag gets a "ci" key, not an unrestricted one — so forgetting a flag never
// widens anything, while asking for more (other commands, another tag, a later expiry) is
// refused. The same "narrower only" rule applies to removing and renaming: a restricted
// credential cannot touch a key wider than itself (it could lock its owner out).
//
// Removing the key in use is refused (connect with another key to do it), and so is
// removing the last key, so an account always keeps a way in.
#include <CLI/CLI.hpp>

#include "lobby/commands/command_table.h"
#include "lobby/commands/commands.h"
#include "lobby/commands/key_input.h"
#include "lobby/commands/key_view.h"
#include "lobby/commands/text_format.h"

namespace warren {
namespace {

// Why `child` is wider than `parent`, for the refusal message; empty when it is not.
std::string WhyWider(const Scope& parent, const Scope& child) {
  std::vector<std::string> reasons;
  if (!parent.cmds.empty()) {
    if (child.cmds.empty()) {
      reasons.push_back("it would allow every command");
    } else {
      for (const std::string& c : child.cmds) {
        if (!parent.AllowsCommand(c)) reasons.push_back("it would allow \"" + c + "\"");
      }
    }
  }
  if (!parent.tag.empty() && child.tag != parent.tag) {
    reasons.push_back("it must keep the tag \"" + parent.tag + "\"");
  }
  if (parent.expires_at != 0 && (child.expires_at == 0 || child.expires_at > parent.expires_at)) {
    reasons.push_back("it must expire by " + FormatTime(parent.expires_at));
  }
  std::string out;
  for (const std::string& r : reasons) out += (out.empty() ? "" : "; ") + r;
  return out;
}

Status RequireNarrower(const Caller& caller, const Scope& target, std::string_view verb) {
  if (caller.scope.Covers(target)) return Status::Ok();
  std::string why = WhyWider(caller.scope, target);
  return PermissionDenied("a restricted key can only " + std::string(verb) + " narrower keys" +
                          (why.empty() ? "" : ": " + why));
}

class ListCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(ctx.caller().user));
    nlohmann::json list = nlohmann::json::array();
    for (const SshKey& k : keys) list.push_back(KeyJson(k, ctx.caller().key_fingerprint));
    CommandResult r;
    r.data = {{"keys", std::move(list)}};
    r.text = KeyTableText(keys, ctx.caller().key_fingerprint);
    return r;
  }
};

class AddCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("KEY", key_words_,
                   "the public key line, e.g. ssh-ed25519 AAAA… me@laptop; read from stdin "
                   "when absent");
    name_opt_ = app.add_option("--name", name_, "the key's name (default: its comment, or key-N)")
                    ->type_name("NAME");
    cmds_opt_ = app.add_option("--cmds", cmds_,
                               "only these commands, comma-separated (e.g. \"ls,share show\")")
                    ->type_name("LIST");
    tag_opt_ =
        app.add_option("--tag", tag_, "only VMs with this tag exist for the key")->type_name("TAG");
    exp_opt_ = app.add_option("--exp", exp_, "expiry: Nh, Nd, Nw, Ny or never")->type_name("WHEN");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    // Flags first: they are cheap to check and must not wait on stdin.
    Scope scope = caller.scope;  // inherited unless the command line says otherwise
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
    WARREN_RETURN_IF_ERROR(RequireNarrower(caller, scope, "add"));
    if (name_opt_->count() > 0) WARREN_RETURN_IF_ERROR(ValidateKeyName(name_));

    WARREN_ASSIGN_OR_RETURN(PublicKey pk, ReadPublicKey(JoinWords(key_words_), *ctx.session.in));
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(caller.user));
    if (Result<SshKey> existing = ctx.store().GetKey(pk.fingerprint); existing.ok()) {
      if (existing->user == caller.user) {
        return Conflict("this key is already on your account as \"" + existing->name + "\"");
      }
      return Conflict("this key is already registered to another account");
    } else if (existing.status().code() != Code::kNotFound) {
      return existing.status();
    }
    std::string name = name_opt_->count() > 0 ? name_ : DefaultKeyName(pk.comment, keys);
    for (const SshKey& k : keys) {
      if (k.name == name) return Conflict("you already have a key named \"" + name + "\"");
    }

    SshKey key;
    key.fingerprint = pk.fingerprint;
    key.user = caller.user;
    key.name = name;
    key.algorithm = pk.algorithm;
    key.blob_base64 = pk.blob_base64;
    key.comment = pk.comment;
    key.added_at = ctx.now;
    key.scope = scope;
    WARREN_RETURN_IF_ERROR(ctx.store().AddKey(key));

    CommandResult r;
    r.data = {{"key", KeyJson(key, caller.key_fingerprint)}};
    r.text = "added key " + key.name + " (" + key.fingerprint +
             ")\nlimits: " + DescribeScope(key.scope) + "\n";
    return r;
  }

 private:
  std::vector<std::string> key_words_;
  std::string name_, cmds_, tag_, exp_;
  CLI::Option* name_opt_ = nullptr;
  CLI::Option* cmds_opt_ = nullptr;
  CLI::Option* tag_opt_ = nullptr;
  CLI::Option* exp_opt_ = nullptr;
};

class RemoveCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("KEY", key_, "the key's name or fingerprint")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(caller.user));
    WARREN_ASSIGN_OR_RETURN(SshKey key, FindKey(keys, key_));
    if (key.fingerprint == caller.key_fingerprint) {
      return Conflict("\"" + key.name +
                      "\" is the key you are using; connect with another of your keys to "
                      "remove it");
    }
    if (keys.size() == 1) {
      return Conflict("\"" + key.name + "\" is your last key; add another before removing it");
    }
    WARREN_RETURN_IF_ERROR(RequireNarrower(caller, key.scope, "remove"));
    WARREN_RETURN_IF_ERROR(ctx.store().RemoveKey(caller.user, key.fingerprint));
    CommandResult r;
    r.data = {{"removed", KeyJson(key, caller.key_fingerprint)}};
    r.text = "removed key " + key.name + " (" + key.fingerprint + ")\n";
    return r;
  }

 private:
  std::string key_;
};

class RenameCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("KEY", key_, "the key's name or fingerprint")->required();
    app.add_option("NEWNAME", new_name_, "its new name")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    WARREN_RETURN_IF_ERROR(ValidateKeyName(new_name_));
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(caller.user));
    WARREN_ASSIGN_OR_RETURN(SshKey key, FindKey(keys, key_));
    WARREN_RETURN_IF_ERROR(RequireNarrower(caller, key.scope, "rename"));
    const std::string old_name = key.name;
    if (new_name_ != old_name) {
      for (const SshKey& k : keys) {
        if (k.name == new_name_) {
          return Conflict("you already have a key named \"" + new_name_ + "\"");
        }
      }
      WARREN_RETURN_IF_ERROR(ctx.store().RenameKey(caller.user, key.fingerprint, new_name_));
      key.name = new_name_;
    }
    CommandResult r;
    r.data = {{"key", KeyJson(key, caller.key_fingerprint)}, {"old_name", old_name}};
    r.text = "renamed key " + old_name + " to " + key.name + " (" + key.fingerprint + ")\n";
    return r;
  }

 private:
  std::string key_, new_name_;
};

}  // namespace

void RegisterSshKeyCommands(CommandTable& table) {
  table.AddGroup("ssh-key", "your SSH keys");
  table.Add({
      .path = "ssh-key list",
      .summary = "list your SSH keys",
      .description = "Lists the keys on your account: name, fingerprint, algorithm, when it was "
                     "added and last used, and its limits. * marks the key you are using.\n",
      .read_only = true,
      .make = [] { return std::make_unique<ListCommand>(); },
  });
  table.Add({
      .path = "ssh-key add",
      .summary = "add an SSH public key to your account",
      .args = "[KEY…]",
      .description =
          "Adds a public key, given as the argument or on stdin:\n"
          "  ssh-key add ssh-ed25519 AAAA… me@laptop\n"
          "  ssh HOST ssh-key add --name ci --cmds \"ls,new\" --exp 30d < ci.pub\n"
          "The key is named by --name, else by its comment, else key-N.\n"
          "--cmds, --tag and --exp limit what the key may do. A restricted key can only add "
          "narrower keys; a limit it carries that you leave out is inherited.\n",
      .make = [] { return std::make_unique<AddCommand>(); },
  });
  table.Add({
      .path = "ssh-key remove",
      .summary = "remove one of your SSH keys",
      .args = "NAME|FINGERPRINT",
      .description = "Removes a key at once: sessions using it stop working on their next "
                     "command. You cannot remove the key you are using, nor your last key.\n",
      .make = [] { return std::make_unique<RemoveCommand>(); },
  });
  table.Add({
      .path = "ssh-key rename",
      .summary = "rename one of your SSH keys",
      .args = "NAME|FINGERPRINT NEWNAME",
      .description = "Names are letters, digits and . _ @ -, up to 64, unique on your account.\n",
      .make = [] { return std::make_unique<RenameCommand>(); },
  });
}

}  // namespace warren
