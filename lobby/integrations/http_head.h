// HTTP heads as only the integrations proxy rewrites them: integration target URLs, Host →
// integration name, and the request sent upstream (Host, hop-by-hop headers, the
// integration's headers). Parsing, framing and the generic rewrites are lobby/relay's
// (http_head.h there), named here as the proxy has always named them. Pure functions;
// thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/relay/http_head.h"

namespace warren::integrations {

using relay::BodyFraming;
using relay::ChunkedScanner;
using relay::DownstreamResponseHead;
using relay::EqualsIgnoreCase;
using relay::ErrorResponse;
using relay::FindHeader;
using relay::HttpHeader;
using relay::HttpHeaders;
using relay::ParseRequestHead;
using relay::ParseResponseHead;
using relay::RequestFraming;
using relay::RequestHead;
using relay::ResponseFraming;
using relay::ResponseHead;

// An integration's upstream: scheme, host, port and a path prefix.
struct TargetUrl {
  bool https = false;
  std::string host;  // a name or an address (IPv6 without brackets)
  uint16_t port = 0;
  std::string path_prefix;  // "" or "/v1" (never ending in '/')
  std::string host_header;  // "api.example.com" or "api.example.com:8443"
};
Result<TargetUrl> ParseTargetUrl(std::string_view url);

// The integration name a Host header names under `domain` ("N.<domain>", any port,
// any case): NotFound-free: InvalidArgument when the host is not one label under domain.
Result<std::string> IntegrationNameFromHost(std::string_view host, std::string_view domain);

// The head sent upstream: the request line with the target's path prefix, Host set to
// the target, hop-by-hop headers (Connection and what it lists, Keep-Alive, TE, Trailer,
// Upgrade, Proxy-*), Expect and every header the integration sets (Authorization
// included) removed from the VM's, the integration's headers added, `Connection: close`.
std::string UpstreamRequestHead(const RequestHead& request, const TargetUrl& target,
                                const HttpHeaders& add);

}  // namespace warren::integrations
