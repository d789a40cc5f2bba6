// Moving HTTP messages between two ByteStreams as a reverse proxy does: reading a head
// (bounded in size and time) and relaying a body as its framing delimits it, a piece at a
// time with a blocking write before the next read, so a slow reader stalls the sender and
// nothing is buffered whole. Thread-compatible: one worker thread per pair of streams.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "lobby/base/status.h"
#include "lobby/relay/byte_stream.h"
#include "lobby/relay/http_head.h"

namespace warren::relay {

// Bytes a body moves at a time.
inline constexpr size_t kRelayChunk = 32 * 1024;

// Reads until the blank line that ends a head; what came after it stays in `rest` (and what
// is in `rest` on entry is read first). TooLarge past `limit`, Unavailable when the stream
// closed before a byte, InvalidArgument when it ended inside the head, else the stream's
// error (Timeout at `deadline`).
Result<std::string> ReadHead(ByteStream& in, size_t limit, ByteStream::Clock::time_point deadline,
                             std::string* rest);

// Moves one body from `in` to `out` as `framing` delimits it, starting with `first` (bytes
// already read), each read and write given `idle`. `*moved` counts what went out so far,
// also when it fails (for the log line). Bytes read past the body's end (a request pipelined
// behind it) go to `*after` when given, else they are dropped.
Status RelayBody(ByteStream& in, ByteStream& out, const BodyFraming& framing, std::string first,
                 std::chrono::milliseconds idle, uint64_t* moved, std::string* after = nullptr);

// After an upgrade (101 Switching Protocols: WebSockets), copies bytes both ways until both
// directions ended: `a`→`b` on a thread of its own, `b`→`a` on the caller's. A direction
// that reads EOF closes the other side's writing and the other direction goes on; an error
// either way (or `idle` without a byte in one direction) cancels both. `*a_to_b` and
// `*b_to_a` count the bytes moved. Returns when both are done.
void Splice(ByteStream& a, ByteStream& b, std::chrono::milliseconds idle, uint64_t* a_to_b,
            uint64_t* b_to_a);

}  // namespace warren::relay
