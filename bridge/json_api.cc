#include "bridge/json_api.h"

#include <utility>

#include "lobby/base/ascii.h"
#include "lobby/base/error_map.h"

namespace warren {
Result<std::string> BearerToken(const HttpRequest& req) {
  std::string_view auth = TrimAsciiSpace(req.Header("authorization"));
  if (auth.empty()) {
    return Unauthenticated(
        "missing API token: send \"Authorization: Bearer TOKEN\" (mint one with ssh HOST "
        "ssh-key generate-api-key --label NAME)");
  }
  if (!StartsWithIgnoreCase(auth, "bearer ")) {
    return Unauthenticated("the Authorization header must be \"Bearer TOKEN\"");
  }
  std::string_view token = TrimAsciiSpace(auth.substr(7));
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
