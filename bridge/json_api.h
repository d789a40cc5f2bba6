// What the bridge's JSON endpoints under a bearer token (POST /exec, REST /v1) share: reading
// the API token from the Authorization header, and answering a Status as {"error": …} with
// the HTTP status of the one error map (lobby/base/error_map.h) and the headers its code
// calls for (WWW-Authenticate, Retry-After, Allow). Pure functions over the request and
// responder; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "bridge/http_handler.h"
#include "lobby/base/status.h"

namespace warren {

// The bearer token of `req` ("Authorization: Bearer TOKEN", the scheme in any case), or
// Unauthenticated saying how to send one.
Result<std::string> BearerToken(const HttpRequest& req);

// Answers `st` (not ok) as JSON. `allow` is the Allow header of a 405: the methods the
// path takes.
void RespondStatus(HttpResponder& responder, const Status& st, std::string_view allow = "POST");

}  // namespace warren
