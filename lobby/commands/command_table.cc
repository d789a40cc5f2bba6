#include "lobby/commands/command_table.h"

#include <algorithm>
#include <cstdlib>

#include "lobby/base/log.h"

namespace warren {
namespace {

size_t WordCount(std::string_view path) {
  return static_cast<size_t>(std::count(path.begin(), path.end(), ' ')) + 1;
}

[[noreturn]] void DieDuplicate(std::string_view path) {
  LogError("command table: \"" + std::string(path) + "\" registered twice");
  std::abort();
}

// Edit distance counting an adjacent swap as one edit ("whomai" is one from "whoami"):
// the optimal-string-alignment variant of Damerau-Levenshtein.
size_t EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

bool PathIsUnder(std::string_view path, std::string_view group) {
  return path.size() > group.size() + 1 && path.substr(0, group.size()) == group &&
         path[group.size()] == ' ';
}

void CommandTable::AddGroup(std::string path, std::string summary) {
  if (FindGroup(path) != nullptr || Find(path) != nullptr) DieDuplicate(path);
  groups_.push_back({std::move(path), std::move(summary)});
}

void CommandTable::Add(CommandSpec spec) {
  if (Find(spec.path) != nullptr || FindGroup(spec.path) != nullptr) DieDuplicate(spec.path);
  max_words_ = std::max(max_words_, WordCount(spec.path));
  commands_.push_back(std::move(spec));
}

const CommandSpec* CommandTable::Find(std::string_view path) const {
  for (const CommandSpec& c : commands_) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

const CommandGroup* CommandTable::FindGroup(std::string_view path) const {
  for (const CommandGroup& g : groups_) {
    if (g.path == path) return &g;
  }
  return nullptr;
}

bool CommandTable::IsGroup(std::string_view path) const {
  for (const CommandSpec& c : commands_) {
    if (PathIsUnder(c.path, path)) return true;
  }
  return false;
}

CommandTable::Match CommandTable::Lookup(const std::vector<std::string>& argv) const {
  for (size_t k = std::min(argv.size(), max_words_); k >= 1; --k) {
    if (const CommandSpec* spec = Find(JoinWords({argv.begin(), argv.begin() + k}))) {
      return {spec, k};
    }
  }
  return {};
}

size_t CommandTable::GroupWords(const std::vector<std::string>& argv) const {
  for (size_t k = std::min(argv.size(), max_words_); k >= 1; --k) {
    if (IsGroup(JoinWords({argv.begin(), argv.begin() + k}))) return k;
  }
  return 0;
}

std::vector<const CommandSpec*> CommandTable::InGroup(std::string_view group) const {
  std::vector<const CommandSpec*> out;
  for (const CommandSpec& c : commands_) {
    if (PathIsUnder(c.path, group)) out.push_back(&c);
  }
  return out;
}

std::string CommandTable::Suggest(const std::vector<std::string>& argv,
                                  const std::function<bool(const CommandSpec&)>& visible) const {
  std::vector<std::string> candidates;
  for (const CommandSpec& c : commands_) {
    if (visible(c)) candidates.push_back(c.path);
  }
  for (const CommandGroup& g : groups_) {
    for (const CommandSpec* c : InGroup(g.path)) {
      if (visible(*c)) {
        candidates.push_back(g.path);
        break;
      }
    }
  }
  std::string best;
  size_t best_distance = 0;
  size_t best_words = 0;
  for (const std::string& candidate : candidates) {
    size_t words = WordCount(candidate);
    if (words > argv.size()) continue;
    std::string attempt = JoinWords({argv.begin(), argv.begin() + words});
    size_t distance = EditDistance(attempt, candidate);
    // Close means a typo or two, never a different short word: "ls" is not "rm".
    size_t allowed = std::min<size_t>(2, std::max<size_t>(1, attempt.size() / 3));
    if (distance == 0 || distance > allowed) continue;
    // Prefer the closest; on a tie the more specific path ("ssh-key list" over "ssh-key").
    if (best.empty() || distance < best_distance ||
        (distance == best_distance && words > best_words)) {
      best = candidate;
      best_distance = distance;
      best_words = words;
    }
  }
  return best;
}

}  // namespace warren
