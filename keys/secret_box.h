// SecretKey: the key that seals secrets kept in the store (integration headers and bearer
// tokens, keys/integration.h) — AES-256-GCM through OpenSSL's EVP, a fresh random 96-bit
// nonce per seal, and a context string bound in as additional data so a sealed value moved
// to another record does not open. The key (32 random bytes) lives in DATA/integration.key,
// mode 0600, made on first start like the token signing key (keys/secret_file.h) and never
// logged; lose it and every sealed secret is lost, so operators back it up with the store.
//
// Immutable after creation and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

class SecretKey {
 public:
  static constexpr size_t kKeyBytes = 32;

  // Reads the key from `path`, or makes it when the file does not exist (keys/secret_file.h
  // for what is refused).
  static Result<SecretKey> LoadOrCreate(const std::string& path);
  // For tests: a key of exactly kKeyBytes bytes.
  static Result<SecretKey> FromBytes(std::string_view key);

  SecretKey(const SecretKey&) = default;
  SecretKey& operator=(const SecretKey&) = default;
  SecretKey(SecretKey&&) = default;
  SecretKey& operator=(SecretKey&&) = default;
  ~SecretKey();

  // "s1." + base64(nonce || ciphertext || tag) of `plaintext`, bound to `context`.
  Result<std::string> Seal(std::string_view plaintext, std::string_view context) const;
  // The plaintext again. Internal when `sealed` was altered, was sealed under another key or
  // another context, or is not a sealed value; the message never carries any of it.
  Result<std::string> Open(std::string_view sealed, std::string_view context) const;

  // HMAC-SHA256 of `data` under a key of its own derived from this one (never the sealing
  // key): a fingerprint of a secret that tells versions apart without letting whoever sees
  // it test guesses of a weak secret offline.
  std::string Mac(std::string_view data) const;

 private:
  explicit SecretKey(std::string_view key);

  std::string seal_key_;  // AES-256-GCM key
  std::string mac_key_;   // HMAC-SHA256 key
};

}  // namespace warren
