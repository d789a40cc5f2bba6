#include "lobby/web/web_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "lobby/base/log.h"
#include "lobby/relay/http_relay.h"
#include "lobby/web/web_conn.h"
#include "lobby/web/web_pages.h"

namespace warren::web {

namespace {

using Clock = relay::ByteStream::Clock;
constexpr auto kAnswerWait = std::chrono::seconds(5);

// "HOST:PORT" or "[V6]:PORT" → host and port.
Result<std::pair<std::string, std::string>> SplitListen(const std::string& listen) {
  std::string host, port;
  if (!listen.empty() && listen.front() == '[') {
    size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return InvalidArgument("--web: expected HOST:PORT or [V6]:PORT, got " + listen);
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    size_t colon = listen.rfind(':');
    if (colon == std::string::npos) {
      return InvalidArgument("--web: expected HOST:PORT, got " + listen);
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) > 65535) {
    return InvalidArgument("--web: expected HOST:PORT, got " + listen);
  }
  return std::make_pair(host, port);
}

std::string PeerAddress(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      ::inet_ntop(AF_INET, &a6.s6_addr[12], buf, sizeof buf);
    } else {
      ::inet_ntop(AF_INET6, &a6, buf, sizeof buf);
    }
  }
  return buf;
}

}  // namespace

WebServer::WebServer(WebServerOptions options, WebGate* gate)
    : options_(std::move(options)), gate_(gate) {}

WebServer::~WebServer() { Stop(); }

relay::SslCtxPtr WebServer::Tls() const {
  std::lock_guard<std::mutex> lock(tls_mu_);
  return tls_;
}

Status WebServer::ReloadTls(const std::string& cert_file, const std::string& key_file) {
  if (!https()) return InvalidArgument("the web listener serves plain HTTP: no TLS to reload");
  if (cert_file.empty() || key_file.empty()) {
    return InvalidArgument("HTTPS needs both --tls-cert and --tls-key");
  }
  WARREN_ASSIGN_OR_RETURN(relay::SslCtxPtr ctx, relay::LoadServerContext(cert_file, key_file));
  std::lock_guard<std::mutex> lock(tls_mu_);
  tls_ = std::move(ctx);
  return Status::Ok();
}

Status WebServer::Start() {
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    return InvalidArgument("HTTPS needs both --tls-cert and --tls-key");
  }
  if (!options_.tls_cert_file.empty()) {
    WARREN_ASSIGN_OR_RETURN(relay::SslCtxPtr ctx, relay::LoadServerContext(options_.tls_cert_file,
                                                                           options_.tls_key_file));
    std::lock_guard<std::mutex> lock(tls_mu_);
    tls_ = std::move(ctx);
  }
  if (!waker_.ok()) return Internal("cannot make an eventfd for the web listener");
  WARREN_ASSIGN_OR_RETURN(auto hp, SplitListen(options_.listen));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* raw = nullptr;
  int rc = ::getaddrinfo(hp.first.c_str(), hp.second.c_str(), &hints, &raw);
  if (rc != 0) {
    return InvalidArgument("--web " + options_.listen + ": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(raw, &::freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 256) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                           : reinterpret_cast<sockaddr_in&>(ss).sin_port);
    listen_fd_ = fd;
    break;
  }
  if (listen_fd_ < 0) return Unavailable("cannot listen on " + options_.listen + ": " + last);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  // The harness reads the bound port from this line: "web listening on HOST:PORT".
  std::string host = hp.first.find(':') != std::string::npos ? "[" + hp.first + "]" : hp.first;
  LogInfo("web listening on " + host + ":" + std::to_string(port_) +
          (https() ? " (https)" : " (http)") + " domain=" + options_.domain);
  return Status::Ok();
}

void WebServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  waker_.Wake();
  if (acceptor_.joinable()) acceptor_.join();
  std::unique_lock<std::mutex> lock(mu_);
  for (auto& [id, c] : conns_) Cut(*c);
  cv_.wait(lock, [&] { return workers_ == 0; });
  lock.unlock();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

int WebServer::Revalidate() {
  struct Check {
    uint64_t id;
    WebSite site;
    WebCredentials creds;
  };
  std::vector<Check> checks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, c] : conns_) {
      if (c->up != nullptr && !c->cancelled) checks.push_back({id, c->site, c->creds});
    }
  }
  std::vector<uint64_t> refused;
  for (const Check& check : checks) {
    if (!gate_->Admit(check.site, check.creds).ok()) refused.push_back(check.id);
  }
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (uint64_t id : refused) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->cancelled || it->second->up == nullptr) continue;
    Cut(*it->second);
    ++n;
  }
  return n;
}

int WebServer::RevokeVm(std::string_view vm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (auto& [id, c] : conns_) {
    if (c->cancelled || c->up == nullptr || c->site.vm_id != vm_id) continue;
    Cut(*c);
    ++n;
  }
  return n;
}

void WebServer::Cut(Conn& c) {
  c.cancelled = true;
  c.down_base->Cancel();
  if (c.up != nullptr) c.up->Cancel();
}

int WebServer::active() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(conns_.size());
}

void WebServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {waker_.fd(), POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (rc < 0) continue;
    if (fds[1].revents != 0) waker_.Drain();
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: pause rather than spin on a connection we cannot take.
        LogWarn("web accept: " + std::string(std::strerror(errno)));
        waker_.WaitFor(100);
      }
      continue;
    }
    Admit(fd, PeerAddress(ss));
  }
}

void WebServer::Admit(int fd, std::string peer) {
  auto stream = std::make_unique<relay::FdStream>(fd);
  auto conn = std::make_shared<Conn>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    int& mine = per_source_[peer];
    if (static_cast<int>(conns_.size()) >= options_.max_connections ||
        mine >= options_.max_connections_per_source) {
      if (mine == 0) per_source_.erase(peer);
      if (rejecting_ >= options_.max_rejecting) return;  // dropped: closes the socket
      ++rejecting_;
      ++workers_;
      std::thread([this, s = std::move(stream), peer = std::move(peer)]() mutable {
        Reject(std::move(s), std::move(peer));
      }).detach();
      return;
    }
    ++mine;
    conn->id = next_id_++;
    conn->peer = std::move(peer);
    conn->https = https();
    conn->down_base = std::move(stream);
    conn->down = conn->down_base;
    conns_.emplace(conn->id, conn);
    ++workers_;
  }
  std::thread([this, conn]() mutable { Run(std::move(conn)); }).detach();
}

void WebServer::Reject(std::unique_ptr<relay::FdStream> stream, std::string peer) {
  auto deadline = Clock::now() + kAnswerWait;
  std::shared_ptr<relay::ByteStream> down = std::move(stream);
  if (relay::SslCtxPtr ctx = Tls()) {
    Result<std::unique_ptr<relay::TlsStream>> tls = relay::TlsStream::Accept(ctx, down, deadline);
    down = tls.ok() ? std::shared_ptr<relay::ByteStream>(std::move(tls.value())) : nullptr;
  }
  if (down != nullptr) {
    // The request is read first (bounded): a socket closed with unread bytes resets the
    // answer away.
    std::string rest;
    (void)relay::ReadHead(*down, options_.max_header_bytes, deadline, &rest);
    (void)down->Write(
        Render(MessagePage(503, "Busy", "too many connections; try again shortly", Wants::kHtml)),
        deadline);
    down->CloseWrite();
  }
  LogInfo("web source=" + LogQuote(peer) + " status=503 reason=limit");
  down.reset();
  std::lock_guard<std::mutex> lock(mu_);
  --rejecting_;
  --workers_;
  cv_.notify_all();
}

bool WebServer::CountSite(Conn& c) {
  std::lock_guard<std::mutex> lock(mu_);
  int& n = per_site_[c.site.vm_id];
  if (n >= options_.max_connections_per_site) {
    if (n == 0) per_site_.erase(c.site.vm_id);
    return false;
  }
  ++n;
  c.site_counted = c.site.vm_id;
  return true;
}

void WebServer::ReleaseSite(Conn& c) {
  if (c.site_counted.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto s = per_site_.find(c.site_counted);
  if (s != per_site_.end() && --s->second <= 0) per_site_.erase(s);
  c.site_counted.clear();
}

void WebServer::LogRequest(const Conn& c, Clock::time_point t0) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  if (!c.req.method.empty()) {
    LogInfo("web host=" + LogQuote(c.host.host.empty() ? "-" : c.host.host) +
            " vm=" + LogQuote(c.site.vm_name.empty() ? "-" : c.site.vm_name) +
            " visitor=" + LogQuote(c.visitor) + " method=" + LogQuote(c.req.method) +
            " status=" + std::to_string(c.status) + " up_bytes=" + std::to_string(c.up_bytes) +
            " down_bytes=" + std::to_string(c.down_bytes) + " dur_ms=" + std::to_string(ms) +
            (c.error.empty() ? "" : " error=" + LogQuote(c.error)));
  } else if (!c.error.empty()) {
    LogDebug("web source=" + LogQuote(c.peer) + " error=" + LogQuote(c.error));
  }
}

void WebServer::Run(std::shared_ptr<Conn> conn) {
  Handle(*conn);
  ReleaseSite(*conn);
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.erase(conn->id);
    auto it = per_source_.find(conn->peer);
    if (it != per_source_.end() && --it->second <= 0) per_source_.erase(it);
  }
  conn->up.reset();
  conn->down.reset();
  conn->down_base.reset();
  conn.reset();
  std::lock_guard<std::mutex> lock(mu_);
  --workers_;
  cv_.notify_all();
}

}  // namespace warren::web
