// HTTP/1.1 message heads as a reverse proxy reads and rewrites them (the integrations proxy,
// the web proxy): parsing a request head and a response head (bounded and strict, since
// both sides are untrusted), the body framing of each, the tokens of list headers and which
// headers are hop-by-hop, and the proxy's own short answers. Pure functions and one small
// state machine; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"

namespace warren::relay {

struct HttpHeader {
  std::string name;
  std::string value;
};
using HttpHeaders = std::vector<HttpHeader>;

// Limits on one head: lines and their number (the byte limit is the reader's).
inline constexpr size_t kMaxHeaderLines = 100;

struct RequestHead {
  std::string method;
  std::string target;   // origin-form: "/path?query"
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
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

// The comma-separated tokens of every header named `name`, lower-cased.
std::vector<std::string> ListTokens(const HttpHeaders& headers, std::string_view name);
// Whether a header is hop-by-hop (Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-*, and
// whatever `connection_tokens` — ListTokens(headers, "connection") — lists).
bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_tokens);
// Spaces and tabs off both ends; ASCII lower case.
std::string_view Trim(std::string_view s);
std::string Lower(std::string_view s);

// The head sent back to the VM: hop-by-hop headers removed (Transfer-Encoding is kept: the
// body passes through as framed), `Connection: close`.
std::string DownstreamResponseHead(const ResponseHead& response);
// A complete short answer of the proxy's own: status line, text body `line` + "\n".
std::string ErrorResponse(int status, std::string_view line);

}  // namespace warren::relay
