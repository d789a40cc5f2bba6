// `warren serve`'s command line and config file (lobby/serve_config.h).
#include "lobby/serve_config.h"

#include <cctype>
#include <istream>
#include <sstream>
#include <utility>

namespace warren {
namespace {

bool IsKeyChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// The key an option has in the file: its first long name.
std::string KeyOf(const CLI::Option* op) { return op->get_lnames().front(); }

bool IsFlag(const CLI::Option* op) { return op->get_expected_min() == 0; }

bool IsRepeatable(const CLI::Option* op) { return op->get_items_expected_max() > 1; }

// The options the file may set: every option but --help, --config and --print-config.
bool Configurable(const CLI::Option* op) {
  return op->get_configurable() && !op->get_lnames().empty() && KeyOf(op) != "help";
}

bool IsBare(const std::string& v) {
  if (v == "true" || v == "false") return true;
  if (v.empty()) return false;
  size_t i = v[0] == '-' ? 1 : 0;
  bool digits = false;
  bool dot = false;
  for (; i < v.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(v[i])) != 0) {
      digits = true;
    } else if (v[i] == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digits;
}

std::string Quote(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string Render(const std::vector<std::string>& values, bool repeatable) {
  if (!repeatable)
    return values.empty() ? "\"\"" : (IsBare(values[0]) ? values[0] : Quote(values[0]));
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + Quote(values[i]);
  return out + "]";
}

// Splits CLI11's rendering of a container default, "[a,b]", into its items.
std::vector<std::string> ContainerItems(const std::string& text) {
  std::vector<std::string> items;
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    if (!text.empty()) items.push_back(text);
    return items;
  }
  std::string inner = text.substr(1, text.size() - 2);
  if (inner.empty()) return items;
  std::stringstream parts(inner);
  std::string part;
  while (std::getline(parts, part, ',')) items.push_back(part);
  return items;
}

// `text` as "# " comment lines of at most `width` columns.
std::string CommentWrapped(const std::string& text, size_t width) {
  std::string out;
  std::string line = "#";
  std::stringstream words(text);
  std::string word;
  while (words >> word) {
    if (line.size() > 1 && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = "#";
    }
    line += " " + word;
  }
  return out + line + "\n";
}

}  // namespace

// Reads the file line by line, so every error names its line; hands CLI11 one ConfigItem per
// key, checked against the options of `app`.
class ServeCli::Reader : public CLI::Config {
 public:
  Reader(const CLI::App* app, std::string default_file,
         const std::map<std::string, std::vector<std::string>>* defaults)
      : app_(app), default_file_(std::move(default_file)), defaults_(defaults) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    path_ = FilePath();
    used_.clear();
    // --help shows the options even when the file is broken.
    if (app_->get_help_ptr() != nullptr && app_->get_help_ptr()->count() > 0) return {};
    std::vector<CLI::ConfigItem> items;
    std::map<std::string, int> seen;
    std::string raw;
    int number = 0;
    while (std::getline(in, raw)) {
      ++number;
      const int line = number;
      std::string text = Trim(raw);
      if (text.empty() || text[0] == '#' || text[0] == ';') continue;
      if (text[0] == '[') {
        Fail(line, "sections are not used: every key sits at the top level");
      }
      size_t eq = text.find('=');
      if (eq == std::string::npos) Fail(line, "expected key = value, got " + Quote(text));
      std::string key = Trim(std::string_view(text).substr(0, eq));
      if (key.empty()) Fail(line, "a line with no key before '='");
      for (char c : key) {
        if (!IsKeyChar(c)) Fail(line, "key " + Quote(key) + ": keys are lowercase flag names");
      }
      std::string rest = text.substr(eq + 1);
      std::vector<std::string> values;
      bool array = false;
      ParseValue(in, &number, line, key, rest, &values, &array);

      const CLI::Option* op = app_->get_option_no_throw("--" + key);
      if (op == nullptr || !Configurable(op)) {
        if (op != nullptr && op->get_lnames().front() != "help") {
          Fail(line, "key " + Quote(key) + " cannot be set in the config file", key);
        }
        Fail(line,
             "unknown key " + Quote(key) +
                 " (the keys are warren serve's flags without their --; see warren serve --help)",
             key);
      }
      const std::string name = KeyOf(op);
      if (auto it = seen.find(name); it != seen.end()) {
        Fail(line,
             "key " + Quote(key) + " is set again (first on line " + std::to_string(it->second) +
                 ")" +
                 (IsRepeatable(op) ? "; give a repeatable key an array: " + key + " = [...]" : ""),
             key);
      }
      seen[name] = line;
      if (array && !IsRepeatable(op)) {
        Fail(line, "key " + Quote(key) + " takes one value, not an array", key);
      }
      if (array && values.empty()) {
        // [] is the default of a key that has none; elsewhere it would silently mean the
        // default (pool = [] is not "no pool").
        if (defaults_->count(name) != 0 && defaults_->at(name).empty()) continue;
        Fail(line, "key " + Quote(key) + ": an empty array; comment the key out for its default",
             key);
      }
      if (IsFlag(op) && values[0] != "true" && values[0] != "false") {
        Fail(line, "key " + Quote(key) + " is true or false, not " + Quote(values[0]), key);
      }
      // A flag on the command line wins: CLI11 skips the file's value then.
      if (op->count() == 0) used_[name] = line;
      CLI::ConfigItem item;
      item.name = key;
      item.inputs = std::move(values);
      items.push_back(std::move(item));
    }
    return items;
  }

  // "FILE line N (key K)" for the key whose --name an error message of CLI11's mentions, when
  // its value came from the file; "" otherwise.
  std::string WhereMentioned(const std::string& message) const {
    for (const auto& [key, line] : used_) {
      const std::string flag = "--" + key;
      for (size_t at = message.find(flag); at != std::string::npos;
           at = message.find(flag, at + 1)) {
        size_t end = at + flag.size();
        if (end == message.size() || !IsKeyChar(message[end])) {
          return path_ + " line " + std::to_string(line) + " (key " + key + ")";
        }
      }
    }
    return "";
  }

  const std::map<std::string, int>& used() const { return used_; }
  const std::string& path() const { return path_; }
  void Reset() const {
    path_.clear();
    used_.clear();
  }

 private:
  std::string FilePath() const {
    const CLI::Option* config = app_->get_config_ptr();
    if (config != nullptr && config->count() > 0) return config->results().front();
    return default_file_;
  }

  [[noreturn]] void Fail(int line, const std::string& why, const std::string& key = "") const {
    (void)key;
    throw CLI::ConfigError(path_ + " line " + std::to_string(line) + ": " + why);
  }

  // One scalar at s[*i]: "basic" (\" \\ \n \t escapes), 'literal', or a bare word. *i ends
  // past it.
  std::string Scalar(const std::string& s, size_t* i, int line, const std::string& key) const {
    std::string out;
    const char q = s[*i];
    if (q == '"' || q == '\'') {
      for (size_t k = *i + 1; k < s.size(); ++k) {
        char c = s[k];
        if (c == q) {
          *i = k + 1;
          return out;
        }
        if (q == '"' && c == '\\' && k + 1 < s.size()) {
          char e = s[++k];
          if (e == 'n') {
            out.push_back('\n');
          } else if (e == 't') {
            out.push_back('\t');
          } else if (e == '"' || e == '\\') {
            out.push_back(e);
          } else {
            Fail(line, "key " + Quote(key) + ": unknown escape \\" + std::string(1, e), key);
          }
          continue;
        }
        out.push_back(c);
      }
      Fail(line, "key " + Quote(key) + ": a quoted value is not closed", key);
    }
    size_t end = s.find_first_of(" \t,]#", *i);
    if (end == std::string::npos) end = s.size();
    out = s.substr(*i, end - *i);
    *i = end;
    if (out.empty()) Fail(line, "key " + Quote(key) + " has no value", key);
    return out;
  }

  static void SkipSpace(const std::string& s, size_t* i) {
    while (*i < s.size() && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\r')) ++*i;
  }

  // Nothing but a comment may follow a value.
  void ExpectEnd(const std::string& s, size_t i, int line, const std::string& key) const {
    SkipSpace(s, &i);
    if (i < s.size() && s[i] != '#') {
      Fail(line,
           "key " + Quote(key) + ": unexpected " + Quote(s.substr(i)) +
               " after the value (quote a value with spaces, commas or brackets)",
           key);
    }
  }

  void ParseValue(std::istream& in, int* number, int line, const std::string& key, std::string rest,
                  std::vector<std::string>* values, bool* array) const {
    size_t i = 0;
    SkipSpace(rest, &i);
    if (i >= rest.size() || rest[i] == '#') Fail(line, "key " + Quote(key) + " has no value", key);
    if (rest[i] != '[') {
      values->push_back(Scalar(rest, &i, line, key));
      ExpectEnd(rest, i, line, key);
      return;
    }
    *array = true;
    ++i;
    bool want_item = true;
    while (true) {
      SkipSpace(rest, &i);
      if (i >= rest.size() || rest[i] == '#') {  // the array goes on on the next line
        std::string next;
        if (!std::getline(in, next)) {
          Fail(line, "key " + Quote(key) + ": the array is not closed with ]", key);
        }
        ++*number;
        rest = next;
        i = 0;
        continue;
      }
      if (rest[i] == ']') {
        ExpectEnd(rest, i + 1, *number, key);
        return;
      }
      if (rest[i] == ',') {
        if (want_item) Fail(*number, "key " + Quote(key) + ": an empty item in the array", key);
        want_item = true;
        ++i;
        continue;
      }
      if (!want_item) Fail(*number, "key " + Quote(key) + ": items are separated by commas", key);
      values->push_back(Scalar(rest, &i, *number, key));
      want_item = false;
    }
  }

  const CLI::App* app_;
  std::string default_file_;
  const std::map<std::string, std::vector<std::string>>* defaults_;  // ServeCli's
  mutable std::string path_;
  mutable std::map<std::string, int> used_;  // keys whose value the file gave -> line
};

ServeCli::ServeCli(std::string default_config_file)
    : flags_(std::make_unique<ServeFlags>()),
      app_("Run the server in the foreground", "warren serve") {
  app_.set_config("--config", default_config_file,
                  "The config file: every flag below is a key there (the flag without its --); "
                  "flags given here win over it. The default one may be missing; a FILE given "
                  "must exist")
      ->type_name("FILE");
  app_.add_flag("--print-config", flags_->print_config,
                "Print the effective configuration (defaults, config file, flags) in the config "
                "file's format, and exit")
      ->configurable(false);
  AddServeOptions(app_, *flags_);
  reader_ = std::make_shared<Reader>(&app_, default_config_file, &defaults_);
  app_.config_formatter(reader_);
  for (CLI::Option* op : app_.get_options()) {
    if (!Configurable(op)) continue;
    std::string shown = op->get_default_str();
    std::string value = op->capture_default_str()->get_default_str();
    op->default_str(shown);
    if (IsFlag(op)) {
      defaults_[KeyOf(op)] = {value.empty() ? "false" : value};
    } else if (IsRepeatable(op)) {
      defaults_[KeyOf(op)] = ContainerItems(value);
    } else {
      defaults_[KeyOf(op)] = {value};
    }
  }
}

const std::string& ServeCli::config_file() const { return reader_->path(); }

void ServeCli::Parse(const std::vector<std::string>& args) {
  reader_->Reset();
  std::vector<const char*> argv = {"warren serve"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app_.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ConfigError&) {
    throw;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) throw;  // --help
    std::string where = reader_->WhereMentioned(e.what());
    if (where.empty()) throw;
    throw CLI::ConfigError(where + ": " + e.what());
  }
}

Status ServeCli::ParseForReload(const std::vector<std::string>& args) {
  try {
    Parse(args);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  return Status::Ok();
}

std::string ServeCli::EffectiveConfig() const {
  const std::string& file = reader_->path();
  std::string out = "# warren serve: the effective configuration (built-in defaults, then " +
                    (file.empty() ? std::string("no config file") : file) +
                    ", then the command line)\n";
  for (const CLI::Option* op : app_.get_options()) {
    if (!Configurable(op)) continue;
    const std::string key = KeyOf(op);
    std::vector<std::string> values;
    std::string source = "default";
    if (op->count() > 0) {
      values =
          IsFlag(op) ? std::vector<std::string>{op->as<bool>() ? "true" : "false"} : op->results();
      auto used = reader_->used().find(key);
      source = used != reader_->used().end() ? file + " line " + std::to_string(used->second)
                                             : "command line";
    } else {
      values = defaults_.at(key);
    }
    out += key + " = " + Render(values, IsRepeatable(op)) + "  # " + source + "\n";
  }
  return out;
}

std::string ServeCli::ExampleConfig() const {
  std::string out =
      "# " + std::string(kDefaultConfigFile) +
      ": the configuration of `warren serve`.\n"
      "#\n"
      "# Every key is a `warren serve` flag without its \"--\" (warren serve --help); a flag\n"
      "# given on the command line wins over this file, and this file over the built-in\n"
      "# default shown after each key below. An unknown key is an error naming its line.\n"
      "# Format (TOML's simple part): key = value; strings in double quotes, numbers and\n"
      "# true/false bare; a repeatable flag takes an array, [\"a\", \"b\"], which may span lines.\n"
      "# `warren serve --print-config` prints the configuration in effect. On SIGHUP\n"
      "# (systemctl reload warren) warren re-reads log-level from this file and the TLS\n"
      "# certificate and key; everything else takes a restart.\n"
      "#\n"
      "# This file is generated from the flags (tests/unit/serve_config_test.cc checks it).\n";
  for (const CLI::Option* op : app_.get_options()) {
    if (!Configurable(op)) continue;
    const std::string key = KeyOf(op);
    std::string help = op->get_description();
    if (IsRepeatable(op) && help.find("repeatable") == std::string::npos) {
      help += " (repeatable: an array)";
    }
    out += "\n" + CommentWrapped(help, 96);
    out += "#" + key + " = " + Render(defaults_.at(key), IsRepeatable(op)) + "\n";
  }
  return out;
}

}  // namespace warren
