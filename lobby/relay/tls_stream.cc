#include "lobby/relay/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <climits>
#include <utility>

namespace warren::relay {

namespace {

TlsStream::Io* IoOf(BIO* b) { return static_cast<TlsStream::Io*>(BIO_get_data(b)); }

int BioWrite(BIO* b, const char* data, int len) {
  TlsStream::Io* io = IoOf(b);
  BIO_clear_retry_flags(b);
  Status st =
      io->inner->Write(std::string_view(data, static_cast<size_t>(len)), io->write_deadline);
  if (!st.ok()) {
    io->error = st;
    return -1;
  }
  return len;
}

int BioRead(BIO* b, char* buf, int len) {
  TlsStream::Io* io = IoOf(b);
  BIO_clear_retry_flags(b);
  Result<size_t> n = io->inner->Read(buf, static_cast<size_t>(len), io->read_deadline);
  if (!n.ok() && io->read_timeout_retries && n.status().code() == Code::kTimeout) {
    BIO_set_retry_read(b);
    return -1;
  }
  if (!n.ok()) {
    io->error = n.status();
    return -1;
  }
  return static_cast<int>(*n);  // 0: the peer's EOF
}

long BioCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int BioCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

// One BIO method for every stream, made once (thread-safe static initialisation).
BIO_METHOD* StreamMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "warren-stream");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    return m;
  }();
  return method;
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "connection closed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

}  // namespace

Result<SslCtxPtr> MakeClientContext(const std::string& ca_file) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr) return Internal("cannot make a TLS client context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  int ok = ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get())
                           : SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr);
  if (ok != 1) return Internal("cannot load the CA certificates for upstream TLS");
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  return ctx;
}

Result<SslCtxPtr> LoadServerContext(const std::string& cert_file, const std::string& key_file) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr) return Internal("cannot make a TLS server context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1) {
    return InvalidArgument("cannot read the TLS certificate " + cert_file + ": " + OpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgument("cannot read the TLS key " + key_file + ": " + OpenSslError());
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("the TLS key " + key_file + " does not match the certificate " +
                           cert_file);
  }
  return ctx;
}

TlsStream::TlsStream(SslCtxPtr ctx, std::shared_ptr<ByteStream> inner)
    : ctx_(std::move(ctx)), inner_(std::move(inner)) {
  io_.inner = inner_.get();
}

TlsStream::~TlsStream() = default;

Status TlsStream::Failure(int rc, std::string_view what) {
  int err = SSL_get_error(ssl_.get(), rc);
  if (!io_.error.ok()) {
    Status st = io_.error;
    io_.error = Status::Ok();
    ERR_clear_error();
    return st;
  }
  if (err == SSL_ERROR_ZERO_RETURN) return Unavailable(std::string(what) + ": connection closed");
  long verify = SSL_get_verify_result(ssl_.get());
  if (verify != X509_V_OK) {
    ERR_clear_error();
    return Unavailable(std::string(what) + ": certificate not trusted (" +
                       X509_verify_cert_error_string(verify) + ")");
  }
  return Unavailable(std::string(what) + ": " + OpenSslError());
}

Status TlsStream::Handshake(const std::string* host, Clock::time_point deadline) {
  ssl_.reset(SSL_new(ctx_.get()));
  BIO* bio = BIO_new(StreamMethod());
  if (ssl_ == nullptr || bio == nullptr) {
    if (bio != nullptr) BIO_free(bio);
    return Internal("cannot make a TLS session");
  }
  BIO_set_data(bio, &io_);
  SSL_set_bio(ssl_.get(), bio, bio);
  if (host != nullptr) {
    // SNI, and the name the target's certificate must carry.
    SSL_set_tlsext_host_name(ssl_.get(), host->c_str());
    if (SSL_set1_host(ssl_.get(), host->c_str()) != 1) {
      return Internal("cannot set the TLS host name to check");
    }
  }
  io_.read_deadline = io_.write_deadline = deadline;
  ERR_clear_error();
  int rc = host == nullptr ? SSL_accept(ssl_.get()) : SSL_connect(ssl_.get());
  if (rc != 1)
    return Failure(rc, host == nullptr ? "TLS handshake" : "TLS handshake with the target");
  return Status::Ok();
}

Result<std::unique_ptr<TlsStream>> TlsStream::Accept(const SslCtxPtr& ctx,
                                                     std::shared_ptr<ByteStream> inner,
                                                     Clock::time_point deadline) {
  std::unique_ptr<TlsStream> s(new TlsStream(ctx, std::move(inner)));
  WARREN_RETURN_IF_ERROR(s->Handshake(nullptr, deadline));
  return s;
}

Result<std::unique_ptr<TlsStream>> TlsStream::Connect(const SslCtxPtr& ctx,
                                                      std::shared_ptr<ByteStream> inner,
                                                      const std::string& host,
                                                      Clock::time_point deadline) {
  std::unique_ptr<TlsStream> s(new TlsStream(ctx, std::move(inner)));
  WARREN_RETURN_IF_ERROR(s->Handshake(&host, deadline));
  return s;
}

Result<size_t> TlsStream::Read(char* buf, size_t len, Clock::time_point deadline) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Only what is there already is read under the lock; a write it needs (a TLS 1.3
      // key update) may wait until the caller's deadline.
      io_.read_deadline = Clock::now();
      io_.write_deadline = deadline;
      io_.read_timeout_retries = true;
      ERR_clear_error();
      int n = SSL_read(ssl_.get(), buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
      io_.read_timeout_retries = false;
      if (n > 0) return static_cast<size_t>(n);
      int err = SSL_get_error(ssl_.get(), n);
      if (err != SSL_ERROR_WANT_READ) {
        if (io_.error.ok() && (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL ||
                               (err == SSL_ERROR_SSL && ERR_peek_error() == 0))) {
          ERR_clear_error();
          return size_t{0};  // close_notify, or a plain EOF (tolerated: many peers skip it)
        }
        return Failure(n, "TLS read");
      }
      ERR_clear_error();
    }
    if (Clock::now() >= deadline) return Timeout("the peer was idle too long");
    WARREN_RETURN_IF_ERROR(inner_->WaitReadable(deadline));
  }
}

Status TlsStream::WaitReadable(Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (SSL_pending(ssl_.get()) > 0) return Status::Ok();
  }
  // Bytes underneath may be only part of a record: a Read then finds nothing yet and
  // waits again, which is what a caller of WaitReadable would do anyway.
  return inner_->WaitReadable(deadline);
}

Status TlsStream::Write(std::string_view bytes, Clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  io_.read_deadline = io_.write_deadline = deadline;
  while (!bytes.empty()) {
    ERR_clear_error();
    int n = SSL_write(ssl_.get(), bytes.data(),
                      static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
    if (n <= 0) return Failure(n, "TLS write");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

void TlsStream::CloseWrite() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    io_.write_deadline = Clock::now() + std::chrono::seconds(5);
    ERR_clear_error();
    SSL_shutdown(ssl_.get());
    ERR_clear_error();
  }
  // Then EOF underneath: a VM's channel delivers what is queued (the close_notify included)
  // only when its input was closed before the channel goes.
  inner_->CloseWrite();
}

}  // namespace warren::relay
