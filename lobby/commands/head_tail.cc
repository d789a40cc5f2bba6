#include "lobby/commands/head_tail.h"

#include <algorithm>

namespace warren {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The longest prefix of `s` that does not end inside a UTF-8 character.
std::string_view WholeCharsPrefix(std::string_view s) {
  size_t end = s.size();
  // Walk back over at most 3 continuation bytes to the lead byte of the last character,
  // then keep that character only if all of its bytes are there.
  size_t lead = end;
  while (lead > 0 && end - lead < 4 && IsContinuation(s[lead - 1])) --lead;
  if (lead == 0) return s;
  unsigned char c = static_cast<unsigned char>(s[lead - 1]);
  size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (end - (lead - 1) < want) return s.substr(0, lead - 1);
  return s;
}

// `s` without the continuation bytes at its start (the rest of a character cut in two).
std::string_view WholeCharsSuffix(std::string_view s) {
  size_t start = 0;
  while (start < s.size() && start < 3 && IsContinuation(s[start])) ++start;
  return s.substr(start);
}

}  // namespace

HeadTailBuffer::HeadTailBuffer(size_t limit)
    : head_limit_(limit / 2), tail_limit_(limit - limit / 2) {}

void HeadTailBuffer::Write(std::string_view bytes) {
  std::lock_guard lock(mu_);
  total_ += bytes.size();
  if (head_.size() < head_limit_) {
    size_t n = std::min(head_limit_ - head_.size(), bytes.size());
    head_.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  if (bytes.empty()) return;
  if (bytes.size() >= tail_limit_) {
    tail_.assign(bytes.substr(bytes.size() - tail_limit_));
    return;
  }
  tail_.append(bytes);
  if (tail_.size() > tail_limit_) tail_.erase(0, tail_.size() - tail_limit_);
}

std::string HeadTailBuffer::Text() const {
  std::lock_guard lock(mu_);
  uint64_t kept = head_.size() + tail_.size();
  if (kept == total_) return head_ + tail_;
  std::string_view head = WholeCharsPrefix(head_);
  std::string_view tail = WholeCharsSuffix(tail_);
  uint64_t left_out = total_ - head.size() - tail.size();
  std::string out(head);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out +=
      "[… " + std::to_string(left_out) + " bytes left out of " + std::to_string(total_) + " …]\n";
  out += tail;
  return out;
}

bool HeadTailBuffer::truncated() const {
  std::lock_guard lock(mu_);
  return head_.size() + tail_.size() < total_;
}

uint64_t HeadTailBuffer::total_bytes() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace warren
