// user add|ls|rm: accounts on a self-hosted server; admins only.
//
// Creating an admin, or removing one, needs an unrestricted credential: otherwise a key
// limited by --cmds/--tag/--exp could mint an account without those limits and escape them.
#include <CLI/CLI.hpp>

#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/key_input.h"
#include "lobby/commands/live_sessions.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_access.h"

namespace warren {
namespace {

constexpr size_t kMaxUserNameBytes = 32;

// ^[a-z][a-z0-9_-]{0,31}$: safe in a shell, a path and a URL without quoting.
Status ValidateUserName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxUserNameBytes && name[0] >= 'a' && name[0] <= 'z';
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  }
  if (ok) return Status::Ok();
  return InvalidArgument("user name \"" + std::string(name.substr(0, 64)) +
                         "\" is not valid: 1-32 of a-z, 0-9, _ and -, starting with a letter");
}

Status RequireUnrestricted(const Caller& caller, std::string_view what) {
  if (caller.scope.Unrestricted()) return Status::Ok();
  return PermissionDenied(std::string(what) + " needs an unrestricted key");
}

class AddCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the new user's name")->required();
    app.add_option("--key", key_, "their SSH public key line; read from stdin when absent")
        ->type_name("KEY");
    app.add_flag("--admin", admin_, "make the user an admin");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_RETURN_IF_ERROR(ValidateUserName(name_));
    if (admin_) WARREN_RETURN_IF_ERROR(RequireUnrestricted(ctx.caller(), "creating an admin"));
    if (Result<User> existing = ctx.store().GetUser(name_); existing.ok()) {
      return Conflict("user \"" + name_ + "\" already exists");
    } else if (existing.status().code() != Code::kNotFound) {
      return existing.status();
    }
    // VM names and user names never meet (login_names.h): ssh NAME@HOST must mean one thing.
    if (Result<VmRecord> vm = ctx.store().GetVmByName(name_); vm.ok()) {
      return Conflict("a VM is named \"" + name_ +
                      "\", and user names and VM names are kept apart so that ssh " + name_ +
                      "@HOST has one meaning; pick another name, or rename the VM first");
    } else if (vm.status().code() != Code::kNotFound) {
      return vm.status();
    }
    WARREN_ASSIGN_OR_RETURN(PublicKey pk, ReadPublicKey(key_, *ctx.session.in));
    if (Result<SshKey> taken = ctx.store().GetKey(pk.fingerprint); taken.ok()) {
      return Conflict("this key is already registered to an account");
    } else if (taken.status().code() != Code::kNotFound) {
      return taken.status();
    }

    User user{name_, admin_, ctx.now};
    SshKey key;
    key.fingerprint = pk.fingerprint;
    key.user = name_;
    key.name = DefaultKeyName(pk.comment, {});
    key.algorithm = pk.algorithm;
    key.blob_base64 = pk.blob_base64;
    key.comment = pk.comment;
    key.added_at = ctx.now;
    WARREN_RETURN_IF_ERROR(ctx.store().CreateUser(user, {key}));

    CommandResult r;
    r.data = {{"user",
               {{"name", user.name},
                {"admin", user.admin},
                {"created_at", user.created_at},
                {"keys", 1}}},
              {"key", {{"name", key.name}, {"fingerprint", key.fingerprint}}}};
    r.text = "added " + std::string(admin_ ? "admin " : "user ") + user.name + " with key " +
             key.name + " (" + key.fingerprint +
             ")\nthey connect with: " + SshHint(ctx.services.info) + "\n";
    return r;
  }

 private:
  std::string name_, key_;
  bool admin_ = false;
};

class ListCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(std::vector<User> users, ctx.store().ListUsers());
    nlohmann::json list = nlohmann::json::array();
    TextTable table({"NAME", "ADMIN", "KEYS", "CREATED"});
    for (const User& u : users) {
      WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(u.name));
      list.push_back({{"name", u.name},
                      {"admin", u.admin},
                      {"keys", keys.size()},
                      {"created_at", u.created_at}});
      table.AddRow({u.name, u.admin ? "yes" : "no", std::to_string(keys.size()),
                    FormatTime(u.created_at, "-")});
    }
    CommandResult r;
    r.data = {{"users", std::move(list)}};
    r.text = table.Render();
    return r;
  }
};

class RemoveCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the user to remove, with all of their keys")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    if (name_ == ctx.caller().user) {
      return Conflict("you cannot remove yourself; ask another admin");
    }
    WARREN_ASSIGN_OR_RETURN(User user, ctx.store().GetUser(name_));
    if (user.admin) WARREN_RETURN_IF_ERROR(RequireUnrestricted(ctx.caller(), "removing an admin"));
    WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(name_));
    // Their VMs go first, while the account still exists: should one refuse to go, the
    // user stays and the removal can be run again. Nobody else can see those VMs, so
    // leaving them would strand them (and their names) forever.
    WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> all_vms, ctx.store().ListVms());
    size_t vms = 0;
    for (const VmRecord& vm : all_vms) {
      if (vm.owner != user.name) continue;
      WARREN_RETURN_IF_ERROR(RemoveVm(ctx.services, vm).Annotate("removing " + user.name));
      ++vms;
    }
    // One transaction removes the user and every key, so none of their sessions outlives it.
    WARREN_RETURN_IF_ERROR(ctx.store().DeleteUser(name_));
    EndRevokedSessions(ctx.services, ctx.session);  // their connections and commands end now
    CommandResult r;
    r.data = {{"removed",
               {{"name", user.name}, {"admin", user.admin}, {"keys", keys.size()}, {"vms", vms}}}};
    r.text = "removed user " + user.name + " and " + std::to_string(keys.size()) +
             (keys.size() == 1 ? " key" : " keys");
    if (vms > 0) r.text += " and " + std::to_string(vms) + (vms == 1 ? " VM" : " VMs");
    r.text += "\n";
    return r;
  }

 private:
  std::string name_;
};

}  // namespace

void RegisterUserCommands(CommandTable& table) {
  table.AddGroup("user", "accounts on this server (admins only)");
  table.Add({
      .path = "user add",
      .summary = "add a user with their first SSH key",
      .args = "NAME",
      .description = "Creates an account. The key comes from --key or stdin:\n"
                     "  user add alice --key \"ssh-ed25519 AAAA… alice@laptop\"\n"
                     "  ssh HOST user add bob --admin < bob.pub\n"
                     "Names are 1-32 of a-z, 0-9, _ and -, starting with a letter.\n",
      .admin_only = true,
      .make = [] { return std::make_unique<AddCommand>(); },
  });
  table.Add({
      .path = "user ls",
      .summary = "list users",
      .description = "Lists every user: name, admin, number of keys, created.\n",
      .read_only = true,
      .admin_only = true,
      .make = [] { return std::make_unique<ListCommand>(); },
  });
  table.Add({
      .path = "user rm",
      .summary = "remove a user with all of their keys and VMs",
      .args = "NAME",
      .description = "Removes the user's VMs (with their disks), then the user and their "
                     "keys in one step; their connections and commands end at once. You "
                     "cannot remove yourself.\n",
      .admin_only = true,
      .make = [] { return std::make_unique<RemoveCommand>(); },
  });
}

}  // namespace warren
