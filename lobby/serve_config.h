// `warren serve`'s command line and config file. Every serve flag is also a key of the config
// file (the flag without its "--"); a flag given on the command line wins over the file, and
// the file over the built-in default. The file is what CLI11 reads (set_config) through a
// reader of its own that knows each line's number, so an unknown key, a malformed line or a
// bad value is an error naming the key and the line.
//
// The format is TOML's simple part (what CLI11 reads), one key a line, no sections:
//
//   # a comment
//   ssh = "0.0.0.0:2222"
//   vm-ready-timeout = 120
//   pool = ["debian=2", "tiny=1"]        # a repeatable flag takes an array (may span lines)
//   mcp-conformance-fixtures = false     # a flag without a value: true or false
//
// With the default path (/etc/warren/warren.conf) a missing file is fine: the built-in
// defaults hold. A file named with --config must exist.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lobby/base/status.h"
#include "lobby/serve_flags.h"

namespace warren {

inline constexpr char kDefaultConfigFile[] = "/etc/warren/warren.conf";

class ServeCli {
 public:
  // `default_config_file` is read when --config is not given, if it exists.
  explicit ServeCli(std::string default_config_file = kDefaultConfigFile);
  ServeCli(const ServeCli&) = delete;
  ServeCli& operator=(const ServeCli&) = delete;

  // Parses `args` (the words after `serve`) and the config file. Throws CLI::ParseError as
  // CLI11 does (help included: hand it to app().exit); an error about a value that came from
  // the config file is a CLI::ConfigError naming the file, the line and the key.
  void Parse(const std::vector<std::string>& args);
  // The same, for a re-read (SIGHUP): any error as a Status.
  Status ParseForReload(const std::vector<std::string>& args);

  const ServeFlags& flags() const { return *flags_; }
  CLI::App& app() { return app_; }
  // The config file read by the last Parse ("" when the default one is missing).
  const std::string& config_file() const;

  // After Parse: the effective configuration, in the config file's format (so it can be
  // read back), each value with where it came from (the command line, the file and its
  // line, or the default).
  std::string EffectiveConfig() const;
  // The documented example config (packaging/warren.conf): every key commented out with its
  // default and its --help text. Does not depend on what was parsed.
  std::string ExampleConfig() const;

  class Reader;  // the config file's reader (serve_config.cc)

 private:
  std::unique_ptr<ServeFlags> flags_;
  CLI::App app_;
  std::shared_ptr<Reader> reader_;
  // Each configurable option's built-in default, as config values (long name -> values).
  std::map<std::string, std::vector<std::string>> defaults_;
};

}  // namespace warren
