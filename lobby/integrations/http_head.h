// HTTP heads as only the integrations proxy rewrites them: Host →
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
#include "lobby/base/target_url.h"
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
