// Test peers for the integrations proxy: a loopback upstream of the test's own (plain or
// TLS, one thread per connection, the handler's choice of answer), a lookup whose routes
// the test sets, and small socket helpers. Thread-safe where the proxy calls them.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lobby/integrations/integration_lookup.h"

namespace warren::integrations::test {

// One accepted upstream connection: plain or TLS, blocking.
class PeerIo {
 public:
  PeerIo(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  // > 0 bytes, 0 at EOF, < 0 on error.
  long Read(char* buf, size_t len);
  bool WriteAll(std::string_view bytes);
  // Reads until the head's blank line; the bytes after it go to *rest.
  bool ReadHead(std::string* head, std::string* rest);
  int fd() const { return fd_; }

 private:
  int fd_;
  SSL* ssl_;
};

class Upstream {
 public:
  // Called per connection with the request head and the bytes read after it.
  using Handler = std::function<void(PeerIo& io, const std::string& head, std::string rest)>;
  // Listens on 127.0.0.1:0; with `tls`, speaks TLS with that server context.
  explicit Upstream(Handler handler, SSL_CTX* tls = nullptr, int sndbuf = 0);
  ~Upstream();
  uint16_t port() const { return port_; }
  std::vector<std::string> heads();

 private:
  void Accept();
  Handler handler_;
  SSL_CTX* tls_;
  int sndbuf_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> heads_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

// A handler answering "auth=ok" when `secret` arrived as a bearer, else "auth=bad" (so the
// secret itself never comes back to the VM's side), with `extra_headers` ("K: V\r\n"...)
// in the answer.
Upstream::Handler AnswerBearer(std::string secret, std::string extra_headers = "");

class TestLookup final : public IntegrationLookup {
 public:
  void Set(const std::string& vm, const std::string& name, Result<IntegrationRoute> route);
  Result<IntegrationRoute> Find(std::string_view vm_id, std::string_view name) override;
  std::vector<std::string> NamesFor(std::string_view vm_id) override;
  bool WantsEndpoint(std::string_view vm_id) override;
  // The owner of every VM: "ann", unless `owners` names another.
  std::string OwnerOf(std::string_view vm_id) override;
  void SetOwner(const std::string& vm, const std::string& owner);
  std::atomic<bool> wants{true};

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Result<IntegrationRoute>> routes_;
  std::map<std::string, std::string, std::less<>> owners_;
};

// Reads from `fd` until EOF or `timeout_ms` without a byte.
std::string ReadUntilEof(int fd, int timeout_ms = 10000);
bool WriteAllFd(int fd, std::string_view bytes);
// Runs `cmd` under /bin/sh: its exit status (as pclose gives it) and output (2>&1).
std::pair<int, std::string> RunShell(const std::string& cmd);
// The answer's body: what follows the head.
std::string BodyOf(const std::string& response);

}  // namespace warren::integrations::test
