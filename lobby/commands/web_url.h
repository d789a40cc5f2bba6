// The web addresses warren prints: the origin of the web listener (serve --web) and the URL
// of a host under the domain, exactly as a browser on this machine reaches them — the port
// is left out only where the scheme implies it (80 for http, 443 for https) — and nothing at
// all when there is no listener, so no command prints a dead link. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lobby/commands/interpreter.h"

namespace warren {

// Whether this server has a web listener (ServerInfo::web_port is set).
bool WebEnabled(const ServerInfo& info);
// "http://warren.localhost:8081", "https://example.org"; "" without a listener.
std::string WebOrigin(const ServerInfo& info);
// The host name of `label` under the domain: "web-one.warren.localhost".
std::string WebHostName(const ServerInfo& info, std::string_view label);
// "http://web-one.warren.localhost:8081/"; "" without a listener.
std::string WebHostUrl(const ServerInfo& info, std::string_view label);
// A URL for --json: the string, or null when it is "" (no listener).
nlohmann::json WebUrlJson(const std::string& url);

}  // namespace warren
