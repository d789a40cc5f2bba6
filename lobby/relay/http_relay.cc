#include "lobby/relay/http_relay.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

namespace warren::relay {

using Clock = ByteStream::Clock;

Result<std::string> ReadHead(ByteStream& in, size_t limit, Clock::time_point deadline,
                             std::string* rest) {
  std::string buf = std::move(*rest);
  rest->clear();
  size_t searched = 0;
  char chunk[4096];
  for (;;) {
    size_t from = searched > 3 ? searched - 3 : 0;
    size_t crlf = buf.find("\r\n\r\n", from);
    size_t lf = buf.find("\n\n", from);
    size_t end = std::min(crlf == std::string::npos ? crlf : crlf + 4,
                          lf == std::string::npos ? lf : lf + 2);
    if (end != std::string::npos && end > limit) {
      return TooLarge("the head is larger than " + std::to_string(limit) + " bytes");
    }
    if (end != std::string::npos) {
      *rest = buf.substr(end);
      buf.resize(end);
      return buf;
    }
    if (buf.size() > limit)
      return TooLarge("the head is larger than " + std::to_string(limit) + " bytes");
    searched = buf.size();
    WARREN_ASSIGN_OR_RETURN(size_t n, in.Read(chunk, sizeof chunk, deadline));
    if (n == 0) {
      return buf.empty() ? Unavailable("closed before a request")
                         : InvalidArgument("the connection ended inside the head");
    }
    buf.append(chunk, n);
  }
}

Status RelayBody(ByteStream& in, ByteStream& out, const BodyFraming& framing, std::string first,
                 std::chrono::milliseconds idle, uint64_t* moved, std::string* after) {
  using Kind = BodyFraming::Kind;
  *moved = 0;
  if (framing.kind == Kind::kNone) {
    if (after != nullptr) *after = std::move(first);
    return Status::Ok();
  }
  uint64_t remaining = framing.length;
  ChunkedScanner chunks;
  std::string buf = std::move(first);
  std::vector<char> chunk(kRelayChunk);
  for (;;) {
    std::string_view piece = buf;
    bool done = false;
    if (framing.kind == Kind::kLength) {
      piece = piece.substr(0, static_cast<size_t>(std::min<uint64_t>(remaining, piece.size())));
      remaining -= piece.size();
      done = remaining == 0;
    } else if (framing.kind == Kind::kChunked) {
      WARREN_ASSIGN_OR_RETURN(size_t n, chunks.Feed(piece));
      piece = piece.substr(0, n);
      done = chunks.done();
    }
    if (!piece.empty()) {
      WARREN_RETURN_IF_ERROR(out.Write(piece, Clock::now() + idle));
      *moved += piece.size();
    }
    if (done) {
      if (after != nullptr) *after = buf.substr(piece.size());
      return Status::Ok();
    }
    WARREN_ASSIGN_OR_RETURN(size_t n, in.Read(chunk.data(), chunk.size(), Clock::now() + idle));
    if (n == 0) {
      if (framing.kind == Kind::kUntilClose) return Status::Ok();
      return Unavailable("the body ended early");
    }
    buf.assign(chunk.data(), n);
  }
}

namespace {

// One direction of a splice: `in` to `out` until EOF (then EOF on `out`) or an error (then
// both streams cancelled, which ends the other direction too).
void Pump(ByteStream& in, ByteStream& out, std::chrono::milliseconds idle, uint64_t* moved) {
  std::vector<char> chunk(kRelayChunk);
  for (;;) {
    Result<size_t> n = in.Read(chunk.data(), chunk.size(), Clock::now() + idle);
    if (n.ok() && *n == 0) {
      out.CloseWrite();
      return;
    }
    if (!n.ok() || !out.Write(std::string_view(chunk.data(), *n), Clock::now() + idle).ok()) {
      in.Cancel();
      out.Cancel();
      return;
    }
    *moved += *n;
  }
}

}  // namespace

void Splice(ByteStream& a, ByteStream& b, std::chrono::milliseconds idle, uint64_t* a_to_b,
            uint64_t* b_to_a) {
  std::thread up([&] { Pump(a, b, idle, a_to_b); });
  Pump(b, a, idle, b_to_a);
  up.join();
}

}  // namespace warren::relay
