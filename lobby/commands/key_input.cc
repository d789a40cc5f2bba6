#include "lobby/commands/key_input.h"

namespace warren {
namespace {

constexpr size_t kMaxKeyNameBytes = 64;

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsNameChar(char c) { return IsNameStart(c) || c == '.' || c == '_' || c == '@' || c == '-'; }

std::string_view Trim(std::string_view s) {
  const char* blanks = " \t\r\n";
  size_t b = s.find_first_not_of(blanks);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(blanks);
  return s.substr(b, e - b + 1);
}

bool NameTaken(std::string_view name, const std::vector<SshKey>& keys) {
  for (const SshKey& k : keys) {
    if (k.name == name) return true;
  }
  return false;
}

const char kHowToGiveAKey[] =
    "give the public key as an argument (ssh-key add \"$(cat ~/.ssh/id_ed25519.pub)\") or on "
    "stdin (ssh-key add < ~/.ssh/id_ed25519.pub)";

}  // namespace

Result<PublicKey> ReadPublicKey(std::string_view text, InputStream& in) {
  std::string input;
  if (!Trim(text).empty()) {
    input = std::string(text);
  } else {
    Result<std::string> read = ReadAll(in, kMaxKeyInputBytes);
    if (!read.ok()) {
      if (read.status().code() == Code::kTooLarge) {
        return TooLarge("the key on stdin is larger than " + std::to_string(kMaxKeyInputBytes) +
                        " bytes; give one public key line");
      }
      return read.status().Annotate("reading the key from stdin");
    }
    input = std::move(read).value();
  }
  if (input.find("PRIVATE KEY") != std::string::npos) {
    return InvalidArgument(
        "that is a private key; never share it. Give the public key instead (the .pub file)");
  }
  std::vector<std::string_view> lines;
  std::string_view rest = input;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = Trim(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  }
  if (lines.empty()) return InvalidArgument(std::string("no key given; ") + kHowToGiveAKey);
  if (lines.size() > 1) {
    return InvalidArgument("got " + std::to_string(lines.size()) +
                           " key lines; add one key at a time");
  }
  return ParseAuthorizedKey(lines[0]);
}

Status ValidateKeyName(std::string_view name) {
  if (name.empty()) return InvalidArgument("key name is empty");
  if (name.size() > kMaxKeyNameBytes) {
    return InvalidArgument("key name is longer than " + std::to_string(kMaxKeyNameBytes) +
                           " bytes");
  }
  bool ok = IsNameStart(name[0]);
  for (char c : name) ok = ok && IsNameChar(c);
  if (!ok) {
    return InvalidArgument("key name \"" + std::string(name.substr(0, kMaxKeyNameBytes)) +
                           "\" is not valid: use letters, digits and . _ @ -, starting with a "
                           "letter or digit");
  }
  return Status::Ok();
}

std::string DefaultKeyName(std::string_view comment, const std::vector<SshKey>& existing) {
  if (ValidateKeyName(comment).ok() && !NameTaken(comment, existing)) return std::string(comment);
  for (size_t n = existing.size() + 1;; ++n) {
    std::string name = "key-" + std::to_string(n);
    if (!NameTaken(name, existing)) return name;
  }
}

Result<SshKey> FindKey(const std::vector<SshKey>& keys, std::string_view name_or_fp) {
  for (const SshKey& k : keys) {
    if (k.name == name_or_fp || k.fingerprint == name_or_fp) return k;
  }
  std::string shown(name_or_fp.substr(0, kMaxKeyNameBytes + 8));
  return NotFound("you have no key named \"" + shown +
                  "\" or with that fingerprint; see ssh-key list");
}

}  // namespace warren
