// OpenSSH public keys as people paste them (one authorized_keys-style line) and their
// SHA256 fingerprints, computed exactly as `ssh-keygen -lf` prints them. The input is
// untrusted: parsing is strict and bounded. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

struct PublicKey {
  std::string algorithm;    // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
  std::string blob_base64;  // the key blob, canonical padded base64
  std::string comment;      // may be empty; printable, valid UTF-8
  std::string fingerprint;  // "SHA256:<base64 without padding>"

  bool operator==(const PublicKey&) const = default;
};

// Longest line ParseAuthorizedKey accepts (an RSA-16384 key is about 2.8 KiB).
inline constexpr size_t kMaxPublicKeyLineBytes = 16 * 1024;

// Parses one OpenSSH public key line: `TYPE BASE64 [COMMENT]`, surrounding whitespace
// ignored. Accepted types: ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521,
// sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com. The blob's structure is
// checked against its type (RSA moduli under 1024 bits are refused, as OpenSSH does).
// InvalidArgument saying what is wrong, with an example of a key line; TooLarge over
// kMaxPublicKeyLineBytes.
Result<PublicKey> ParseAuthorizedKey(std::string_view line);

// True for the key types ParseAuthorizedKey accepts.
bool IsSupportedKeyAlgorithm(std::string_view algorithm);

// "SHA256:" + unpadded base64 of SHA-256(blob): the text `ssh-keygen -lf` prints.
std::string FingerprintOfBlob(std::string_view blob_bytes);
// The same from the blob's base64 as it appears in a key line.
Result<std::string> FingerprintOfBase64Blob(std::string_view blob_base64);

}  // namespace warren
