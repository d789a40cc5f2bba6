// Fuzzes OpenSSH public key parsing (keys/public_key.h): the line a person pastes into
// `ssh-key add`, `user add` or authorized_keys-style stdin. Input: one byte, then either the
// whole line (even byte), or the raw key blob (odd byte), put in a line as base64 after one of
// the accepted type names so that the blob's structure is what gets explored.
// Invariants: a refusal is InvalidArgument or TooLarge; an accepted key has a supported
// type, its fingerprint is that of its blob, its comment is printable UTF-8, and its
// canonical line parses to the same key.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "keys/base64.h"
#include "keys/public_key.h"
#include "lobby/base/utf8.h"
#include "tests/fuzz/check.h"

namespace {

using warren::Code;
using warren::Result;
using warren::fuzz::Fail;

constexpr const char* kTypes[] = {"ssh-ed25519",
                                  "sk-ssh-ed25519@openssh.com",
                                  "ssh-rsa",
                                  "ecdsa-sha2-nistp256",
                                  "ecdsa-sha2-nistp384",
                                  "ecdsa-sha2-nistp521",
                                  "sk-ecdsa-sha2-nistp256@openssh.com"};

void Check(std::string_view line) {
  Result<warren::PublicKey> key = warren::ParseAuthorizedKey(line);
  if (!key.ok()) {
    Code c = key.status().code();
    if (c != Code::kInvalidArgument && c != Code::kTooLarge) Fail(key.status().ToString());
    return;
  }
  if (!warren::IsSupportedKeyAlgorithm(key->algorithm)) Fail("type " + key->algorithm);
  Result<std::string> fp = warren::FingerprintOfBase64Blob(key->blob_base64);
  if (!fp.ok() || *fp != key->fingerprint) Fail("fingerprint is not the blob's");
  if (!warren::IsValidUtf8(key->comment)) Fail("comment is not UTF-8");
  for (unsigned char c : key->comment) {
    if (c < 0x20 || c == 0x7f) Fail("comment holds a control byte");
  }
  std::string canonical = key->algorithm + " " + key->blob_base64;
  if (!key->comment.empty()) canonical += " " + key->comment;
  Result<warren::PublicKey> again = warren::ParseAuthorizedKey(canonical);
  if (!again.ok() || !(*again == *key)) Fail("the canonical line parses differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    Check(rest);
  } else {
    const char* type = kTypes[(data[0] / 2) % std::size(kTypes)];
    Check(std::string(type) + " " + warren::Base64Encode(rest) + " fuzz@host");
  }
  return 0;
}
