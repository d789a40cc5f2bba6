#include "lobby/commands/key_view.h"

#include "lobby/commands/text_format.h"

namespace warren {

nlohmann::json KeyJson(const SshKey& key, std::string_view in_use_fingerprint) {
  return {{"name", key.name},
          {"fingerprint", key.fingerprint},
          {"algorithm", key.algorithm},
          {"comment", key.comment},
          {"added_at", key.added_at},
          {"last_used_at", key.last_used_at},
          {"restrictions", key.scope.ToJson()},
          {"in_use", !in_use_fingerprint.empty() && key.fingerprint == in_use_fingerprint}};
}

std::string DescribeScope(const Scope& scope) {
  if (scope.Unrestricted()) return "none";
  std::string out;
  auto part = [&out](const std::string& s) {
    if (!out.empty()) out += "; ";
    out += s;
  };
  if (!scope.cmds.empty()) {
    std::string cmds;
    for (const std::string& c : scope.cmds) cmds += (cmds.empty() ? "" : ", ") + c;
    part("cmds: " + cmds);
  }
  if (!scope.tag.empty()) part("tag: " + scope.tag);
  if (scope.expires_at != 0) part("expires " + FormatTime(scope.expires_at));
  return out;
}

std::string KeyTableText(const std::vector<SshKey>& keys, std::string_view in_use_fingerprint) {
  if (keys.empty()) return "no keys\n";
  TextTable table({"", "NAME", "FINGERPRINT", "ALGORITHM", "ADDED", "LAST USED", "LIMITS"});
  bool marked = false;
  for (const SshKey& k : keys) {
    bool in_use = !in_use_fingerprint.empty() && k.fingerprint == in_use_fingerprint;
    marked = marked || in_use;
    table.AddRow({in_use ? "*" : "", k.name, k.fingerprint, k.algorithm, FormatTime(k.added_at),
                  FormatTime(k.last_used_at), DescribeScope(k.scope)});
  }
  std::string out = table.Render();
  if (marked) out += "* the key you are using\n";
  return out;
}

nlohmann::json TokenLabelJson(const TokenLabel& label, std::string_view in_use_label_id) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const IssuedToken& t : label.tokens) {
    tokens.push_back({{"restrictions", t.scope.ToJson()}, {"issued_at", t.issued_at}});
  }
  return {{"label", label.name},
          {"id", label.id},
          {"created_at", label.created_at},
          {"last_used_at", label.last_used_at},
          {"tokens", std::move(tokens)},
          {"in_use", !in_use_label_id.empty() && label.id == in_use_label_id}};
}

std::string TokenLabelTableText(const std::vector<TokenLabel>& labels,
                                std::string_view in_use_label_id) {
  TextTable table({"", "NAME", "ID", "CREATED", "LAST USED", "TOKENS", "LIMITS"});
  bool marked = false;
  for (const TokenLabel& l : labels) {
    bool in_use = !in_use_label_id.empty() && l.id == in_use_label_id;
    marked = marked || in_use;
    table.AddRow({in_use ? "*" : "", l.name, l.id.substr(0, 8), FormatTime(l.created_at),
                  FormatTime(l.last_used_at), std::to_string(l.tokens.size()),
                  l.tokens.empty() ? "-" : DescribeScope(l.tokens.back().scope)});
  }
  std::string out = table.Render();
  if (marked) out += "* the label of the token you are using\n";
  return out;
}

}  // namespace warren
