// WebGate: everything the web proxy (lobby/web) asks about VMs, visitors and browser
// sessions. The proxy parses HTTP and moves bytes; every decision — which VM a host name
// means, who a visitor is, whether they may see a page, what a sign-in token is worth —
// is the gate's. The binary implements it over the interpreter's web-access rules
// (lobby/commands/web_access.h); tests use a fake. Thread-safe: the proxy's
// workers call it concurrently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "lobby/commands/web_visit.h"
#include "vmhost/guest_control.h"

namespace warren {

class WebGate {
 public:
  virtual ~WebGate() = default;

  // The label left of the domain ("web-one", "web-one-p3000") → the site. NotFound when no
  // VM has that name or the port is outside 3000–9999; InvalidArgument for a malformed
  // label.
  virtual Result<WebSite> Resolve(std::string_view label) = 0;

  // May these credentials see `site`? OK with who it is; Unauthenticated when nobody the
  // credentials name may (the sign-in page); PermissionDenied when a signed-in visitor is
  // not allowed (a page saying so, and who they are signed in as, in the message).
  virtual Result<WebVisitor> Admit(const WebSite& site, const WebCredentials& creds) = 0;

  // A TCP channel to the site's port on the guest's loopback (GuestControl::OpenChannel
  // kTcp), opened for an admitted visitor. Unavailable with a message saying how to start
  // the VM when it is stopped (the 503 page); the pipe itself reports a refused port (the
  // 502 page).
  virtual Result<std::shared_ptr<GuestPipe>> Open(const WebSite& site, const WebVisitor& visitor,
                                                  std::function<void()> notify) = 0;

  // Browser sign-in. A magic link (`ssh HOST browser`) → a new session for the domain
  // itself; single use, short-lived (Unauthenticated once used, expired or unknown).
  virtual Result<std::string> RedeemMagicLink(std::string_view token) = 0;
  // A session for the domain → a one-time ticket (about a minute) for exactly `host` (the
  // full host name, "web-one.warren.localhost"). Unauthenticated for a dead session.
  virtual Result<std::string> IssueHostTicket(std::string_view domain_session,
                                              std::string_view host) = 0;
  // The ticket, presented on `host` → a session bound to that host alone (its cookie value).
  virtual Result<std::string> RedeemHostTicket(std::string_view ticket, std::string_view host) = 0;
  // Who a session of `host` (the domain, or a VM's host) is, for the domain's own pages;
  // Unauthenticated when it is not a live session of that host.
  virtual Result<WebVisitor> SessionVisitor(std::string_view session, std::string_view host) = 0;
  // Signing out: ends the session this cookie names (and every host session issued from
  // the same sign-in).
  virtual Status EndSession(std::string_view session) = 0;
};

}  // namespace warren
