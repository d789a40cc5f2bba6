#include "lobby/ssh/ssh_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

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

std::string FormatAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
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

}  // namespace

class SshServer::State {
 public:
  State(SshServerOptions opts, Interpreter& interpreter, Store& store, const Clock& clock)
      : options(std::move(opts)) {
    config.interpreter = &interpreter;
    config.store = &store;
    config.clock = &clock;
    config.info = &interpreter.services().info;
    config.preauth_timeout = options.preauth_timeout;
    config.max_auth_failures = options.max_auth_failures;
    config.max_channels = options.max_channels_per_connection;
  }

  Status Start();
  bool Stop();
  int OpenConnections() {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const Entry& e : entries_) n += e.done ? 0 : 1;
    return n;
  }

  SshServerOptions options;
  ConnectionConfig config;
  int port = 0;
  std::string host_key_fingerprint;

 private:
  struct Entry {
    std::shared_ptr<SshConnection> conn;
    std::thread thread;
    bool done = false;  // guarded by mu_
  };

  Status Listen();
  Status ConfigureBind(HostKey host_key);
  void AcceptLoop();
  void Accepted(int fd, const sockaddr_storage& peer);
  void ReapFinished();

  BindPtr bind_;
  int listen_fd_ = -1;
  std::shared_ptr<EventWaker> accept_waker_ = std::make_shared<EventWaker>();
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Entry> entries_;  // a list: an Entry's address stays valid for its thread
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
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
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
  if (!accept_waker_->ok()) return Internal("cannot create an eventfd");
  ssh_init();
  WARREN_ASSIGN_OR_RETURN(HostKey host_key, LoadOrCreateHostKey(options.data_dir));
  host_key_fingerprint = host_key.fingerprint;
  WARREN_RETURN_IF_ERROR(ConfigureBind(std::move(host_key)));
  WARREN_RETURN_IF_ERROR(Listen());
  LogInfo("ssh host key " + host_key_fingerprint);
  if (options.on_listening) options.on_listening(port);
  try {
    acceptor_ = std::thread([this] { AcceptLoop(); });
  } catch (const std::system_error& e) {
    return Internal(std::string("cannot start the SSH accept thread: ") + e.what());
  }
  return Status::Ok();
}

void SshServer::State::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {accept_waker_->fd(), POLLIN, 0}};
    int ready = ::poll(fds, 2, 1000);
    ReapFinished();
    if (ready <= 0) continue;
    if (fds[1].revents != 0) accept_waker_->Drain();
    if ((fds[0].revents & POLLIN) == 0 || stopping_.load()) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        LogWarn(std::string("ssh accept: ") + std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    Accepted(fd, peer);
  }
}

// Runs on the accept thread: only cheap work here. The key exchange, which costs a
// round trip and some crypto, happens on the connection's own thread.
void SshServer::State::Accepted(int fd, const sockaddr_storage& peer_addr) {
  std::string peer = FormatAddress(peer_addr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(entries_.size()) >= options.max_connections) {
      LogWarn("ssh connection refused peer=" + peer + " reason=\"too many connections\"");
      ::close(fd);
      return;
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  SessionPtr session(ssh_new());
  if (session == nullptr) {
    ::close(fd);
    return;
  }
  int verbosity = SSH_LOG_NOLOG;
  ssh_options_set(session.get(), SSH_OPTIONS_LOG_VERBOSITY, &verbosity);
  if (ssh_bind_accept_fd(bind_.get(), session.get(), fd) != SSH_OK) {
    LogWarn("ssh accept failed peer=" + peer + " error=" + LogQuote(ssh_get_error(bind_.get())));
    // Once the session has adopted the socket, freeing the session closes it.
    if (ssh_get_fd(session.get()) != fd) ::close(fd);
    return;
  }
  // No compression: the bind has no option for it, the session does.
  ssh_options_set(session.get(), SSH_OPTIONS_COMPRESSION_C_S, kCompression);
  ssh_options_set(session.get(), SSH_OPTIONS_COMPRESSION_S_C, kCompression);
  auto conn = std::make_shared<SshConnection>(config, std::move(session), peer);
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace_back();
  Entry* entry = &entries_.back();
  entry->conn = conn;
  try {
    entry->thread = std::thread([this, conn, entry] {
      conn->Run();
      std::lock_guard<std::mutex> done_lock(mu_);
      entry->done = true;
      cv_.notify_all();
    });
  } catch (const std::system_error& e) {
    LogError("ssh cannot start a connection thread peer=" + peer + ": " + e.what());
    entries_.pop_back();  // the connection (and its socket) is freed with it
  }
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
  accept_waker_->Wake();
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;

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
