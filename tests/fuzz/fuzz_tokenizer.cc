// Fuzzes the tokenizer every surface splits command lines with (lobby/commands/tokenizer.h).
// Invariants: errors are InvalidArgument or TooLarge, never a crash; a line it accepts
// round-trips through JoinQuoted; any text without NUL bytes, quoted with QuoteWord, reads
// back as that one word.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/commands/tokenizer.h"
#include "tests/fuzz/check.h"

namespace {

using warren::Code;
using warren::Result;
using Words = std::vector<std::string>;

void CheckRoundTrip(const Words& words) {
  std::string joined = warren::JoinQuoted(words);
  if (joined.size() > warren::kMaxCommandLineBytes) return;  // quoting may lengthen a line
  Result<Words> again = warren::Tokenize(joined);
  if (!again.ok() || *again != words) warren::fuzz::Fail("JoinQuoted does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  Result<Words> words = warren::Tokenize(line);
  if (words.ok()) {
    CheckRoundTrip(*words);
  } else if (Code c = words.status().code(); c != Code::kInvalidArgument && c != Code::kTooLarge) {
    warren::fuzz::Fail("Tokenize: " + words.status().ToString());
  }
  if (line.find('\0') == std::string_view::npos) CheckRoundTrip({std::string(line)});
  return 0;
}
