#include "bridge/json_api.h"

#include <optional>
#include <utility>

#include "lobby/base/ascii.h"
#include "lobby/base/error_map.h"

namespace warren {
Result<std::string> BearerToken(const HttpRequest& req) {
  if (TrimAsciiSpace(req.Header("authorization")).empty()) {
    return Unauthenticated(
        "missing API token: send \"Authorization: Bearer TOKEN\" (mint one with ssh HOST "
        "ssh-key generate-api-key --label NAME)");
  }
  std::optional<std::string_view> token = req.BearerCredential();
  if (!token) return Unauthenticated("the Authorization header must be \"Bearer TOKEN\"");
  if (token->empty()) return Unauthenticated("the bearer token is empty");
  return std::string(*token);
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
