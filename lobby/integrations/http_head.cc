#include "lobby/integrations/http_head.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace warren::integrations {

using relay::IsHopByHop;
using relay::ListTokens;
using relay::Lower;
using relay::Trim;

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
  out += "Host: " + target.Authority() + "\r\n";
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
