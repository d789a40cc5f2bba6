// Help for one command, generated from its CommandSpec and the flags its handler declares on
// a fresh CLI::App — so `help CMD`, `CMD --help` and `help --json` can never drift from what
// the parser accepts. Pure functions of immutable specs; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lobby/commands/command.h"

namespace warren {

// "ssh-key add [KEY…] [flags]"
std::string CommandSynopsis(const CommandSpec& spec);

// usage line, summary, description, arguments and flags, for people.
std::string CommandHelpText(const CommandSpec& spec);
// The same, then what spec.live_help says about this server (help CMD, CMD --help).
std::string CommandHelpText(const CommandSpec& spec, const Services& services);

// {"path","summary","usage","description","read_only","admin_only",
//  "args":[{"name","description","required","repeated"}],
//  "flags":[{"name","names","value","description","required","default"}]}
nlohmann::json CommandHelpJson(const CommandSpec& spec);

}  // namespace warren
