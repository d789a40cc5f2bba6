#include "lobby/integrations/integration_ca.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "lobby/base/file_write.h"

namespace warren::integrations {

namespace {

using PkeyPtr = UniqueHandle<EVP_PKEY*, EVP_PKEY_free>;
using X509Ptr = UniqueHandle<X509*, X509_free>;
using BioPtr = UniqueHandle<BIO*, BIO_free_all>;

constexpr long kCaDays = 3650;
constexpr long kLeafDays = 825;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Internal("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return Internal("cannot make an EC key");
  return key;
}

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `cn`, valid `days`, signed by issuer/issuer_key (itself
// when issuer is null).
Result<X509Ptr> MakeCert(EVP_PKEY* key, const std::string& cn, long days, X509* issuer,
                         EVP_PKEY* issuer_key, bool ca, const std::string& san) {
  X509Ptr cert(X509_new());
  if (cert == nullptr) return Internal("cannot make a certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Internal("no randomness for a serial");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  bool ok = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(bn);
  ok = ok && X509_set_version(cert.get(), 2) == 1 &&
       X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr &&
       X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600) != nullptr &&
       X509_set_pubkey(cert.get(), key) == 1;
  X509_NAME* name = X509_get_subject_name(cert.get());
  ok = ok &&
       X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                  reinterpret_cast<const unsigned char*>("warren"), -1, -1,
                                  0) == 1 &&
       X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                  reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                  0) == 1;
  X509* signer = issuer == nullptr ? cert.get() : issuer;
  ok = ok && X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) == 1;
  ok = ok && AddExt(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) {
    ok = ok && AddExt(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  }
  if (ca) {
    ok = ok && AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
         AddExt(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    ok = ok && AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
         AddExt(cert.get(), signer, NID_key_usage, "critical,digitalSignature") &&
         AddExt(cert.get(), signer, NID_ext_key_usage, "serverAuth") &&
         AddExt(cert.get(), signer, NID_subject_alt_name, san.c_str());
  }
  ok = ok && X509_sign(cert.get(), issuer_key == nullptr ? key : issuer_key, EVP_sha256()) > 0;
  if (!ok) return Internal("cannot build the certificate for " + cn);
  return cert;
}

Status CreateCa(const std::string& key_path, const std::string& cert_path) {
  WARREN_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  WARREN_ASSIGN_OR_RETURN(X509Ptr cert, MakeCert(key.get(), "warren integrations CA", kCaDays,
                                                 nullptr, nullptr, /*ca=*/true, ""));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  if (key_bio == nullptr || cert_bio == nullptr ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1 ||
      PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1) {
    return Internal("cannot encode the integrations CA");
  }
  // The key first: a crash in between leaves a key without a certificate, which the next
  // start refuses rather than silently replacing.
  WARREN_RETURN_IF_ERROR(WriteFileAtomic(key_path, BioText(key_bio.get()), 0600));
  return WriteFileAtomic(cert_path, BioText(cert_bio.get()), 0644);
}

}  // namespace

Result<IntegrationCa> LoadOrCreateIntegrationCa(const std::string& data_dir,
                                                const std::string& domain) {
  std::string key_path = data_dir + "/integrations-ca.key";
  std::string cert_path = data_dir + "/integrations-ca.crt";
  bool have_key = Exists(key_path), have_cert = Exists(cert_path);
  if (have_key != have_cert) {
    return Internal(
        "only one of " + key_path + " and " + cert_path +
        " exists: restore the other or remove both (guests must then trust the new CA)");
  }
  if (!have_key) WARREN_RETURN_IF_ERROR(CreateCa(key_path, cert_path));
  ::chmod(key_path.c_str(), 0600);
  WARREN_ASSIGN_OR_RETURN(std::string key_pem, ReadFile(key_path));
  WARREN_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(cert_path));
  BioPtr kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  BioPtr cb(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  PkeyPtr ca_key(kb == nullptr ? nullptr
                               : PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  X509Ptr ca_cert(cb == nullptr ? nullptr : PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  if (ca_key == nullptr || ca_cert == nullptr) {
    return Internal("cannot parse the integrations CA in " + data_dir);
  }
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    return Internal("the integrations CA key and certificate in " + data_dir + " do not match");
  }
  WARREN_ASSIGN_OR_RETURN(PkeyPtr leaf_key, NewKey());
  WARREN_ASSIGN_OR_RETURN(
      X509Ptr leaf, MakeCert(leaf_key.get(), "*." + domain, kLeafDays, ca_cert.get(), ca_key.get(),
                             /*ca=*/false, "DNS:*." + domain + ",DNS:" + domain));
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr || SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(ctx.get(), leaf.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), leaf_key.get()) != 1 ||
      SSL_CTX_add1_chain_cert(ctx.get(), ca_cert.get()) != 1) {
    return Internal("cannot set up the integrations TLS context");
  }
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  return IntegrationCa{cert_pem, std::move(ctx)};
}

}  // namespace warren::integrations
