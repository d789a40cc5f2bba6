#include "lobby/web/web_names.h"

#include <cctype>

#include "lobby/base/hex.h"
#include "lobby/relay/http_head.h"

namespace warren::web {

namespace {

bool IsLabelChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }

// "HOST[:PORT]" → lower-case host without the port or a trailing dot; nullopt when malformed.
std::optional<std::string> HostOnly(std::string_view authority) {
  std::string h = relay::Lower(relay::Trim(authority));
  if (size_t colon = h.rfind(':'); colon != std::string::npos) {
    std::string_view port = std::string_view(h).substr(colon + 1);
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    h.resize(colon);
  }
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty()) return std::nullopt;
  for (char c : h) {
    if (!IsLabelChar(c) && c != '.') return std::nullopt;
  }
  return h;
}

}  // namespace

Result<WebHost> ParseWebHost(std::string_view host_header, std::string_view domain) {
  std::optional<std::string> h = HostOnly(host_header);
  std::string d = relay::Lower(domain);
  if (!h.has_value()) return NotFound("no such site");
  if (*h == d) return WebHost{WebHost::Kind::kDomain, *h, ""};
  std::string suffix = "." + d;
  if (h->size() <= suffix.size() ||
      h->compare(h->size() - suffix.size(), suffix.size(), suffix) != 0) {
    return NotFound("no such site");
  }
  std::string label = h->substr(0, h->size() - suffix.size());
  if (label.find('.') != std::string::npos) return NotFound("no such site");
  return WebHost{WebHost::Kind::kSite, *h, label};
}

std::string PublicOrigin::Of(std::string_view host) const {
  std::string out = scheme() + "://" + std::string(host);
  if (port != 0 && port != (https ? 443 : 80)) out += ":" + std::to_string(port);
  return out;
}

std::optional<SiteUrl> ParseSiteUrl(std::string_view url, std::string_view domain) {
  if (url.starts_with("https://")) {
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  size_t slash = url.find_first_of("/?#");
  std::string_view authority = url.substr(0, slash);
  std::string_view rest = slash == std::string_view::npos ? "" : url.substr(slash);
  if (size_t hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  if (authority.find('@') != std::string_view::npos) return std::nullopt;
  Result<WebHost> host = ParseWebHost(authority, domain);
  if (!host.ok() || host->kind != WebHost::Kind::kSite) return std::nullopt;
  std::string path =
      rest.empty() || rest.front() == '?' ? "/" + std::string(rest) : std::string(rest);
  if (!IsLocalPath(path)) return std::nullopt;
  return SiteUrl{host->host, path};
}

std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, ""};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    size_t eq = item.find('=');
    if (PercentDecode(item.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? std::string() : PercentDecode(item.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::string WithoutParam(std::string_view target, std::string_view name) {
  auto [path, query] = SplitTarget(target);
  std::string kept;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    if (!item.empty() && PercentDecode(item.substr(0, item.find('='))) != name) {
      if (!kept.empty()) kept += '&';
      kept += item;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::string(path) + (kept.empty() ? "" : "?" + kept);
}

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigitValue(s[i + 1]) >= 0 &&
               HexDigitValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigitValue(s[i + 1]) * 16 + HexDigitValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool IsLocalPath(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path.size() > 1 && (path[1] == '/' || path[1] == '\\')) return false;
  for (char c : path) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;  // no header splitting through Location
  }
  return true;
}

}  // namespace warren::web
