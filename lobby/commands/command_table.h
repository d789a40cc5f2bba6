// CommandTable: every lobby command, by path, with its groups ("ssh-key", "user") — the one
// table every surface dispatches through, as tmux's cmd_table does. Filled once at startup by
// RegisterBuiltinCommands (builtin_commands.h) and read-only afterwards, so concurrent lookups are
// safe; registering after the first lookup is not.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/commands/command.h"

namespace warren {

struct CommandGroup {
  std::string path;  // "ssh-key"
  std::string summary;
};

class CommandTable {
 public:
  struct Match {
    const CommandSpec* spec = nullptr;
    size_t words = 0;  // argv words that named the command; the rest are its arguments
  };

  // Registration. A duplicate path is a programming error and aborts.
  void AddGroup(std::string path, std::string summary);
  void Add(CommandSpec spec);

  const CommandSpec* Find(std::string_view path) const;
  // The longest registered path that is a prefix of argv ("ssh-key add KEY" -> "ssh-key
  // add" with 2 words); spec is null when none is.
  Match Lookup(const std::vector<std::string>& argv) const;
  // How many leading argv words name a group ("ssh-key frob" -> 1); 0 when none do.
  size_t GroupWords(const std::vector<std::string>& argv) const;
  // True when some command path continues `path` ("ssh-key" for "ssh-key add").
  bool IsGroup(std::string_view path) const;
  const CommandGroup* FindGroup(std::string_view path) const;

  // In registration order.
  const std::vector<CommandSpec>& commands() const { return commands_; }
  const std::vector<CommandGroup>& groups() const { return groups_; }
  // Commands under a group path, in registration order.
  std::vector<const CommandSpec*> InGroup(std::string_view group) const;

  // A registered path (or group) close to what argv tried, for "did you mean"; empty when
  // nothing is close. `visible` hides commands the caller could not run.
  std::string Suggest(const std::vector<std::string>& argv,
                      const std::function<bool(const CommandSpec&)>& visible) const;

 private:
  std::vector<CommandSpec> commands_;
  std::vector<CommandGroup> groups_;
  size_t max_words_ = 0;
};

// True when `path` is `group` followed by more words.
bool PathIsUnder(std::string_view path, std::string_view group);

}  // namespace warren
