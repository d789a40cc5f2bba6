#include "lobby/relay/http_head.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace warren::relay {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> ListTokens(const HttpHeaders& headers, std::string_view name) {
  std::vector<std::string> out;
  for (const HttpHeader& h : headers) {
    if (!EqualsIgnoreCase(h.name, name)) continue;
    std::string_view v = h.value;
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view item = Trim(v.substr(0, comma));
      if (!item.empty()) out.push_back(Lower(item));
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return out;
}

bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_tokens) {
  static constexpr std::string_view kHop[] = {
      "connection",          "keep-alive",        "te", "trailer", "upgrade", "proxy-connection",
      "proxy-authorization", "proxy-authenticate"};
  std::string lower = Lower(name);
  if (lower.rfind("proxy-", 0) == 0) return true;
  for (std::string_view h : kHop) {
    if (lower == h) return true;
  }
  return std::find(connection_tokens.begin(), connection_tokens.end(), lower) !=
         connection_tokens.end();
}

namespace {

bool IsTokenChar(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (std::isalnum(u)) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// Field values: visible bytes, space and tab, and bytes >= 0x80 (obs-text).
bool IsFieldValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    unsigned char u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

// Splits the head into lines (CRLF; a bare LF is accepted as RFC 9112 allows), without the
// final blank line.
Result<std::vector<std::string_view>> Lines(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    size_t lf = head.find('\n');
    if (lf == std::string_view::npos)
      return InvalidArgument("the head does not end in a blank line");
    std::string_view line = head.substr(0, lf);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    head.remove_prefix(lf + 1);
    if (line.empty()) return lines;
    if (lines.size() > kMaxHeaderLines) return InvalidArgument("too many header lines");
    lines.push_back(line);
  }
  return InvalidArgument("the head does not end in a blank line");
}

Result<HttpHeaders> ParseHeaders(const std::vector<std::string_view>& lines) {
  HttpHeaders headers;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') {
      return InvalidArgument("folded header lines are not accepted");
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return InvalidArgument("a header line has no colon");
    std::string_view name = line.substr(0, colon);
    std::string_view value = Trim(line.substr(colon + 1));
    if (!IsToken(name)) return InvalidArgument("a header name is not a token");
    if (!IsFieldValue(value)) return InvalidArgument("a header value has control bytes");
    headers.push_back(HttpHeader{std::string(name), std::string(value)});
  }
  return headers;
}

Result<BodyFraming> Framing(const HttpHeaders& headers) {
  std::vector<std::string> codings = ListTokens(headers, "transfer-encoding");
  const HttpHeader* length = nullptr;
  for (const HttpHeader& h : headers) {
    if (!EqualsIgnoreCase(h.name, "content-length")) continue;
    if (length != nullptr && length->value != h.value) {
      return InvalidArgument("conflicting Content-Length headers");
    }
    length = &h;
  }
  if (!codings.empty()) {
    if (length != nullptr) return InvalidArgument("both Content-Length and Transfer-Encoding");
    if (codings.back() != "chunked") return InvalidArgument("a transfer coding other than chunked");
    return BodyFraming{BodyFraming::Kind::kChunked, 0};
  }
  if (length == nullptr) return BodyFraming{};
  uint64_t n = 0;
  const std::string& v = length->value;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty()) {
    return InvalidArgument("a bad Content-Length");
  }
  return BodyFraming{BodyFraming::Kind::kLength, n};
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const HttpHeader* FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const HttpHeader& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return &h;
  }
  return nullptr;
}

Result<RequestHead> ParseRequestHead(std::string_view head) {
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string_view> lines, Lines(head));
  if (lines.empty()) return InvalidArgument("an empty request");
  std::string_view line = lines[0];
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return InvalidArgument("a malformed request line");
  }
  RequestHead r;
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(r.method)) return InvalidArgument("a malformed method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return InvalidArgument("only HTTP/1.0 and HTTP/1.1 are spoken here");
  }
  r.version = std::string(version);
  if (r.target.empty() || r.target.front() != '/' ||
      !std::all_of(r.target.begin(), r.target.end(), [](char c) {
        unsigned char u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7f;
      })) {
    return InvalidArgument("the request target must be a path (/...)");
  }
  WARREN_ASSIGN_OR_RETURN(r.headers, ParseHeaders(lines));
  return r;
}

Result<ResponseHead> ParseResponseHead(std::string_view head) {
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string_view> lines, Lines(head));
  if (lines.empty()) return InvalidArgument("an empty response");
  std::string_view line = lines[0];
  if (line.size() < 12 || (line.substr(0, 9) != "HTTP/1.1 " && line.substr(0, 9) != "HTTP/1.0 ")) {
    return InvalidArgument("a malformed status line");
  }
  ResponseHead r;
  std::string_view code = line.substr(9, 3);
  auto [end, ec] = std::from_chars(code.data(), code.data() + 3, r.status);
  if (ec != std::errc() || end != code.data() + 3 || r.status < 100 || r.status > 999 ||
      (line.size() > 12 && line[12] != ' ')) {
    return InvalidArgument("a malformed status code");
  }
  r.reason = std::string(line.size() > 13 ? line.substr(13) : std::string_view());
  if (!IsFieldValue(r.reason)) return InvalidArgument("a malformed reason phrase");
  WARREN_ASSIGN_OR_RETURN(r.headers, ParseHeaders(lines));
  return r;
}

Result<BodyFraming> RequestFraming(const RequestHead& request) { return Framing(request.headers); }

Result<BodyFraming> ResponseFraming(std::string_view method, const ResponseHead& response) {
  if (method == "HEAD" || response.status < 200 || response.status == 204 ||
      response.status == 304) {
    return BodyFraming{};
  }
  WARREN_ASSIGN_OR_RETURN(BodyFraming f, Framing(response.headers));
  if (f.kind == BodyFraming::Kind::kNone &&
      FindHeader(response.headers, "content-length") == nullptr) {
    f.kind = BodyFraming::Kind::kUntilClose;
  }
  return f;
}

Result<size_t> ChunkedScanner::Feed(std::string_view data) {
  constexpr size_t kMaxTrailerBytes = 16 * 1024;
  size_t i = 0;
  while (i < data.size() && state_ != State::kDone) {
    char c = data[i];
    switch (state_) {
      case State::kSize: {
        int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                    : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                : -1;
        if (digit >= 0) {
          if (++size_digits_ > 15) return InvalidArgument("a chunk size too large");
          remaining_ = remaining_ * 16 + static_cast<uint64_t>(digit);
        } else if (size_digits_ == 0) {
          return InvalidArgument("a malformed chunk size");
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kSizeExt;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else {
          return InvalidArgument("a malformed chunk size");
        }
        ++i;
        break;
      }
      case State::kSizeExt:
        if (c == '\r') state_ = State::kSizeLf;
        ++i;
        if (++trailer_bytes_ > kMaxTrailerBytes)
          return InvalidArgument("chunk extensions too long");
        break;
      case State::kSizeLf:
        if (c != '\n') return InvalidArgument("a malformed chunk line");
        ++i;
        size_digits_ = 0;
        state_ = remaining_ == 0 ? State::kTrailer : State::kData;
        trailer_line_ = 0;
        break;
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - i));
        i += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return InvalidArgument("a chunk is longer than its size");
        ++i;
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return InvalidArgument("a chunk is longer than its size");
        ++i;
        state_ = State::kSize;
        break;
      case State::kTrailer:
        ++i;
        if (++trailer_bytes_ > kMaxTrailerBytes) return InvalidArgument("trailers too long");
        if (c == '\r') {
          state_ = State::kTrailerLf;
        } else {
          ++trailer_line_;
        }
        break;
      case State::kTrailerLf:
        if (c != '\n') return InvalidArgument("a malformed trailer line");
        ++i;
        state_ = trailer_line_ == 0 ? State::kDone : State::kTrailer;
        trailer_line_ = 0;
        break;
      case State::kDone:
        break;
    }
  }
  return i;
}

std::string DownstreamResponseHead(const ResponseHead& response) {
  std::vector<std::string> connection = ListTokens(response.headers, "connection");
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + response.reason + "\r\n";
  for (const HttpHeader& h : response.headers) {
    if (IsHopByHop(h.name, connection)) continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

std::string ErrorResponse(int status, std::string_view line) {
  std::string_view reason = status == 400   ? "Bad Request"
                            : status == 403 ? "Forbidden"
                            : status == 404 ? "Not Found"
                            : status == 408 ? "Request Timeout"
                            : status == 431 ? "Request Header Fields Too Large"
                            : status == 502 ? "Bad Gateway"
                            : status == 503 ? "Service Unavailable"
                            : status == 504 ? "Gateway Timeout"
                                            : "Error";
  std::string body = std::string(line) + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace warren::relay
