#include "lobby/commands/web_url.h"

namespace warren {
namespace {

// ":8081", or "" for the scheme's own port.
std::string PortSuffix(const ServerInfo& info) {
  const bool https = info.web_scheme == "https";
  if ((https && info.web_port == 443) || (!https && info.web_port == 80)) return "";
  return ":" + std::to_string(info.web_port);
}

}  // namespace

bool WebEnabled(const ServerInfo& info) { return info.web_port > 0; }

std::string WebOrigin(const ServerInfo& info) {
  if (!WebEnabled(info)) return "";
  return info.web_scheme + "://" + info.domain + PortSuffix(info);
}

std::string WebHostName(const ServerInfo& info, std::string_view label) {
  return std::string(label) + "." + info.domain;
}

std::string WebHostUrl(const ServerInfo& info, std::string_view label) {
  if (!WebEnabled(info)) return "";
  return info.web_scheme + "://" + WebHostName(info, label) + PortSuffix(info) + "/";
}

nlohmann::json WebUrlJson(const std::string& url) {
  return url.empty() ? nlohmann::json(nullptr) : nlohmann::json(url);
}

}  // namespace warren
