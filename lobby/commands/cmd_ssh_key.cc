// ssh-key list|add|remove|rename|generate-api-key: the caller's own SSH keys and API token
// labels. Every command acts on the caller's user only.
//
// An API token (keys/token.h) is minted under a label: `generate-api-key --label ci` makes
// the label when it is new (with a fresh random id) or adds a token to it. Labels share the
// per-user namespace of key names, appear in `list`, and `remove LABEL` revokes every token
// of the label at once; a new label of the same name gets a new id and revives nothing.
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

#include "keys/token.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/key_input.h"
#include "lobby/commands/key_view.h"
#include "lobby/commands/live_sessions.h"
#include "lobby/commands/scope_flags.h"
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

// The limits a new key or token gets (ScopeFlags), checked to be no wider than the caller's.
Result<Scope> NarrowerScope(const ScopeFlags& flags, const CommandContext& ctx,
                            std::string_view verb) {
  WARREN_ASSIGN_OR_RETURN(Scope scope, flags.Apply(ctx));
  WARREN_RETURN_IF_ERROR(RequireNarrower(ctx.caller(), scope, verb));
  return scope;
}

ScopeFlagsHelp HelpFor(const std::string& what) {
  return {"only these commands, comma-separated (e.g. \"ls,share show\")",
          "only VMs with this tag exist for the " + what, "expiry: Nh, Nd, Nw, Ny or never"};
}

// The label among `labels` called `name` (or with that id), if any.
const TokenLabel* FindLabel(const std::vector<TokenLabel>& labels, std::string_view name) {
  for (const TokenLabel& l : labels) {
    if (l.name == name || l.id == name) return &l;
  }
  return nullptr;
}

// Keys and token labels share one name space per user: Conflict when `name` is taken.
Status CheckNameFree(const std::vector<SshKey>& keys, const std::vector<TokenLabel>& labels,
                     std::string_view name) {
  for (const SshKey& k : keys) {
    if (k.name == name) {
      return Conflict("you already have a key named \"" + std::string(name) + "\"");
    }
  }
  if (FindLabel(labels, name) != nullptr) {
    return Conflict("you already have an API token label named \"" + std::string(name) + "\"");
  }
  return Status::Ok();
}

// A restricted caller may touch a label only when it covers every token of it.
Status RequireNarrowerLabel(const Caller& caller, const TokenLabel& label, std::string_view verb) {
  for (const IssuedToken& t : label.tokens) {
    if (!caller.scope.Covers(t.scope)) {
      std::string why = WhyWider(caller.scope, t.scope);
      return PermissionDenied("a restricted credential can only " + std::string(verb) +
                              " labels whose tokens are narrower than itself" +
                              (why.empty() ? "" : ": a token of " + label.name + " " + why));
    }
  }
  return Status::Ok();
}

// "not found" for a name that is neither a key nor a label.
Status NoKeyOrLabel(std::string_view name) {
  std::string shown(name.substr(0, 72));
  return NotFound("you have no key or API token label named \"" + shown +
                  "\" (or with that fingerprint); see ssh-key list");
}

class ListCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(ctx.caller().user));
    WARREN_ASSIGN_OR_RETURN(std::vector<TokenLabel> labels,
                            ctx.store().ListTokenLabels(ctx.caller().user));
    nlohmann::json list = nlohmann::json::array();
    for (const SshKey& k : keys) list.push_back(KeyJson(k, ctx.caller().key_fingerprint));
    nlohmann::json label_list = nlohmann::json::array();
    for (const TokenLabel& l : labels) {
      label_list.push_back(TokenLabelJson(l, ctx.caller().token_label_id));
    }
    CommandResult r;
    r.data = {{"keys", std::move(list)}, {"api_tokens", std::move(label_list)}};
    r.text = KeyTableText(keys, ctx.caller().key_fingerprint);
    if (!labels.empty()) {
      r.text += "\nAPI token labels:\n" + TokenLabelTableText(labels, ctx.caller().token_label_id);
    }
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
    scope_flags_.Declare(app, HelpFor("key"));
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    // Flags first: they are cheap to check and must not wait on stdin.
    WARREN_ASSIGN_OR_RETURN(Scope scope, NarrowerScope(scope_flags_, ctx, "add"));
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
    WARREN_ASSIGN_OR_RETURN(std::vector<TokenLabel> labels,
                            ctx.store().ListTokenLabels(caller.user));
    WARREN_RETURN_IF_ERROR(CheckNameFree(keys, labels, name));

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
  std::string name_;
  CLI::Option* name_opt_ = nullptr;
  ScopeFlags scope_flags_;
};

class RemoveCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("KEY", key_, "the key's name or fingerprint")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(caller.user));
    Result<SshKey> found = FindKey(keys, key_);
    if (!found.ok()) return RemoveLabel(ctx);
    SshKey key = std::move(found).value();
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
    EndRevokedSessions(ctx.services, ctx.session);  // its connections and commands end now
    CommandResult r;
    r.data = {{"removed", KeyJson(key, caller.key_fingerprint)}};
    r.text = "removed key " + key.name + " (" + key.fingerprint + ")\n";
    return r;
  }

 private:
  // `key_` names no key: it may name an API token label, whose tokens all stop working now.
  Result<CommandResult> RemoveLabel(CommandContext& ctx) {
    const Caller& caller = ctx.caller();
    WARREN_ASSIGN_OR_RETURN(std::vector<TokenLabel> labels,
                            ctx.store().ListTokenLabels(caller.user));
    const TokenLabel* label = FindLabel(labels, key_);
    if (label == nullptr) return NoKeyOrLabel(key_);
    WARREN_RETURN_IF_ERROR(RequireNarrowerLabel(caller, *label, "remove"));
    WARREN_RETURN_IF_ERROR(ctx.store().RemoveTokenLabel(caller.user, label->id));
    EndRevokedSessions(ctx.services, ctx.session);  // its calls in flight end now
    CommandResult r;
    r.data = {{"removed_api_token_label", TokenLabelJson(*label, caller.token_label_id)},
              {"revoked_tokens", label->tokens.size()}};
    r.text = "removed API token label " + label->name + ": " +
             std::to_string(label->tokens.size()) + " token(s) revoked\n";
    return r;
  }

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
    WARREN_ASSIGN_OR_RETURN(std::vector<TokenLabel> labels,
                            ctx.store().ListTokenLabels(caller.user));
    Result<SshKey> found = FindKey(keys, key_);
    if (!found.ok()) return RenameLabel(ctx, keys, labels);
    SshKey key = std::move(found).value();
    WARREN_RETURN_IF_ERROR(RequireNarrower(caller, key.scope, "rename"));
    const std::string old_name = key.name;
    if (new_name_ != old_name) {
      WARREN_RETURN_IF_ERROR(CheckNameFree(keys, labels, new_name_));
      WARREN_RETURN_IF_ERROR(ctx.store().RenameKey(caller.user, key.fingerprint, new_name_));
      key.name = new_name_;
    }
    CommandResult r;
    r.data = {{"key", KeyJson(key, caller.key_fingerprint)}, {"old_name", old_name}};
    r.text = "renamed key " + old_name + " to " + key.name + " (" + key.fingerprint + ")\n";
    return r;
  }

 private:
  Result<CommandResult> RenameLabel(CommandContext& ctx, const std::vector<SshKey>& keys,
                                    const std::vector<TokenLabel>& labels) {
    const Caller& caller = ctx.caller();
    const TokenLabel* found = FindLabel(labels, key_);
    if (found == nullptr) return NoKeyOrLabel(key_);
    TokenLabel label = *found;
    WARREN_RETURN_IF_ERROR(RequireNarrowerLabel(caller, label, "rename"));
    const std::string old_name = label.name;
    if (new_name_ != old_name) {
      WARREN_RETURN_IF_ERROR(CheckNameFree(keys, labels, new_name_));
      WARREN_RETURN_IF_ERROR(ctx.store().RenameTokenLabel(caller.user, label.id, new_name_));
      label.name = new_name_;
    }
    CommandResult r;
    r.data = {{"api_token_label", TokenLabelJson(label, caller.token_label_id)},
              {"old_name", old_name}};
    r.text = "renamed API token label " + old_name + " to " + label.name + "\n";
    return r;
  }

  std::string key_, new_name_;
};

class GenerateApiKeyCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("--label", label_,
                   "the label the token is minted under; ssh-key remove LABEL revokes it")
        ->type_name("NAME")
        ->required();
    scope_flags_.Declare(app, HelpFor("token"));
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    if (ctx.services.token_signer == nullptr) {
      return Unavailable("this server issues no API tokens");
    }
    WARREN_RETURN_IF_ERROR(ValidateKeyName(label_).Annotate("--label"));
    WARREN_ASSIGN_OR_RETURN(Scope scope, NarrowerScope(scope_flags_, ctx, "mint"));
    WARREN_ASSIGN_OR_RETURN(std::string new_id, NewTokenLabelId());
    // Signed before it is recorded, so a scope too large for a token records nothing.
    TokenClaims claims{caller.user, new_id, scope, ctx.now, /*audience=*/""};
    WARREN_RETURN_IF_ERROR(ctx.services.token_signer->Sign(claims).status());
    WARREN_ASSIGN_OR_RETURN(
        TokenLabel label,
        ctx.store().RecordToken(caller.user, label_, new_id, IssuedToken{scope, ctx.now}, ctx.now));
    if (label.id != new_id) {
      claims.label_id = label.id;  // a token added to an existing label
    }
    WARREN_ASSIGN_OR_RETURN(std::string token, ctx.services.token_signer->Sign(claims));

    CommandResult r;
    r.data = {{"token", token},
              {"label", label.name},
              {"label_id", label.id},
              {"restrictions", scope.ToJson()},
              {"tokens_under_label", label.tokens.size()}};
    r.text = token + "\n";
    if (!ctx.json) {
      // stdout carries the token alone (TOKEN=$(ssh HOST ssh-key generate-api-key …));
      // the explanation goes to stderr.
      ctx.session.err->Write("API token under label " + label.name + " (limits: " +
                             DescribeScope(scope) + "). It is shown only now; send it as " +
                             "\"Authorization: Bearer TOKEN\". ssh-key remove " + label.name +
                             " revokes every token of this label.\n");
    }
    return r;
  }

 private:
  std::string label_;
  ScopeFlags scope_flags_;
};

}  // namespace

void RegisterSshKeyCommands(CommandTable& table) {
  table.AddGroup("ssh-key", "your SSH keys and API tokens");
  table.Add({
      .path = "ssh-key list",
      .summary = "list your SSH keys and API token labels",
      .description = "Lists the keys on your account: name, fingerprint, algorithm, when it was "
                     "added and last used, and its limits. * marks the key you are using. "
                     "Then the labels of your API tokens: how many tokens each has, when one "
                     "was last used, and the newest token's limits.\n",
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
      .summary = "remove one of your SSH keys, or revoke an API token label",
      .args = "NAME|FINGERPRINT|LABEL",
      .description = "Removes a key at once: connections made with it are closed and its "
                     "commands stop (shells, sftp and forwards into VMs too). You cannot "
                     "remove the key you are using, nor your last key.\n"
                     "Given an API token label, removes it and so revokes every token minted "
                     "under it, at once, ending its calls in flight (/exec, MCP); a new label "
                     "of the same name does not revive them.\n",
      .make = [] { return std::make_unique<RemoveCommand>(); },
  });
  table.Add({
      .path = "ssh-key rename",
      .summary = "rename one of your SSH keys or API token labels",
      .args = "NAME|FINGERPRINT|LABEL NEWNAME",
      .description = "Names are letters, digits and . _ @ -, up to 64, unique on your account.\n",
      .make = [] { return std::make_unique<RenameCommand>(); },
  });
  table.Add({
      .path = "ssh-key generate-api-key",
      .summary = "mint an API token for /exec and MCP",
      .description =
          "Prints a new API token (it starts with wr1.) for the HTTP surfaces:\n"
          "  curl -H \"Authorization: Bearer $TOKEN\" -d 'ls' http://HOST:8080/exec\n"
          "  ssh HOST ssh-key generate-api-key --label ci --tag ci --cmds \"new,ls,ssh\" "
          "--exp 30d\n"
          "The token carries its limits, signed by this server: --cmds (command paths it may "
          "run), --tag (only VMs with this tag exist for it; VMs it creates get the tag) and "
          "--exp (Nh, Nd, Nw, Ny or never). A restricted key or token can only mint narrower "
          "tokens; a limit it carries that you leave out is inherited.\n"
          "Tokens are minted under --label: a new label is made, or the token joins an "
          "existing one. ssh-key remove LABEL revokes every token of the label at once.\n",
      .make = [] { return std::make_unique<GenerateApiKeyCommand>(); },
  });
}

}  // namespace warren
