// The web proxy's own answers: its pages (sign-in, signed in, signed out, not allowed, the
// VM stopped, nothing listening, no such site) in HTML for browsers and JSON for
// `Accept: application/json`, and redirects. Every answer is complete (Content-Length), says
// `Connection: close`, is never cached and never leaks its URL onward (Referrer-Policy), and
// escapes what it quotes. Pure; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/markup.h"
#include "lobby/relay/http_head.h"

namespace warren::web {

// How the visitor wants errors: a page (browsers, curl's default) or JSON.
enum class Wants { kHtml, kJson };
Wants WantsOf(const relay::HttpHeaders& headers);
// A browser navigation: Accept names text/html.
bool AcceptsHtml(const relay::HttpHeaders& headers);

struct WebAnswer {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
  relay::HttpHeaders headers;  // extra: Location, Set-Cookie
};
// The bytes on the wire (for HEAD, the head alone).
std::string Render(const WebAnswer& answer, bool head_only = false);

WebAnswer Redirect(std::string location, relay::HttpHeaders set_cookies = {});

// The page for who is not signed in (401 on a VM's host, 200 on the domain's own "/"):
// `sign_in` is the command that prints a sign-in link ("ssh -p 2222 HOST browser").
WebAnswer SignInPage(int status, std::string_view sign_in, std::string_view note, Wants wants);
WebAnswer SignedInPage(std::string_view who);
WebAnswer SignOutPage(std::string_view who);  // the button (a POST form)
WebAnswer SignedOutPage();
// A page with a title and one line of text (404, 400, 403, 500, 503...), or its JSON
// {"error": line} plus `extra` fields already in JSON (",\"k\":\"v\"").
WebAnswer MessagePage(int status, std::string_view title, std::string_view line, Wants wants,
                      std::string_view extra_json = "");
// 502: nothing in the VM answered on `port`.
WebAnswer NothingListeningPage(std::string_view vm_name, int port, Wants wants);

std::string JsonString(std::string_view s);  // a quoted JSON string

}  // namespace warren::web
