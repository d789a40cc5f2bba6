// What the web proxy changes in a request before it reaches a VM, and in the VM's answer
// before it reaches the visitor. The VM is untrusted: it never sees warren's cookies, a
// warren token or the share parameter; a cookie it sets stays on its own host and can never
// be one of warren's. Pure; thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "lobby/relay/http_head.h"

namespace warren::web {

// A WebSocket-style upgrade: `Connection: upgrade` and an Upgrade header, on a GET.
bool IsUpgrade(const relay::RequestHead& request);
// The API token an `Authorization: Bearer` header carries when it is warren's (wr1.…);
// empty otherwise (the VM's own authorization then passes through untouched).
std::string WarrenBearer(const relay::HttpHeaders& headers);

struct ForwardContext {
  std::string target;  // the request target as the VM gets it (`share` removed)
  std::string peer;    // the visitor's address
  bool https = false;  // what the visitor spoke
  bool upgrade = false;
};
// The head sent to the VM: `target`, HTTP/1.1 (1.0 for a 1.0 visitor), the visitor's Host kept;
// hop-by-hop headers dropped (an upgrade keeps `Connection: Upgrade` and Upgrade), Expect dropped
// (answered here), warren's cookies and a warren bearer removed, X-Forwarded-For appended to,
// X-Forwarded-Proto and -Host set; `Connection: close` otherwise.
std::string VmRequestHead(const relay::RequestHead& request, const ForwardContext& ctx);
// The head sent to the visitor: hop-by-hop headers dropped (Transfer-Encoding kept: the body
// passes as framed; a 101 keeps Connection: Upgrade and Upgrade), Set-Cookie rewritten
// (RewriteVmSetCookie), `Connection: close` unless `keep_alive` (then nothing: HTTP/1.1's
// default).
std::string VisitorResponseHead(const relay::ResponseHead& response, bool keep_alive = false);

}  // namespace warren::web
