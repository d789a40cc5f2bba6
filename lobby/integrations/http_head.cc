#include "lobby/integrations/http_head.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace warren::integrations {

using relay::IsHopByHop;
using relay::ListTokens;
using relay::Lower;
using relay::Trim;

Result<TargetUrl> ParseTargetUrl(std::string_view url) {
  TargetUrl t;
  if (url.rfind("https://", 0) == 0) {
    t.https = true;
    url.remove_prefix(8);
  } else if (url.rfind("http://", 0) == 0) {
    url.remove_prefix(7);
  } else {
    return InvalidArgument("an integration target must start with http:// or https://");
  }
  size_t slash = url.find_first_of("/?#");
  std::string_view authority = url.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : url.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos) {
    return InvalidArgument("an integration target takes no query or fragment");
  }
  if (authority.empty() || authority.find('@') != std::string_view::npos) {
    return InvalidArgument("an integration target needs a host (and no user info)");
  }
  std::string_view host = authority, port;
  if (authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("a malformed IPv6 address");
    host = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return InvalidArgument("a malformed target authority");
      port = rest.substr(1);
    }
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty() || !std::all_of(host.begin(), host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
               c == '_';
      })) {
    return InvalidArgument("a malformed target host");
  }
  t.host = std::string(host);
  t.port = t.https ? 443 : 80;
  if (!port.empty()) {
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535) {
      return InvalidArgument("a malformed target port");
    }
    t.port = static_cast<uint16_t>(p);
  }
  t.host_header = std::string(authority);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (!std::all_of(path.begin(), path.end(), [](char c) {
        unsigned char u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7f;
      })) {
    return InvalidArgument("a malformed target path");
  }
  t.path_prefix = std::string(path);
  return t;
}

Result<std::string> IntegrationNameFromHost(std::string_view host, std::string_view domain) {
  std::string h = Lower(Trim(host));
  if (size_t colon = h.rfind(':'); colon != std::string::npos) h.resize(colon);
  if (!h.empty() && h.back() == '.') h.pop_back();
  std::string suffix = "." + Lower(domain);
  if (h.size() <= suffix.size() ||
      h.compare(h.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return InvalidArgument("the Host header names no integration: use http://NAME." +
                           std::string(domain) + "/");
  }
  std::string name = h.substr(0, h.size() - suffix.size());
  if (name.find('.') != std::string::npos) {
    return InvalidArgument("the Host header names no integration: use http://NAME." +
                           std::string(domain) + "/");
  }
  return name;
}

std::string UpstreamRequestHead(const RequestHead& request, const TargetUrl& target,
                                const HttpHeaders& add) {
  std::vector<std::string> connection = ListTokens(request.headers, "connection");
  std::string out = request.method + " " + target.path_prefix + request.target + " HTTP/1.1\r\n";
  out += "Host: " + target.host_header + "\r\n";
  for (const HttpHeader& h : request.headers) {
    if (EqualsIgnoreCase(h.name, "host") || EqualsIgnoreCase(h.name, "expect") ||
        IsHopByHop(h.name, connection)) {
      continue;
    }
    bool replaced = std::any_of(add.begin(), add.end(), [&](const HttpHeader& a) {
      return EqualsIgnoreCase(a.name, h.name);
    });
    if (replaced) continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  for (const HttpHeader& a : add) out += a.name + ": " + a.value + "\r\n";
  out += "Connection: close\r\n\r\n";
  return out;
}

}  // namespace warren::integrations
