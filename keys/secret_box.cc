#include "keys/secret_box.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <memory>

#include "keys/base64.h"
#include "keys/secret_file.h"

namespace warren {
namespace {

constexpr SecretFileKind kIntegrationKeyFile = {
    "integration key",
    "replacing every integration's secret at its provider: whoever read the file can decrypt "
    "them"};
constexpr std::string_view kSealedPrefix = "s1.";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), Bytes(data), data.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

Status NotSealed() {
  return Internal(
      "a sealed secret in the store does not open with DATA/integration.key "
      "(altered, or sealed under another key)");
}

// Sets the context up for AES-256-GCM with `key` and `nonce`, and feeds `aad`.
bool StartGcm(EVP_CIPHER_CTX* ctx, bool encrypt, std::string_view key, std::string_view nonce,
              std::string_view aad) {
  auto init = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  auto update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate;
  int len = 0;
  return init(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce.size()),
                             nullptr) == 1 &&
         init(ctx, nullptr, nullptr, Bytes(key), Bytes(nonce)) == 1 &&
         update(ctx, nullptr, &len, Bytes(aad), static_cast<int>(aad.size())) == 1;
}

}  // namespace

SecretKey::SecretKey(std::string_view key)
    // Two keys derived from the one in the file, so sealing and fingerprints never share one.
    : seal_key_(Hmac(key, "warren integration seal v1")),
      mac_key_(Hmac(key, "warren integration fingerprint v1")) {}

SecretKey::~SecretKey() {
  OPENSSL_cleanse(seal_key_.data(), seal_key_.size());
  OPENSSL_cleanse(mac_key_.data(), mac_key_.size());
}

Result<SecretKey> SecretKey::LoadOrCreate(const std::string& path) {
  WARREN_ASSIGN_OR_RETURN(std::string key,
                          LoadOrCreateSecretFile(path, kKeyBytes, kIntegrationKeyFile));
  SecretKey out(key);
  OPENSSL_cleanse(key.data(), key.size());
  return out;
}

Result<SecretKey> SecretKey::FromBytes(std::string_view key) {
  if (key.size() != kKeyBytes) {
    return InvalidArgument("a secret key has exactly " + std::to_string(kKeyBytes) + " bytes");
  }
  return SecretKey(key);
}

Result<std::string> SecretKey::Seal(std::string_view plaintext, std::string_view context) const {
  if (plaintext.size() > (size_t{1} << 20)) return InvalidArgument("a secret is at most 1 MiB");
  WARREN_ASSIGN_OR_RETURN(std::string nonce, RandomBytes(kNonceBytes));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string box = nonce;
  box.resize(kNonceBytes + plaintext.size() + kTagBytes);
  auto* out = reinterpret_cast<unsigned char*>(box.data()) + kNonceBytes;
  int len = 0;
  int tail = 0;
  if (ctx == nullptr || !StartGcm(ctx.get(), /*encrypt=*/true, seal_key_, nonce, context) ||
      EVP_EncryptUpdate(ctx.get(), out, &len, Bytes(plaintext),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), out + len, &tail) != 1 ||
      static_cast<size_t>(len + tail) != plaintext.size() ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, out + plaintext.size()) !=
          1) {
    OPENSSL_cleanse(box.data(), box.size());
    return Internal("sealing a secret failed (OpenSSL)");
  }
  return std::string(kSealedPrefix) + Base64Encode(box);
}

Result<std::string> SecretKey::Open(std::string_view sealed, std::string_view context) const {
  if (!sealed.starts_with(kSealedPrefix)) return NotSealed();
  Result<std::string> box = Base64Decode(sealed.substr(kSealedPrefix.size()));
  if (!box.ok() || box->size() < kNonceBytes + kTagBytes) return NotSealed();
  const std::string_view all = *box;
  const std::string_view nonce = all.substr(0, kNonceBytes);
  const std::string_view body = all.substr(kNonceBytes, all.size() - kNonceBytes - kTagBytes);
  std::string tag(all.substr(all.size() - kTagBytes));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string plain(body.size(), '\0');
  int len = 0;
  int tail = 0;
  if (ctx == nullptr || !StartGcm(ctx.get(), /*encrypt=*/false, seal_key_, nonce, context) ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len,
                        Bytes(body), static_cast<int>(body.size())) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1 ||
      // The tag is checked here: nothing decrypted is returned unless it matches.
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &tail) !=
          1) {
    OPENSSL_cleanse(plain.data(), plain.size());
    return NotSealed();
  }
  plain.resize(static_cast<size_t>(len + tail));
  return plain;
}

std::string SecretKey::Mac(std::string_view data) const { return Hmac(mac_key_, data); }

}  // namespace warren
