#include "tests/unit/integration_test_peers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace warren::integrations::test {

long PeerIo::Read(char* buf, size_t len) {
  if (ssl_ != nullptr) {
    int n = SSL_read(ssl_, buf, static_cast<int>(len));
    return n > 0 ? n : (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1);
  }
  return ::recv(fd_, buf, len, 0);
}

bool PeerIo::WriteAll(std::string_view bytes) {
  while (!bytes.empty()) {
    long n = ssl_ != nullptr ? SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()))
                             : ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool PeerIo::ReadHead(std::string* head, std::string* rest) {
  std::string buf;
  char chunk[4096];
  for (;;) {
    size_t end = buf.find("\r\n\r\n");
    if (end != std::string::npos) {
      *head = buf.substr(0, end + 4);
      *rest = buf.substr(end + 4);
      return true;
    }
    long n = Read(chunk, sizeof chunk);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
}

Upstream::Upstream(Handler handler, SSL_CTX* tls, int sndbuf)
    : handler_(std::move(handler)), tls_(tls), sndbuf_(sndbuf) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

Upstream::~Upstream() {
  stop_.store(true);
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

std::vector<std::string> Upstream::heads() {
  std::lock_guard<std::mutex> lock(mu_);
  return heads_;
}

void Upstream::Accept() {
  while (!stop_.load()) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stop_.load()) return;
      continue;
    }
    if (sndbuf_ > 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf_, sizeof sndbuf_);
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, fd] {
      SSL* ssl = nullptr;
      if (tls_ != nullptr) {
        ssl = SSL_new(tls_);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) {
          SSL_free(ssl);
          ::close(fd);
          return;
        }
      }
      PeerIo io(fd, ssl);
      std::string head, rest;
      if (io.ReadHead(&head, &rest)) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          heads_.push_back(head);
        }
        handler_(io, head, std::move(rest));
      }
      if (ssl != nullptr) {
        SSL_shutdown(ssl);
        SSL_free(ssl);
      }
      ::close(fd);
    });
  }
}

Upstream::Handler AnswerBearer(std::string secret, std::string extra_headers) {
  return [secret = std::move(secret), extra_headers = std::move(extra_headers)](
             PeerIo& io, const std::string& head, std::string) {
    std::string body = head.find("Authorization: Bearer " + secret + "\r\n") != std::string::npos
                           ? "auth=ok"
                           : "auth=bad";
    io.WriteAll("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                extra_headers + "\r\n" + body);
  };
}

void TestLookup::Set(const std::string& vm, const std::string& name,
                     Result<IntegrationRoute> route) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.insert_or_assign({vm, name}, std::move(route));
}

Result<IntegrationRoute> TestLookup::Find(std::string_view vm_id, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = routes_.find({std::string(vm_id), std::string(name)});
  if (it == routes_.end()) return NotFound("no integration named " + std::string(name));
  return it->second;
}

std::vector<std::string> TestLookup::NamesFor(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, route] : routes_) {
    if (key.first == vm_id && route.ok()) out.push_back(key.second);
  }
  return out;
}

bool TestLookup::WantsEndpoint(std::string_view) { return wants.load(); }

std::string TestLookup::OwnerOf(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(vm_id);
  return it == owners_.end() ? "ann" : it->second;
}

void TestLookup::SetOwner(const std::string& vm, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  owners_[vm] = owner;
}

std::string ReadUntilEof(int fd, int timeout_ms) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return out;
    long n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

bool WriteAllFd(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    long n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::pair<int, std::string> RunShell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return {::pclose(p), out};
}

std::string BodyOf(const std::string& response) {
  size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

}  // namespace warren::integrations::test
