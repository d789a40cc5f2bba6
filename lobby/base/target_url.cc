#include "lobby/base/target_url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "lobby/base/ascii.h"

namespace warren {
namespace {

constexpr size_t kMaxHostBytes = 253;
constexpr size_t kMaxLabelBytes = 63;

// A DNS name: dot-separated labels of letters, digits and '-' (neither first nor last).
bool IsDnsName(std::string_view host) {
  if (host.empty() || host.size() > kMaxHostBytes) return false;
  size_t start = 0;
  while (start <= host.size()) {
    size_t dot = host.find('.', start);
    std::string_view label =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > kMaxLabelBytes || label.front() == '-' ||
        label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!IsAsciiLower(c) && !IsAsciiDigit(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

// RFC 3986 pchar, without percent-encoding (checked apart).
bool IsPathChar(char c) {
  if (IsAsciiAlpha(c) || IsAsciiDigit(c)) return true;
  static constexpr std::string_view kOther = "-._~!$&'()*+,;=:@/";
  return kOther.find(c) != std::string_view::npos;
}

bool IsVisible(char c) { return c > 0x20 && c < 0x7f; }

Status BadTarget(std::string_view why) {
  return InvalidArgument("target URL: " + std::string(why) +
                         " (expected http(s)://HOST[:PORT][/PATH], e.g. https://api.example.com)");
}

Result<std::string> ParseHost(std::string_view host) {
  if (host.empty()) return BadTarget("no host");
  if (host.front() == '[') {
    if (host.back() != ']') return BadTarget("an IPv6 address is written [ADDRESS]");
    std::string literal(host.substr(1, host.size() - 2));
    unsigned char buf[16];
    if (inet_pton(AF_INET6, literal.c_str(), buf) != 1) {
      return BadTarget("\"" + ShownUntrusted(host) + "\" is not an IPv6 address");
    }
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, buf, text, sizeof text);  // one spelling per address
    return std::string(text);
  }
  std::string lower = AsciiLower(host);
  if (!IsDnsName(lower)) {
    return BadTarget("\"" + ShownUntrusted(host) +
                     "\" is not a host name (letters, digits, '-' and dots) or an IP address");
  }
  // A name whose last label is all digits can only be meant as an IPv4 address.
  std::string_view last = std::string_view(lower).substr(lower.rfind('.') + 1);
  if (std::all_of(last.begin(), last.end(), IsAsciiDigit)) {
    unsigned char buf[4];
    if (inet_pton(AF_INET, lower.c_str(), buf) != 1) {
      return BadTarget("\"" + ShownUntrusted(host) + "\" is not an IPv4 address");
    }
  }
  return lower;
}

Result<std::string> ParsePath(std::string_view path) {
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '%') {
      if (i + 2 >= path.size() || !IsAsciiHex(path[i + 1]) || !IsAsciiHex(path[i + 2])) {
        return BadTarget("a '%' in the path must start an escape like %2F");
      }
      i += 2;
    } else if (!IsPathChar(c)) {
      return BadTarget("the path has a character URLs do not carry unescaped");
    }
  }
  std::string out(path);
  while (!out.empty() && out.back() == '/') out.pop_back();
  size_t start = 1;
  while (start <= out.size()) {
    size_t slash = out.find('/', start);
    std::string_view segment = std::string_view(out).substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    if (segment == "." || segment == "..") return BadTarget("no \".\" or \"..\" in the path");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

}  // namespace

std::string TargetUrl::Authority() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != 0 && port != (https() ? 443 : 80)) out += ":" + std::to_string(port);
  return out;
}

std::string TargetUrl::ToString() const { return scheme + "://" + Authority() + path_prefix; }

Result<TargetUrl> ParseTargetUrl(std::string_view text) {
  if (text.empty()) return BadTarget("it is empty");
  if (text.size() > kMaxTargetUrlBytes) {
    return BadTarget("longer than " + std::to_string(kMaxTargetUrlBytes) + " bytes");
  }
  for (char c : text) {
    if (!IsVisible(c)) return BadTarget("no spaces or control characters");
  }
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) return BadTarget("no scheme");
  TargetUrl url;
  url.scheme = AsciiLower(text.substr(0, sep));
  if (url.scheme != "http" && url.scheme != "https") {
    return BadTarget("the scheme must be http or https, not \"" + ShownUntrusted(url.scheme) +
                     "\"");
  }
  std::string_view rest = text.substr(sep + 3);
  if (rest.find('#') != std::string_view::npos) return BadTarget("no #fragment");
  if (rest.find('?') != std::string_view::npos) {
    return BadTarget("no ?query: a request's own query is passed on");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    // Said without echoing: what precedes '@' is a password.
    return BadTarget("no user:password@ in the URL; give secrets with --header or --bearer");
  }
  std::string_view host = authority;
  std::string_view port;
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || port.size() > 5 || ec != std::errc() || end != port.data() + port.size() ||
        value < 1 || value > 65535) {
      return BadTarget("the port must be 1-65535");
    }
    url.port = value;
  }
  WARREN_ASSIGN_OR_RETURN(url.host, ParseHost(host));
  WARREN_ASSIGN_OR_RETURN(url.path_prefix, ParsePath(path));
  if (url.port == (url.scheme == "https" ? 443 : 80)) url.port = 0;
  return url;
}

}  // namespace warren
