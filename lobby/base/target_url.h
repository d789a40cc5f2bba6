// TargetUrl: where an integration sends what it is asked for — parsed once, strictly, when
// the integration is added (keys/integration.h), and carried parsed to the proxy, which
// connects to host:EffectivePort() and sends Authority() as the Host header.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

inline constexpr size_t kMaxTargetUrlBytes = 2048;

// The request's path and query are appended to path_prefix.
struct TargetUrl {
  std::string scheme;       // "http" or "https"
  std::string host;         // a lowercase DNS name, an IPv4 address, or an IPv6 one (no [])
  int port = 0;             // 0: the scheme's default
  std::string path_prefix;  // "" or "/v1": starts with '/', never ends with one

  bool https() const { return scheme == "https"; }
  int EffectivePort() const { return port != 0 ? port : https() ? 443 : 80; }
  // host[:port] as a Host header carries it: IPv6 in brackets, a default port left out.
  std::string Authority() const;
  // scheme://Authority()path_prefix.
  std::string ToString() const;
};

// http or https, a host (a DNS name, an IPv4 address or a bracketed IPv6 one), an optional
// port and path prefix. Refused, with the reason: other schemes, user:password@ (secrets go
// in --header or --bearer, never in the URL), a query, a fragment, "." or ".." segments,
// bytes outside a URL's. InvalidArgument.
Result<TargetUrl> ParseTargetUrl(std::string_view text);

}  // namespace warren
