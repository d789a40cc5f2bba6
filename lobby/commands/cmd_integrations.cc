// integrations add|list|show|remove|rename|attach|detach: HTTP proxies on the host that add
// a secret (headers, a bearer token) on the way to a target, so a VM can use an API without
// ever holding its key. A VM the integration is attached to reaches it as
// http(s)://NAME.int.DOMAIN/; the proxy (not here) asks integration_access.h which
// integration a VM may use. Each command acts on the caller's own integrations.
//
// Secrets are sealed with the integration key before they reach the store, and no command
// prints one, `add` included: header names, "****" and a fingerprint that tells versions
// apart. Who may do what (integration_scope.h): a credential limited to a tag sees only the
// integrations its tag's VMs use, attaches and detaches only its VMs and its tag, and cannot
// add, remove or rename. Every change is one store transaction (a refused attachment leaves
// the others of the same command unmade), then the proxy is told (integration_events.h).
#include <algorithm>

#include <CLI/CLI.hpp>

#include "keys/integration.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/integration_scope.h"
#include "lobby/commands/text_format.h"

namespace warren {
namespace {

constexpr char kPermissions[] =
    "A key or token limited to a tag (--tag T) sees only the integrations its VMs use "
    "(attached to all, to tag:T, or to a VM carrying T), and of them only those attachments; "
    "it may attach and detach only vm:NAME of its VMs and tag:T, and may not add, remove or "
    "rename integrations.\n";

// "--header NAME:VALUE" as given. The value is a secret: no message repeats it.
Result<std::pair<std::string, std::string>> ParseHeaderFlag(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument(
        "--header takes NAME:VALUE, e.g. --header X-Api-Key:KEY (one of them "
        "has no NAME: part)");
  }
  std::string name(text.substr(0, colon));
  std::string_view value = text.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  WARREN_RETURN_IF_ERROR(CheckHeaderName(name));
  return std::make_pair(std::move(name), std::string(value));
}

// Adds `a` to the sorted, duplicate-free `attachments`; false when it was there.
bool Insert(std::vector<std::string>& attachments, const std::string& a) {
  auto at = std::lower_bound(attachments.begin(), attachments.end(), a);
  if (at != attachments.end() && *at == a) return false;
  attachments.insert(at, a);
  return true;
}

std::string Joined(const std::vector<Attachment>& attachments) {
  std::string out;
  for (const Attachment& a : attachments) out += (out.empty() ? "" : ", ") + a.shown;
  return out.empty() ? "nothing" : out;
}

// A few lines on one integration, for add and show.
std::string DetailText(const IntegrationScope& scope, const IntegrationRecord& i,
                       const ServerInfo& info) {
  return i.name + " (" + i.kind + ")\n" +       //
         "  target:      " + i.target + "\n" +  //
         "  adds:        " + IntegrationScope::SecretsText(i) + "\n" +
         "  fingerprint: " + i.fingerprint + "\n" + "  attached to: " + Joined(scope.Shown(i)) +
         "\n" + "  in a VM:     " + IntegrationUrl(info, i.name) + " or " +
         IntegrationUrl(info, i.name, /*https=*/true) + "\n" +  //
         "  created:     " + FormatTime(i.created_at) + "\n";
}

class AddCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("KIND", kind_, "the kind of integration: http-proxy")->required();
    app.add_option("--name", name_,
                   "its name, a DNS label: 1-40 of a-z, 0-9 and '-' (VMs reach NAME.int.DOMAIN)")
        ->required()
        ->type_name("NAME");
    app.add_option("--target", target_,
                   "where requests go: http(s)://HOST[:PORT][/PATH]; a request's path and query "
                   "follow PATH")
        ->required()
        ->type_name("URL");
    app.add_option("--header", headers_,
                   "a header to add to every request, a secret (repeatable); replaces the VM's")
        ->type_name("NAME:VALUE");
    bearer_opt_ = app.add_option("--bearer", bearer_, "adds Authorization: Bearer TOKEN, a secret")
                      ->type_name("TOKEN");
    app.add_option("--attach", attach_,
                   "which VMs may use it: vm:NAME, tag:TAG or all (repeatable)")
        ->type_name("WHAT");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
    WARREN_RETURN_IF_ERROR(scope.RequireUnlimited(ctx, "add"));
    if (kind_ != kHttpProxyKind) {
      return InvalidArgument("unknown integration kind \"" + kind_.substr(0, 64) +
                             "\"; the kind there is: http-proxy");
    }
    if (ctx.services.integration_key == nullptr) {
      return Unavailable("this server has no integration key to seal secrets with");
    }
    IntegrationRecord rec;
    rec.owner = ctx.caller().user;
    rec.name = name_;
    rec.kind = kind_;
    rec.created_at = ctx.now;
    WARREN_RETURN_IF_ERROR(CheckIntegrationName(name_));
    WARREN_ASSIGN_OR_RETURN(TargetUrl target, ParseTargetUrl(target_));
    rec.target = target.ToString();
    IntegrationSecrets secrets;
    for (const std::string& h : headers_) {
      WARREN_ASSIGN_OR_RETURN(auto header, ParseHeaderFlag(h));
      secrets.headers.push_back(std::move(header));
    }
    secrets.bearer = bearer_;
    if (bearer_opt_->count() > 0 && bearer_.empty()) {
      return InvalidArgument("the bearer token is empty");
    }
    for (const std::string& text : attach_) {
      WARREN_ASSIGN_OR_RETURN(Attachment a, scope.Parse(ctx, text));
      Insert(rec.attachments, a.stored);
    }
    WARREN_ASSIGN_OR_RETURN(rec.id, NewIntegrationId());
    WARREN_RETURN_IF_ERROR(SealIntegrationSecrets(*ctx.services.integration_key, secrets, rec));
    Status created = ctx.store().CreateIntegration(rec);
    if (created.code() == Code::kConflict) {
      return Conflict("you already have an integration named \"" + rec.name +
                      "\"; see integrations list");
    }
    WARREN_RETURN_IF_ERROR(created);
    NotifyIntegrations(ctx.services, rec.owner);
    CommandResult r;
    r.data = scope.Json(rec, ctx.services.info);
    r.text = "added integration " + DetailText(scope, rec, ctx.services.info);
    return r;
  }

 private:
  std::string kind_, name_, target_, bearer_;
  CLI::Option* bearer_opt_ = nullptr;
  std::vector<std::string> headers_, attach_;
};

class ListCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
    WARREN_ASSIGN_OR_RETURN(std::vector<IntegrationRecord> all, scope.List(ctx.store()));
    nlohmann::json list = nlohmann::json::array();
    TextTable table({"NAME", "KIND", "TARGET", "ADDS", "FINGERPRINT", "ATTACHED TO"});
    for (const IntegrationRecord& i : all) {
      list.push_back(scope.Json(i, ctx.services.info));
      table.AddRow({i.name, i.kind, i.target, IntegrationScope::SecretsText(i), i.fingerprint,
                    Joined(scope.Shown(i))});
    }
    CommandResult r;
    r.data = {{"integrations", std::move(list)}};
    r.text = all.empty() ? "no integrations\n" : table.Render();
    return r;
  }
};

class ShowCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the integration")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
    WARREN_ASSIGN_OR_RETURN(IntegrationRecord i, scope.Find(ctx.store(), name_));
    CommandResult r;
    r.data = scope.Json(i, ctx.services.info);
    r.text = DetailText(scope, i, ctx.services.info);
    return r;
  }

 private:
  std::string name_;
};

class RemoveCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the integration")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
    WARREN_RETURN_IF_ERROR(scope.RequireUnlimited(ctx, "remove"));
    WARREN_ASSIGN_OR_RETURN(IntegrationRecord i, scope.Find(ctx.store(), name_));
    WARREN_RETURN_IF_ERROR(ctx.store().DeleteIntegration(i.owner, i.name));
    NotifyIntegrations(ctx.services, i.owner);
    CommandResult r;
    r.data = {{"removed", i.name}};
    r.text = "removed integration " + i.name + "\n";
    return r;
  }

 private:
  std::string name_;
};

class RenameCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("OLD", old_, "the integration")->required();
    app.add_option("NEW", new_, "its new name")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
    WARREN_RETURN_IF_ERROR(scope.RequireUnlimited(ctx, "rename"));
    WARREN_ASSIGN_OR_RETURN(IntegrationRecord i, scope.Find(ctx.store(), old_));
    WARREN_RETURN_IF_ERROR(CheckIntegrationName(new_));
    Status renamed = ctx.store().RenameIntegration(i.owner, i.name, new_);
    if (renamed.code() == Code::kConflict) {
      return Conflict("you already have an integration named \"" + new_ + "\"");
    }
    WARREN_RETURN_IF_ERROR(renamed);
    NotifyIntegrations(ctx.services, i.owner);
    CommandResult r;
    r.data = {
        {"name", new_}, {"old_name", i.name}, {"url", IntegrationUrl(ctx.services.info, new_)}};
    r.text = "renamed integration " + i.name + " to " + new_ + "; VMs now reach it at " +
             IntegrationUrl(ctx.services.info, new_) + "\n";
    return r;
  }

 private:
  std::string old_, new_;
};

// attach and detach: one transaction for every attachment named, so either all of them
// are made or none.
class AttachCommand final : public Command {
 public:
  explicit AttachCommand(bool detach) : detach_(detach) {}

  void DeclareFlags(CLI::App& app) override {
    app.add_option("NAME", name_, "the integration")->required();
    app.add_option("WHAT", what_, "vm:NAME, tag:TAG or all")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
    WARREN_ASSIGN_OR_RETURN(IntegrationRecord i, scope.Find(ctx.store(), name_));
    std::vector<Attachment> asked;
    for (const std::string& text : what_) {
      WARREN_ASSIGN_OR_RETURN(Attachment a, scope.Parse(ctx, text));
      const bool named_before = std::any_of(
          asked.begin(), asked.end(), [&](const Attachment& b) { return b.stored == a.stored; });
      if (!named_before) asked.push_back(std::move(a));
    }
    std::vector<std::string> changed, unchanged;
    IntegrationRecord after;
    Status st = ctx.store().UpdateIntegration(i.owner, i.name, [&](IntegrationRecord& rec) {
      changed.clear();
      unchanged.clear();
      for (const Attachment& a : asked) {
        if (detach_) {
          if (std::erase(rec.attachments, a.stored) == 0) {
            return NotFound(rec.name + " is not attached to " + a.shown);
          }
          changed.push_back(a.shown);
        } else {
          (Insert(rec.attachments, a.stored) ? changed : unchanged).push_back(a.shown);
        }
      }
      after = rec;
      return Status::Ok();
    });
    WARREN_RETURN_IF_ERROR(st);
    if (!changed.empty()) NotifyIntegrations(ctx.services, i.owner);
    nlohmann::json attachments = nlohmann::json::array();
    for (const Attachment& a : scope.Shown(after)) attachments.push_back(a.shown);
    CommandResult r;
    r.data = {{"name", i.name},
              {detach_ ? "detached" : "attached", changed},
              {"attachments", std::move(attachments)}};
    if (!detach_) r.data["already_attached"] = unchanged;
    for (const std::string& a : changed) {
      r.text +=
          (detach_ ? "detached " + i.name + " from " : "attached " + i.name + " to ") + a + "\n";
    }
    for (const std::string& a : unchanged) {
      r.text += i.name + " was already attached to " + a + "\n";
    }
    return r;
  }

 private:
  bool detach_;
  std::string name_;
  std::vector<std::string> what_;
};

}  // namespace

void RegisterIntegrationCommands(CommandTable& table) {
  table.AddGroup("integrations", "HTTP proxies that add a secret, so your VMs never hold it");
  table.Add({
      .path = "integrations add",
      .summary = "add an integration: a proxy that adds a header or bearer token",
      .args = "http-proxy",
      .description =
          std::string(
              "Adds an HTTP proxy on this server that sends what an attached VM asks of "
              "http(s)://NAME.int.DOMAIN/PATH to TARGET/PATH, adding the headers and the "
              "bearer token on the way, so the secret never enters the VM:\n"
              "  integrations add http-proxy --name stripe --target https://api.stripe.com "
              "--bearer sk_live_... --attach tag:sandbox\n"
              "  integrations add http-proxy --name search --target https://api.example.com/v2 "
              "--header X-Api-Key:KEY --attach vm:web-1\n"
              "Every header value and the bearer token are secrets: sealed with this server's "
              "integration key before they are stored and never shown again, here or by any "
              "command — only header names, **** and a fingerprint that changes with them. "
              "--attach vm:NAME follows the VM through a rename; tag:TAG reaches every VM "
              "carrying the tag at the time of the request; all reaches all your VMs.\n") +
          kPermissions,
      .make = [] { return std::make_unique<AddCommand>(); },
  });
  table.Add({
      .path = "integrations list",
      .summary = "list your integrations",
      .description =
          std::string("Lists your integrations: name, kind, target, the headers it adds (values "
                      "shown as ****), the fingerprint of its secrets, and what it is attached "
                      "to.\n") +
          kPermissions,
      .read_only = true,
      .make = [] { return std::make_unique<ListCommand>(); },
  });
  table.Add({
      .path = "integrations show",
      .summary = "show one integration",
      .args = "NAME",
      .description =
          std::string("Shows one integration as list does, with the addresses VMs reach it at "
                      "(http://NAME.int.DOMAIN/ and https://). Secrets are never shown.\n") +
          kPermissions,
      .read_only = true,
      .make = [] { return std::make_unique<ShowCommand>(); },
  });
  table.Add({
      .path = "integrations remove",
      .summary = "remove an integration",
      .args = "NAME",
      .description = std::string("Removes the integration and its secrets; VMs lose it at "
                                 "once, open connections included.\n") +
                     kPermissions,
      .make = [] { return std::make_unique<RemoveCommand>(); },
  });
  table.Add({
      .path = "integrations rename",
      .summary = "rename an integration",
      .args = "OLD NEW",
      .description =
          std::string("Renames the integration: VMs reach it as NEW.int.DOMAIN from then on, "
                      "and no longer under the old name. Attachments and secrets stay.\n") +
          kPermissions,
      .make = [] { return std::make_unique<RenameCommand>(); },
  });
  table.Add({
      .path = "integrations attach",
      .summary = "let VMs use an integration",
      .args = "NAME WHAT…",
      .description =
          std::string("Attaches the integration to vm:NAME (the VM, also after a rename), "
                      "tag:TAG (every VM carrying the tag when it makes a request) or all "
                      "(every VM of yours). One already attached is left as it is.\n"
                      "  integrations attach stripe vm:web-1 tag:ci\n") +
          kPermissions,
      .make = [] { return std::make_unique<AttachCommand>(/*detach=*/false); },
  });
  table.Add({
      .path = "integrations detach",
      .summary = "stop VMs using an integration",
      .args = "NAME WHAT…",
      .description =
          std::string("Detaches vm:NAME, tag:TAG or all as attach made them; each must be "
                      "attached, or nothing changes. VMs that lose the integration lose it at "
                      "once, open connections included. A VM still reached another way (a "
                      "tag, all) keeps it.\n") +
          kPermissions,
      .make = [] { return std::make_unique<AttachCommand>(/*detach=*/true); },
  });
}

}  // namespace warren
