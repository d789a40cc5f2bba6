#include "lobby/ssh/ssh_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "keys/public_key.h"
#include "lobby/base/error_map.h"
#include "lobby/base/log.h"
#include "lobby/commands/vm_login.h"
#include "lobby/ssh/lobby_workers.h"
#include "lobby/ssh/session_channel.h"
#include "lobby/ssh/vm_route.h"

namespace warren::ssh {

namespace {
std::atomic<int> g_abandoned_workers{0};
}  // namespace

int AbandonedWorkers() { return g_abandoned_workers.load(); }

// The static trampolines libssh calls; each forwards to the connection or channel.
struct ConnectionCallbacks {
  static int AuthPubkey(ssh_session, const char* user, ssh_key pubkey, char state, void* ud) {
    return static_cast<SshConnection*>(ud)->OnAuthPubkey(user, pubkey, state);
  }
  static int AuthPassword(ssh_session, const char* user, const char*, void* ud) {
    // The password itself is never looked at, let alone logged.
    return static_cast<SshConnection*>(ud)->OnAuthPassword(user);
  }
  static ssh_channel ChannelOpen(ssh_session, void* ud) {
    return static_cast<SshConnection*>(ud)->OnChannelOpen();
  }
  static int Message(ssh_session, ssh_message message, void* ud) {
    return static_cast<SshConnection*>(ud)->OnMessage(message);
  }
  static int Wake(socket_t, int, void* ud) {
    static_cast<SshConnection*>(ud)->waker_->Drain();
    return 0;
  }

  static int Data(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    // Extended data from a client means nothing to us; a closed channel drops input.
    if (is_stderr || c->finished || c->remote_closed || c->broken) return static_cast<int>(len);
    if (c->pipe != nullptr) return static_cast<int>(VmRoute::PushInput(*c, data, len));
    // libssh hands over everything it holds for the channel (earlier leftovers included), so
    // what stays unconsumed is exactly len - n. While it stays, libssh stops widening the
    // client's window: that is the flow control.
    size_t n = c->io->PushStdin(static_cast<const char*>(data), len);
    c->backlog = len - n;
    return static_cast<int>(n);
  }
  static void Eof(ssh_session, ssh_channel, void* ud) {
    static_cast<SessionChannel*>(ud)->remote_eof = true;
  }
  static void Close(ssh_session, ssh_channel, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    c->remote_closed = true;
    c->remote_eof = true;
    c->io->Cancel();  // thread-safe and touches no libssh state
  }
  static void SetTerminal(SessionChannel* c, int width, int height, int pxwidth, int pxheight) {
    c->terminal.cols = static_cast<uint32_t>(std::clamp(width, 0, 10000));
    c->terminal.rows = static_cast<uint32_t>(std::clamp(height, 0, 10000));
    c->terminal.width_px = static_cast<uint32_t>(std::clamp(pxwidth, 0, 1 << 20));
    c->terminal.height_px = static_cast<uint32_t>(std::clamp(pxheight, 0, 1 << 20));
  }
  static int PtyRequest(ssh_session, ssh_channel, const char* term, int width, int height,
                        int pxwidth, int pxheight, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    if (c->started) return -1;
    c->pty = true;
    std::string_view t = term == nullptr ? "" : term;
    c->terminal.term = t.empty() || t.size() > 64 ? "xterm" : std::string(t);
    SetTerminal(c, width, height, pxwidth, pxheight);
    return 0;
  }
  static int PtyResize(ssh_session, ssh_channel, int width, int height, int pxwidth, int pxheight,
                       void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    SetTerminal(c, width, height, pxwidth, pxheight);
    if (c->pipe != nullptr) c->pipe->Resize(c->terminal);  // thread-safe, no libssh
    return 0;
  }
  static void Signal(ssh_session, ssh_channel, const char* signal, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    std::string_view sig = signal == nullptr ? "" : signal;
    if (c->pipe != nullptr && !sig.empty() && sig.size() <= 16) c->pipe->Signal(sig);
  }
  static int Shell(ssh_session, ssh_channel, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    if (VmRoute* vm = c->conn->vm_route_.get()) {
      return vm->StartSession(*c, GuestChannelRequest::Kind::kShell, "") ? 0 : -1;
    }
    return c->conn->StartWorker(*c, /*shell=*/true, "") ? 0 : -1;
  }
  static int Exec(ssh_session, ssh_channel, const char* command, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    std::string line = command == nullptr ? "" : command;
    if (VmRoute* vm = c->conn->vm_route_.get()) {
      return vm->StartSession(*c, GuestChannelRequest::Kind::kExec, std::move(line)) ? 0 : -1;
    }
    return c->conn->StartWorker(*c, /*shell=*/false, std::move(line)) ? 0 : -1;
  }
  static int Env(ssh_session, ssh_channel, const char* name, const char* value, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    VmRoute* vm = c->conn->vm_route_.get();
    // The lobby accepts and ignores them (OpenSSH sends LANG and friends).
    if (vm == nullptr) return 0;
    return vm->TakeEnv(*c, name == nullptr ? "" : name, value == nullptr ? "" : value) ? 0 : -1;
  }
  static int Subsystem(ssh_session, ssh_channel, const char* subsystem, void* ud) {
    auto* c = static_cast<SessionChannel*>(ud);
    std::string name = subsystem == nullptr ? "" : subsystem;
    if (VmRoute* vm = c->conn->vm_route_.get()) {
      return vm->StartSession(*c, GuestChannelRequest::Kind::kSubsystem, std::move(name)) ? 0 : -1;
    }
    LogInfo("ssh subsystem refused peer=" + c->conn->peer_ + " subsystem=" + LogQuote(name) +
            " reason=\"not available in the lobby\"");
    return -1;  // the client reports "subsystem request failed"
  }
};

namespace {

std::string KeyLine(ssh_key key) {
  char* b64_raw = nullptr;
  if (ssh_pki_export_pubkey_base64(key, &b64_raw) != SSH_OK || b64_raw == nullptr) return "";
  CharPtr b64(b64_raw);
  return std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + b64.get();
}

Result<std::string> KeyFingerprint(ssh_key key) {
  char* b64_raw = nullptr;
  if (ssh_pki_export_pubkey_base64(key, &b64_raw) != SSH_OK || b64_raw == nullptr) {
    return InvalidArgument("unreadable public key");
  }
  CharPtr b64(b64_raw);
  return FingerprintOfBase64Blob(b64.get());
}

const char* ChannelTypeName(int subtype) {
  switch (subtype) {
    case SSH_CHANNEL_SESSION:
      return "session";
    case SSH_CHANNEL_DIRECT_TCPIP:
      return "direct-tcpip";
    case SSH_CHANNEL_FORWARDED_TCPIP:
      return "forwarded-tcpip";
    case SSH_CHANNEL_X11:
      return "x11";
    case SSH_CHANNEL_AUTH_AGENT:
      return "auth-agent";
    default:
      return "unknown";
  }
}

const char* AuthMethodName(int subtype) {
  switch (subtype) {
    case SSH_AUTH_METHOD_NONE:
      return "none";
    case SSH_AUTH_METHOD_PASSWORD:
      return "password";
    case SSH_AUTH_METHOD_PUBLICKEY:
      return "publickey";
    case SSH_AUTH_METHOD_HOSTBASED:
      return "hostbased";
    case SSH_AUTH_METHOD_INTERACTIVE:
      return "keyboard-interactive";
    case SSH_AUTH_METHOD_GSSAPI_MIC:
      return "gssapi-with-mic";
    default:
      return "unknown";
  }
}

}  // namespace

SshConnection::SshConnection(const ConnectionConfig& config, SessionPtr session, std::string peer)
    : config_(config),
      session_(std::move(session)),
      peer_(std::move(peer)),
      started_(std::chrono::steady_clock::now()),
      waker_(std::make_shared<EventWaker>()) {}

SshConnection::~SshConnection() = default;

void SshConnection::Stop() {
  stop_requested_.store(true);
  waker_->Wake();  // the loop (key exchange included) never blocks but in its poll
}

bool SshConnection::Alive() {
  ssh_session s = session_.get();
  if ((ssh_get_status(s) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0) return false;
  return ssh_is_connected(s) != 0;
}

void SshConnection::Run() {
  ssh_session s = session_.get();
  auto deadline = started_ + config_.preauth_timeout;

  ssh_set_auth_methods(s, SSH_AUTH_METHOD_PUBLICKEY);  // the only method we advertise

  server_callbacks_.userdata = this;
  server_callbacks_.auth_pubkey_function = &ConnectionCallbacks::AuthPubkey;
  server_callbacks_.auth_password_function = &ConnectionCallbacks::AuthPassword;
  server_callbacks_.channel_open_request_session_function = &ConnectionCallbacks::ChannelOpen;
  ssh_callbacks_init(&server_callbacks_);
  ssh_set_server_callbacks(s, &server_callbacks_);
  // Everything the callbacks above do not take (other auth methods, port forwarding,
  // global requests) comes here and gets a refusal.
  ssh_set_message_callback(s, &ConnectionCallbacks::Message, this);

  ssh_set_blocking(s, 0);  // no libssh call may wait on the network, the key exchange's neither
  if (!KeyExchange(deadline)) {
    Teardown();
    return;
  }

  while (!stop_requested_.load()) {
    // Ending: look often, to leave as soon as the closed channels are gone.
    int timeout_ms = ending_ ? 50 : 1000;
    if (!authenticated_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) {
        LogInfo("ssh auth timeout peer=" + peer_);
        break;
      }
      timeout_ms = static_cast<int>(std::min<long>(left, timeout_ms));
    }
    ssh_event_dopoll(event_.get(), timeout_ms);
    if (!Alive()) break;
    if (!authenticated_ && auth_failures_ >= config_.max_auth_failures) {
      LogInfo("ssh too many auth failures peer=" + peer_ +
              " failures=" + std::to_string(auth_failures_));
      break;
    }
    Service();
    if (!ending_) {
      std::optional<Status> why;
      {
        std::lock_guard<std::mutex> lock(revoked_mu_);
        why = revoked_;
      }
      if (why.has_value()) EndRevoked(*why);
    }
    if (ending_ && (channels_.empty() || std::chrono::steady_clock::now() >= ending_deadline_)) {
      break;
    }
  }
  Teardown();
}

// Sets up the event loop and drives the key exchange to its end on it, by the pre-auth
// deadline. Before each wait the socket is put back in quick-ACK mode: the kernel turns
// delayed ACKs on once we answer what the client sent (our KEXINIT answers its banner), and a
// client that sends its KEXINIT and then its key share in two writes holds the second (Nagle)
// until the first is ACKed: a delayed ACK cost ~4 in 10 handshakes 40 ms
// (tests/bench/ssh_sessions.py).
bool SshConnection::KeyExchange(std::chrono::steady_clock::time_point deadline) {
  ssh_session s = session_.get();
  // The first step sends our identification line (unless the listener did) and makes the
  // session's poll handle, which the event takes over.
  int kex = stop_requested_.load() ? SSH_ERROR : ssh_handle_key_exchange(s);
  if (kex != SSH_ERROR) {
    event_.reset(ssh_event_new());
    if (event_ == nullptr || !waker_->ok() || ssh_event_add_session(event_.get(), s) != SSH_OK ||
        ssh_event_add_fd(event_.get(), waker_->fd(), POLLIN, &ConnectionCallbacks::Wake, this) !=
            SSH_OK) {
      LogError("ssh connection setup failed peer=" + peer_);
      return false;
    }
  }
  while (kex == SSH_AGAIN) {
    if (stop_requested_.load()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      LogInfo("ssh handshake timeout peer=" + peer_);
      return false;
    }
    int one = 1;
    setsockopt(ssh_get_fd(s), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    ssh_event_dopoll(event_.get(), static_cast<int>(std::min<long>(left, 1000)));
    kex = ssh_handle_key_exchange(s);
  }
  if (kex != SSH_OK) {
    LogInfo("ssh handshake failed peer=" + peer_ + " error=" + LogQuote(ssh_get_error(s)));
    return false;
  }
  return true;
}

void SshConnection::EndRevoked(const Status& why) {
  ending_ = true;
  // Time for the closes to go out (and the client's to come back) before the disconnect.
  ending_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  LogInfo("ssh connection ending peer=" + peer_ + " user=" + LogQuote(caller_.user) +
          " reason=" + LogQuote(why.message()));
  std::vector<SessionChannel*> snapshot;
  for (auto& [id, c] : channels_) snapshot.push_back(c.get());
  for (SessionChannel* c : snapshot) {
    // A command (lobby, REPL, or under the guest runner) is cancelled; a raw channel into
    // the VM is closed on the guest's side.
    c->io->Cancel();
    if (c->pipe != nullptr) c->pipe->Close();
    if (c->finished || c->remote_closed || c->broken) continue;
    if (c->started && !c->tcp) {
      std::string text = "error: " + why.message() + (c->pty ? "\r\n" : "\n");
      if (WritableNow(c->ch) >= text.size()) WriteToClient(c->ch, /*is_stderr=*/!c->pty, text);
      ssh_channel_request_send_exit_status(c->ch, ExitStatusFor(why.code()));
    }
    ssh_channel_send_eof(c->ch);
    ssh_channel_close(c->ch);
    c->finished = true;
  }
}

void SshConnection::Service() {
  std::vector<SessionChannel*> snapshot;
  snapshot.reserve(channels_.size());
  for (auto& [id, c] : channels_) snapshot.push_back(c.get());
  // Channels are only ever freed in ReapChannels, so the pointers stay valid even when a
  // libssh call below runs callbacks (which may open new channels).
  for (SessionChannel* c : snapshot) ServiceChannel(*c);
  ReapChannels();
}

void SshConnection::ServiceChannel(SessionChannel& c) {
  if (c.pipe != nullptr) {
    vm_route_->Service(c);  // a raw channel into the VM
    return;
  }
  // Stdin: move what libssh kept back into the buffer the worker has since made room in.
  // Reading never more than the backlog keeps libssh from polling the socket (and so
  // from running callbacks) inside ssh_channel_read_nonblocking.
  if (c.backlog > 0 && !c.remote_closed && !c.finished) {
    char buf[16 * 1024];
    size_t room = c.io->StdinSpace();
    while (c.backlog > 0 && room > 0) {
      size_t want = std::min({c.backlog, room, sizeof buf});
      int n = ssh_channel_read_nonblocking(c.ch, buf, static_cast<uint32_t>(want), 0);
      if (n <= 0) {
        c.backlog = 0;
        break;
      }
      c.io->PushStdin(buf, static_cast<size_t>(n));
      c.backlog -= std::min(c.backlog, static_cast<size_t>(n));
      room -= std::min(room, static_cast<size_t>(n));
    }
  }
  if (c.remote_eof && c.backlog == 0 && !c.eof_delivered) {
    c.io->SetStdinEof();
    c.eof_delivered = true;
  }

  if (c.finished || c.remote_closed || c.broken) return;
  FlushOutput(c);
  if (c.broken) return;

  int exit_status = 0;
  if (c.started && c.io->Drained(&exit_status)) {
    // The order clients rely on: exit-status, then EOF, then close.
    ssh_channel_request_send_exit_status(c.ch, exit_status);
    ssh_channel_send_eof(c.ch);
    ssh_channel_close(c.ch);
    c.finished = true;
  }
}

void SshConnection::FlushOutput(SessionChannel& c) {
  std::string bytes;
  bool is_stderr = false;
  for (;;) {
    size_t room = WritableNow(c.ch);
    if (room == 0) return;
    if (!c.io->PeekOutput(room, &bytes, &is_stderr)) return;
    int n = WriteToClient(c.ch, is_stderr, bytes);
    if (n < 0) {
      c.broken = true;
      c.io->Cancel();
      return;
    }
    c.io->ConsumeOutput(static_cast<size_t>(n));
    if (static_cast<size_t>(n) < bytes.size()) return;
  }
}

void SshConnection::ReapChannels() {
  for (auto it = channels_.begin(); it != channels_.end();) {
    SessionChannel& c = *it->second;
    bool closed = c.finished || c.remote_closed || c.broken;
    bool worker_running = c.worker.joinable() && !c.io->worker_done();
    if (!closed || worker_running) {
      ++it;
      continue;
    }
    if (c.worker.joinable()) c.worker.join();
    if (c.pipe != nullptr) c.pipe->Close();  // the guest's side of the channel goes too
    ssh_remove_channel_callbacks(c.ch, &c.callbacks);
    // Sends our close if not sent yet; libssh frees the channel once the client's close
    // has arrived too.
    ssh_channel_free(c.ch);
    it = channels_.erase(it);
  }
}

bool SshConnection::StartWorker(SessionChannel& c, bool shell, std::string command) {
  if (c.started || !authenticated_ || vm_route_ != nullptr) return false;
  auto io = c.io;
  Interpreter* interpreter = config_.interpreter;
  Caller caller = caller_;
  bool pty = c.pty;
  try {
    c.worker = std::thread([io, interpreter, caller, pty, shell, command = std::move(command)] {
      int status = ExitStatusFor(Code::kInternal);
      try {
        status = shell ? RunRepl(*io, *interpreter, caller, pty)
                       : RunExecCommand(*io, *interpreter, caller, command, pty);
      } catch (const std::exception& e) {
        LogError(std::string("ssh worker failed: ") + e.what());
      }
      io->Finish(status);
    });
  } catch (const std::system_error& e) {
    LogError(std::string("ssh cannot start a worker thread: ") + e.what());
    return false;
  }
  c.started = true;
  return true;
}

bool SshConnection::OpenVmTcp(ssh_message message) {
  if (static_cast<int>(channels_.size()) >= config_.max_vm_channels) {
    LogInfo("ssh channel refused peer=" + peer_ +
            " type=direct-tcpip reason=\"too many channels\"");
    return false;
  }
  return vm_route_->OpenTcp(message, [this](ssh_channel ch) { return NewChannel(ch); });
}

ssh_channel SshConnection::OnChannelOpen() {
  if (!authenticated_ || stop_requested_.load() || ending_) return nullptr;
  int limit = vm_route_ != nullptr ? config_.max_vm_channels : config_.max_channels;
  if (static_cast<int>(channels_.size()) >= limit) {
    LogInfo("ssh channel refused peer=" + peer_ +
            " reason=\"too many channels\" limit=" + std::to_string(limit));
    return nullptr;
  }
  ssh_channel ch = ssh_channel_new(session_.get());
  if (ch == nullptr) return nullptr;
  if (NewChannel(ch) == nullptr) {
    ssh_channel_free(ch);
    return nullptr;
  }
  return ch;
}

SessionChannel* SshConnection::NewChannel(ssh_channel ch) {
  auto c = std::make_unique<SessionChannel>();
  c->conn = this;
  c->id = next_channel_id_++;
  c->ch = ch;
  c->io = std::make_shared<ChannelIo>(waker_);
  ssh_channel_callbacks_struct& cb = c->callbacks;
  cb.userdata = c.get();
  cb.channel_data_function = &ConnectionCallbacks::Data;
  cb.channel_eof_function = &ConnectionCallbacks::Eof;
  cb.channel_close_function = &ConnectionCallbacks::Close;
  cb.channel_pty_request_function = &ConnectionCallbacks::PtyRequest;
  cb.channel_pty_window_change_function = &ConnectionCallbacks::PtyResize;
  cb.channel_shell_request_function = &ConnectionCallbacks::Shell;
  cb.channel_exec_request_function = &ConnectionCallbacks::Exec;
  cb.channel_env_request_function = &ConnectionCallbacks::Env;
  cb.channel_subsystem_request_function = &ConnectionCallbacks::Subsystem;
  cb.channel_signal_function = &ConnectionCallbacks::Signal;
  ssh_callbacks_init(&cb);
  if (ssh_set_channel_callbacks(ch, &cb) != SSH_OK) return nullptr;
  ++channels_opened_;
  SessionChannel* raw = c.get();
  channels_.emplace(c->id, std::move(c));
  return raw;
}

void SshConnection::SendAccessBannerOnce(const std::string& key_line) {
  if (banner_sent_) return;
  banner_sent_ = true;
  std::string key = key_line.empty() ? "<your public key, e.g. ~/.ssh/id_ed25519.pub>" : key_line;
  std::string dest = "-p " + std::to_string(config_.info->ssh_port) + " " + config_.info->ssh_host;
  std::string text =
      "warren: this SSH key is not registered on this server, so it cannot log in.\n"
      "To get access, ask an admin of this server to run:\n"
      "  ssh " +
      dest + " user add NAME --key '" + key +
      "'\n"
      "or, if you already have a key that works here, add this one with it:\n"
      "  ssh " +
      dest + " ssh-key add '" + key + "'\n";
  ssh_string banner = ssh_string_from_char(text.c_str());
  if (banner == nullptr) return;
  StringPtr owned(banner);
  ssh_send_issue_banner(session_.get(), owned.get());
}

void SshConnection::CountAuthFailure(std::string_view method, std::string_view reason,
                                     std::string_view fingerprint) {
  ++auth_failures_;
  std::string line = "ssh auth refused peer=" + peer_ + " login=" + LogQuote(login_name_) +
                     " method=" + std::string(method);
  if (!fingerprint.empty()) line += " key=" + std::string(fingerprint);
  line += " reason=" + LogQuote(reason);
  LogInfo(line);
}

int SshConnection::OnAuthPubkey(const char* user, ssh_key pubkey, char signature_state) {
  if (authenticated_) return SSH_AUTH_DENIED;
  login_name_ = user == nullptr ? "" : user;
  Result<std::string> fp = KeyFingerprint(pubkey);
  if (!fp.ok()) {
    CountAuthFailure("publickey", "unreadable key", "");
    return SSH_AUTH_DENIED;
  }
  if (signature_state == SSH_PUBLICKEY_STATE_NONE) {
    // The probe: "would you accept this key?" Say yes only for a key we know and that is
    // still valid, so an unknown key never gets as far as a signature.
    Result<SshKey> key = config_.store->GetKey(*fp);
    if (key.ok() && !key->scope.Expired(config_.clock->NowUnix())) return SSH_AUTH_SUCCESS;
    CountAuthFailure("publickey", key.ok() ? "key expired" : "unknown key", *fp);
    SendAccessBannerOnce(KeyLine(pubkey));
    return SSH_AUTH_DENIED;
  }
  if (signature_state != SSH_PUBLICKEY_STATE_VALID) {
    CountAuthFailure("publickey", "bad signature", *fp);
    return SSH_AUTH_DENIED;
  }
  Result<Caller> caller = CallerForKey(*config_.store, *config_.clock, *fp, "ssh");
  if (!caller.ok()) {
    CountAuthFailure("publickey", caller.status().message(), *fp);
    SendAccessBannerOnce(KeyLine(pubkey));
    return SSH_AUTH_DENIED;
  }
  // Until the connection ends, removing its key (or its user) ends it (EndRevoked).
  live_ = config_.interpreter->live_sessions().Register(*caller, this, [this](const Status& why) {
    {
      std::lock_guard<std::mutex> lock(revoked_mu_);
      revoked_ = why;
    }
    waker_->Wake();
  });
  // A removal that committed between CallerForKey and the registration was swept without
  // us: look once more.
  Caller recheck = *caller;
  if (Status st = RevalidateCaller(recheck, *config_.store, config_.clock->NowUnix()); !st.ok()) {
    live_.Reset();
    CountAuthFailure("publickey", st.message(), *fp);
    return SSH_AUTH_DENIED;
  }
  if (config_.admit_login) {
    if (Status admitted = config_.admit_login(*this, caller->user); !admitted.ok()) {
      live_.Reset();
      CountAuthFailure("publickey", admitted.message(), *fp);
      return SSH_AUTH_DENIED;
    }
  }
  caller_ = std::move(caller).value();
  authenticated_ = true;
  // Where this connection leads, decided once: the login name names one of the caller's
  // VMs (or says vm+NAME), or it reaches the lobby.
  std::optional<std::string> vm = VmLoginTarget(*config_.store, caller_, login_name_);
  if (vm.has_value()) {
    vm_route_ = std::make_unique<VmRoute>(*config_.interpreter, caller_, *vm, waker_, peer_);
  }
  LogInfo(
      "ssh login peer=" + peer_ + " login=" + LogQuote(login_name_) +
      " user=" + LogQuote(caller_.user) + " key=" + *fp +
      (vm_route_ != nullptr ? " route=vm vm=" + LogQuote(vm_route_->vm_name()) : " route=lobby"));
  return SSH_AUTH_SUCCESS;
}

int SshConnection::OnAuthPassword(const char* user) {
  login_name_ = user == nullptr ? "" : user;
  CountAuthFailure("password", "only public keys are accepted", "");
  SendAccessBannerOnce("");
  return SSH_AUTH_DENIED;
}

int SshConnection::OnMessage(ssh_message message) {
  int type = ssh_message_type(message);
  int subtype = ssh_message_subtype(message);
  switch (type) {
    case SSH_REQUEST_AUTH:
      if (subtype != SSH_AUTH_METHOD_NONE) {
        const char* user = ssh_message_auth_user(message);
        login_name_ = user == nullptr ? "" : user;
        CountAuthFailure(AuthMethodName(subtype), "only public keys are accepted", "");
        SendAccessBannerOnce("");
      }
      break;  // the default reply: failure, "publickey" may continue
    case SSH_REQUEST_CHANNEL_OPEN:
      if (subtype == SSH_CHANNEL_DIRECT_TCPIP && authenticated_ && vm_route_ != nullptr &&
          !ending_) {
        return OpenVmTcp(message) ? 0 : 1;
      }
      LogInfo("ssh channel refused peer=" + peer_ + " type=" + ChannelTypeName(subtype) +
              (subtype == SSH_CHANNEL_DIRECT_TCPIP ? " reason=\"port forwarding is not available\""
                                                   : ""));
      break;  // the default reply: administratively prohibited
    case SSH_REQUEST_GLOBAL:
      if (subtype == SSH_GLOBAL_REQUEST_TCPIP_FORWARD) {
        LogInfo("ssh remote forwarding refused peer=" + peer_);
      }
      break;  // the default reply: request failure (also for keepalives, as OpenSSH expects)
    default:
      break;  // channel requests we do not serve (signal, x11, agent...) are refused
  }
  return 1;  // let libssh send the default (refusing) reply
}

void SshConnection::Teardown() {
  live_.Reset();  // from here the registry's callback cannot run
  // Commands first: cancel them so that they stop reading and writing; every raw channel
  // into a VM is closed on the guest's side too (nothing is left open on its connection).
  for (auto& [id, c] : channels_) {
    c->io->Cancel();
    if (c->pipe != nullptr) c->pipe->Close();
  }
  // Give workers a moment to notice; a command that ignores cancellation is left behind
  // (it holds only its ChannelIo, never this connection) rather than hang the server.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& [id, c] : channels_) {
    if (!c->worker.joinable()) continue;
    while (!c->io->worker_done() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (c->io->worker_done()) {
      c->worker.join();
    } else {
      LogWarn("ssh command did not stop after cancel peer=" + peer_);
      c->worker.detach();
      g_abandoned_workers.fetch_add(1);
    }
  }
  ssh_session s = session_.get();
  for (auto& [id, c] : channels_) ssh_remove_channel_callbacks(c->ch, &c->callbacks);
  if (event_ != nullptr) {
    ssh_event_remove_fd(event_.get(), waker_->fd());
    ssh_event_remove_session(event_.get(), s);
    event_.reset();
  }
  // Frees the channels too; says goodbye if the socket is still up.
  ssh_disconnect(s);
  channels_.clear();
  waker_->Close();
  auto dur = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - started_)
                 .count();
  if (authenticated_) {
    LogInfo("ssh connection closed peer=" + peer_ + " user=" + LogQuote(caller_.user) +
            " channels=" + std::to_string(channels_opened_) + " dur_ms=" + std::to_string(dur));
  }
}

}  // namespace warren::ssh
