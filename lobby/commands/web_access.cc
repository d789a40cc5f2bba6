#include "lobby/commands/web_access.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "keys/oauth.h"
#include "keys/vm_rules.h"
#include "lobby/base/log.h"
#include "lobby/commands/command.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/web_url.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

// Longer cookie values, tokens and links are nobody's: refused before hashing or lookup.
constexpr size_t kMaxSecretBytes = 512;
constexpr size_t kMaxLabelBytes = 63;  // one DNS label
// Past this many links with counts kept, the ones with nothing pending are forgotten.
constexpr size_t kMaxPendingLinks = 10000;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool IsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

bool IsDnsLabel(std::string_view label) {
  return !label.empty() && label.size() <= kMaxLabelBytes &&
         std::all_of(label.begin(), label.end(), IsLabelChar);
}

// The label a site is served under: "web-one", or "web-one-p3000" for a port host.
std::string SiteLabel(const WebSite& site) {
  if (!site.owner_only) return site.vm_name;
  return site.vm_name + "-p" + std::to_string(site.port);
}

Status SignInAgain(const ServerInfo& info) {
  return Unauthenticated("your browser session has ended; sign in again with: " + SshHint(info) +
                         " browser");
}

// A VM by exact name, or nullopt when none has it (or it cannot be a VM name).
Result<std::optional<VmRecord>> VmNamed(Store& store, std::string_view name) {
  if (!CheckVmName(name).ok()) return std::optional<VmRecord>();
  Result<VmRecord> vm = store.GetVmByName(name);
  if (vm.ok()) return std::optional<VmRecord>(std::move(vm).value());
  if (vm.status().code() == Code::kNotFound) return std::optional<VmRecord>();
  return vm.status();
}

// The one audit line of a web stream: as vm_stream.cc's for `ssh`, with the visitor.
void Audit(const WebSite& site, const WebVisitor& visitor, const Status& st,
           std::chrono::steady_clock::time_point start) {
  auto dur_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  LogInfo("audit cmd=web vm=" + LogQuote(site.vm_name) + " channel=" +
          LogQuote("tcp:" + std::to_string(site.port)) + " visitor=" + LogQuote(visitor.who) +
          " surface=web code=" + std::string(CodeName(st.code())) + " dur_ms=" +
          std::to_string(dur_ms) + (st.ok() ? "" : " error=" + LogQuote(st.message())));
}

}  // namespace

WebCredential WebCredentialOf(const Caller& caller) {
  WebCredential c;
  c.user = caller.user;
  c.credential = caller.credential;
  c.key_fingerprint = caller.key_fingerprint;
  c.token_label_id = caller.token_label_id;
  c.scope = caller.scope;
  return c;
}

Caller CallerOfWebCredential(const WebCredential& credential) {
  Caller c;
  c.user = credential.user;
  c.credential = credential.credential;
  c.key_fingerprint = credential.key_fingerprint;
  c.token_label_id = credential.token_label_id;
  c.scope = credential.scope;
  c.surface = "web";
  return c;
}

WebAccess::WebAccess(Interpreter& interpreter) : interpreter_(interpreter) {}

WebAccess::~WebAccess() { FlushLinkUses(); }

Result<WebSite> WebAccess::Resolve(std::string_view raw_label) {
  const std::string label = Lower(raw_label);
  if (!IsDnsLabel(label)) return InvalidArgument("not a VM's host name");
  Store& store = *interpreter_.services().store;
  if (size_t p = label.rfind("-p"); p != std::string::npos && p > 0 && p + 2 < label.size()) {
    std::string_view digits = std::string_view(label).substr(p + 2);
    if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, VmNamed(store, label.substr(0, p)));
      if (vm) {
        // One spelling per port ("-p03000" is not port 3000), so each port has one host.
        const int64_t port =
            digits.size() > 5 || digits[0] == '0' ? -1 : std::stoll(std::string(digits));
        if (!CheckWebPort(port).ok()) {
          return NotFound("port " + std::string(digits) + " is not served: a VM's ports " +
                          std::to_string(kMinWebPort) + "-" + std::to_string(kMaxWebPort) + " are");
        }
        return WebSite{vm->id, vm->name, static_cast<int>(port), /*owner_only=*/true};
      }
    }
  }
  WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, VmNamed(store, label));
  if (!vm) return NotFound("no VM named \"" + label + "\"");
  WARREN_ASSIGN_OR_RETURN(VmShare share, store.GetVmShare(vm->id));
  return WebSite{vm->id, vm->name, share.port, /*owner_only=*/false};
}

Result<Caller> WebAccess::FromSession(std::string_view session, std::string_view host,
                                      int64_t now) {
  Services& services = interpreter_.services();
  if (session.empty() || session.size() > kMaxSecretBytes) return SignInAgain(services.info);
  Result<BrowserSession> s = services.store->GetBrowserSession(HashSecret(session), now);
  if (!s.ok()) {
    if (s.status().code() == Code::kNotFound) return SignInAgain(services.info);
    return s.status();
  }
  // Bound to its host: a cookie a VM's page got hold of is worth nothing anywhere else.
  if (s->host != host) return SignInAgain(services.info);
  Caller caller = CallerOfWebCredential(s->credential);
  Status valid = RevalidateCaller(caller, *services.store, now);
  if (!valid.ok()) {
    if (valid.code() == Code::kUnauthenticated) return SignInAgain(services.info);
    return valid;
  }
  if (!caller.key_fingerprint.empty()) {
    // A key removed and added again is a new grant: sessions from before it stay ended.
    Result<SshKey> key = services.store->GetKey(caller.key_fingerprint);
    if (!key.ok() || key->added_at > s->created_at) return SignInAgain(services.info);
  }
  return caller;
}

Result<Caller> WebAccess::FromBearer(std::string_view bearer) {
  if (bearer.size() > kMaxSecretBytes * 32) return Unauthenticated("invalid API token");
  // As /exec verifies them: no audience, so tokens bound to another resource are refused.
  return interpreter_.CallerForToken(bearer, "web");
}

Result<WebVisitor> WebAccess::Admit(const WebSite& site, const WebCredentials& creds) {
  Services& services = interpreter_.services();
  Store& store = *services.store;
  const int64_t now = services.clock->NowUnix();
  WARREN_ASSIGN_OR_RETURN(VmRecord vm, store.GetVm(site.vm_id));
  WARREN_ASSIGN_OR_RETURN(VmShare share, store.GetVmShare(vm.id));
  const std::string host = Lower(WebHostName(services.info, SiteLabel(site)));

  // Every credential presented is tried: a stale cookie beside a good token still admits.
  // A store failure is not "nobody": it is reported, never taken for a refusal.
  std::vector<Caller> callers;
  auto consider = [&](Result<Caller> c) -> Status {
    if (c.ok()) {
      callers.push_back(std::move(c).value());
    } else if (c.status().code() != Code::kUnauthenticated) {
      return c.status();
    }
    return Status::Ok();
  };
  if (!creds.session.empty())
    WARREN_RETURN_IF_ERROR(consider(FromSession(creds.session, host, now)));
  if (!creds.bearer.empty()) WARREN_RETURN_IF_ERROR(consider(FromBearer(creds.bearer)));
  std::optional<Caller> signed_in_as;
  for (const Caller& caller : callers) {
    // The owner, within the credential's tag.
    if (VmVisibleTo(caller, vm)) return WebVisitor{"user:" + caller.user};
    // A user it is shared with; a credential limited to a tag reaches no one else's VMs.
    if (!site.owner_only && caller.scope.tag.empty() &&
        std::binary_search(share.users.begin(), share.users.end(), caller.user)) {
      return WebVisitor{"user:" + caller.user};
    }
    if (!signed_in_as) signed_in_as = caller;
  }
  if (!site.owner_only) {
    if (!creds.share_link.empty() && creds.share_link.size() <= kMaxSecretBytes) {
      Result<ShareLinkMatch> link = store.FindShareLink(HashSecret(creds.share_link));
      if (link.ok() && link->vm_id == vm.id) {
        CountLinkUse(vm.id, link->link.id, now);
        return WebVisitor{"link:" + link->link.id};
      }
      if (!link.ok() && link.status().code() != Code::kNotFound) return link.status();
    }
    if (share.is_public) return WebVisitor{"public"};
  }
  if (signed_in_as) {
    const std::string& user = signed_in_as->user;
    if (user == vm.owner) {
      return PermissionDenied("you are signed in as " + user +
                              " with a credential limited to "
                              "the tag \"" +
                              signed_in_as->scope.tag + "\", which " + vm.name + " does not carry");
    }
    if (site.owner_only) {
      return PermissionDenied("you are signed in as " + user + "; port " +
                              std::to_string(site.port) + " of " + vm.name +
                              " is for its owner only");
    }
    return PermissionDenied("you are signed in as " + user + ", and " + vm.name +
                            " is not shared with you; its owner can share it with: share add " +
                            vm.name + " " + user);
  }
  return Unauthenticated(vm.name + " is private; sign in with: " + SshHint(services.info) +
                         " browser");
}

void WebAccess::CountLinkUse(const std::string& vm_id, const std::string& link_id, int64_t now) {
  int64_t uses = 0;
  {
    std::lock_guard lock(mu_);
    if (pending_.size() > kMaxPendingLinks) {
      std::erase_if(pending_, [](const auto& e) { return e.second.uses == 0; });
    }
    PendingUses& p = pending_[{vm_id, link_id}];
    ++p.uses;
    p.last_use = std::max(p.last_use, now);
    if (now - p.written_at < kShareLinkWriteSeconds) return;
    uses = p.uses;
    p.uses = 0;
    p.written_at = now;
  }
  Status st = interpreter_.services().store->RecordShareLinkUses(vm_id, link_id, uses, now);
  // A count is a convenience; a store hiccup must not turn a visitor away.
  if (!st.ok()) LogWarn("recording share link use: " + LogQuote(st.ToString()));
}

void WebAccess::FlushLinkUses() {
  std::vector<std::pair<std::pair<std::string, std::string>, PendingUses>> due;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, p] : pending_) {
      if (p.uses == 0) continue;
      due.emplace_back(key, p);
      p.uses = 0;
      p.written_at = p.last_use;
    }
  }
  for (const auto& [key, p] : due) {
    Status st = interpreter_.services().store->RecordShareLinkUses(key.first, key.second, p.uses,
                                                                   p.last_use);
    if (!st.ok()) LogWarn("recording share link use: " + LogQuote(st.ToString()));
  }
}

Result<std::shared_ptr<GuestPipe>> WebAccess::Open(const WebSite& site, const WebVisitor& visitor,
                                                   std::function<void()> notify) {
  const auto start = std::chrono::steady_clock::now();
  Services& services = interpreter_.services();
  auto open = [&]() -> Result<std::shared_ptr<GuestPipe>> {
    if (services.vms == nullptr || services.guests == nullptr) {
      return Unavailable("this server runs no VMs");
    }
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, services.store->GetVm(site.vm_id));
    Status ready = RequireReady(vm);
    if (ready.ok()) ready = CheckVmRunning(services, vm, ShellHints(services.info));
    // A VM that is not running is the 503 page, worded as `ssh VM CMD` words it.
    if (!ready.ok()) {
      return ready.code() == Code::kConflict ? Unavailable(ready.message()) : ready;
    }
    GuestChannelRequest request;
    request.kind = GuestChannelRequest::Kind::kTcp;
    request.port = static_cast<uint16_t>(site.port);
    return services.guests->OpenChannel(vm.id, request, std::move(notify));
  };
  Result<std::shared_ptr<GuestPipe>> pipe = open();
  Audit(site, visitor, pipe.status(), start);
  return pipe;
}

Result<std::string> WebAccess::RedeemMagicLink(std::string_view token) {
  Services& services = interpreter_.services();
  const Status used_up =
      Unauthenticated("this sign-in link was used already or has expired; get a new one with: " +
                      SshHint(services.info) + " browser");
  if (token.empty() || token.size() > kMaxSecretBytes) return used_up;
  const int64_t now = services.clock->NowUnix();
  WARREN_ASSIGN_OR_RETURN(std::string cookie, NewSecret(32));
  WARREN_ASSIGN_OR_RETURN(std::string sign_in, NewSignInId());
  const std::string domain = Lower(services.info.domain);
  Result<BrowserSession> session = services.store->RedeemMagicLink(
      HashSecret(token), now, [&](const MagicLink& link) -> Result<BrowserSession> {
        return BrowserSession{HashSecret(cookie),          sign_in, link.credential, domain, now,
                              now + kBrowserSessionSeconds};
      });
  if (!session.ok()) {
    return session.status().code() == Code::kNotFound ? used_up : session.status();
  }
  // The credential may have gone since `browser` ran: then the session is worth nothing.
  Result<Caller> caller = FromSession(cookie, domain, now);
  if (!caller.ok()) {
    (void)services.store->EndBrowserSignIn(HashSecret(cookie));
    return caller.status();
  }
  return cookie;
}

Result<std::string> WebAccess::IssueHostTicket(std::string_view domain_session,
                                               std::string_view raw_host) {
  Services& services = interpreter_.services();
  const int64_t now = services.clock->NowUnix();
  const std::string host = Lower(raw_host);
  const std::string domain = Lower(services.info.domain);
  const std::string suffix = "." + domain;
  if (host.size() <= suffix.size() || !host.ends_with(suffix) ||
      !IsDnsLabel(std::string_view(host).substr(0, host.size() - suffix.size()))) {
    return InvalidArgument("not a host under " + domain);
  }
  WARREN_ASSIGN_OR_RETURN(Caller caller, FromSession(domain_session, domain, now));
  WARREN_ASSIGN_OR_RETURN(std::string ticket, NewSecret(32));
  Status st = services.store->CreateHostTicket(
      {HashSecret(ticket), HashSecret(domain_session), caller.user, host, now + kHostTicketSeconds},
      now);
  if (st.code() == Code::kNotFound) return SignInAgain(services.info);
  WARREN_RETURN_IF_ERROR(st);
  return ticket;
}

Result<std::string> WebAccess::RedeemHostTicket(std::string_view ticket,
                                                std::string_view raw_host) {
  Services& services = interpreter_.services();
  const Status refused = Unauthenticated(
      "this sign-in ticket was used already, has expired or is for another host; open the page "
      "again");
  if (ticket.empty() || ticket.size() > kMaxSecretBytes) return refused;
  const int64_t now = services.clock->NowUnix();
  const std::string host = Lower(raw_host);
  WARREN_ASSIGN_OR_RETURN(std::string cookie, NewSecret(32));
  Result<BrowserSession> session = services.store->RedeemHostTicket(
      HashSecret(ticket), host, now,
      [&](const HostTicket&, const BrowserSession& parent) -> Result<BrowserSession> {
        return BrowserSession{HashSecret(cookie), parent.sign_in_id, parent.credential, host, now,
                              parent.expires_at};
      });
  if (!session.ok()) {
    return session.status().code() == Code::kNotFound ? refused : session.status();
  }
  return cookie;
}

Result<WebVisitor> WebAccess::SessionVisitor(std::string_view session, std::string_view host) {
  const int64_t now = interpreter_.services().clock->NowUnix();
  WARREN_ASSIGN_OR_RETURN(Caller caller, FromSession(session, Lower(host), now));
  return WebVisitor{"user:" + caller.user};
}

Status WebAccess::EndSession(std::string_view session) {
  if (session.empty() || session.size() > kMaxSecretBytes) return Status::Ok();
  return interpreter_.services().store->EndBrowserSignIn(HashSecret(session)).status();
}

}  // namespace warren
