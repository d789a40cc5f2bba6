// The web proxy's names and addresses: which host a request is for (the domain itself or one
// label under it), the public origin URLs are built from, and the small URL pieces the sign-in
// redirects carry (query parameters, percent-encoding, local paths). Pure; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"

namespace warren::web {

// A Host header, understood under `domain`.
struct WebHost {
  enum class Kind { kDomain, kSite };
  Kind kind = Kind::kDomain;
  std::string host;   // lower case, without port or trailing dot: "web-one.warren.localhost"
  std::string label;  // kSite: "web-one" (or "web-one-p3000")
};
// `host_header` any case, with an optional port. NotFound ("no such site") when it is
// neither `domain` nor exactly one label under it.
Result<WebHost> ParseWebHost(std::string_view host_header, std::string_view domain);

// Where visitors reach the proxy: "https://" or "http://", and the port, left out when it is
// the scheme's own (80, 443).
struct PublicOrigin {
  bool https = false;
  int port = 0;
  std::string Of(std::string_view host) const;  // "http://HOST:8081"
  std::string scheme() const { return https ? "https" : "http"; }
};

// An absolute URL's host, when it is `domain`'s LABEL.domain (for /__warren/auth?to=…), and
// its path with query ("/" when empty). nullopt for anything else.
struct SiteUrl {
  std::string host;
  std::string path;
};
std::optional<SiteUrl> ParseSiteUrl(std::string_view url, std::string_view domain);

// "/path?query" → its path and query (without '?').
std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target);
// The query's parameters, values percent-decoded ('+' is a space); the first of a name wins.
std::optional<std::string> QueryParam(std::string_view query, std::string_view name);
// The target without every parameter named `name` (the rest stays as sent).
std::string WithoutParam(std::string_view target, std::string_view name);
std::string PercentEncode(std::string_view s);
std::string PercentDecode(std::string_view s);
// Whether `path` may be redirected to on the same host: starts with '/', not "//" or "/\".
bool IsLocalPath(std::string_view path);

}  // namespace warren::web
