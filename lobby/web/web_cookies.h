// warren's own cookies on web hosts, and what the proxy does to the cookies a VM sees and
// sets. Two cookies, each host-only (no Domain attribute, so a cookie of one host never
// reaches another — and the gate binds every session to its host besides): the session
// (`warren_session`) and, on a VM's host, the share link it was opened with (`warren_link`);
// on the domain, where a sign-in should lead back to (`warren_return`).
// On HTTPS they are `__Host-`-prefixed and Secure. Both forms are stripped from what a VM
// receives and refused in what it sets. Pure; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/relay/http_head.h"

namespace warren::web {

// kReturn lives on the domain only: the page a visitor was signing in for, so the magic link
// leads back to it.
enum class WarrenCookie { kSession, kLink, kReturn };

// The name on a connection that is (`https`) or is not TLS.
std::string CookieName(WarrenCookie cookie, bool https);
// The value of our cookie from the request's Cookie headers (the name of this scheme only).
std::optional<std::string> FindCookie(const relay::HttpHeaders& headers, WarrenCookie cookie,
                                      bool https);
// Whether `value` may be a cookie's value as it is: 1–4096 bytes of letters, digits and
// "-._~+/=" (what tokens are made of). A share link from the address bar is checked with it
// before it goes into a Set-Cookie, so it cannot carry attributes or line breaks with it.
bool IsCookieSafe(std::string_view value);
// Every value of our cookie in the request, in order: a page on HTTP can set a cookie of the
// same name for the parent domain from script (HTTPS's __Host- prefix forbids it), so there
// may be more than one.
std::vector<std::string> FindCookies(const relay::HttpHeaders& headers, WarrenCookie cookie,
                                     bool https);
// A Set-Cookie value: HttpOnly, SameSite=Lax, Path=/, never Domain; Secure on HTTPS;
// Max-Age `max_age_s` (0 clears it).
std::string SetCookieValue(WarrenCookie cookie, bool https, std::string_view value,
                           long long max_age_s);

// A Cookie header's value without warren's cookies (either form); empty when nothing is left.
std::string StripWarrenCookies(std::string_view cookie_header);
// A VM's Set-Cookie value as the visitor gets it: its Domain attribute removed (so it stays on
// this host); nullopt when it names one of warren's cookies (dropped).
std::optional<std::string> RewriteVmSetCookie(std::string_view set_cookie);

}  // namespace warren::web
