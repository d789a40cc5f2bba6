// browser [--revoke]: signing a web browser in from SSH. `browser` prints a one-time link
// (kMagicLinkSeconds) that signs the browser in as the caller — with the caller's own
// limits, so a key limited to a tag gives a session limited to it — and `browser --revoke`
// signs every browser of the caller's user out. The rules the link and sessions follow live
// in web_access.h; only the link's hash is stored.
#include <CLI/CLI.hpp>

#include "keys/oauth.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/web_access.h"
#include "lobby/commands/web_url.h"

namespace warren {
namespace {

class BrowserCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_flag("--revoke", revoke_, "sign out every browser signed in as you");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    CommandResult r;
    if (revoke_) {
      WARREN_ASSIGN_OR_RETURN(size_t n, ctx.store().EndUserBrowserSessions(caller.user));
      r.data = {{"revoked", n}};
      r.text = "ended " + std::to_string(n) + " browser session" + (n == 1 ? "" : "s") + " of " +
               caller.user + "\n";
      return r;
    }
    const ServerInfo& info = ctx.services.info;
    if (!WebEnabled(info)) {
      return Unavailable(
          "this server has no web listener (serve --web off), so there is no "
          "page to sign in to");
    }
    WARREN_ASSIGN_OR_RETURN(std::string token, NewSecret(32));
    MagicLink link;
    link.token_sha256 = HashSecret(token);
    link.credential = WebCredentialOf(caller);
    link.created_at = ctx.now;
    link.expires_at = ctx.now + kMagicLinkSeconds;
    WARREN_RETURN_IF_ERROR(ctx.store().CreateMagicLink(link, ctx.now));
    const std::string url = WebOrigin(info) + "/__warren/login?token=" + token;
    r.data = {{"url", url}, {"expires_at", link.expires_at}, {"user", caller.user}};
    r.text = "Open this link in your browser within " + std::to_string(kMagicLinkSeconds / 60) +
             " minutes; it works once and signs it in as " + caller.user + ":\n  " + url +
             "\n(expires " + FormatTime(link.expires_at) +
             "; sign out everywhere with: browser "
             "--revoke)\n";
    return r;
  }

 private:
  bool revoke_ = false;
};

}  // namespace

void RegisterBrowserCommand(CommandTable& table) {
  table.Add({
      .path = "browser",
      .summary = "sign a web browser in to see your VMs' pages",
      .description =
          "Prints a one-time link that signs a browser in as you (with this key's or token's "
          "limits), so it can see your VMs' pages at their addresses and those shared with you. "
          "The link works once, for 5 minutes; the session lasts 7 days. browser --revoke "
          "signs out every browser signed in as you and says how many sessions ended.\n",
      .make = [] { return std::make_unique<BrowserCommand>(); },
  });
}

}  // namespace warren
