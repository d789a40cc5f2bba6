// TlsStream: TLS over another ByteStream (shared, so whoever cancels it may hold it too) (a VM's
// forwarded channel, or an upstream socket), through a BIO of our own so the same code serves both.
// The server side terminates https:// with the proxy's certificate; the client side
// verifies the upstream (system CAs, or a given CA file) and sends SNI. Threads: as ByteStream —
// one worker thread, or one reading while another writes (the SSL object is behind a lock and
// a read never waits while holding it: it waits on the stream underneath, WaitReadable, with
// the lock free); Cancel from any thread (it cancels the stream underneath).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>

#include "lobby/base/status.h"
#include "lobby/base/unique_handle.h"
#include "lobby/relay/byte_stream.h"

namespace warren::relay {

using SslCtxPtr = std::shared_ptr<SSL_CTX>;
using SslPtr = UniqueHandle<SSL*, SSL_free>;

// A client context that verifies peers against `ca_file` (PEM), or the system's CAs when
// empty. Internal when it cannot be made.
Result<SslCtxPtr> MakeClientContext(const std::string& ca_file);
// A server context with the certificate chain in `cert_file` (PEM, the leaf first) and its
// private key in `key_file`. InvalidArgument, naming the file, when either cannot be read
// or they do not match.
Result<SslCtxPtr> LoadServerContext(const std::string& cert_file, const std::string& key_file);

class TlsStream final : public ByteStream {
 public:
  // Handshakes as the server (with `ctx`'s certificate) by `deadline`.
  static Result<std::unique_ptr<TlsStream>> Accept(const SslCtxPtr& ctx,
                                                   std::shared_ptr<ByteStream> inner,
                                                   Clock::time_point deadline);
  // Handshakes as a client of `host` (SNI and certificate name check) by `deadline`.
  static Result<std::unique_ptr<TlsStream>> Connect(const SslCtxPtr& ctx,
                                                    std::shared_ptr<ByteStream> inner,
                                                    const std::string& host,
                                                    Clock::time_point deadline);
  ~TlsStream() override;

  Result<size_t> Read(char* buf, size_t len, Clock::time_point deadline) override;
  Status Write(std::string_view bytes, Clock::time_point deadline) override;
  Status WaitReadable(Clock::time_point deadline) override;
  void CloseWrite() override;  // sends close_notify, then closes the stream underneath
  void Cancel() override { inner_->Cancel(); }

  // What the BIO needs to reach the stream underneath (public for the BIO's callbacks).
  struct Io {
    ByteStream* inner = nullptr;
    Clock::time_point read_deadline, write_deadline;
    // A read that timed out is "retry later" to OpenSSL (SSL_ERROR_WANT_READ), not a
    // failure: how Read polls the stream underneath without waiting under the lock.
    bool read_timeout_retries = false;
    Status error;
  };

 private:
  TlsStream(SslCtxPtr ctx, std::shared_ptr<ByteStream> inner);
  // As the server when `host` is null, else as a client of *host.
  Status Handshake(const std::string* host, Clock::time_point deadline);
  // The failure of an SSL call that returned `rc`.
  Status Failure(int rc, std::string_view what);

  SslCtxPtr ctx_;
  std::shared_ptr<ByteStream> inner_;
  std::mutex mu_;  // ssl_ and io_, once the handshake is done
  Io io_;
  SslPtr ssl_;
};

}  // namespace warren::relay
