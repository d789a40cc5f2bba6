#include "lobby/ssh/ssh_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "lobby/base/event_waker.h"
#include "lobby/base/log.h"
#include "lobby/ssh/host_key.h"
#include "lobby/ssh/libssh_handles.h"
#include "lobby/ssh/ssh_connection.h"

namespace warren::ssh {
namespace {

// Modern algorithms only (what `ssh-audit` passes): no SHA-1, no CBC, no NIST-curve or
// small-group key exchange, no encrypt-and-MAC, no compression. Every current OpenSSH,
// PuTTY, dropbear and paramiko negotiates one of these.
constexpr char kKeyExchange[] =
    "curve25519-sha256,curve25519-sha256@libssh.org,"
    "diffie-hellman-group18-sha512,diffie-hellman-group16-sha512";
constexpr char kCiphers[] =
    "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,"
    "aes256-ctr,aes192-ctr,aes128-ctr";
constexpr char kMacs[] = "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com";
constexpr char kHostKeyAlgorithms[] = "ssh-ed25519";
constexpr char kUserKeyAlgorithms[] =
    "ssh-ed25519,sk-ssh-ed25519@openssh.com,"
    "ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,"
    "sk-ecdsa-sha2-nistp256@openssh.com,rsa-sha2-512,rsa-sha2-256";
constexpr int kRsaMinBits = 2048;
constexpr char kCompression[] = "none";
// "SSH-2.0-warren": the identification string names the product, not the library version.
constexpr char kIdentification[] = "warren";

// The peer's address alone: the "source" the per-address limits count.
std::string HostOf(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
  }
  return host;
}

std::string FormatAddress(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    return HostOf(ss) + ":" +
           std::to_string(ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    return "[" + HostOf(ss) +
           "]:" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port));
  }
  return "?";
}

Status SetBindOption(ssh_bind bind, ssh_bind_options_e option, const void* value,
                     const char* what) {
  if (ssh_bind_options_set(bind, option, value) != SSH_OK) {
    return Internal(std::string("libssh rejected ") + what + ": " + ssh_get_error(bind));
  }
  return Status::Ok();
}

// Under a flood one log line per refused connection would be a flood of its own: at most
// one line every 5 s, each saying how many were left out since the one before
// (more_unlogged=N). Listener thread only.
class ThrottledLog {
 public:
  explicit ThrottledLog(std::string what) : what_(std::move(what)) {}

  void Note(const std::string& line) {
    auto now = std::chrono::steady_clock::now();
    if (logged_once_ && now - last_ < kEvery) {
      ++left_out_;
      return;
    }
    LogWarn(line + LeftOut());
    logged_once_ = true;
    last_ = now;
  }
  // Says how many were left out once the flood is over.
  void Flush() {
    if (left_out_ > 0 && std::chrono::steady_clock::now() - last_ >= kEvery) {
      LogWarn("ssh " + what_ + LeftOut());
      last_ = std::chrono::steady_clock::now();
    }
  }

 private:
  static constexpr std::chrono::seconds kEvery{5};
  std::string LeftOut() {
    if (left_out_ == 0) return "";
    std::string text = " more_unlogged=" + std::to_string(left_out_);
    left_out_ = 0;
    return text;
  }

  std::string what_;
  bool logged_once_ = false;
  std::chrono::steady_clock::time_point last_;
  long left_out_ = 0;
};

}  // namespace

class SshServer::State {
 public:
  State(SshServerOptions opts, Interpreter& interpreter, Store& store, const Clock& clock)
      : options(std::move(opts)), admission_(options.limits) {
    config.interpreter = &interpreter;
    config.store = &store;
    config.clock = &clock;
    config.info = &interpreter.services().info;
    config.preauth_timeout = options.preauth_timeout;
    config.max_auth_failures = options.max_auth_failures;
    config.max_channels = options.max_channels_per_connection;
    config.admit_login = [this](const SshConnection& conn, const std::string& user) {
      return AdmitLogin(conn, user);
    };
  }

  Status Start();
  bool Stop();
  int OpenConnections() {
    std::lock_guard<std::mutex> lock(mu_);
    return admission_.totals().total();
  }

  SshServerOptions options;
  ConnectionConfig config;
  int port = 0;
  std::string host_key_fingerprint;

 private:
  // A connection the listener holds: accepted, no thread of its own yet. Its session has
  // sent our identification line (or will, first thing on its thread) and owns the socket.
  struct Held {
    SessionPtr session;
    int fd = -1;
    std::string peer;    // address:port, for logs
    std::string source;  // the address, for the limits
    std::chrono::steady_clock::time_point accepted;
    bool spoke = false;  // the client has sent something (it is in waiting_, not silent_)
  };
  using HeldList = std::list<Held>;
  // A connection with a thread of its own (handshake or logged in).
  struct Entry {
    std::shared_ptr<SshConnection> conn;
    std::thread thread;
    std::string source;
    Stage stage = Stage::kHandshake;  // guarded by mu_
    std::string user;                 // guarded by mu_; set at login
    bool done = false;                // guarded by mu_
  };

  Status Listen();
  Status ConfigureBind(HostKey host_key);
  void ListenLoop();
  void AcceptPending();
  void Accepted(int fd, const sockaddr_storage& peer);
  SessionPtr NewSession(int fd, const std::string& peer);
  bool Greet(Held& held);
  void Readable(int fd, uint32_t events);
  void Drop(HeldList::iterator it, const char* reason);
  void ExpireHeld();
  int MillisUntilNextExpiry() const;
  void StartHandshakes();
  void StartConnection(Held held);
  Status AdmitLogin(const SshConnection& conn, const std::string& user);
  void ReapFinished();

  BindPtr bind_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  // Wakes the listener: to stop, or because a handshake slot came free.
  std::shared_ptr<EventWaker> waker_ = std::make_shared<EventWaker>();
  std::thread listener_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;

  // Listener thread only (and Stop, after joining it).
  HeldList silent_;   // in accept order: the front is the oldest and expires first
  HeldList waiting_;  // in the order they first spoke
  std::unordered_map<int, HeldList::iterator> held_;  // by fd
  std::mt19937 rng_{std::random_device{}()};
  ThrottledLog refused_log_{"connections refused"};
  ThrottledLog dropped_log_{"connections dropped"};

  std::mutex mu_;
  std::condition_variable cv_;
  SshAdmission admission_;    // guarded by mu_
  std::list<Entry> entries_;  // a list: an Entry's address stays valid for its thread
  std::unordered_map<const SshConnection*, Entry*> by_conn_;  // guarded by mu_
};

Status SshServer::State::Listen() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(options.port);
  int gai = getaddrinfo(options.address.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0) {
    return InvalidArgument("cannot resolve SSH address " + options.address + ": " +
                           gai_strerror(gai));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    // Non-blocking: the listener takes what is pending and goes back to epoll_wait.
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // A deep backlog: a burst of clients must queue, not be dropped to SYN retries.
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
    break;
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0) {
    return Unavailable("cannot listen on " + options.address + ":" + port_text + ": " + last_error);
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  LogInfo("ssh listening on " + FormatAddress(bound));
  return Status::Ok();
}

Status SshServer::State::ConfigureBind(HostKey host_key) {
  bind_.reset(ssh_bind_new());
  if (bind_ == nullptr) return Internal("ssh_bind_new failed");
  ssh_bind b = bind_.get();
  // The system's /etc/ssh/libssh_server_config must not change what warren offers.
  bool process_config = false;
  WARREN_RETURN_IF_ERROR(
      SetBindOption(b, SSH_BIND_OPTIONS_PROCESS_CONFIG, &process_config, "process config"));
  int verbosity = SSH_LOG_NOLOG;
  WARREN_RETURN_IF_ERROR(
      SetBindOption(b, SSH_BIND_OPTIONS_LOG_VERBOSITY, &verbosity, "log verbosity"));
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_KEY_EXCHANGE, kKeyExchange, "kex"));
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_CIPHERS_C_S, kCiphers, "ciphers"));
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_CIPHERS_S_C, kCiphers, "ciphers"));
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_HMAC_C_S, kMacs, "MACs"));
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_HMAC_S_C, kMacs, "MACs"));
  WARREN_RETURN_IF_ERROR(
      SetBindOption(b, SSH_BIND_OPTIONS_HOSTKEY_ALGORITHMS, kHostKeyAlgorithms, "host key algs"));
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_PUBKEY_ACCEPTED_KEY_TYPES,
                                       kUserKeyAlgorithms, "user key algs"));
  WARREN_RETURN_IF_ERROR(
      SetBindOption(b, SSH_BIND_OPTIONS_BANNER, kIdentification, "identification"));
  int rsa_min = kRsaMinBits;
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_RSA_MIN_SIZE, &rsa_min, "RSA size"));
  // The bind takes ownership of the key on success.
  ssh_key key = host_key.key.get();
  WARREN_RETURN_IF_ERROR(SetBindOption(b, SSH_BIND_OPTIONS_IMPORT_KEY, key, "host key"));
  (void)host_key.key.release();
  return Status::Ok();
}

Status SshServer::State::Start() {
  if (started_) return Internal("SSH server started twice");
  started_ = true;
  WARREN_RETURN_IF_ERROR(CheckLimits(options.limits));
  if (!waker_->ok()) return Internal("cannot create an eventfd");
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Internal(std::string("epoll_create1: ") + std::strerror(errno));
  ssh_init();
  WARREN_ASSIGN_OR_RETURN(HostKey host_key, LoadOrCreateHostKey(options.data_dir));
  host_key_fingerprint = host_key.fingerprint;
  WARREN_RETURN_IF_ERROR(ConfigureBind(std::move(host_key)));
  WARREN_RETURN_IF_ERROR(Listen());
  for (int fd : {listen_fd_, waker_->fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Internal(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  }
  LogInfo("ssh host key " + host_key_fingerprint);
  if (options.on_listening) options.on_listening(port);
  try {
    listener_ = std::thread([this] { ListenLoop(); });
  } catch (const std::system_error& e) {
    return Internal(std::string("cannot start the SSH listener thread: ") + e.what());
  }
  return Status::Ok();
}

void SshServer::State::ListenLoop() {
  epoll_event events[64];
  while (!stopping_.load()) {
    int n = ::epoll_wait(epoll_fd_, events, 64, MillisUntilNextExpiry());
    ReapFinished();
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        AcceptPending();
      } else if (fd == waker_->fd()) {
        waker_->Drain();
      } else {
        Readable(fd, events[i].events);
      }
    }
    ExpireHeld();
    StartHandshakes();
    refused_log_.Flush();
    dropped_log_.Flush();
  }
}

// The listen socket is non-blocking and level-triggered: take a bounded batch, the rest
// comes at the next turn (after the held sockets had theirs).
void SshServer::State::AcceptPending() {
  for (int i = 0; i < 256; ++i) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      Accepted(fd, peer);
      continue;
    }
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      refused_log_.Note(std::string("ssh accept: ") + std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return;  // EAGAIN: nothing more now; other errors concern that one connection
  }
}

// Counting, one session set up and our identification line sent; no thread: the
// connection waits for the client's first bytes in the epoll set.
void SshServer::State::Accepted(int fd, const sockaddr_storage& peer_addr) {
  Held held;
  held.fd = fd;
  held.peer = FormatAddress(peer_addr);
  held.source = HostOf(peer_addr);
  held.accepted = std::chrono::steady_clock::now();
  AcceptVerdict verdict;
  {
    std::lock_guard<std::mutex> lock(mu_);
    verdict = admission_.Accept(held.source, std::uniform_int_distribution<int>(0, 99)(rng_));
  }
  if (verdict.action == AcceptVerdict::kRefuse) {
    refused_log_.Note("ssh connection refused peer=" + held.peer +
                      " reason=" + LogQuote(verdict.reason));
    ::close(fd);
    return;
  }
  HeldList::iterator displaced = silent_.end();
  if (verdict.action == AcceptVerdict::kAdmitDisplacingSource) {
    displaced = std::find_if(silent_.begin(), silent_.end(),
                             [&](const Held& h) { return h.source == held.source; });
  } else if (verdict.action == AcceptVerdict::kAdmitDisplacingOldest) {
    displaced = silent_.begin();
  }
  if (displaced != silent_.end()) Drop(displaced, verdict.reason);

  auto forget = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    admission_.Leave(held.source, Stage::kSilent);
  };
  held.session = NewSession(fd, held.peer);  // owns the socket from here, even on failure
  if (held.session == nullptr || !Greet(held)) {
    held.session.reset();
    forget();
    return;
  }
  // Edge-triggered: the client's first bytes are all the listener waits for.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    LogWarn(std::string("ssh epoll_ctl: ") + std::strerror(errno));
    held.session.reset();
    forget();
    return;
  }
  if (held.spoke) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      admission_.Spoke(held.source);
    }
    waiting_.push_back(std::move(held));
    held_[fd] = std::prev(waiting_.end());
  } else {
    silent_.push_back(std::move(held));
    held_[fd] = std::prev(silent_.end());
  }
}

// A session for an accepted socket (no crypto: the bind's keys and our algorithms). Null on
// failure, with the socket closed.
SessionPtr SshServer::State::NewSession(int fd, const std::string& peer) {
  SessionPtr session(ssh_new());
  if (session == nullptr) {
    ::close(fd);
    return nullptr;
  }
  int verbosity = SSH_LOG_NOLOG;
  ssh_options_set(session.get(), SSH_OPTIONS_LOG_VERBOSITY, &verbosity);
  if (ssh_bind_accept_fd(bind_.get(), session.get(), fd) != SSH_OK) {
    LogWarn("ssh accept failed peer=" + peer + " error=" + LogQuote(ssh_get_error(bind_.get())));
    // Once the session has adopted the socket, freeing the session closes it.
    if (ssh_get_fd(session.get()) != fd) ::close(fd);
    return nullptr;
  }
  // No compression: the bind has no option for it, the session does.
  ssh_options_set(session.get(), SSH_OPTIONS_COMPRESSION_C_S, kCompression);
  ssh_options_set(session.get(), SSH_OPTIONS_COMPRESSION_S_C, kCompression);
  return session;
}

// Sends our identification line now, because some clients (ssh-keyscan, monitoring probes)
// wait for it before they say anything. That is the first, non-blocking step of libssh's
// key exchange; the connection's thread resumes it later (ssh_handle_key_exchange picks up
// where it stopped). Skipped when the client has spoken already: its thread will greet it,
// and the listener never parses client packets (nor does crypto for them).
bool SshServer::State::Greet(Held& held) {
  char byte;
  if (::recv(held.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
    held.spoke = true;
    return true;
  }
  ssh_session s = held.session.get();
  ssh_set_blocking(s, 0);  // and so it stays: the connection's thread runs non-blocking too
  int rc = ssh_handle_key_exchange(s);
  if (rc == SSH_ERROR) {
    dropped_log_.Note("ssh connection dropped peer=" + held.peer +
                      " reason=" + LogQuote(ssh_get_error(s)));
    return false;
  }
  // Bytes that raced in were read by libssh: the client has spoken.
  held.spoke = rc == SSH_OK || ssh_get_clientbanner(s) != nullptr;
  return true;
}

void SshServer::State::Readable(int fd, uint32_t events) {
  auto found = held_.find(fd);
  if (found == held_.end()) return;  // closed earlier in this batch
  HeldList::iterator it = found->second;
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    Drop(it, nullptr);  // the client left
    return;
  }
  if (it->spoke) {
    // More from a waiting client (its key exchange init): only a hang-up matters.
    if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) Drop(it, nullptr);
    return;
  }
  if (n < 0) return;
  // Its first bytes: what they are is for libssh to judge, on the connection's thread.
  {
    std::lock_guard<std::mutex> lock(mu_);
    admission_.Spoke(it->source);
  }
  it->spoke = true;
  waiting_.splice(waiting_.end(), silent_, it);  // `it` (in held_) stays valid
}

// `reason` null: the client left by itself, nothing to log.
void SshServer::State::Drop(HeldList::iterator it, const char* reason) {
  if (reason != nullptr) {
    dropped_log_.Note("ssh connection dropped peer=" + it->peer + " reason=" + LogQuote(reason));
  }
  held_.erase(it->fd);
  it->session.reset();  // closes the socket, which takes it out of the epoll set
  {
    std::lock_guard<std::mutex> lock(mu_);
    admission_.Leave(it->source, it->spoke ? Stage::kWaiting : Stage::kSilent);
  }
  (it->spoke ? waiting_ : silent_).erase(it);
}

void SshServer::State::ExpireHeld() {
  auto now = std::chrono::steady_clock::now();
  while (!silent_.empty() && silent_.front().accepted + options.version_timeout <= now) {
    Drop(silent_.begin(), "silent past the version timeout");
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto next = std::next(it);
    if (it->accepted + options.preauth_timeout <= now) {
      Drop(it, "no handshake slot in time");
    }
    it = next;
  }
}

int SshServer::State::MillisUntilNextExpiry() const {
  auto now = std::chrono::steady_clock::now();
  auto next = now + std::chrono::seconds(1);  // at least once a second: reaping, log flushes
  if (!silent_.empty()) next = std::min(next, silent_.front().accepted + options.version_timeout);
  for (const Held& h : waiting_) next = std::min(next, h.accepted + options.preauth_timeout);
  // Rounded up, so that the deadline has passed when epoll_wait returns.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::max<long>(0, ms));
}

// Oldest first, skipping addresses at their own handshake limit.
void SshServer::State::StartHandshakes() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto next = std::next(it);
    bool start = false;
    bool all_busy = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      start = admission_.MayStartHandshake(it->source);
      if (start) admission_.StartHandshake(it->source);
      all_busy = admission_.totals().handshake >= admission_.limits().handshakes;
    }
    if (start) {
      Held held = std::move(*it);
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, held.fd, nullptr);
      held_.erase(held.fd);
      waiting_.erase(it);
      StartConnection(std::move(held));
    }
    if (all_busy) return;
    it = next;
  }
}

// The key exchange, which costs round trips and some crypto, runs on the connection's own
// thread.
void SshServer::State::StartConnection(Held held) {
  int one = 1;
  setsockopt(held.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto conn = std::make_shared<SshConnection>(config, std::move(held.session), held.peer);
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace_back();
  Entry* entry = &entries_.back();
  entry->conn = conn;
  entry->source = held.source;
  by_conn_[conn.get()] = entry;
  try {
    entry->thread = std::thread([this, conn, entry] {
      conn->Run();
      std::lock_guard<std::mutex> done_lock(mu_);
      admission_.Leave(entry->source, entry->stage, entry->user);
      by_conn_.erase(conn.get());
      entry->done = true;
      cv_.notify_all();
      waker_->Wake();  // a slot came free
    });
  } catch (const std::system_error& e) {
    LogError("ssh cannot start a connection thread peer=" + held.peer + ": " + e.what());
    admission_.Leave(held.source, Stage::kHandshake);
    by_conn_.erase(conn.get());
    entries_.pop_back();  // the connection (and its socket) is freed with it
  }
}

// On the connection's thread, once its key is accepted.
Status SshServer::State::AdmitLogin(const SshConnection& conn, const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_conn_.find(&conn);
  if (it == by_conn_.end()) return Internal("a login on a connection the server does not hold");
  Entry& entry = *it->second;
  if (entry.stage == Stage::kLoggedIn) return Status::Ok();
  WARREN_RETURN_IF_ERROR(admission_.Login(entry.source, user));
  entry.stage = Stage::kLoggedIn;
  entry.user = user;
  waker_->Wake();  // its handshake slot came free
  return Status::Ok();
}

void SshServer::State::ReapFinished() {
  std::list<Entry> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), entries_, it);
      it = next;
    }
  }
  for (Entry& e : finished) e.thread.join();  // each has returned from Run already
}

bool SshServer::State::Stop() {
  if (!started_ || stopped_) return true;
  stopped_ = true;
  stopping_.store(true);
  waker_->Wake();
  if (listener_.joinable()) listener_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  while (!silent_.empty()) Drop(silent_.begin(), nullptr);
  while (!waiting_.empty()) Drop(waiting_.begin(), nullptr);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  epoll_fd_ = -1;

  std::unique_lock<std::mutex> lock(mu_);
  for (Entry& e : entries_) e.conn->Stop();
  auto all_done = [&] {
    for (const Entry& e : entries_) {
      if (!e.done) return false;
    }
    return true;
  };
  bool clean = cv_.wait_for(lock, std::chrono::seconds(4), all_done);
  std::list<Entry> finished;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->done) finished.splice(finished.end(), entries_, it);
    it = next;
  }
  // Connections still running keep their Entry (their thread writes to it when it ends).
  for (Entry& e : entries_) e.thread.detach();
  lock.unlock();
  for (Entry& e : finished) e.thread.join();
  clean = clean && AbandonedWorkers() == 0;
  if (!clean) LogWarn("ssh server stopped with connections still running");
  return clean;
}

SshServer::SshServer(SshServerOptions options, Interpreter& interpreter, Store& store,
                     const Clock& clock)
    : state_(std::make_unique<State>(std::move(options), interpreter, store, clock)) {}

SshServer::~SshServer() { Stop(); }

Status SshServer::Start() { return state_->Start(); }
bool SshServer::Stop() { return state_->Stop(); }
int SshServer::port() const { return state_->port; }

int SshServer::open_connections() const { return state_->OpenConnections(); }
const std::string& SshServer::host_key_fingerprint() const { return state_->host_key_fingerprint; }

}  // namespace warren::ssh
