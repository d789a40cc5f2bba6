#include "lobby/commands/help_text.h"

#include <algorithm>
#include <vector>

#include <CLI/CLI.hpp>

namespace warren {
namespace {

constexpr size_t kMaxGutter = 24;
// Narrow enough for a phone's terminal and for a model's context to stay readable.
constexpr size_t kWrapColumns = 80;

struct ArgInfo {
  std::string name;
  std::string description;
  bool required = false;
  bool repeated = false;
};

struct FlagInfo {
  std::vector<std::string> names;  // "-h", "--help"
  std::string value;               // placeholder; empty for a plain flag
  std::string description;
  bool required = false;
  std::string default_value;
};

struct Declared {
  std::vector<ArgInfo> args;
  std::vector<FlagInfo> flags;
};

// Asks a fresh handler to declare its flags, then reads them back from the App.
Declared Describe(const CommandSpec& spec) {
  Declared out;
  std::unique_ptr<Command> handler = spec.make();
  bool json = false;
  std::unique_ptr<CLI::App> app = NewCommandApp(spec, *handler, &json);
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_positional() && !opt->nonpositional()) {
      out.args.push_back({opt->get_name(true), opt->get_description(), opt->get_required(),
                          opt->get_items_expected_max() > 1});
      continue;
    }
    FlagInfo f;
    for (const std::string& s : opt->get_snames()) f.names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) f.names.push_back("--" + l);
    if (opt->get_items_expected_max() > 0) f.value = opt->get_type_name();
    f.description = opt->get_description();
    f.required = opt->get_required();
    f.default_value = opt->get_default_str();
    out.flags.push_back(std::move(f));
  }
  // Help last: it is the same everywhere and the least interesting line.
  std::stable_partition(out.flags.begin(), out.flags.end(), [](const FlagInfo& f) {
    return std::find(f.names.begin(), f.names.end(), "--help") == f.names.end();
  });
  return out;
}

// Wraps prose at `width` columns so authors can write descriptions as plain sentences.
// Lines that start with a blank are examples and are kept as they are.
std::string Wrap(const std::string& text, size_t width) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? nl : nl - start);
    start = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty() || line[0] == ' ') {
      out += line + "\n";
      continue;
    }
    size_t col = 0;
    size_t pos = 0;
    while (pos < line.size()) {
      size_t sp = line.find(' ', pos);
      std::string word = line.substr(pos, sp == std::string::npos ? sp : sp - pos);
      pos = sp == std::string::npos ? line.size() : sp + 1;
      if (word.empty()) continue;
      if (col > 0 && col + 1 + word.size() > width) {
        out += "\n";
        col = 0;
      }
      if (col > 0) {
        out += ' ';
        ++col;
      }
      out += word;
      col += word.size();
    }
    out += "\n";
  }
  return out;
}

std::string FlagLabel(const FlagInfo& f) {
  std::string label;
  for (const std::string& n : f.names) {
    if (!label.empty()) label += ", ";
    label += n;
  }
  if (!f.value.empty()) label += " " + f.value;
  return label;
}

// Two columns: label, then description, aligned on the longest label up to a limit.
void AppendColumns(std::string& out, const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t gutter = 0;
  for (const auto& r : rows) gutter = std::max(gutter, std::min(r.first.size(), kMaxGutter));
  for (const auto& [label, text] : rows) {
    out += "  " + label;
    if (label.size() > gutter) {
      out += "\n  " + std::string(gutter, ' ');
    } else {
      out += std::string(gutter - label.size(), ' ');
    }
    out += "  " + text + "\n";
  }
}

}  // namespace

std::string CommandSynopsis(const CommandSpec& spec) {
  std::string s = spec.path;
  if (!spec.args.empty()) s += " " + spec.args;
  return s + " [flags]";
}

std::string CommandHelpText(const CommandSpec& spec) {
  Declared d = Describe(spec);
  std::string out = "usage: " + CommandSynopsis(spec) + "\n\n" + spec.summary;
  if (spec.admin_only) out += " (admins only)";
  out += "\n";
  if (!spec.description.empty()) {
    out += "\n" + Wrap(spec.description, kWrapColumns);
  }
  if (!d.args.empty()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const ArgInfo& a : d.args) {
      rows.emplace_back(a.name + (a.repeated ? "…" : ""),
                        a.description + (a.required ? " (required)" : ""));
    }
    out += "\narguments:\n";
    AppendColumns(out, rows);
  }
  std::vector<std::pair<std::string, std::string>> rows;
  for (const FlagInfo& f : d.flags) {
    std::string text = f.description;
    if (f.required) text += " (required)";
    if (!f.default_value.empty()) text += " (default " + f.default_value + ")";
    rows.emplace_back(FlagLabel(f), text);
  }
  out += "\nflags:\n";
  AppendColumns(out, rows);
  return out;
}

std::string CommandHelpText(const CommandSpec& spec, const Services& services) {
  std::string out = CommandHelpText(spec);
  std::string live = spec.live_help ? spec.live_help(services) : "";
  if (!live.empty()) out += "\n" + live;
  return out;
}

nlohmann::json CommandHelpJson(const CommandSpec& spec) {
  Declared d = Describe(spec);
  nlohmann::json args = nlohmann::json::array();
  for (const ArgInfo& a : d.args) {
    args.push_back({{"name", a.name},
                    {"description", a.description},
                    {"required", a.required},
                    {"repeated", a.repeated}});
  }
  nlohmann::json flags = nlohmann::json::array();
  for (const FlagInfo& f : d.flags) {
    nlohmann::json j = {{"name", f.names.empty() ? "" : f.names.back()},
                        {"names", f.names},
                        {"description", f.description},
                        {"required", f.required}};
    j["value"] = f.value.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.value);
    if (!f.default_value.empty()) j["default"] = f.default_value;
    flags.push_back(std::move(j));
  }
  return {{"path", spec.path},
          {"summary", spec.summary},
          {"usage", CommandSynopsis(spec)},
          {"description", spec.description},
          {"read_only", spec.read_only},
          {"admin_only", spec.admin_only},
          {"args", std::move(args)},
          {"flags", std::move(flags)}};
}

}  // namespace warren
