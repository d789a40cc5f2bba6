// oauth clients list|remove: the OAuth clients (MCP apps) registered with this server, for
// admins. Registration is open to anyone who reaches the HTTP bridge (RFC 7591), so admins
// need to see what registered, from where, and whether it was ever used, and to remove a
// client: with its pending sign-ins, refresh tokens and the token labels of its sign-ins,
// so every app signed in through it is signed out (keys/oauth.h, RemoveOAuthClient).
// Unused clients also expire by themselves (OAuthClientExpired).
#include <CLI/CLI.hpp>

#include "keys/oauth.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/live_sessions.h"
#include "lobby/commands/text_format.h"

namespace warren {
namespace {

Result<OAuthStore*> OAuthOf(CommandContext& ctx) {
  if (ctx.services.oauth == nullptr) return Unavailable("this server has no OAuth sign-in");
  return ctx.services.oauth;
}

// When `c` is removed unless used before.
int64_t ExpiresAt(const OAuthClient& c) {
  return c.last_used_at == 0 ? c.created_at + kOAuthUnusedClientSeconds
                             : c.last_used_at + kOAuthIdleClientSeconds;
}

nlohmann::json ClientJson(const OAuthClient& c) {
  return {{"id", c.id},
          {"name", c.name},
          {"redirect_uris", c.redirect_uris},
          {"source", c.source},
          {"created_at", c.created_at},
          {"last_used_at", c.last_used_at},
          {"expires_at", ExpiresAt(c)}};
}

class ListCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(OAuthStore * oauth, OAuthOf(ctx));
    WARREN_ASSIGN_OR_RETURN(std::vector<OAuthClient> clients, oauth->ListOAuthClients());
    nlohmann::json list = nlohmann::json::array();
    TextTable table({"ID", "NAME", "SOURCE", "REGISTERED", "LAST USED", "EXPIRES"});
    for (const OAuthClient& c : clients) {
      list.push_back(ClientJson(c));
      table.AddRow({c.id, c.name, c.source.empty() ? "-" : c.source, FormatTime(c.created_at),
                    FormatTime(c.last_used_at), FormatTime(ExpiresAt(c))});
    }
    CommandResult r;
    r.data = {{"clients", std::move(list)}};
    r.text = clients.empty() ? "no OAuth clients are registered\n" : table.Render();
    return r;
  }
};

class RemoveCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("ID", id_, "the client id (wc-…), as oauth clients list shows it")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(OAuthStore * oauth, OAuthOf(ctx));
    Result<OAuthClient> client = oauth->GetOAuthClient(id_);
    if (!client.ok()) {
      if (client.status().code() != Code::kNotFound) return client.status();
      return NotFound("no OAuth client " + id_.substr(0, 64) + "; see oauth clients list");
    }
    WARREN_ASSIGN_OR_RETURN(OAuthClientRemoval removed, oauth->RemoveOAuthClient(id_));
    EndRevokedSessions(ctx.services, ctx.session);  // its apps' calls in flight end now
    CommandResult r;
    r.data = {{"removed", ClientJson(*client)},
              {"sign_ins_revoked", removed.token_labels},
              {"refresh_tokens", removed.refresh_tokens},
              {"pending_sign_ins", removed.requests}};
    r.text = "removed OAuth client " + client->id + " \"" + client->name +
             "\": " + std::to_string(removed.token_labels) +
             (removed.token_labels == 1 ? " sign-in" : " sign-ins") + " revoked, " +
             std::to_string(removed.requests) + " pending dropped\n";
    return r;
  }

 private:
  std::string id_;
};

}  // namespace

void RegisterOAuthCommands(CommandTable& table) {
  table.AddGroup("oauth", "OAuth clients (MCP apps) registered with this server (admins only)");
  table.Add({
      .path = "oauth clients list",
      .summary = "list the registered OAuth clients",
      .description =
          "Every OAuth client (MCP app) registered with this server: its id, name, where it "
          "registered from, when, when it was last used (a sign-in or a token refresh) and "
          "when it expires: a client never used is removed a day after it registered, one "
          "unused for 90 days likewise.\n",
      .read_only = true,
      .admin_only = true,
      .make = [] { return std::make_unique<ListCommand>(); },
  });
  table.Add({
      .path = "oauth clients remove",
      .summary = "remove an OAuth client and sign out everything signed in through it",
      .args = "ID",
      .description =
          "Removes the client with its sign-ins in progress, its refresh tokens and the "
          "token labels of its sign-ins (ssh-key list shows them as oauth-NAME-N), so their "
          "access tokens stop working at once. The app must register again to sign in.\n\n"
          "Example: oauth clients remove wc-0123456789abcdef0123456789abcdef\n",
      .admin_only = true,
      .make = [] { return std::make_unique<RemoveCommand>(); },
  });
}

}  // namespace warren
