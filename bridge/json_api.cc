#include "bridge/json_api.h"

#include <cctype>
#include <utility>

#include "lobby/base/error_map.h"

namespace warren {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

}  // namespace

Result<std::string> BearerToken(const HttpRequest& req) {
  std::string_view auth = Trim(req.Header("authorization"));
  if (auth.empty()) {
    return Unauthenticated(
        "missing API token: send \"Authorization: Bearer TOKEN\" (mint one with ssh HOST "
        "ssh-key generate-api-key --label NAME)");
  }
  if (!StartsWithNoCase(auth, "bearer ")) {
    return Unauthenticated("the Authorization header must be \"Bearer TOKEN\"");
  }
  std::string_view token = Trim(auth.substr(7));
  if (token.empty()) return Unauthenticated("the bearer token is empty");
  return std::string(token);
}

void RespondStatus(HttpResponder& responder, const Status& st, std::string_view allow) {
  HttpHeaders headers;
  if (st.code() == Code::kUnauthenticated) {
    headers.emplace_back("WWW-Authenticate", "Bearer realm=\"warren\"");
  } else if (st.code() == Code::kLimitExceeded) {
    headers.emplace_back("Retry-After", "1");
  } else if (st.code() == Code::kMethodNotAllowed) {
    headers.emplace_back("Allow", std::string(allow));
  }
  RespondJsonError(responder, HttpStatusFor(st.code()), st.message(), std::move(headers));
}

}  // namespace warren
