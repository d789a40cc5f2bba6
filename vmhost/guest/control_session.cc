#include "vmhost/guest/control_session.h"

#include <libssh/callbacks.h>
#include <libssh/server.h>  // ssh_set_message_callback, ssh_send_keepalive (not server-only)
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/guest/endpoint_setup.h"
#include "vmhost/guest/runner_protocol.h"
#include "vmhost/guest_text.h"
#include "vmhost/host_load.h"

namespace warren::guest {

namespace {

constexpr size_t kMaxWriteChunk = size_t{32} * 1024;
// Rounds of forwards asked again after the guest refused one, on one connection.
constexpr int kForwardRetries = 4;
// How long a channel we closed waits for the guest's close before it is freed anyway.
constexpr auto kCloseWait = std::chrono::seconds(5);
// How long a deliberate disconnect waits for the guest to close the open channels.
constexpr auto kQuiesceWait = std::chrono::milliseconds(300);

long long MillisSince(ControlSession::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(ControlSession::Clock::now() - t)
      .count();
}

Result<std::string> Fingerprint(ssh_key key) {
  unsigned char* raw = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &raw, &len) != 0 || raw == nullptr) {
    return Internal("cannot hash the guest's host key");
  }
  SshHashPtr hash(raw);
  SshCharPtr text(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash.get(), len));
  if (text == nullptr) return Internal("cannot format the guest's host key fingerprint");
  return std::string(text.get());
}

// libssh's last error on a session with the guest, made safe to show. Its text may quote
// what the guest sent: a banner ("Protocol mismatch: …"), a disconnect's or a channel
// refusal's description. The guest is untrusted, so that text is cut and reduced to
// printable ASCII like anything else it says (no terminal escapes, no invalid UTF-8).
std::string GuestSshError(ssh_session s) {
  const char* e = ssh_get_error(s);
  return SanitizeGuestText(e == nullptr ? "" : e, 300);
}

// A slowdown factor for a log line: "3.5".
std::string FormatSlowdown(double slowdown) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", slowdown);
  return text;
}

}  // namespace

// One exec channel, seen from the owner thread. Callbacks only record what happened;
// ServiceChannel acts on it.
struct ControlSession::Channel {
  // kClosing: we closed the channel first and wait for the guest's close, so that no reply
  // is still on its way when the connection ends (it would reach the next connection).
  // kPty and kStart: a session channel's pty-req, then its exec/shell/subsystem request.
  enum class Phase { kNew, kOpening, kPty, kStart, kRunning, kClosing, kDone };

  uint64_t id = 0;
  std::shared_ptr<GuestChannel> io;
  ssh_channel ch = nullptr;
  ssh_channel_callbacks_struct callbacks{};
  Phase phase = Phase::kNew;
  Clock::time_point since;     // when it was queued, or when kClosing began
  Clock::time_point deadline;  // its caller's: how long it may wait for a connection
  size_t backlog = 0;  // stdout bytes libssh still holds because the caller's buffer was full
  size_t stderr_backlog = 0;  // the same for stderr (raw channels; runner channels take all)
  bool remote_eof = false;
  bool eof_delivered = false;
  bool remote_closed = false;
  bool closed_delivered = false;
  bool eof_sent = false;
  bool draining = false;  // closed by its caller, its queued input still going out
};

// The static trampolines libssh calls.
struct ControlSessionCallbacks {
  using Channel = ControlSession::Channel;
  // libssh's progress through ssh_connect: 0.4 once the server's banner came (client.c).
  static void ConnectStatus(void* ud, float status) {
    auto* session = static_cast<ControlSession*>(ud);
    if (status >= 0.4f && session->answered_) std::exchange(session->answered_, nullptr)();
  }
  static int Data(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* ud) {
    auto* c = static_cast<Channel*>(ud);
    if (is_stderr) {
      size_t n = c->io->PushStderr(static_cast<const char*>(data), len, 0);
      c->stderr_backlog = len - n;
      return static_cast<int>(n);
    }
    // libssh hands over everything it holds for the channel (earlier leftovers included), so
    // what stays unconsumed is exactly len - n. While it stays, libssh stops widening the
    // guest's window for this channel: that is the per-channel flow control.
    size_t n = c->io->PushStdout(static_cast<const char*>(data), len, 0);
    c->backlog = len - n;
    return static_cast<int>(n);
  }
  static void Eof(ssh_session, ssh_channel, void* ud) {
    static_cast<Channel*>(ud)->remote_eof = true;
  }
  static void Close(ssh_session, ssh_channel, void* ud) {
    auto* c = static_cast<Channel*>(ud);
    c->remote_closed = true;
    c->remote_eof = true;
  }
  static void ExitStatus(ssh_session, ssh_channel, int status, void* ud) {
    static_cast<Channel*>(ud)->io->SetExitStatus(status);
  }
  static void ExitSignal(ssh_session, ssh_channel, const char* signal, int, const char*,
                         const char*, void* ud) {
    static_cast<Channel*>(ud)->io->SetExitSignal(signal == nullptr ? "?" : signal);
  }
  // Anything else the guest asks of us outside our channels (opening channels towards us,
  // global requests): refused with libssh's default reply. Without this callback libssh would queue
  // such messages for the application, without bound.
  static int Message(ssh_session, ssh_message message, void* ud) {
    // Connections to the endpoint's forwards: ours to take (or to refuse, below).
    if (ud != nullptr && ssh_message_type(message) == SSH_REQUEST_CHANNEL_OPEN &&
        ssh_message_subtype(message) == SSH_CHANNEL_FORWARDED_TCPIP &&
        static_cast<ControlSession*>(ud)->AcceptForward(message)) {
      return 0;
    }
    LogDebug("guest control refused a request type=" + std::to_string(ssh_message_type(message)));
    return 1;
  }
  static int Wake(socket_t, int, void* ud) {
    static_cast<EventWaker*>(ud)->Drain();
    return 0;
  }
};

ControlSession::ControlSession(ControlSessionOptions options) : options_(std::move(options)) {
  owner_ = std::thread([this] { Run(); });
}

ControlSession::~ControlSession() { Shutdown(); }

Result<std::shared_ptr<GuestChannel>> ControlSession::OpenExec(std::string command_line,
                                                               Clock::time_point deadline,
                                                               const CancelSignal* cancel) {
  GuestChannelRequest request;
  request.kind = GuestChannelRequest::Kind::kExec;
  request.command = std::move(command_line);
  return OpenRunnerChannel(std::move(request), deadline, cancel);
}

Result<std::shared_ptr<GuestChannel>> ControlSession::OpenRunnerChannel(
    GuestChannelRequest request, Clock::time_point deadline, const CancelSignal* cancel) {
  auto io = std::make_shared<GuestChannel>(std::move(request), waker_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Unavailable("the control connection to VM " + options_.vm_id + " is closed");
    incoming_.push_back(Request{io, deadline});
  }
  waker_->Wake();
  // A little past the deadline, so that the owner's reason (the last connection error)
  // usually wins over a bare timeout.
  Status st = io->WaitOpen(deadline + std::chrono::milliseconds(300), cancel);
  if (!st.ok()) {
    io->Close();  // the owner drops it, queued or half open
    if (st.code() == Code::kCancelled) {
      return Cancelled("cancelled while waiting for VM " + options_.vm_id +
                       "'s control connection");
    }
    if (st.code() == Code::kTimeout) {
      return Unavailable("VM " + options_.vm_id + " did not answer on its control connection");
    }
    return st;
  }
  return io;
}

Status ControlSession::AwaitConnection(Clock::time_point deadline, std::function<void()> answered) {
  auto io = std::make_shared<GuestChannel>(GuestChannelRequest{}, waker_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Unavailable("the control connection to VM " + options_.vm_id + " is closed");
    incoming_.push_back(Request{io, deadline, /*connection_only=*/true, std::move(answered)});
  }
  waker_->Wake();
  Status st = io->WaitOpen(deadline + std::chrono::milliseconds(300));
  io->Close();
  if (st.code() == Code::kTimeout) {
    return Unavailable("VM " + options_.vm_id + " did not answer on its control connection");
  }
  return st;
}

std::shared_ptr<GuestChannel> ControlSession::OpenRaw(GuestChannelRequest request,
                                                      std::function<void()> notify,
                                                      Clock::time_point deadline) {
  auto io = std::make_shared<GuestChannel>(std::move(request), waker_, std::move(notify));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      incoming_.push_back(Request{io, deadline});
      waker_->Wake();
      return io;
    }
  }
  io->Fail(Unavailable("the control connection to VM " + options_.vm_id + " is closed"));
  return io;
}

void ControlSession::DropConnection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop_ = true;
    if (connecting_fd_ >= 0) ::shutdown(connecting_fd_, SHUT_RDWR);
  }
  waker_->Wake();
}

void ControlSession::KeepConnected() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    keep_connected_ = true;
  }
  waker_->Wake();
}

void ControlSession::RefreshEndpoint() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    refresh_endpoint_ = true;
    endpoint_pending_.store(true);
  }
  waker_->Wake();
}

void ControlSession::SetUpEndpointNow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    endpoint_now_ = true;
  }
  waker_->Wake();
}

void ControlSession::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // A handshake blocks inside libssh, deaf to the waker: cutting the socket ends it.
    if (connecting_fd_ >= 0) ::shutdown(connecting_fd_, SHUT_RDWR);
  }
  waker_->Wake();
  if (owner_.joinable() && owner_.get_id() != std::this_thread::get_id()) owner_.join();
}

std::string ControlSession::endpoint_problem() {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoint_problem_;
}

void ControlSession::SetEndpointProblem(std::string problem) {
  std::lock_guard<std::mutex> lock(mu_);
  endpoint_problem_ = std::move(problem);
}

bool ControlSession::closed() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

std::string ControlSession::host_key_fingerprint() {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_fingerprint_;
}

Status ControlSession::Repin(std::string_view public_key_line) {
  // "TYPE BASE64 [COMMENT]": libssh imports the base64 blob given its type.
  const std::string line(public_key_line);
  const size_t sp = line.find(' ');
  if (sp == std::string::npos) return InvalidArgument("not an ssh public key line");
  const std::string type = line.substr(0, sp);
  std::string blob = line.substr(sp + 1);
  blob = blob.substr(0, blob.find_first_of(" \r\n"));
  ssh_key raw = nullptr;
  if (ssh_pki_import_pubkey_base64(blob.c_str(), ssh_key_type_from_name(type.c_str()), &raw) !=
          SSH_OK ||
      raw == nullptr) {
    return InvalidArgument("not an ssh public key line");
  }
  SshKeyPtr key(raw);
  WARREN_ASSIGN_OR_RETURN(std::string fingerprint, Fingerprint(key.get()));
  std::string before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before = std::exchange(pinned_fingerprint_, fingerprint);
  }
  LogInfo("guest host key re-pinned vm=" + LogQuote(options_.vm_id) +
          " was=" + (before.empty() ? "-" : before) + " now=" + fingerprint);
  return Status::Ok();
}

void ControlSession::Run() {
  std::deque<Request> waiting;
  auto backoff = options_.retry_first;
  Clock::time_point next_attempt{};
  Status last_error = Unavailable("not connected");
  for (;;) {
    bool drop = false;
    bool keep = false;
    bool refresh = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      while (!incoming_.empty()) {
        waiting.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      drop = drop_;
      drop_ = false;
      if (drop) keep_connected_ = false;
      keep = keep_connected_;
      // A refresh waits while a setup runs (it is taken once that one is done).
      if (endpoint_phase_ == EndpointPhase::kOff || endpoint_phase_ == EndpointPhase::kReady) {
        refresh = refresh_endpoint_;
        refresh_endpoint_ = false;
      }
      if (endpoint_now_ && endpoint_due_ != Clock::time_point{}) endpoint_due_ = Clock::now();
      endpoint_now_ = false;
      endpoint_pending_.store(
          refresh_endpoint_ || refresh || endpoint_due_ != Clock::time_point{} ||
          forward_retry_due_ != Clock::time_point{} || endpoint_phase_ == EndpointPhase::kSetup ||
          endpoint_phase_ == EndpointPhase::kForward);
    }
    if (refresh && session_ != nullptr) StartEndpoint();
    if (drop && session_ != nullptr) {
      TearDown(Unavailable("the control connection to VM " + options_.vm_id + " was dropped"),
               /*graceful=*/true);
    }
    auto now = Clock::now();
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (it->io->caller_closed()) {
        it = waiting.erase(it);
      } else if (now > it->deadline) {
        it->io->Fail(Unavailable("cannot reach VM " + options_.vm_id +
                                 " over its control connection: " + last_error.message()));
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }

    if (session_ == nullptr) {
      if (waiting.empty() && !keep) {
        waker_->WaitFor(1000);
        continue;
      }
      if (now < next_attempt) {
        // Until the next attempt, or until a request's deadline (it then fails with the last
        // connection error, before its caller gives up on a bare timeout).
        Clock::time_point until = next_attempt;
        for (const Request& r : waiting)
          until = std::min(until, r.deadline + std::chrono::milliseconds(1));
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
        waker_->WaitFor(static_cast<int>(std::clamp<long long>(ms + 1, 1, 1000)));
        continue;
      }
      Clock::time_point latest = waiting.empty() ? now + options_.connect_timeout : now;
      for (const Request& r : waiting) latest = std::max(latest, r.deadline);
      // Those waiting for the connection hear when the guest's sshd answered (the host key
      // it presents is chosen then); those that come during the handshake, once it is up.
      Status st = Connect(std::min(latest, now + options_.connect_timeout), [&waiting] {
        for (Request& r : waiting) {
          if (r.answered) std::exchange(r.answered, nullptr)();
        }
      });
      if (st.code() == Code::kNotFound || st.code() == Code::kConflict) {
        // The dialer says there is no port to try (no such VM, or not running): retrying
        // would only make the caller wait.
        for (Request& r : waiting) r.io->Fail(st);
        waiting.clear();
        std::lock_guard<std::mutex> lock(mu_);
        keep_connected_ = false;
        continue;
      }
      if (!st.ok()) {
        last_error = st;
        LogInfo("guest control connect failed vm=" + LogQuote(options_.vm_id) + " error=" +
                LogQuote(st.message()) + " retry_ms=" + std::to_string(backoff.count()));
        next_attempt = Clock::now() + backoff;
        backoff = std::min(backoff * 2, options_.retry_max);
        continue;
      }
      backoff = options_.retry_first;
      // The setup waits (endpoint_setup_delay): a connection is mostly made for a command,
      // which should not share the guest's CPU with it.
      endpoint_due_ = Clock::now();
      if (!endpoint_at_connect_) endpoint_due_ += options_.endpoint_setup_delay;
      endpoint_at_connect_ = false;
      endpoint_pending_.store(true);
    }
    if (endpoint_due_ != Clock::time_point{} && Clock::now() >= endpoint_due_ && Alive()) {
      StartEndpoint();
    }
    if (forward_retry_due_ != Clock::time_point{} && Clock::now() >= forward_retry_due_ &&
        endpoint_phase_ == EndpointPhase::kReady && Alive()) {
      RetryForwards();
    }

    if (reconnect_when_idle_ && channels_.empty() && waiting.empty()) {
      // Nothing of a caller's is on the connection: remade now, for the endpoint's forwards
      // (set up at once on the new one).
      endpoint_at_connect_ = true;
      TearDown(Unavailable("the control connection to VM " + options_.vm_id + " is being remade"),
               /*graceful=*/true);
      next_attempt = Clock::now() + options_.retry_first;  // the launcher's pause between clients
      continue;
    }
    StartChannels(waiting);
    Service();
    if (Alive()) ServiceEndpoint();
    if (Alive()) {
      ssh_event_dopoll(event_.get(), PollMillis());
      if (Alive()) Service();
      if (Alive()) ServiceEndpoint();
    }
    if (Alive() && !CheckLiveness()) {
      last_error =
          Unavailable("VM " + options_.vm_id + " stopped answering on its control connection");
      LogWarn("guest control keepalive unanswered vm=" + LogQuote(options_.vm_id) +
              " slowdown=" + FormatSlowdown(dropped_slowdown_));
      TearDown(last_error, /*graceful=*/false, &waiting);
      next_attempt = Clock::now() + options_.retry_first;  // the launcher's pause
    }
    if (session_ != nullptr && !Alive()) {  // (Service may have torn a hung one down)
      last_error = Unavailable("the control connection to VM " + options_.vm_id +
                               " was lost: " + GuestSshError(session_.get()));
      TearDown(last_error, /*graceful=*/false, &waiting);
      next_attempt = Clock::now() + options_.retry_first;  // the launcher's pause
    }
  }
  Status bye = Unavailable("the control connection to VM " + options_.vm_id + " is closed");
  TearDown(bye, /*graceful=*/true);
  for (Request& r : waiting) r.io->Fail(bye);
  std::lock_guard<std::mutex> lock(mu_);
  for (Request& r : incoming_) r.io->Fail(bye);
  incoming_.clear();
}

Status ControlSession::Connect(Clock::time_point deadline, std::function<void()> answered) {
  auto t0 = Clock::now();
  Result<UniqueFd> dialed = options_.dial(options_.vm_id);
  if (!dialed.ok()) return dialed.status();
  int fd = dialed->release();  // closed below on every failure, else by TearDown

  SshSessionPtr session(ssh_new());
  if (session == nullptr) {
    ::close(fd);
    return Internal("ssh_new failed");
  }
  ssh_session s = session.get();
  auto left = std::max<long long>(
      1, std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count());
  long secs = static_cast<long>(left / 1000000);
  long usecs = static_cast<long>(left % 1000000);
  int no = 0;
  bool ok = ssh_options_set(s, SSH_OPTIONS_HOST, "warren-guest") == 0 &&
            ssh_options_set(s, SSH_OPTIONS_USER, options_.user.c_str()) == 0 &&
            ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no) == 0 &&
            // Nothing of the host user's ~/.ssh is consulted: the guest key is checked here.
            ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, "/dev/null") == 0 &&
            ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") == 0 &&
            ssh_options_set(s, SSH_OPTIONS_HOSTKEYS, "ssh-ed25519") == 0 &&
            ssh_options_set(s, SSH_OPTIONS_KEY_EXCHANGE,
                            "curve25519-sha256,curve25519-sha256@libssh.org") == 0 &&
            ssh_options_set(s, SSH_OPTIONS_COMPRESSION, "no") == 0 &&
            ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &secs) == 0 &&
            ssh_options_set(s, SSH_OPTIONS_TIMEOUT_USEC, &usecs) == 0;
  ssh_set_message_callback(s, &ControlSessionCallbacks::Message, this);
  session_callbacks_ = {};
  session_callbacks_.userdata = this;
  session_callbacks_.connect_status_function = &ControlSessionCallbacks::ConnectStatus;
  ssh_callbacks_init(&session_callbacks_);
  ok = ok && ssh_set_callbacks(s, &session_callbacks_) == SSH_OK;
  if (!ok || ssh_options_set(s, SSH_OPTIONS_FD, &fd) != 0) {
    ::close(fd);
    return Internal("cannot configure the SSH client session");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      ::close(fd);
      return Unavailable("shutting down");
    }
    connecting_fd_ = fd;
  }
  // From ssh_connect on, ssh_free closes the fd; but ssh_disconnect forgets an fd that was
  // handed in without closing it, so after a disconnect it is ours to close (TearDown).
  Status st;
  const int64_t dial_ms = MillisSince(t0);
  int64_t kex_ms = 0;
  answered_ = std::move(answered);
  const int connected = ssh_connect(s);
  answered_ = nullptr;  // (called by now unless the guest never sent its banner)
  if (connected != SSH_OK) {
    st = Unavailable(std::string("SSH handshake with the guest failed: ") + GuestSshError(s));
  } else {
    kex_ms = MillisSince(t0);
    st = Authenticate(s);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    connecting_fd_ = -1;  // before the session (and with it the fd) can go away
  }
  if (!st.ok()) return st;

  ssh_set_blocking(s, 0);  // from here on no libssh call may wait on the guest
  SshEventPtr event(ssh_event_new());
  if (event == nullptr || !waker_->ok() || ssh_event_add_session(event.get(), s) != SSH_OK ||
      ssh_event_add_fd(event.get(), waker_->fd(), POLLIN, &ControlSessionCallbacks::Wake,
                       waker_.get()) != SSH_OK) {
    if (event != nullptr) ssh_event_remove_session(event.get(), s);
    return Internal("cannot set up the control session's event loop");
  }
  session_ = std::move(session);
  event_ = std::move(event);
  socket_fd_ = fd;
  counters_ = {};
  ssh_set_counters(s, &counters_, nullptr);
  heard_bytes_ = 0;
  last_heard_ = Clock::now();
  keepalive_sent_ = false;
  uint64_t gen = generation_.fetch_add(1) + 1;
  LogInfo("guest control connected vm=" + LogQuote(options_.vm_id) +
          " hostkey=" + host_key_fingerprint() + " generation=" + std::to_string(gen) +
          " dur_ms=" + std::to_string(MillisSince(t0)) + " dial_ms=" + std::to_string(dial_ms) +
          " kex_ms=" + std::to_string(kex_ms));
  return Status::Ok();
}

Status ControlSession::Authenticate(ssh_session s) {
  // The guest's host key: the socket can only lead to this VM's port, so any key is
  // accepted the first time, logged, and then pinned for the life of this object (a
  // different key on a reconnect means something else answers there).
  ssh_key raw = nullptr;
  if (ssh_get_server_publickey(s, &raw) != SSH_OK || raw == nullptr) {
    return Unavailable("the guest sent no host key");
  }
  SshKeyPtr host_key(raw);
  WARREN_ASSIGN_OR_RETURN(std::string fingerprint, Fingerprint(host_key.get()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pinned_fingerprint_.empty()) {
      pinned_fingerprint_ = fingerprint;  // logged with the connection
    } else if (pinned_fingerprint_ != fingerprint) {
      LogWarn("guest host key changed vm=" + LogQuote(options_.vm_id) +
              " pinned=" + pinned_fingerprint_ + " got=" + fingerprint);
      return Unavailable("VM " + options_.vm_id + " presented a different host key (" +
                         fingerprint + ", pinned " + pinned_fingerprint_ + ")");
    }
  }
  ssh_key key_raw = nullptr;
  if (ssh_pki_import_privkey_file(options_.key_path.c_str(), nullptr, nullptr, nullptr, &key_raw) !=
          SSH_OK ||
      key_raw == nullptr) {
    return Internal("cannot read the control key " + options_.key_path);
  }
  SshKeyPtr key(key_raw);
  int rc = ssh_userauth_publickey(s, nullptr, key.get());
  if (rc != SSH_AUTH_SUCCESS) {
    return Unavailable(std::string("the guest refused the control key: ") + GuestSshError(s));
  }
  return Status::Ok();
}

void ControlSession::Quiesce() {
  if (!Alive()) return;
  for (auto& [id, c] : channels_) {
    if (c->phase != Channel::Phase::kRunning || c->remote_closed) continue;
    ssh_channel_close(c->ch);
    c->phase = Channel::Phase::kClosing;
    c->since = Clock::now();
  }
  auto give_up = Clock::now() + kQuiesceWait;
  auto closing = [&] {
    return std::any_of(channels_.begin(), channels_.end(), [](const auto& kv) {
      return kv.second->phase == Channel::Phase::kClosing && !kv.second->remote_closed;
    });
  };
  while (closing() && Clock::now() < give_up && Alive()) {
    ssh_event_dopoll(event_.get(), 20);
  }
}

void ControlSession::TearDown(const Status& why, bool graceful, std::deque<Request>* requeue) {
  if (graceful) Quiesce();
  for (auto& [id, c] : channels_) {
    if (c->ch != nullptr) ssh_remove_channel_callbacks(c->ch, &c->callbacks);
    const bool nothing_ran = c->phase == Channel::Phase::kNew ||
                             c->phase == Channel::Phase::kOpening ||
                             c->phase == Channel::Phase::kPty;
    if (requeue != nullptr && nothing_ran && !c->io->caller_closed()) {
      requeue->push_front(Request{c->io, c->deadline});
      continue;
    }
    c->io->Fail(why);
  }
  if (event_ != nullptr) {
    ssh_event_remove_fd(event_.get(), waker_->fd());
    if (session_ != nullptr) ssh_event_remove_session(event_.get(), session_.get());
    event_.reset();
  }
  if (session_ != nullptr) {
    ssh_disconnect(session_.get());  // says goodbye and frees the channels
    session_.reset();
  }
  // QEMU serves one client at a time: an fd left open would keep the next connection waiting.
  if (socket_fd_ >= 0) ::close(socket_fd_);
  socket_fd_ = -1;
  channels_.clear();
  open_channels_.store(0);
  endpoint_phase_ = EndpointPhase::kOff;
  endpoint_due_ = {};
  setup_io_.reset();
  forwards_requested_ = false;
  forwards_wanted_.clear();
  forwarded_ports_.clear();
  forward_retries_ = 0;
  forwards_refused_.clear();
  forward_retry_due_ = {};
  keepalive_ever_sent_ = false;
  reconnect_when_idle_ = false;
  endpoint_ready_.store(false);
}

void ControlSession::StartChannels(std::deque<Request>& waiting) {
  while (!waiting.empty() && static_cast<int>(channels_.size()) < options_.max_channels) {
    Request r = std::move(waiting.front());
    waiting.pop_front();
    if (r.io->caller_closed()) continue;
    if (r.connection_only) {  // (StartChannels runs once connected)
      if (r.answered) std::exchange(r.answered, nullptr)();
      r.io->SetOpen(generation_.load());
      continue;
    }
    auto c = std::make_unique<Channel>();
    c->id = next_channel_id_++;
    c->io = std::move(r.io);
    c->since = Clock::now();
    c->deadline = r.deadline;
    channels_.emplace(c->id, std::move(c));
  }
  open_channels_.store(static_cast<int>(channels_.size()));
}

bool ControlSession::CheckLiveness() {
  auto now = Clock::now();
  bool probing = !channels_.empty() || endpoint_phase_ == EndpointPhase::kReady;
  const bool heard = counters_.in_bytes != heard_bytes_;
  if (heard) last_traffic_ = now;
  if (heard || !probing) {
    // Heard from the guest, or nobody waits on it: an idle connection needs no probing
    // (one that carries the endpoint does: it must come back if the guest's sshd died).
    heard_bytes_ = counters_.in_bytes;
    last_heard_ = now;
    keepalive_sent_ = false;
    probing_ = probing;
    return true;
  }
  if (!probing_) {
    // A caller's channel on a connection that was idle: if the guest has been silent for
    // keepalive_after already, its sshd may be long gone (a virtio-serial port shows no
    // hang-up), so the keepalive goes out now rather than keepalive_after from now.
    probing_ = true;
    if (now - last_traffic_ >= options_.keepalive_after) {
      last_heard_ = now - options_.keepalive_after;
    }
  }
  if (now - last_heard_ < options_.keepalive_after) return true;
  // Never while the forwards are asked for: libssh follows one global request at a time.
  if (!keepalive_sent_ && endpoint_phase_ != EndpointPhase::kForward) {
    // libssh keeps the state of the previous global request until the next call, which
    // then only clears it: the first call may just reset, the second then sends. While a
    // request is still pending both only poll.
    ssh_send_keepalive(session_.get());
    ssh_send_keepalive(session_.get());
    keepalive_sent_ = true;
    keepalive_ever_sent_ = true;
    return true;
  }
  if (now - last_heard_ < options_.keepalive_after + options_.keepalive_timeout) return true;
  // The keepalive's allowance ran out: a guest starved of CPU gets it stretched.
  const double slowdown = Slowdown();
  if (now - last_heard_ <
      options_.keepalive_after + StretchedBy(options_.keepalive_timeout, slowdown))
    return true;
  dropped_slowdown_ = slowdown;
  return false;
}

double ControlSession::Slowdown() const { return options_.slowdown ? options_.slowdown() : 1.0; }

bool ControlSession::Alive() {
  if (session_ == nullptr) return false;
  ssh_session s = session_.get();
  if ((ssh_get_status(s) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0) return false;
  return ssh_is_connected(s) != 0;
}

void ControlSession::Service() {
  std::vector<Channel*> snapshot;
  snapshot.reserve(channels_.size());
  for (auto& [id, c] : channels_) snapshot.push_back(c.get());
  // Channels are freed only in ReapChannels, so these pointers stay valid even when a
  // libssh call below runs callbacks.
  bool hung = false;
  double slowdown = 0;  // asked once, and only when a channel open is overdue
  for (Channel* c : snapshot) {
    ServiceChannel(*c);
    if ((c->phase == Channel::Phase::kOpening || c->phase == Channel::Phase::kPty ||
         c->phase == Channel::Phase::kStart) &&
        Clock::now() - c->since > options_.channel_open_timeout) {
      if (slowdown == 0) slowdown = Slowdown();
      if (Clock::now() - c->since > StretchedBy(options_.channel_open_timeout, slowdown))
        hung = true;
    }
  }
  ReapChannels();
  if (hung) {
    LogWarn("guest control connection hung vm=" + LogQuote(options_.vm_id) +
            " reason=\"a channel open was not answered\" slowdown=" + FormatSlowdown(slowdown));
    TearDown(Unavailable("VM " + options_.vm_id + " stopped answering on its control connection"),
             /*graceful=*/false);
  }
}

bool ControlSession::InstallCallbacks(Channel& c) {
  ssh_channel_callbacks_struct& cb = c.callbacks;
  cb.userdata = &c;
  cb.channel_data_function = &ControlSessionCallbacks::Data;
  cb.channel_eof_function = &ControlSessionCallbacks::Eof;
  cb.channel_close_function = &ControlSessionCallbacks::Close;
  cb.channel_exit_status_function = &ControlSessionCallbacks::ExitStatus;
  cb.channel_exit_signal_function = &ControlSessionCallbacks::ExitSignal;
  ssh_callbacks_init(&cb);
  return ssh_set_channel_callbacks(c.ch, &cb) == SSH_OK;
}

void ControlSession::ServiceChannel(Channel& c) {
  using Phase = Channel::Phase;
  ssh_session s = session_.get();
  if (c.phase == Phase::kNew) {
    c.ch = ssh_channel_new(s);
    if (c.ch == nullptr) {
      c.io->Fail(Internal("cannot create an SSH channel"));
      c.phase = Phase::kDone;
      return;
    }
    if (!InstallCallbacks(c)) {
      c.io->Fail(Internal("cannot set SSH channel callbacks"));
      c.phase = Phase::kDone;
      return;
    }
    c.phase = Phase::kOpening;
  }
  const GuestChannelRequest& req = c.io->request();
  using Kind = GuestChannelRequest::Kind;
  if (c.phase == Phase::kOpening) {
    const bool forward = req.kind == Kind::kTcp || req.kind == Kind::kUnix;
    int rc = req.kind == Kind::kTcp
                 ? ssh_channel_open_forward(c.ch, "127.0.0.1", req.port, req.originator.c_str(),
                                            req.originator_port)
             : req.kind == Kind::kUnix
                 ? ssh_channel_open_forward_unix(c.ch, req.path.c_str(), req.originator.c_str(),
                                                 req.originator_port)
                 : ssh_channel_open_session(c.ch);
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
      c.io->Fail(
          req.kind == Kind::kTcp
              ? Unavailable("nothing in the VM accepted a connection on port " +
                            std::to_string(req.port) + " (" + GuestSshError(s) + ")")
          : req.kind == Kind::kUnix
              ? Unavailable("nothing in the VM accepted a connection on " + req.path + " (" +
                            GuestSshError(s) + ")")
              : Unavailable(std::string("the guest refused a channel: ") + GuestSshError(s)));
      c.phase = Phase::kDone;
      return;
    }
    if (forward) {
      c.io->SetOpen(generation_.load());
      c.phase = Phase::kRunning;
    } else {
      c.phase = req.terminal ? Phase::kPty : Phase::kStart;
    }
  }
  if (c.phase == Phase::kPty) {
    const GuestTerminal& t = *req.terminal;
    int rc = ssh_channel_request_pty_size(c.ch, t.term.c_str(), static_cast<int>(t.cols),
                                          static_cast<int>(t.rows));
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
      c.io->Fail(Unavailable(std::string("the guest refused a terminal: ") + GuestSshError(s)));
      c.phase = Phase::kDone;
      return;
    }
    c.phase = Phase::kStart;
  }
  if (c.phase == Phase::kStart) {
    int rc = req.kind == Kind::kShell ? ssh_channel_request_shell(c.ch)
             : req.kind == Kind::kSubsystem
                 ? ssh_channel_request_subsystem(c.ch, req.command.c_str())
                 : ssh_channel_request_exec(c.ch, req.command.c_str());
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
      c.io->Fail(req.kind == Kind::kSubsystem
                     ? Unavailable("the VM does not offer the " + req.command + " subsystem")
                     : Unavailable(std::string("the guest refused to run a command: ") +
                                   GuestSshError(s)));
      c.phase = Phase::kDone;
      return;
    }
    c.io->SetOpen(generation_.load());
    c.phase = Phase::kRunning;
  }
  if (c.phase == Phase::kClosing) {
    if (c.remote_closed || Clock::now() - c.since > kCloseWait) c.phase = Phase::kDone;
    return;
  }
  if (c.phase != Phase::kRunning) return;

  if (c.io->caller_closed()) {
    // A caller that closed its input first (the proxy's answer, then EOF) closes gracefully:
    // what it queued goes out before the close, for up to kCloseWait.
    if (c.io->raw() && !c.remote_closed && !c.eof_sent && c.io->StdinClosed()) {
      if (!c.draining) {
        c.draining = true;
        c.since = Clock::now();
      }
      FlushStdin(c);
      if (!c.eof_sent && Clock::now() - c.since < kCloseWait) return;
    }
    if (c.remote_closed) {
      c.phase = Phase::kDone;
    } else {
      ssh_channel_close(c.ch);  // EOF and close; the guest's side sees its pipes go
      c.phase = Phase::kClosing;
      c.since = Clock::now();
    }
    return;
  }
  // Stdout: move what libssh kept back into the buffer the caller has since made room in.
  // Reading never more than the backlog keeps libssh from polling the socket (and so from
  // running callbacks) inside ssh_channel_read_nonblocking.
  for (int is_stderr = 0; is_stderr <= 1; ++is_stderr) {
    size_t& backlog = is_stderr ? c.stderr_backlog : c.backlog;
    if (backlog == 0) continue;
    char buf[16 * 1024];
    size_t room = is_stderr ? c.io->StderrSpace() : c.io->StdoutSpace();
    while (backlog > 0 && room > 0) {
      size_t want = std::min({backlog, room, sizeof buf});
      int n = ssh_channel_read_nonblocking(c.ch, buf, static_cast<uint32_t>(want), is_stderr);
      if (n <= 0) {
        backlog = 0;
        break;
      }
      size_t got = static_cast<size_t>(n);
      backlog -= std::min(backlog, got);
      if (is_stderr) {
        c.io->PushStderr(buf, got, backlog);
      } else {
        c.io->PushStdout(buf, got, backlog);
      }
      room -= std::min(room, got);
    }
  }
  if (c.io->raw()) {
    // A raw channel's window changes and signals, as the client sent them (no reply asked).
    GuestChannel::ControlRequests cr = c.io->TakeControlRequests();
    if (cr.resize && req.terminal && !c.remote_closed) {
      ssh_channel_change_pty_size(c.ch, static_cast<int>(cr.resize->cols),
                                  static_cast<int>(cr.resize->rows));
    }
    for (const std::string& sig : cr.signals) {
      if (!c.remote_closed) ssh_channel_request_send_signal(c.ch, sig.c_str());
    }
  }
  bool drained = c.backlog == 0 && c.stderr_backlog == 0;
  if (c.remote_closed && drained && !c.closed_delivered) {
    c.io->SetRemoteClosed();
    c.closed_delivered = true;
  } else if (c.remote_eof && drained && !c.eof_delivered) {
    c.io->SetStdoutEof();
    c.eof_delivered = true;
  }
  if (!c.remote_closed) FlushStdin(c);
}

void ControlSession::FlushStdin(Channel& c) {
  if (c.eof_sent) return;
  std::string bytes;
  for (;;) {
    if (!ssh_channel_is_open(c.ch)) return;
    uint32_t window = ssh_channel_window_size(c.ch);
    if (window == 0) return;  // resumes when the guest's window adjust wakes the loop
    if (!c.io->PeekStdin(std::min<size_t>(window, kMaxWriteChunk), &bytes)) break;
    int n = ssh_channel_write(c.ch, bytes.data(), static_cast<uint32_t>(bytes.size()));
    if (n < 0) {
      c.io->Fail(Unavailable("writing to the guest failed"));
      return;
    }
    c.io->ConsumeStdin(static_cast<size_t>(n));
    if (static_cast<size_t>(n) < bytes.size()) return;
  }
  if (c.io->StdinEofDue()) {
    ssh_channel_send_eof(c.ch);
    c.eof_sent = true;
  }
}

void ControlSession::ReapChannels() {
  for (auto it = channels_.begin(); it != channels_.end();) {
    Channel& c = *it->second;
    if (c.phase != Channel::Phase::kDone) {
      ++it;
      continue;
    }
    if (c.ch != nullptr) {
      ssh_remove_channel_callbacks(c.ch, &c.callbacks);
      // Sends our close if not sent yet; libssh frees the channel once the guest's close
      // has arrived too.
      ssh_channel_free(c.ch);
    }
    it = channels_.erase(it);
  }
  open_channels_.store(static_cast<int>(channels_.size()));
}

int ControlSession::PollMillis() const {
  Clock::time_point due = endpoint_due_;
  if (forward_retry_due_ != Clock::time_point{} &&
      (due == Clock::time_point{} || forward_retry_due_ < due)) {
    due = forward_retry_due_;
  }
  if (due == Clock::time_point{}) return 1000;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(due - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(ms.count() + 1, 0, 1000));
}

void ControlSession::StartEndpoint() {
  endpoint_due_ = {};  // (a refresh before the delay is up is this connection's setup)
  std::optional<EndpointPlan> plan;
  if (options_.endpoint_plan) plan = options_.endpoint_plan();
  if (!plan) {
    endpoint_phase_ = forwards_requested_ ? EndpointPhase::kReady : EndpointPhase::kOff;
    return;
  }
  plan_ = std::move(*plan);
  if (plan_.forwards) {
    // A VM with an endpoint keeps its connection (and so its forwards) up from now on,
    // however it was first made.
    std::lock_guard<std::mutex> lock(mu_);
    keep_connected_ = true;
  }
  if (plan_.forwards && !forwards_requested_ && keepalive_ever_sent_) {
    // A keepalive's answer may still be pending in libssh's one global-request slot, where
    // it would be read as the forward's: a fresh connection asks for them instead, once no
    // caller's channel is on this one (a held-back setup comes due beside a VM's first
    // commands, such as a clone's identity, which must not fail for it).
    LogInfo("guest endpoint reconnects for its forwards vm=" + LogQuote(options_.vm_id));
    reconnect_when_idle_ = true;
    endpoint_phase_ = EndpointPhase::kOff;
    return;
  }
  if (plan_.setup_command.empty()) {
    PlanForwards("", /*setup_ran=*/false);
    return;
  }
  setup_io_ = std::make_shared<GuestChannel>(plan_.setup_command, waker_);
  setup_io_->CloseStdin();
  setup_since_ = Clock::now();
  auto c = std::make_unique<Channel>();
  c->id = next_channel_id_++;
  c->io = setup_io_;
  c->since = setup_since_;
  channels_.emplace(c->id, std::move(c));
  open_channels_.store(static_cast<int>(channels_.size()));
  endpoint_phase_ = EndpointPhase::kSetup;
}

void ControlSession::ServiceEndpoint() {
  if (endpoint_phase_ == EndpointPhase::kSetup) {
    GuestPipe::End end = setup_io_->End();
    end.closed = setup_io_->RemoteClosed();  // its stderr is kept, never consumed
    Status st = setup_io_->status();
    bool late = Clock::now() - setup_since_ > options_.endpoint_setup_timeout;
    if (st.ok() && !end.closed && !late) return;
    std::string err = SanitizeGuestText(setup_io_->StderrText(), 300);
    if (!st.ok()) {
      LogWarn("guest endpoint setup failed vm=" + LogQuote(options_.vm_id) +
              " error=" + LogQuote(st.message()));
      SetEndpointProblem("the guest setup failed: " + st.message());
    } else if (!end.closed) {
      LogWarn("guest endpoint setup did not finish vm=" + LogQuote(options_.vm_id));
      SetEndpointProblem("the guest setup did not finish in time");
    } else if (end.exit_status != 0 && end.exit_status != plan_.reconnect_exit) {
      // sudo refused (no passwordless sudo), or a step failed: the endpoint still works by
      // address, names and https may not.
      LogWarn("guest endpoint setup failed vm=" + LogQuote(options_.vm_id) + " exit=" +
              (end.exit_status ? std::to_string(*end.exit_status) : std::string("none")) +
              " stderr=" + LogQuote(err));
      SetEndpointProblem("the guest setup failed (" + (err.empty() ? "no message" : err) +
                         "): names and https may not work, http://" + plan_.address +
                         "/ with a Host header does");
    } else {
      LogInfo("guest endpoint set up vm=" + LogQuote(options_.vm_id));
      SetEndpointProblem("");
    }
    // The report line (a few bytes, all there once the guest closed the channel).
    std::string out;
    char buf[512];
    while (out.size() < 4096) {
      Result<size_t> n = setup_io_->Read(buf, sizeof buf, Clock::now());
      if (!n.ok() || *n == 0) break;
      out.append(buf, *n);
    }
    setup_io_->Close();
    setup_io_.reset();
    if (st.ok() && end.closed && plan_.reconnect_exit != 0 &&
        end.exit_status == plan_.reconnect_exit && plan_.forwards && setup_reconnects_ < 2) {
      ++setup_reconnects_;
      LogInfo("guest endpoint needs a new connection vm=" + LogQuote(options_.vm_id) +
              " reason=\"the guest's sshd config changed\"");
      reconnect_when_idle_ = true;
      endpoint_phase_ = EndpointPhase::kOff;
      std::lock_guard<std::mutex> lock(mu_);
      keep_connected_ = true;
      return;
    }
    PlanForwards(out, /*setup_ran=*/true,
                 /*setup_ok=*/st.ok() && end.closed && end.exit_status == 0, err);
    if (session_ == nullptr) return;  // remade for the forwards
  }
  if (endpoint_phase_ != EndpointPhase::kForward) return;
  while (forward_next_ < forwards_wanted_.size()) {
    auto [port, https] = forwards_wanted_[forward_next_];
    // Connections to it are ours as soon as it is asked for (the guest may open one before
    // its answer is read).
    forwarded_ports_[port] = https;
    // Non-blocking: SSH_AGAIN until the guest's answer came; called again after each poll.
    int rc = ssh_channel_listen_forward(session_.get(), plan_.address.c_str(), port, nullptr);
    if (rc == SSH_AGAIN) return;
    std::string where = plan_.address + ":" + std::to_string(port);
    if (rc == SSH_OK) {
      LogInfo("guest endpoint listening vm=" + LogQuote(options_.vm_id) + " at=" + where);
    } else {
      forwarded_ports_.erase(port);
      LogWarn("guest endpoint forward refused vm=" + LogQuote(options_.vm_id) + " at=" + where +
              " error=" + LogQuote(GuestSshError(session_.get())));
      if (forward_problems_) {
        if (forwards_refused_.empty() && forward_retries_ == 0) {
          problem_before_refusal_ = endpoint_problem();
        }
        SetEndpointProblem("the guest refused to listen on " + where);
        forwards_refused_.push_back(forwards_wanted_[forward_next_]);
      }
    }
    ++forward_next_;
  }
  forwards_wanted_.clear();
  forward_next_ = 0;
  forwards_requested_ = true;
  endpoint_phase_ = EndpointPhase::kReady;
  endpoint_ready_.store(true);
  // (Over several calls: each returns while the guest's answer is still due.)
  const bool refused = !forwards_refused_.empty();
  if (refused && forward_retries_ < kForwardRetries) {
    // The sshd of the connection before this one may still hold the port (a guest slow to
    // see it closed): the refused forwards again, 1, 2, 4, 8 s from now.
    const auto wait = std::chrono::seconds(1 << forward_retries_);
    ++forward_retries_;
    forward_retry_due_ = Clock::now() + wait;
    LogInfo("guest endpoint asks again for its forwards vm=" + LogQuote(options_.vm_id) +
            " in_ms=" + std::to_string(std::chrono::milliseconds(wait).count()));
  } else if (refused) {
    forwards_refused_.clear();  // given up on this connection; a later round asks again
  } else if (forward_retries_ > 0) {
    // The forwards asked again are all there now.
    SetEndpointProblem(problem_before_refusal_);
    forwards_refused_.clear();
    forward_retries_ = 0;
  }
}

void ControlSession::RetryForwards() {
  forward_retry_due_ = {};
  forwards_wanted_.clear();
  forward_next_ = 0;
  for (const auto& f : forwards_refused_) {
    if (forwarded_ports_.count(f.first) == 0) forwards_wanted_.push_back(f);
  }
  forwards_refused_.clear();
  if (forwards_wanted_.empty()) return;
  if (keepalive_ever_sent_) {
    // A keepalive's answer may still be pending in libssh's one global-request slot (see
    // StartEndpoint): a fresh connection asks for every forward, once no caller's channel
    // is on this one.
    forwards_wanted_.clear();
    LogInfo("guest endpoint reconnects for its forwards vm=" + LogQuote(options_.vm_id));
    reconnect_when_idle_ = true;
    return;
  }
  endpoint_phase_ = EndpointPhase::kForward;
}

void ControlSession::PlanForwards(const std::string& setup_stdout, bool setup_ran, bool setup_ok,
                                  const std::string& setup_stderr) {
  forwards_wanted_.clear();
  forward_next_ = 0;
  forward_problems_ = true;
  if (!plan_.forwards) {
    endpoint_phase_ = forwards_requested_ ? EndpointPhase::kReady : EndpointPhase::kOff;
    return;
  }
  using Ports = std::vector<std::pair<uint16_t, bool>>;
  const Ports direct = {{plan_.http_port, false}, {plan_.https_port, true}};
  const Ports listen = {{plan_.http_listen_port, false}, {plan_.https_listen_port, true}};
  bool can_redirect = plan_.http_listen_port != 0 && plan_.https_listen_port != 0;
  EndpointSetupReport report = ParseEndpointSetupReport(setup_stdout);
  Ports want;
  if (!setup_ran || !can_redirect) {
    want = direct;  // nothing redirects: the URL ports themselves
  } else if (report.mode == EndpointSetupReport::Mode::kRedirect) {
    want = listen;
    LogInfo("guest endpoint redirected vm=" + LogQuote(options_.vm_id) +
            " via=" + LogQuote(report.detail));
  } else if (report.mode == EndpointSetupReport::Mode::kDirect) {
    want = direct;
    LogInfo("guest endpoint without a redirect vm=" + LogQuote(options_.vm_id) +
            " reason=" + LogQuote(report.detail) + " stderr=" + LogQuote(setup_stderr));
    // The endpoint works, but holds ports a service in the VM may want: `stat` says so.
    if (setup_ok) {
      SetEndpointProblem(report.detail + ": the endpoint holds ports " +
                         std::to_string(plan_.http_port) + " and " +
                         std::to_string(plan_.https_port));
    }
  } else if (!forwards_requested_) {
    // The setup failed before saying (its failure is the problem already): both, so the
    // endpoint answers whether an earlier setup's redirect is in place or not.
    want = listen;
    want.insert(want.end(), direct.begin(), direct.end());
    forward_problems_ = false;
  }
  for (const auto& w : want) {
    if (forwarded_ports_.count(w.first) == 0) forwards_wanted_.push_back(w);
  }
  if (forwards_wanted_.empty()) {
    endpoint_phase_ = forwards_requested_ ? EndpointPhase::kReady : EndpointPhase::kOff;
    return;
  }
  if (forwards_requested_ && keepalive_ever_sent_) {
    // The guest changed modes under a connection that has sent keepalives (see
    // StartEndpoint): a fresh connection asks for the forwards the next setup calls for.
    LogInfo("guest endpoint reconnects for its forwards vm=" + LogQuote(options_.vm_id));
    TearDown(Unavailable("the control connection to VM " + options_.vm_id +
                         " is being remade for its integrations endpoint"),
             /*graceful=*/true);
    return;
  }
  endpoint_phase_ = EndpointPhase::kForward;
}

bool ControlSession::AcceptForward(ssh_message message) {
  if (session_ == nullptr || !options_.accept_forward) return false;
  const char* dest = ssh_message_channel_request_open_destination(message);
  int port = ssh_message_channel_request_open_destination_port(message);
  auto forwarded = port > 0 && port <= 65535 ? forwarded_ports_.find(static_cast<uint16_t>(port))
                                             : forwarded_ports_.end();
  if (dest == nullptr || plan_.address != dest || forwarded == forwarded_ports_.end()) {
    return false;
  }
  if (static_cast<int>(channels_.size()) >= options_.max_channels) {
    LogWarn("guest endpoint connection refused vm=" + LogQuote(options_.vm_id) +
            " reason=\"too many channels\"");
    return false;
  }
  bool https = forwarded->second;
  GuestChannelRequest request;
  request.kind = GuestChannelRequest::Kind::kTcp;
  request.port = static_cast<uint16_t>(port);
  auto c = std::make_unique<Channel>();
  c->id = next_channel_id_++;
  c->io = std::make_shared<GuestChannel>(std::move(request), waker_, nullptr);
  c->ch = ssh_channel_new(session_.get());
  if (c->ch == nullptr) return false;
  if (!InstallCallbacks(*c) ||
      ssh_message_channel_request_open_reply_accept_channel(message, c->ch) != SSH_OK) {
    ssh_remove_channel_callbacks(c->ch, &c->callbacks);
    ssh_channel_free(c->ch);
    return false;
  }
  c->phase = Channel::Phase::kRunning;
  c->since = Clock::now();
  c->io->SetOpen(generation_.load());
  std::shared_ptr<GuestChannel> io = c->io;
  channels_.emplace(c->id, std::move(c));
  open_channels_.store(static_cast<int>(channels_.size()));
  std::function<void()> notify = options_.accept_forward(https, io);
  if (!notify) {
    io->Close();  // closed by Service like any channel its caller dropped
  } else {
    io->SetNotify(std::move(notify));
  }
  return true;
}

}  // namespace warren::guest
