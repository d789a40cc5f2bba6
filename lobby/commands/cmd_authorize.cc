// authorize CODE [--tag T] [--cmds LIST] [--exp WHEN] [--deny]: approve (or deny) an MCP
// client's OAuth sign-in (keys/oauth.h, bridge/oauth/) from SSH. The sign-in page shows the
// code and this command; running it is the approval (there is no TTY to ask "are you
// sure"), so it prints which client, which redirect address and which limits it approved.
//
// The limits follow ssh-key's rule: the caller's own, with each flag given replacing its
// part, and never wider than the caller's credential (Scope::Covers). Codes are random,
// expire after 10 minutes and work once; wrong guesses are limited per user.
#include <chrono>
#include <map>
#include <mutex>

#include <CLI/CLI.hpp>

#include "keys/oauth.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/key_view.h"
#include "lobby/commands/scope_flags.h"
#include "lobby/commands/text_format.h"

namespace warren {
namespace {

// Wrong codes a user may type per minute, across all of their connections.
constexpr int kMaxMissesPerMinute = 10;

class MissLimiter {
 public:
  Status Check(const std::string& user, int64_t now) {
    std::lock_guard lock(mu_);
    Entry& e = entries_[user];
    if (now - e.window_start >= 60) e = Entry{now, 0};
    if (e.misses >= kMaxMissesPerMinute) {
      return LimitExceeded("too many wrong sign-in codes; wait a minute");
    }
    return Status::Ok();
  }
  void Miss(const std::string& user, int64_t now) {
    std::lock_guard lock(mu_);
    Entry& e = entries_[user];
    if (now - e.window_start >= 60) e = Entry{now, 0};
    ++e.misses;
    if (entries_.size() > 10000) entries_.clear();  // bounded; a reset only forgives
  }

 private:
  struct Entry {
    int64_t window_start = 0;
    int misses = 0;
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

MissLimiter& Misses() {
  static auto* limiter = new MissLimiter;
  return *limiter;
}

class AuthorizeCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("CODE", code_, "the code the sign-in page shows, e.g. KQ7M-X2PD")->required();
    scope_flags_.Declare(app, {"the client may run only these commands, comma-separated",
                               "only VMs with this tag exist for the client",
                               "the sign-in expires: Nh, Nd, Nw, Ny or never"});
    app.add_flag("--deny", deny_, "refuse the sign-in instead");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    OAuthStore* oauth = ctx.services.oauth;
    if (oauth == nullptr) return Unavailable("this server has no OAuth sign-in");
    WARREN_RETURN_IF_ERROR(Misses().Check(caller.user, ctx.now));

    // The limits first: a wrong flag must not burn the code.
    WARREN_ASSIGN_OR_RETURN(Scope scope, scope_flags_.Apply(ctx));
    if (!caller.scope.Covers(scope)) {
      return PermissionDenied(
          "a restricted credential can only approve a sign-in with "
          "narrower limits than its own (" +
          DescribeScope(caller.scope) + ")");
    }

    Result<std::string> normal = NormalizeUserCode(code_);
    if (!normal.ok()) {
      Misses().Miss(caller.user, ctx.now);
      return normal.status();
    }
    Result<OAuthRequest> found = oauth->FindOAuthRequestByUserCode(HashSecret(*normal));
    if (!found.ok()) {
      if (found.status().code() != Code::kNotFound) return found.status();
      Misses().Miss(caller.user, ctx.now);
      return NotFound("no sign-in is waiting for code " + code_.substr(0, 16) +
                      "; codes expire after 10 minutes and work once (start again from the "
                      "app)");
    }
    WARREN_ASSIGN_OR_RETURN(OAuthClient client, oauth->GetOAuthClient(found->client_id));

    const std::string redirect_host = UriHost(found->redirect_uri);
    Status st = oauth->UpdateOAuthRequest(found->id, [&](OAuthRequest& r) -> Status {
      if (r.phase != OAuthPhase::kPending) {
        return Conflict("this sign-in code was already used");
      }
      if (ctx.now >= r.expires_at) {
        return NotFound("this sign-in code expired; start again from the app");
      }
      r.phase = deny_ ? OAuthPhase::kDenied : OAuthPhase::kApproved;
      r.user = caller.user;
      r.scope = scope;
      r.approved_at = ctx.now;
      return Status::Ok();
    });
    WARREN_RETURN_IF_ERROR(st);

    CommandResult out;
    out.data = {{"approved", !deny_},
                {"client", {{"id", client.id}, {"name", client.name}}},
                {"redirect_uri", found->redirect_uri},
                {"resource", found->resource},
                {"user", caller.user},
                {"restrictions", scope.ToJson()}};
    if (deny_) {
      out.text =
          "denied the sign-in of \"" + client.name + "\" (redirect to " + redirect_host + ")\n";
      return out;
    }
    out.text = "approved the sign-in of \"" + client.name + "\"\n" +
               "  redirect to: " + found->redirect_uri + "\n" +
               "  for:         " + found->resource + " as " + caller.user + "\n" +
               "  limits:      " + DescribeScope(scope) + "\n" +
               "The sign-in page continues by itself. The app's token shows in ssh-key list "
               "as oauth-…; ssh-key remove NAME revokes it.\n";
    return out;
  }

 private:
  std::string code_;
  ScopeFlags scope_flags_;
  bool deny_ = false;
};

}  // namespace

void RegisterAuthorizeCommand(CommandTable& table) {
  table.Add({
      .path = "authorize",
      .summary = "approve an app's sign-in (the code its sign-in page shows)",
      .args = "CODE",
      .description =
          "An MCP client (Claude Code, Codex, Cursor, VS Code…) that signs in to this server "
          "opens a page showing a code and this command. Running it approves the sign-in as "
          "you: the app gets an API token, listed by ssh-key list as oauth-NAME-N and "
          "revoked by ssh-key remove. Limit what the app may do with --cmds, --tag and "
          "--exp (never wider than your own key); --deny refuses it. Codes expire after 10 "
          "minutes and work once.\n\nExample: authorize KQ7M-X2PD --tag agents --exp 30d\n",
      .make = [] { return std::make_unique<AuthorizeCommand>(); },
  });
}

}  // namespace warren
