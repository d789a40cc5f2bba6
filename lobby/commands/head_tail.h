// HeadTailBuffer: an OutputSink that keeps the start and the end of a stream within a byte
// budget and counts what fell out between them, so a command's output returned in one
// piece (JSON, /exec, MCP) stays bounded however much the command printed. Thread-safe: a
// guest connection may write stdout and stderr from different threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/base/streams.h"

namespace warren {

// About 35 KB per stream, as the product promises.
inline constexpr size_t kMaxReturnedOutputBytes = 35 * 1000;

class HeadTailBuffer final : public OutputSink {
 public:
  explicit HeadTailBuffer(size_t limit = kMaxReturnedOutputBytes);

  void Write(std::string_view bytes) override;

  // Everything written when it fit; otherwise the first and last halves of the budget,
  // cut at UTF-8 character boundaries, with a note of how many bytes were left out
  // between them.
  std::string Text() const;
  bool truncated() const;
  uint64_t total_bytes() const;

 private:
  const size_t head_limit_;
  const size_t tail_limit_;
  mutable std::mutex mu_;
  std::string head_;
  std::string tail_;  // a ring would save copies; outputs are small enough not to bother
  uint64_t total_ = 0;
};

}  // namespace warren
