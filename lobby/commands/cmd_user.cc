// user add|ls|set|rm: accounts on a self-hosted server; admins only. `add` and `set` also
// take the user's own limits on what their VMs hold (vm_quota.h): --max-vms, --max-cpu,
// --max-memory, --max-disk; a limit not set follows the server's (serve --user-max-*).
//
// Creating an admin, or removing one, needs an unrestricted credential: otherwise a key
// limited by --cmds/--tag/--exp could mint an account without those limits and escape them.
#include <array>
#include <map>

#include <CLI/CLI.hpp>

#include "lobby/base/user_name.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/key_input.h"
#include "lobby/commands/live_sessions.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_quota.h"
#include "lobby/commands/vm_view.h"

namespace warren {
namespace {

Status RequireUnrestricted(const Caller& caller, std::string_view what) {
  if (caller.scope.Unrestricted()) return Status::Ok();
  return PermissionDenied(std::string(what) + " needs an unrestricted key");
}

// --max-vms, --max-cpu, --max-memory, --max-disk, as `user add` and `user set` take them.
class LimitFlags {
 public:
  // `set` also takes "default": the server's limit again.
  void Declare(CLI::App& app, bool allow_default) {
    allow_default_ = allow_default;
    const std::string also = allow_default ? ", or default (the server's)" : "";
    const char* help[] = {"how many VMs they may have", "how many vCPUs their running VMs may have",
                          "how much memory their running VMs may have (e.g. 32G)",
                          "how much disk all their VMs may have (e.g. 500G, 1T)",
                          "how many sandboxes they may have at once"};
    // One description per limit: a missing one read past the array.
    static_assert(sizeof(help) / sizeof(help[0]) == std::tuple_size_v<decltype(kLimitFields)>);
    for (size_t i = 0; i < kLimitFields.size(); ++i) {
      app.add_option(kLimitFields[i].flag, values_[i],
                     std::string(help[i]) + ": N, 0 or none" + also)
          ->type_name(i < 2 ? "N" : "SIZE");
    }
  }
  bool any() const {
    for (const std::string& v : values_) {
      if (!v.empty()) return true;
    }
    return false;
  }
  // The limits given, onto `limits`.
  Status ApplyTo(UserLimits& limits) const {
    for (size_t i = 0; i < kLimitFields.size(); ++i) {
      const LimitField& field = kLimitFields[i];
      if (values_[i].empty()) continue;
      if (allow_default_ && values_[i] == "default") {
        (limits.*field.limit).reset();
        continue;
      }
      WARREN_ASSIGN_OR_RETURN(limits.*field.limit,
                              ParseUserLimit(field.kind, field.flag, values_[i]));
    }
    return Status::Ok();
  }

 private:
  std::array<std::string, kLimitFields.size()> values_;
  bool allow_default_ = false;
};

// What a user's VMs hold, by owner.
Result<std::map<std::string, VmHolding>> HoldingsByOwner(Store& store) {
  WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> vms, store.ListVms());
  std::map<std::string, VmHolding> out;
  for (const VmRecord& vm : vms) {
    const VmHolding h = HoldingOf(vm);
    VmHolding& sum = out[vm.owner];
    for (const LimitField& f : kLimitFields) sum.*f.held += h.*f.held;
  }
  return out;
}

// {"limits": {"vms": 10, "cpus": null (none), …}, "own_limits": ["vms"], "held": {…}}: the
// limits in force, which of them are the user's own, and what their VMs hold.
void AddLimitsJson(nlohmann::json& j, const User& user, const UserLimits& server,
                   const VmHolding& held) {
  const UserLimits in_force = EffectiveLimits(user.limits, server);
  nlohmann::json limits = nlohmann::json::object();
  nlohmann::json own = nlohmann::json::array();
  nlohmann::json holding = nlohmann::json::object();
  for (const LimitField& f : kLimitFields) {
    const int64_t v = *(in_force.*f.limit);
    limits[f.name] = v == kNoLimit ? nlohmann::json(nullptr) : nlohmann::json(v);
    if (user.limits.*f.limit) own.push_back(f.name);
    holding[f.name] = held.*f.held;
  }
  j["limits"] = std::move(limits);
  j["own_limits"] = std::move(own);
  j["held"] = std::move(holding);
}

// "2/10", "4 GiB/64 GiB", "20/1024 GiB": what is held of what is allowed.
std::string HeldOfLimit(const LimitField& f, const VmHolding& held, const UserLimits& in_force) {
  const int64_t h = held.*f.held;
  const std::string shown =
      f.kind == LimitKind::kMemoryMib && h > 0 ? FormatMib(h) : std::to_string(h);
  return shown + "/" + FormatUserLimit(f.kind, *(in_force.*f.limit));
}

class AddCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the new user's name")->required();
    app.add_option("--key", key_, "their SSH public key line; read from stdin when absent")
        ->type_name("KEY");
    app.add_flag("--admin", admin_, "make the user an admin");
    limits_.Declare(app, /*allow_default=*/false);
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_RETURN_IF_ERROR(CheckUserName(name_));
    if (admin_) WARREN_RETURN_IF_ERROR(RequireUnrestricted(ctx.caller(), "creating an admin"));
    UserLimits limits;
    WARREN_RETURN_IF_ERROR(limits_.ApplyTo(limits));
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

    User user{name_, admin_, ctx.now, limits};
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
    AddLimitsJson(r.data["user"], user, ctx.services.vm_defaults.user_limits, {});
    r.text = "added " + std::string(admin_ ? "admin " : "user ") + user.name + " with key " +
             key.name + " (" + key.fingerprint +
             ")\nthey connect with: " + SshHint(ctx.services.info) + "\n";
    return r;
  }

 private:
  std::string name_, key_;
  bool admin_ = false;
  LimitFlags limits_;
};

class ListCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(std::vector<User> users, ctx.store().ListUsers());
    WARREN_ASSIGN_OR_RETURN(auto held, HoldingsByOwner(ctx.store()));
    const UserLimits& server = ctx.services.vm_defaults.user_limits;
    nlohmann::json list = nlohmann::json::array();
    // Limits as "held/allowed".
    TextTable table({"NAME", "ADMIN", "KEYS", "VMS", "CPU", "MEMORY", "DISK", "CREATED"});
    for (const User& u : users) {
      WARREN_ASSIGN_OR_RETURN(std::vector<SshKey> keys, ctx.store().ListKeys(u.name));
      nlohmann::json j = {{"name", u.name},
                          {"admin", u.admin},
                          {"keys", keys.size()},
                          {"created_at", u.created_at}};
      AddLimitsJson(j, u, server, held[u.name]);
      list.push_back(std::move(j));
      const UserLimits in_force = EffectiveLimits(u.limits, server);
      std::vector<std::string> row = {u.name, u.admin ? "yes" : "no", std::to_string(keys.size())};
      for (const LimitField& f : kLimitFields)
        row.push_back(HeldOfLimit(f, held[u.name], in_force));
      row.push_back(FormatTime(u.created_at, "-"));
      table.AddRow(std::move(row));
    }
    CommandResult r;
    r.data = {{"users", std::move(list)}};
    r.text = table.Render();
    return r;
  }
};

class SetCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the user")->required();
    limits_.Declare(app, /*allow_default=*/true);
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    if (!limits_.any()) {
      return InvalidArgument(
          "nothing to set: give --max-vms, --max-cpu, --max-memory or --max-disk");
    }
    User user;
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateUser(name_, [&](User& u) {
      WARREN_RETURN_IF_ERROR(limits_.ApplyTo(u.limits));
      user = u;
      return Status::Ok();
    }));
    WARREN_ASSIGN_OR_RETURN(auto held, HoldingsByOwner(ctx.store()));
    const UserLimits& server = ctx.services.vm_defaults.user_limits;
    CommandResult r;
    r.data = {{"user", {{"name", user.name}, {"admin", user.admin}}}};
    AddLimitsJson(r.data["user"], user, server, held[user.name]);
    const UserLimits in_force = EffectiveLimits(user.limits, server);
    r.text = user.name + ":";
    for (const LimitField& f : kLimitFields) {
      r.text += std::string(" ") + (f.flag + 2) + " " +
                FormatUserLimit(f.kind, *(in_force.*f.limit)) +
                (user.limits.*f.limit ? "" : " (server's)");
      if (&f != &kLimitFields.back()) r.text += ",";
    }
    r.text += "\n";
    return r;
  }

 private:
  std::string name_;
  LimitFlags limits_;
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
    // Removing the account removes every VM of it: a credential limited to a tag reaches
    // none outside that tag, so it cannot remove an account that has one.
    for (const VmRecord& vm : all_vms) {
      if (vm.owner == user.name && !WithinTagLimit(ctx.caller(), vm)) {
        return PermissionDenied("removing " + user.name + " removes VMs without the tag " +
                                ctx.caller().scope.tag +
                                " your key is limited to; use a key without --tag");
      }
    }
    // Their sessions end first, revoked, rather than fail as their VMs go under them.
    if (ctx.services.live_sessions != nullptr) {
      ctx.services.live_sessions->EndUser(
          user.name, Unauthenticated("the account " + user.name + " is being removed"),
          &ctx.session);
    }
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
                     "  user add carol --max-vms 3 --max-memory 8G < carol.pub\n"
                     "Names are 1-32 of a-z, 0-9, _ and -, starting with a letter. Limits not "
                     "given follow the server's (see user set).\n",
      .admin_only = true,
      .make = [] { return std::make_unique<AddCommand>(); },
  });
  table.Add({
      .path = "user ls",
      .summary = "list users",
      .description = "Lists every user: name, admin, number of keys, what their VMs hold of "
                     "their limits (VMs, running vCPUs, running memory, disk), created.\n",
      .read_only = true,
      .admin_only = true,
      .make = [] { return std::make_unique<ListCommand>(); },
  });
  table.Add({
      .path = "user set",
      .summary = "set a user's limits",
      .args = "NAME",
      .description =
          "Sets what a user's VMs may hold at most: how many VMs, the vCPUs and memory of "
          "their running (and paused) VMs, the disk of all of them. Each takes a number or "
          "size, 0 (none allowed), none (no limit) or default (the server's, serve "
          "--user-max-*). Lowering a limit below what they hold keeps their VMs; only growth "
          "is refused:\n"
          "  user set alice --max-vms 5 --max-cpu 8 --max-memory 16G --max-disk 200G\n"
          "  user set bob --max-disk none --max-vms default\n",
      .admin_only = true,
      .make = [] { return std::make_unique<SetCommand>(); },
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
