// WebAccess: the one home of web access policy — which VM a host name means, who may see
// its pages, what a browser sign-in is worth, and the one sanctioned way to open a stream to
// a VM's web port. The web proxy (lobby/web, through its WebGate) asks these and decides
// nothing itself; the methods mirror WebGate one for one.
//
// Who may see NAME.DOMAIN (the VM's route port): its owner (a browser session or a bearer
// API token, re-checked against the store on every request: a removed key or label, an
// expired credential or a token whose tag the VM lacks is not the owner), a user the VM is
// shared with (an unrestricted credential of theirs), whoever holds one of its live share
// links, or anyone when it is public. NAME-pPORT.DOMAIN (every port 3000–9999) is for the
// owner alone, whatever the share settings. --cmds limits play no part in viewing a page.
//
// Browser sessions are bound to the exact host they were issued for: a magic link makes a
// session for the domain; a VM's host gets its own through a one-time ticket issued to a
// domain session; a session is accepted only on its host.
//
// Thread-safe: the proxy's workers call every method concurrently. The store and the
// interpreter's services do the locking; the only state here is the share-link use counts
// waiting to be written (written at most once per kShareLinkWriteSeconds per link, so a
// crowd on one link does not queue on LMDB's one writer).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "keys/web_share.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/web_visit.h"
#include "vmhost/guest_control.h"

namespace warren {

inline constexpr int64_t kShareLinkWriteSeconds = 10;

// What a browser session keeps of the caller that ran `browser`, and the caller it acts as
// again (surface "web"; RevalidateCaller re-reads its key or label before every use).
WebCredential WebCredentialOf(const Caller& caller);
Caller CallerOfWebCredential(const WebCredential& credential);

class WebAccess {
 public:
  // `interpreter` must outlive this.
  explicit WebAccess(Interpreter& interpreter);
  ~WebAccess();  // writes the share-link uses still pending
  WebAccess(const WebAccess&) = delete;
  WebAccess& operator=(const WebAccess&) = delete;

  // The label left of the domain → the site. "NAME" is VM NAME's route port, for whoever may
  // see it. "NAME-pDIGITS" is a port host — the owner-only port DIGITS of VM NAME — when a
  // VM named NAME exists (NotFound when DIGITS is outside 3000–9999 or has a leading zero);
  // otherwise the whole label is looked up as a name. New VM names may not end in -pDIGITS
  // (lobby/base/vm_name.h), so the fallback only finds a VM named before that rule, and the
  // port parse goes first so that no such name can take over an owner's port host.
  // Case-insensitive. NotFound when no VM has the name; InvalidArgument for a label that
  // cannot be one.
  Result<WebSite> Resolve(std::string_view label);

  // Whether `creds` may see `site`: the visitor ("user:alice", "link:<id>", "public");
  // Unauthenticated when the credentials name nobody allowed and nobody signed in (the
  // sign-in page); PermissionDenied when a signed-in visitor may not (the message says who
  // they are signed in as). NotFound when the VM has gone. A share link's use is counted.
  Result<WebVisitor> Admit(const WebSite& site, const WebCredentials& creds);

  // A TCP channel to the site's port on the guest's loopback, for an admitted visitor
  // (GuestControl::OpenChannel kTcp); one audit line. Unavailable when the VM is not running
  // ("web-one is stopped; start it with: ssh -p 2222 HOST start web-one") or this server
  // runs no VMs; NotFound when it has gone.
  Result<std::shared_ptr<GuestPipe>> Open(const WebSite& site, const WebVisitor& visitor,
                                          std::function<void()> notify);

  // A magic link's token → a new session for the domain (the cookie's value): single use,
  // kMagicLinkSeconds. Unauthenticated once used, expired or unknown.
  Result<std::string> RedeemMagicLink(std::string_view token);
  // A live domain session → a one-time ticket (kHostTicketSeconds) for exactly `host`
  // ("web-one.warren.localhost", a host under the domain). Unauthenticated for a dead
  // session; InvalidArgument for a host that is not under the domain.
  Result<std::string> IssueHostTicket(std::string_view domain_session, std::string_view host);
  // The ticket, presented on `host` → a session bound to that host alone (the cookie's
  // value), ending with the sign-in it came from. Unauthenticated for a used, expired or
  // unknown ticket, one for another host, or one whose domain session ended.
  Result<std::string> RedeemHostTicket(std::string_view ticket, std::string_view host);
  // Who the session of `host` (the domain or a VM's host) is: "user:NAME". Unauthenticated
  // unless it is a live session of exactly that host whose credential still stands.
  Result<WebVisitor> SessionVisitor(std::string_view session, std::string_view host);
  // Signing out: ends the session and every host session of the same sign-in. An unknown
  // session is fine (nothing to end).
  Status EndSession(std::string_view session);

  // Writes the share-link uses counted but not yet written (the destructor does too).
  void FlushLinkUses();

 private:
  struct PendingUses {
    int64_t uses = 0;
    int64_t last_use = 0;
    int64_t written_at = 0;
  };
  // The caller a session of `host` acts as, re-checked against the store.
  Result<Caller> FromSession(std::string_view session, std::string_view host, int64_t now);
  Result<Caller> FromBearer(std::string_view bearer);
  void CountLinkUse(const std::string& vm_id, const std::string& link_id, int64_t now);

  Interpreter& interpreter_;
  std::mutex mu_;                                                       // guards pending_
  std::map<std::pair<std::string, std::string>, PendingUses> pending_;  // (vm id, link id)
};

}  // namespace warren
