#include "lobby/commands/tokenizer.h"

#include <string>

namespace warren {
namespace {

bool IsBlank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The bytes a backslash escapes inside double quotes, as in POSIX sh (minus newline).
bool EscapableInDoubleQuotes(char c) { return c == '"' || c == '\\' || c == '$' || c == '`'; }

}  // namespace

Result<std::vector<std::string>> Tokenize(std::string_view line) {
  if (line.size() > kMaxCommandLineBytes) {
    return TooLarge("command line is " + std::to_string(line.size()) + " bytes; the limit is " +
                    std::to_string(kMaxCommandLineBytes));
  }
  if (line.find('\0') != std::string_view::npos) {
    return InvalidArgument("command line contains a NUL byte");
  }

  std::vector<std::string> words;
  std::string word;
  // A word exists once any part of it was seen, so '' yields an empty argument.
  bool in_word = false;
  size_t i = 0;
  const size_t n = line.size();
  while (i < n) {
    char c = line[i];
    if (IsBlank(c)) {
      if (in_word) {
        words.push_back(std::move(word));
        word.clear();
        in_word = false;
      }
      ++i;
      continue;
    }
    const bool was_in_word = in_word;
    in_word = true;
    if (c == '\'') {
      size_t close = line.find('\'', i + 1);
      if (close == std::string_view::npos) {
        return InvalidArgument("unterminated single quote (') starting at column " +
                               std::to_string(i + 1));
      }
      word.append(line.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '"') {
      size_t start = i;
      ++i;
      bool closed = false;
      while (i < n) {
        char d = line[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d == '\\' && i + 1 < n && EscapableInDoubleQuotes(line[i + 1])) {
          word.push_back(line[i + 1]);
          i += 2;
          continue;
        }
        word.push_back(d);
        ++i;
      }
      if (!closed) {
        return InvalidArgument("unterminated double quote (\") starting at column " +
                               std::to_string(start + 1));
      }
    } else if (c == '\\') {
      if (i + 1 >= n) {
        return InvalidArgument("trailing backslash at the end of the line (escape it as \\\\)");
      }
      if (line[i + 1] == '\n') {
        // Line continuation: neither byte is part of the word, and it does not end it.
        in_word = was_in_word;
      } else {
        word.push_back(line[i + 1]);
      }
      i += 2;
    } else {
      word.push_back(c);
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string QuoteWord(std::string_view word) {
  bool plain = !word.empty();
  for (char c : word) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("-_./=:,@+%^~").find(c) != std::string_view::npos;
    plain = plain && safe;
  }
  if (plain) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string JoinQuoted(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words) line += (line.empty() ? "" : " ") + QuoteWord(w);
  return line;
}

}  // namespace warren
