// Tokenize: splits one command line into argv with shell-like quoting, for the REPL, the
// bridge's `/exec` body and MCP `exec`. It is never a shell: no expansion, no globbing, no
// variables, no comments, no redirection — only word splitting and quoting, so a line means
// the same on every surface. The input is untrusted and bounded. Pure; thread-safe.
//
// Rules (a subset of POSIX sh quoting):
//   - blanks (space, tab, CR, LF, VT, FF) separate words;
//   - '…' is literal up to the next single quote;
//   - "…" is literal except \" \\ \$ \` which drop the backslash;
//   - outside quotes a backslash makes the next byte literal; backslash-newline joins lines;
//   - adjacent parts join into one word (a'b'"c" is "abc"); '' is an empty word.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

// Longest command line accepted. Big enough for a pasted RSA key or a long `ssh VM CMD`,
// small enough that a runaway client cannot make us buffer megabytes per line.
inline constexpr size_t kMaxCommandLineBytes = 64 * 1024;

// InvalidArgument for an unterminated quote, a trailing backslash or a NUL byte;
// TooLarge over kMaxCommandLineBytes. An empty or all-blank line gives no words.
Result<std::vector<std::string>> Tokenize(std::string_view line);

// The inverse, for messages that show a command line to type: a word as it is when it
// needs no quoting, else in single quotes ('\'' for a quote inside).
std::string QuoteWord(std::string_view word);
// Words quoted and joined by spaces, so that Tokenize(JoinQuoted(w)) gives w back.
std::string JoinQuoted(const std::vector<std::string>& words);

}  // namespace warren
