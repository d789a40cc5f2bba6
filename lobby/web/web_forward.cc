#include "lobby/web/web_forward.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "keys/token.h"
#include "lobby/web/web_cookies.h"

namespace warren::web {

namespace {

bool HasToken(const std::vector<std::string>& tokens, std::string_view t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

}  // namespace

bool IsUpgrade(const relay::RequestHead& request) {
  return request.method == "GET" && relay::FindHeader(request.headers, "upgrade") != nullptr &&
         HasToken(relay::ListTokens(request.headers, "connection"), "upgrade");
}

std::string WarrenBearer(const relay::HttpHeaders& headers) {
  const relay::HttpHeader* auth = relay::FindHeader(headers, "authorization");
  if (auth == nullptr) return "";
  std::string_view v = relay::Trim(auth->value);
  if (v.size() < 7 || !relay::EqualsIgnoreCase(v.substr(0, 7), "bearer ")) return "";
  std::string_view token = relay::Trim(v.substr(7));
  return LooksLikeToken(token) ? std::string(token) : "";
}

std::string VmRequestHead(const relay::RequestHead& request, const ForwardContext& ctx) {
  std::vector<std::string> connection = relay::ListTokens(request.headers, "connection");
  // An HTTP/1.0 visitor's request goes as 1.0, so the VM does not answer it chunked.
  std::string out = request.method + " " + ctx.target + " " +
                    (request.version == "HTTP/1.0" ? "HTTP/1.0" : "HTTP/1.1") + "\r\n";
  std::string forwarded_for;
  const relay::HttpHeader* host = relay::FindHeader(request.headers, "host");
  const relay::HttpHeader* upgrade = relay::FindHeader(request.headers, "upgrade");
  for (const relay::HttpHeader& h : request.headers) {
    const std::string& n = h.name;
    if (relay::IsHopByHop(n, connection) || relay::EqualsIgnoreCase(n, "expect") ||
        relay::EqualsIgnoreCase(n, "x-forwarded-proto") ||
        relay::EqualsIgnoreCase(n, "x-forwarded-host")) {
      continue;
    }
    if (relay::EqualsIgnoreCase(n, "x-forwarded-for")) {
      forwarded_for += (forwarded_for.empty() ? "" : ", ") + h.value;
      continue;
    }
    if (relay::EqualsIgnoreCase(n, "cookie")) {
      std::string kept = StripWarrenCookies(h.value);
      if (!kept.empty()) out += "Cookie: " + kept + "\r\n";
      continue;
    }
    if (relay::EqualsIgnoreCase(n, "authorization") && !WarrenBearer({h}).empty()) continue;
    out += n + ": " + h.value + "\r\n";
  }
  out +=
      "X-Forwarded-For: " + (forwarded_for.empty() ? "" : forwarded_for + ", ") + ctx.peer + "\r\n";
  out += std::string("X-Forwarded-Proto: ") + (ctx.https ? "https" : "http") + "\r\n";
  if (host != nullptr) out += "X-Forwarded-Host: " + host->value + "\r\n";
  if (ctx.upgrade && upgrade != nullptr) {
    out += "Connection: Upgrade\r\nUpgrade: " + upgrade->value + "\r\n\r\n";
  } else {
    out += "Connection: close\r\n\r\n";
  }
  return out;
}

std::string VisitorResponseHead(const relay::ResponseHead& response, bool keep_alive) {
  std::vector<std::string> connection = relay::ListTokens(response.headers, "connection");
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + response.reason + "\r\n";
  for (const relay::HttpHeader& h : response.headers) {
    if (relay::IsHopByHop(h.name, connection)) continue;
    if (relay::EqualsIgnoreCase(h.name, "set-cookie")) {
      std::optional<std::string> kept = RewriteVmSetCookie(h.value);
      if (kept.has_value()) out += h.name + ": " + *kept + "\r\n";
      continue;
    }
    out += h.name + ": " + h.value + "\r\n";
  }
  const relay::HttpHeader* upgrade = relay::FindHeader(response.headers, "upgrade");
  if (response.status == 101 && upgrade != nullptr) {
    out += "Connection: Upgrade\r\nUpgrade: " + upgrade->value + "\r\n\r\n";
  } else if (keep_alive) {
    out += "\r\n";
  } else {
    out += "Connection: close\r\n\r\n";
  }
  return out;
}

}  // namespace warren::web
