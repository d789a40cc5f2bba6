// HTTP/1.1 message heads as the integrations proxy reads and rewrites them: parsing a
// request head from a VM and a response head from an upstream (bounded and strict, since
// both sides are untrusted), the body framing of each, the reverse-proxy rewrite (Host,
// hop-by-hop headers, the integration's headers) and integration target URLs. Pure
// functions and one small state machine; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/target_url.h"

namespace warren::integrations {

struct HttpHeader {
  std::string name;
  std::string value;
};
using HttpHeaders = std::vector<HttpHeader>;

// Limits on one head: lines and their number (the byte limit is the reader's).
inline constexpr size_t kMaxHeaderLines = 100;

struct RequestHead {
  std::string method;
  std::string target;  // origin-form: "/path?query"
  HttpHeaders headers;
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  HttpHeaders headers;
};

// `head` is everything up to and including the blank line ("\r\n\r\n"). InvalidArgument
// with a short reason (safe to show the VM) for anything malformed: bad request line, a
// version other than HTTP/1.0 or 1.1, obsolete line folding, control bytes, bad names.
Result<RequestHead> ParseRequestHead(std::string_view head);
Result<ResponseHead> ParseResponseHead(std::string_view head);

// The first header named `name` (case-insensitive), or nullptr.
const HttpHeader* FindHeader(const HttpHeaders& headers, std::string_view name);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// How a message's body is delimited.
struct BodyFraming {
  enum class Kind { kNone, kLength, kChunked, kUntilClose };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength
};
// A request: Content-Length, or Transfer-Encoding ending in chunked; both at once, a bad
// length, or another transfer coding: InvalidArgument (request smuggling is refused).
Result<BodyFraming> RequestFraming(const RequestHead& request);
// A response to `method`: none for HEAD, 1xx, 204 and 304; else as the request, with
// "until the upstream closes" when neither header is there.
Result<BodyFraming> ResponseFraming(std::string_view method, const ResponseHead& response);

// Follows a chunked body passing through unchanged, to find where it ends.
class ChunkedScanner {
 public:
  // How many bytes of `data` belong to the body (all of them unless it ends inside);
  // InvalidArgument for malformed chunk framing.
  Result<size_t> Feed(std::string_view data);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kSize,
    kSizeExt,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailer,
    kTrailerLf,
    kDone
  };
  State state_ = State::kSize;
  uint64_t remaining_ = 0;
  int size_digits_ = 0;
  size_t trailer_line_ = 0;  // bytes of the current trailer line
  size_t trailer_bytes_ = 0;
};

// The integration name a Host header names under `domain` ("N.<domain>", any port,
// any case): NotFound-free: InvalidArgument when the host is not one label under domain.
Result<std::string> IntegrationNameFromHost(std::string_view host, std::string_view domain);

// The head sent upstream: the request line with the target's path prefix, Host set to
// the target, hop-by-hop headers (Connection and what it lists, Keep-Alive, TE, Trailer,
// Upgrade, Proxy-*), Expect and every header the integration sets (Authorization
// included) removed from the VM's, the integration's headers added, `Connection: close`.
std::string UpstreamRequestHead(const RequestHead& request, const TargetUrl& target,
                                const HttpHeaders& add);
// The head sent back to the VM: hop-by-hop headers removed (Transfer-Encoding is kept: the
// body passes through as framed), `Connection: close`.
std::string DownstreamResponseHead(const ResponseHead& response);
// A complete short answer of the proxy's own: status line, text body `line` + "\n".
std::string ErrorResponse(int status, std::string_view line);

}  // namespace warren::integrations
