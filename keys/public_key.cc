#include "keys/public_key.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "keys/base64.h"
#include "lobby/base/utf8.h"

namespace warren {
namespace {

constexpr std::string_view kExample =
    "a public key is one line like \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA... you@laptop\", "
    "the contents of a .pub file such as ~/.ssh/id_ed25519.pub";

constexpr int kMinRsaBits = 1024;  // OpenSSH's SSH_RSA_MINIMUM_MODULUS_SIZE
constexpr int kMaxRsaBits = 16384;

enum class Kind { kEd25519, kSkEd25519, kRsa, kEcdsa, kSkEcdsa };

struct Algorithm {
  std::string_view name;
  Kind kind;
  std::string_view curve;  // ECDSA only: the curve name inside the blob
  int curve_nid;           // ECDSA only
};

constexpr std::array<Algorithm, 7> kAlgorithms = {{
    {"ssh-ed25519", Kind::kEd25519, "", 0},
    {"sk-ssh-ed25519@openssh.com", Kind::kSkEd25519, "", 0},
    {"ssh-rsa", Kind::kRsa, "", 0},
    {"ecdsa-sha2-nistp256", Kind::kEcdsa, "nistp256", NID_X9_62_prime256v1},
    {"ecdsa-sha2-nistp384", Kind::kEcdsa, "nistp384", NID_secp384r1},
    {"ecdsa-sha2-nistp521", Kind::kEcdsa, "nistp521", NID_secp521r1},
    {"sk-ecdsa-sha2-nistp256@openssh.com", Kind::kSkEcdsa, "nistp256", NID_X9_62_prime256v1},
}};

const Algorithm* FindAlgorithm(std::string_view name) {
  for (const Algorithm& a : kAlgorithms) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// A short, printable rendering of untrusted text for an error message.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
  }
  if (s.size() > 40) out += "...";
  return out;
}

Status Bad(std::string what) { return InvalidArgument(what + "; " + std::string(kExample)); }

// Reads the SSH wire format (RFC 4251 §5): uint32 big-endian length, then that many bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  std::optional<std::string_view> String() {
    if (data_.size() < 4) return std::nullopt;
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len = (len << 8) | static_cast<unsigned char>(data_[i]);
    if (len > data_.size() - 4) return std::nullopt;
    std::string_view s = data_.substr(4, len);
    data_.remove_prefix(4 + len);
    return s;
  }
  bool AtEnd() const { return data_.empty(); }

 private:
  std::string_view data_;
};

// Bit length of a positive mpint (RFC 4251 §5), or -1 when it is negative or malformed.
int MpintBits(std::string_view m) {
  if (m.empty()) return 0;
  if (static_cast<unsigned char>(m[0]) & 0x80) return -1;  // negative
  // A leading zero byte is allowed only to keep the next byte's high bit from reading as a
  // sign bit.
  if (m[0] == 0 && (m.size() == 1 || !(static_cast<unsigned char>(m[1]) & 0x80))) return -1;
  while (!m.empty() && m[0] == 0) m.remove_prefix(1);
  if (m.empty()) return 0;
  int bits = static_cast<int>(m.size() - 1) * 8;
  for (unsigned char top = static_cast<unsigned char>(m[0]); top; top >>= 1) ++bits;
  return bits;
}

struct EcGroupFree {
  void operator()(EC_GROUP* g) const { EC_GROUP_free(g); }
};
struct EcPointFree {
  void operator()(EC_POINT* p) const { EC_POINT_free(p); }
};

// True when `q` is an uncompressed point on the curve (OpenSSH refuses anything else).
bool IsPointOnCurve(int nid, std::string_view q) {
  if (q.empty() || q[0] != 0x04) return false;
  std::unique_ptr<EC_GROUP, EcGroupFree> group(EC_GROUP_new_by_curve_name(nid));
  if (!group) return false;
  std::unique_ptr<EC_POINT, EcPointFree> point(EC_POINT_new(group.get()));
  if (!point) return false;
  if (EC_POINT_oct2point(group.get(), point.get(), reinterpret_cast<const unsigned char*>(q.data()),
                         q.size(), nullptr) != 1) {
    return false;
  }
  return EC_POINT_is_at_infinity(group.get(), point.get()) == 0 &&
         EC_POINT_is_on_curve(group.get(), point.get(), nullptr) == 1;
}

// Checks the blob after its type string against the layout OpenSSH writes for `alg`.
Status CheckBlobBody(const Algorithm& alg, WireReader& r) {
  const std::string name(alg.name);
  switch (alg.kind) {
    case Kind::kEd25519:
    case Kind::kSkEd25519: {
      auto pk = r.String();
      if (!pk || pk->size() != 32) return Bad("the " + name + " key data is malformed");
      break;
    }
    case Kind::kRsa: {
      auto e = r.String();
      auto n = r.String();
      if (!e || !n) return Bad("the ssh-rsa key data is malformed");
      int ebits = MpintBits(*e);
      int nbits = MpintBits(*n);
      if (ebits <= 0 || nbits <= 0) return Bad("the ssh-rsa key data is malformed");
      if (nbits < kMinRsaBits) {
        return InvalidArgument("the RSA key has " + std::to_string(nbits) + " bits; at least " +
                               std::to_string(kMinRsaBits) +
                               " are needed (an ed25519 key is better: ssh-keygen -t ed25519)");
      }
      if (nbits > kMaxRsaBits) {
        return InvalidArgument("the RSA key has " + std::to_string(nbits) + " bits; at most " +
                               std::to_string(kMaxRsaBits) + " are accepted");
      }
      break;
    }
    case Kind::kEcdsa:
    case Kind::kSkEcdsa: {
      auto curve = r.String();
      auto q = r.String();
      if (!curve || !q) return Bad("the " + name + " key data is malformed");
      if (*curve != alg.curve) {
        return Bad("the " + name + " key data names curve \"" + Excerpt(*curve) + "\"");
      }
      if (!IsPointOnCurve(alg.curve_nid, *q)) {
        return Bad("the " + name + " key data is not a point on its curve");
      }
      break;
    }
  }
  if (alg.kind == Kind::kSkEd25519 || alg.kind == Kind::kSkEcdsa) {
    auto application = r.String();
    if (!application) return Bad("the " + name + " key data has no application string");
  }
  if (!r.AtEnd()) return Bad("the " + name + " key data has trailing bytes");
  return Status::Ok();
}

// Options go before the type in authorized_keys ("no-pty", "command=\"...\"", "from=...").
// warren expresses restrictions with --cmds/--tag/--exp instead, so they are refused with a
// message that says so rather than "unknown key type".
bool LooksLikeOptions(std::string_view first_token, std::string_view line) {
  if (first_token.find('=') != std::string_view::npos ||
      first_token.find(',') != std::string_view::npos) {
    return true;
  }
  for (std::string_view opt :
       {"restrict", "no-pty", "no-port-forwarding", "no-agent-forwarding", "no-x11-forwarding",
        "no-user-rc", "no-touch-required", "verify-required", "cert-authority", "pty",
        "port-forwarding", "agent-forwarding", "x11-forwarding", "user-rc"}) {
    if (first_token == opt) return true;
  }
  // A known type later in the line, after something else, is a key behind options.
  for (const Algorithm& a : kAlgorithms) {
    size_t at = line.find(std::string(" ") + std::string(a.name) + " ");
    if (at != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

bool IsSupportedKeyAlgorithm(std::string_view algorithm) {
  return FindAlgorithm(algorithm) != nullptr;
}

std::string FingerprintOfBlob(std::string_view blob_bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  // EVP_Digest with SHA-256 fails only on allocation failure; an empty digest then yields a
  // fingerprint no key has, which is the safe outcome.
  if (EVP_Digest(blob_bytes.data(), blob_bytes.size(), md, &md_len, EVP_sha256(), nullptr) != 1) {
    md_len = 0;
  }
  return "SHA256:" +
         Base64EncodeUnpadded(std::string_view(reinterpret_cast<const char*>(md), md_len));
}

Result<std::string> FingerprintOfBase64Blob(std::string_view blob_base64) {
  Result<std::string> blob = Base64Decode(blob_base64);
  if (!blob.ok()) return blob.status().Annotate("key data");
  return FingerprintOfBlob(*blob);
}

Result<PublicKey> ParseAuthorizedKey(std::string_view line) {
  if (line.size() > kMaxPublicKeyLineBytes) {
    return TooLarge("the public key is " + std::to_string(line.size()) + " bytes; at most " +
                    std::to_string(kMaxPublicKeyLineBytes) + " are accepted");
  }
  line = Trim(line);
  if (line.empty()) return Bad("no public key given");
  // Checked before the line count: a private key is several lines, and the useful message
  // is "wrong file", not "one line please". Its text is never echoed back.
  if (line.find("PRIVATE KEY-----") != std::string_view::npos) {
    return InvalidArgument(
        "this is a private key; never share it. Give the public key instead (the .pub file, "
        "e.g. ~/.ssh/id_ed25519.pub)");
  }
  if (line.starts_with("---- BEGIN SSH2 PUBLIC KEY ----")) {
    return InvalidArgument(
        "this is an RFC 4716 (SSH2) public key; convert it to OpenSSH's one-line form with "
        "`ssh-keygen -i -f FILE`");
  }
  if (line.find_first_of("\r\n") != std::string_view::npos) {
    return Bad("more than one line given; add one key at a time");
  }

  size_t type_end = 0;
  while (type_end < line.size() && !IsBlank(line[type_end])) ++type_end;
  std::string_view type = line.substr(0, type_end);
  const Algorithm* alg = FindAlgorithm(type);
  if (alg == nullptr) {
    if (LooksLikeOptions(type, line)) {
      return InvalidArgument(
          "the line starts with authorized_keys options; give only the key (\"TYPE BASE64 "
          "[COMMENT]\") and restrict it with --cmds, --tag and --exp instead");
    }
    std::string supported;
    for (const Algorithm& a : kAlgorithms) {
      supported += supported.empty() ? "" : ", ";
      supported += a.name;
    }
    return Bad("unknown key type \"" + Excerpt(type) + "\" (supported: " + supported + ")");
  }

  std::string_view rest = line.substr(type_end);
  while (!rest.empty() && IsBlank(rest.front())) rest.remove_prefix(1);
  size_t blob_end = 0;
  while (blob_end < rest.size() && !IsBlank(rest[blob_end])) ++blob_end;
  std::string_view blob_b64 = rest.substr(0, blob_end);
  std::string_view comment = rest.substr(blob_end);
  while (!comment.empty() && IsBlank(comment.front())) comment.remove_prefix(1);
  if (blob_b64.empty()) return Bad("the key data is missing after \"" + std::string(type) + "\"");

  Result<std::string> blob = Base64Decode(blob_b64);
  if (!blob.ok()) return Bad("the key data is not valid base64 (" + blob.status().message() + ")");
  WireReader reader(*blob);
  std::optional<std::string_view> blob_type = reader.String();
  if (!blob_type) return Bad("the key data is malformed");
  if (*blob_type != type) {
    return Bad("the key data is of type \"" + Excerpt(*blob_type) + "\" but the line says \"" +
               std::string(type) + "\"");
  }
  WARREN_RETURN_IF_ERROR(CheckBlobBody(*alg, reader));

  for (char c : comment) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return Bad("the comment contains control characters");
  }
  if (!IsValidUtf8(comment)) return Bad("the comment is not valid UTF-8");

  PublicKey key;
  key.algorithm = std::string(type);
  key.blob_base64 = std::string(blob_b64);
  key.comment = std::string(comment);
  key.fingerprint = FingerprintOfBlob(*blob);
  return key;
}

}  // namespace warren
