// TlsStream: TLS over another ByteStream (shared, so whoever cancels it may hold it too) (a VM's
// forwarded channel, or an upstream socket), through a BIO of our own so the same code serves both.
// The server side terminates https:// with the proxy's certificate; the client side
// verifies the upstream (system CAs, or a given CA file) and sends SNI. Threads: as ByteStream —
// one worker thread, Cancel from any thread (it cancels the stream underneath).
#pragma once

#include <openssl/ssl.h>

#include <memory>
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
  void CloseWrite() override;  // sends close_notify, then closes the stream underneath
  void Cancel() override { inner_->Cancel(); }

  // What the BIO needs to reach the stream underneath (public for the BIO's callbacks).
  struct Io {
    ByteStream* inner = nullptr;
    Clock::time_point deadline;
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
  Io io_;
  SslPtr ssl_;
};

}  // namespace warren::relay
