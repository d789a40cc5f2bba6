#include "lobby/web/web_cookies.h"

#include <cctype>
#include <vector>

namespace warren::web {

namespace {

constexpr std::string_view kHostPrefix = "__Host-";

std::string_view BaseName(WarrenCookie cookie) {
  switch (cookie) {
    case WarrenCookie::kSession:
      return "warren_session";
    case WarrenCookie::kLink:
      return "warren_link";
    case WarrenCookie::kReturn:
      return "warren_return";
  }
  return "";
}

// Whether a cookie name is one of warren's, in either form. Browsers match cookie names
// case-sensitively, but a VM page must not slip one past us in another case.
bool IsWarrenName(std::string_view name) {
  std::string lower = relay::Lower(relay::Trim(name));
  for (WarrenCookie c : {WarrenCookie::kSession, WarrenCookie::kLink, WarrenCookie::kReturn}) {
    if (lower == BaseName(c) || lower == relay::Lower(kHostPrefix) + std::string(BaseName(c))) {
      return true;
    }
  }
  return false;
}

// "a=1; b=2" → its pairs as written (name, value), split on ';'.
std::vector<std::string_view> Pairs(std::string_view header) {
  std::vector<std::string_view> out;
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view item = relay::Trim(header.substr(0, semi));
    if (!item.empty()) out.push_back(item);
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return out;
}

}  // namespace

std::string CookieName(WarrenCookie cookie, bool https) {
  return (https ? std::string(kHostPrefix) : std::string()) + std::string(BaseName(cookie));
}

std::vector<std::string> FindCookies(const relay::HttpHeaders& headers, WarrenCookie cookie,
                                     bool https) {
  std::string name = CookieName(cookie, https);
  std::vector<std::string> out;
  for (const relay::HttpHeader& h : headers) {
    if (!relay::EqualsIgnoreCase(h.name, "cookie")) continue;
    for (std::string_view pair : Pairs(h.value)) {
      size_t eq = pair.find('=');
      if (eq == std::string_view::npos || relay::Trim(pair.substr(0, eq)) != name) continue;
      std::string_view value = relay::Trim(pair.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      if (!value.empty()) out.emplace_back(value);
    }
  }
  return out;
}

std::optional<std::string> FindCookie(const relay::HttpHeaders& headers, WarrenCookie cookie,
                                      bool https) {
  std::vector<std::string> all = FindCookies(headers, cookie, https);
  if (all.empty()) return std::nullopt;
  return all.front();
}

bool IsCookieSafe(std::string_view value) {
  if (value.empty() || value.size() > 4096) return false;
  for (char c : value) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("-._~+/=").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

std::string SetCookieValue(WarrenCookie cookie, bool https, std::string_view value,
                           long long max_age_s) {
  std::string out = CookieName(cookie, https) + "=" + std::string(value) +
                    "; Path=/; HttpOnly; SameSite=Lax; Max-Age=" + std::to_string(max_age_s);
  if (https) out += "; Secure";
  return out;
}

std::string StripWarrenCookies(std::string_view cookie_header) {
  std::string out;
  for (std::string_view pair : Pairs(cookie_header)) {
    if (IsWarrenName(pair.substr(0, pair.find('=')))) continue;
    if (!out.empty()) out += "; ";
    out += pair;
  }
  return out;
}

std::optional<std::string> RewriteVmSetCookie(std::string_view set_cookie) {
  std::vector<std::string_view> parts = Pairs(set_cookie);
  if (parts.empty()) return std::nullopt;
  if (IsWarrenName(parts[0].substr(0, parts[0].find('=')))) return std::nullopt;
  std::string out(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view attr = relay::Trim(parts[i].substr(0, parts[i].find('=')));
    if (relay::EqualsIgnoreCase(attr, "domain")) continue;
    out += "; ";
    out += parts[i];
  }
  return out;
}

}  // namespace warren::web
