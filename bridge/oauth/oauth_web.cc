#include "bridge/oauth/oauth_web.h"

#include <nlohmann/json.hpp>

namespace warren::oauth {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> Unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c == '%') {
      if (i + 2 >= text.size()) {
        return InvalidArgument("malformed %-escape in a form");
      }
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument("malformed %-escape in a form");
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

Result<std::map<std::string, std::string>> ParseForm(std::string_view text) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    size_t amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    WARREN_ASSIGN_OR_RETURN(std::string key, Unescape(pair.substr(0, eq)));
    std::string value;
    if (eq != std::string_view::npos) {
      WARREN_ASSIGN_OR_RETURN(value, Unescape(pair.substr(eq + 1)));
    }
    if (!out.emplace(key, std::move(value)).second) {
      return InvalidArgument("parameter \"" + key.substr(0, 40) + "\" given more than once");
    }
  }
  return out;
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 0xf]);
    }
  }
  return out;
}

std::string AppendQuery(std::string_view uri, const std::map<std::string, std::string>& params) {
  std::string out(uri);
  char sep = out.find('?') == std::string::npos ? '?' : '&';
  for (const auto& [k, v] : params) {
    out += sep + UrlEncode(k) + "=" + UrlEncode(v);
    sep = '&';
  }
  return out;
}

Result<std::string> NormalizeBaseUrl(std::string_view url) {
  std::string u(url);
  while (!u.empty() && u.back() == '/') u.pop_back();
  bool https = u.starts_with("https://");
  if (!https && !u.starts_with("http://")) {
    return InvalidArgument("--public-url must start with http:// or https://");
  }
  std::string_view rest = std::string_view(u).substr(https ? 8 : 7);
  if (rest.empty()) return InvalidArgument("--public-url has no host");
  if (rest.find_first_of("/?#@ ") != std::string_view::npos) {
    return InvalidArgument("--public-url must be only scheme://host[:port], without a path");
  }
  return u;
}

Result<std::string> CanonicalResource(const Urls& urls, std::string_view requested) {
  const std::string mcp = urls.mcp_resource();
  if (requested.empty() || requested == urls.base || requested == urls.base + "/" ||
      requested == mcp || requested == mcp + "/" || requested == mcp + "/claude" ||
      requested == mcp + "/openai") {
    return mcp;
  }
  return InvalidArgument("this server protects " + mcp + ", not \"" +
                         std::string(requested.substr(0, 200)) + "\"");
}

std::string WwwAuthenticate(const Urls& urls) {
  return "Bearer resource_metadata=\"" + urls.resource_metadata() + "\"";
}

std::string PageCsp(std::string_view nonce) {
  const std::string n(nonce);
  return "default-src 'none'; style-src 'nonce-" + n + "'; script-src 'nonce-" + n +
         "'; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; "
         "frame-ancestors 'none'";
}

namespace {

std::string Style(std::string_view nonce) {
  return "<style nonce=\"" + std::string(nonce) +
         "\">"
         "body{font:16px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;"
         "background:#f6f6f4;color:#1b1b1b}"
         "main{max-width:34rem;margin:0 auto;padding:1.5rem 1rem}"
         "h1{font-size:1.3rem;margin:0 0 1rem}"
         ".code{font:700 2.6rem/1.2 ui-monospace,Menlo,Consolas,monospace;letter-spacing:.12em;"
         "background:#fff;border:2px solid #1b1b1b;border-radius:8px;padding:.6rem;"
         "text-align:center;margin:1rem 0;word-break:break-all}"
         "pre{background:#1b1b1b;color:#f6f6f4;padding:.8rem;border-radius:6px;"
         "white-space:pre-wrap;word-break:break-all;font-size:.95rem}"
         ".who{background:#fff;border-radius:6px;padding:.6rem .8rem;border:1px solid #ccc}"
         ".status{margin-top:1rem;font-weight:600}"
         ".bad{color:#a30000}.ok{color:#0a6b1f}"
         "small{color:#555}"
         "@media (prefers-color-scheme:dark){body{background:#151515;color:#eee}"
         ".code,.who{background:#222;border-color:#888}small{color:#aaa}}"
         "</style>";
}

std::string Head(std::string_view title, std::string_view nonce) {
  return "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
         "<meta name=\"referrer\" content=\"no-referrer\">"
         "<title>" +
         MarkupEscape(title) + "</title>" + Style(nonce) + "</head><body><main>";
}

}  // namespace

std::string RenderSignInPage(const SignInPage& page) {
  std::string html = Head("Sign in to warren: " + page.user_code, page.nonce);
  html += "<h1>Sign in to warren</h1>";
  html += "<div class=\"who\"><b>" + MarkupEscape(page.client_name) +
          "</b> asks for access to your warren account.<br><small>It will be sent back to " +
          MarkupEscape(page.redirect_host) + "</small></div>";
  html += "<p>Your sign-in code:</p><div class=\"code\" id=\"code\">" +
          MarkupEscape(page.user_code) + "</div>";
  html += "<p>Approve it from a terminal with your SSH key:</p><pre id=\"cmd\">" +
          MarkupEscape(page.ssh_command) + "</pre>";
  html +=
      "<p><small>Limit what the app may do with <code>--cmds</code>, <code>--tag</code> "
      "and <code>--exp</code> (see <code>authorize --help</code>). The code expires in " +
      (page.expires_in_seconds >= 120 ? std::to_string(page.expires_in_seconds / 60) + " minutes"
                                      : std::to_string(page.expires_in_seconds) + " seconds") +
      " and works once. This page continues by itself once you approve.</small>"
      "</p>";
  html += "<p class=\"status\" id=\"status\" role=\"status\">Waiting for approval…</p>";
  // A JSON string inside <script>: '<' escaped, so nothing in it can close the tag.
  std::string secret_js;
  for (char c : nlohmann::json(page.page_secret).dump()) {
    secret_js += c == '<' ? std::string("\\u003c") : std::string(1, c);
  }
  html += "<script nonce=\"" + page.nonce +
          "\">(function(){"
          "var s=" +
          secret_js +
          ",st=document.getElementById('status');"
          "function fail(m){st.textContent=m;st.className='status bad';}"
          "function poll(){fetch('/oauth/status',{method:'POST',cache:'no-store',"
          "headers:{'Content-Type':'text/plain'},body:s}).then(function(r){return r.json();})"
          ".then(function(j){if(j.status==='approved'){st.textContent='Approved. Returning to "
          "the app…';st.className='status ok';location.replace(j.redirect);}"
          "else if(j.status==='pending'){setTimeout(poll,1000);}"
          "else{fail(j.message||'This sign-in can no longer complete.');}})"
          ".catch(function(){setTimeout(poll,2000);});}"
          "poll();})();</script>";
  html += "</main></body></html>\n";
  return html;
}

std::string RenderErrorPage(std::string_view title, std::string_view message,
                            std::string_view nonce) {
  return Head(title, nonce) + "<h1>" + MarkupEscape(title) + "</h1><p class=\"bad\">" +
         MarkupEscape(message) + "</p></main></body></html>\n";
}

std::string OAuthErrorBody(std::string_view code, std::string_view description) {
  nlohmann::json j = {{"error", std::string(code)},
                      {"error_description", std::string(description)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace warren::oauth
