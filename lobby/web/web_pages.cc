#include "lobby/web/web_pages.h"

#include <cstdio>

namespace warren::web {

namespace {

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 302:
      return "Found";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

std::string Html(std::string_view title, std::string_view inner) {
  return "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\">"
         "<title>" +
         MarkupEscape(title) +
         "</title><style>body{font-family:system-ui,sans-serif;max-width:40em;margin:4em auto;"
         "padding:0 1em;line-height:1.5}code{background:#eee;padding:.1em .3em}</style>"
         "</head><body><h1>" +
         MarkupEscape(title) + "</h1>\n" + std::string(inner) + "\n</body></html>\n";
}

WebAnswer HtmlAnswer(int status, std::string_view title, std::string_view inner) {
  WebAnswer a;
  a.status = status;
  a.body = Html(title, inner);
  return a;
}

WebAnswer JsonAnswer(int status, std::string body) {
  WebAnswer a;
  a.status = status;
  a.content_type = "application/json";
  a.body = std::move(body) + "\n";
  return a;
}

bool HeaderHas(const relay::HttpHeaders& headers, std::string_view name, std::string_view what) {
  for (const relay::HttpHeader& h : headers) {
    if (relay::EqualsIgnoreCase(h.name, name) &&
        relay::Lower(h.value).find(what) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

Wants WantsOf(const relay::HttpHeaders& headers) {
  return HeaderHas(headers, "accept", "application/json") && !AcceptsHtml(headers) ? Wants::kJson
                                                                                   : Wants::kHtml;
}

bool AcceptsHtml(const relay::HttpHeaders& headers) {
  return HeaderHas(headers, "accept", "text/html");
}

std::string Render(const WebAnswer& a, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(a.status) + " " + std::string(Reason(a.status)) +
                    "\r\nContent-Type: " + a.content_type +
                    "\r\nContent-Length: " + std::to_string(a.body.size()) +
                    "\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer"
                    "\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n";
  for (const relay::HttpHeader& h : a.headers) out += h.name + ": " + h.value + "\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head_only) out += a.body;
  return out;
}

WebAnswer Redirect(std::string location, relay::HttpHeaders set_cookies) {
  WebAnswer a = HtmlAnswer(302, "Redirecting",
                           "<p><a href=\"" + MarkupEscape(location) + "\">Continue</a></p>");
  a.headers.push_back({"Location", std::move(location)});
  for (relay::HttpHeader& c : set_cookies) a.headers.push_back(std::move(c));
  return a;
}

WebAnswer SignInPage(int status, std::string_view sign_in, std::string_view note, Wants wants) {
  if (wants == Wants::kJson) {
    return JsonAnswer(status,
                      "{\"error\":" + JsonString(note.empty() ? "sign in to see this page" : note) +
                          ",\"sign_in\":" + JsonString(sign_in) + "}");
  }
  std::string inner;
  if (!note.empty()) inner += "<p>" + MarkupEscape(note) + "</p>\n";
  inner += "<p>This page is private. To sign in, run</p>\n<pre><code>" + MarkupEscape(sign_in) +
           "</code></pre>\n<p>and open the link it prints in this browser. Scripts can send "
           "<code>Authorization: Bearer</code> with an API token instead, or use a share "
           "link.</p>";
  return HtmlAnswer(status, "Sign in to warren", inner);
}

WebAnswer SignedInPage(std::string_view who) {
  return HtmlAnswer(200, "warren",
                    "<p>Signed in as <b>" + MarkupEscape(who) +
                        "</b>.</p>\n<form method=\"post\" action=\"/__warren/logout\">"
                        "<button type=\"submit\">Sign out</button></form>");
}

WebAnswer SignOutPage(std::string_view who) {
  std::string inner = who.empty() ? "<p>You are not signed in.</p>\n"
                                  : "<p>Signed in as <b>" + MarkupEscape(who) + "</b>.</p>\n";
  inner +=
      "<form method=\"post\" action=\"/__warren/logout\">"
      "<button type=\"submit\">Sign out</button></form>";
  return HtmlAnswer(200, "Sign out of warren", inner);
}

WebAnswer SignedOutPage() {
  return HtmlAnswer(200, "Signed out", "<p>You are signed out of warren in this browser.</p>");
}

WebAnswer MessagePage(int status, std::string_view title, std::string_view line, Wants wants,
                      std::string_view extra_json) {
  if (wants == Wants::kJson) {
    return JsonAnswer(status, "{\"error\":" + JsonString(line) + std::string(extra_json) + "}");
  }
  return HtmlAnswer(status, title, "<p>" + MarkupEscape(line) + "</p>");
}

WebAnswer NothingListeningPage(std::string_view vm_name, int port, Wants wants) {
  std::string p = std::to_string(port);
  std::string line = "Nothing in VM " + std::string(vm_name) + " is listening on port " + p + ".";
  std::string start = "python3 -m http.server " + p;
  if (wants == Wants::kJson) {
    return JsonAnswer(502, "{\"error\":" + JsonString(line) + ",\"port\":" + p +
                               ",\"start_a_server\":" + JsonString(start) + "}");
  }
  return HtmlAnswer(
      502, "Nothing is listening on port " + p,
      "<p>" + MarkupEscape(line) + "</p>\n<p>Start a server in the VM on that port, listening on " +
          "<code>0.0.0.0</code> or <code>localhost</code>, for example</p>\n<pre><code>ssh " +
          MarkupEscape(vm_name) + "@HOST " + MarkupEscape(start) +
          "</code></pre>\n<p>and check it from inside the VM with <code>curl localhost:" + p +
          "</code>. Then reload this page.</p>");
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace warren::web
