#include "lobby/ssh/vm_route.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>

#include "lobby/base/env_name.h"
#include "lobby/base/error_map.h"
#include "lobby/base/log.h"

namespace warren::ssh {
namespace {

constexpr size_t kMaxEnvVars = 64;
constexpr size_t kMaxEnvValue = 4096;

// Where `ssh -L`/`-W` may point: a port of the VM itself, however the client names it.
bool GuestLocalHost(std::string_view host, std::string_view vm_name) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" || host == "ip6-localhost" ||
         host == vm_name;
}

// Ends a session channel with an error, as a failed lobby command ends: said on the channel,
// then exit-status -> EOF -> close through its ChannelIo. With a terminal there is one
// stream and the client's tty is raw.
void FailChannel(SessionChannel& c, const Status& why) {
  std::string text = "error: " + why.message() + (c.pty ? "\r\n" : "\n");
  c.io->WriteOutput(/*is_stderr=*/!c.pty, text);  // an empty queue: never blocks
  c.io->Finish(ExitStatusFor(why.code()));
  c.started = true;
}

// The worker of a command without a terminal: runs it under the guest runner, streaming the
// channel's stdin in and its stdout and stderr out until it ends. Returns its exit status
// (128+N when signal N ended it); an error is written to stderr and mapped to an exit status.
int RunVmCommand(ChannelIo& io, const VmExecTarget& vm, const GuestCommand& command) {
  ChannelInput in(io);
  ChannelOutput out(io, /*is_stderr=*/false, /*crlf=*/false);
  ChannelOutput err(io, /*is_stderr=*/true, /*crlf=*/false);
  GuestStreams streams;
  streams.in = &in;
  streams.out = &out;
  streams.err = &err;
  streams.cancel = io.cancel();
  streams.wait_ms = -1;  // streams until it ends, like sshd
  Result<GuestProgress> progress = vm.Exec(command, streams);
  if (!progress.ok()) {
    if (progress.status().code() != Code::kCancelled) {
      err.Write("error: " + progress.status().message() + "\n");
    }
    return ExitStatusFor(progress.status().code());
  }
  if (progress->exit_code.has_value()) return *progress->exit_code;
  if (progress->signal > 0) return 128 + progress->signal;
  err.Write("error: the command ended without an exit status (its VM restarted?)\n");
  return ExitStatusFor(Code::kUnavailable);
}

}  // namespace

VmRoute::VmRoute(Interpreter& interpreter, Caller caller, std::string vm_name,
                 std::shared_ptr<EventWaker> waker, std::string peer)
    : interpreter_(interpreter),
      caller_(std::move(caller)),
      vm_name_(std::move(vm_name)),
      waker_(std::move(waker)),
      peer_(std::move(peer)) {
  caller_.surface = "ssh-vm";  // how its audit lines tell a VM login from the lobby
}

bool VmRoute::TakeEnv(SessionChannel& c, std::string_view name, std::string_view value) {
  if (c.started || c.env.size() >= kMaxEnvVars) return false;
  if (!ValidEnvName(name) || name.substr(0, 7) == "WARREN_") return false;
  if (value.size() > kMaxEnvValue || value.find('\0') != std::string_view::npos) return false;
  for (auto& [k, old] : c.env) {
    if (k == name) {
      old = std::string(value);
      return true;
    }
  }
  c.env.emplace_back(std::string(name), std::string(value));
  return true;
}

bool VmRoute::StartSession(SessionChannel& c, GuestChannelRequest::Kind kind, std::string command) {
  if (c.started) return false;
  if (kind == GuestChannelRequest::Kind::kSubsystem && command != "sftp") {
    LogInfo("ssh subsystem refused peer=" + peer_ + " subsystem=" + LogQuote(command) +
            " reason=\"only sftp\"");
    return false;  // the client reports "subsystem request failed"
  }
  c.started = true;
  if (kind == GuestChannelRequest::Kind::kExec && !c.pty) {
    // Checked for every channel: a key removed or narrowed since the login stops here.
    Result<VmExecTarget> vm = AuthorizeVmExec(interpreter_, caller_, vm_name_);
    if (!vm.ok()) {
      FailChannel(c, vm.status());
      return true;
    }
    GuestCommand cmd;
    cmd.command = std::move(command);
    cmd.env = c.env;
    auto io = c.io;
    try {
      c.worker = std::thread([io, vm = std::move(vm).value(), cmd = std::move(cmd)] {
        int status = ExitStatusFor(Code::kInternal);
        try {
          status = RunVmCommand(*io, vm, cmd);
        } catch (const std::exception& e) {
          LogError(std::string("ssh vm worker failed: ") + e.what());
        }
        io->Finish(status);
      });
    } catch (const std::system_error& e) {
      LogError(std::string("ssh cannot start a worker thread: ") + e.what());
      FailChannel(c, Unavailable("the server is out of threads"));
    }
    return true;
  }
  GuestChannelRequest req;
  req.kind = kind;
  req.command = std::move(command);
  if (c.pty) req.terminal = c.terminal;
  req.env = c.env;
  std::shared_ptr<EventWaker> waker = waker_;
  Result<std::shared_ptr<GuestPipe>> pipe =
      OpenVmStream(interpreter_, caller_, vm_name_, req, [waker] { waker->Wake(); });
  if (!pipe.ok()) {
    FailChannel(c, pipe.status());
    return true;
  }
  c.pipe = std::move(pipe).value();
  return true;
}

bool VmRoute::OpenTcp(ssh_message message,
                      const std::function<SessionChannel*(ssh_channel)>& new_channel) {
  const char* dest_raw = ssh_message_channel_request_open_destination(message);
  std::string dest = dest_raw == nullptr ? "" : dest_raw;
  int port = ssh_message_channel_request_open_destination_port(message);
  const char* orig_raw = ssh_message_channel_request_open_originator(message);
  int orig_port = ssh_message_channel_request_open_originator_port(message);
  if (!GuestLocalHost(dest, vm_name_) || port <= 0 || port > 65535) {
    LogInfo("ssh channel refused peer=" + peer_ + " type=direct-tcpip dest=" + LogQuote(dest) +
            " reason=\"only ports inside the VM (localhost:PORT)\"");
    return false;
  }
  GuestChannelRequest req;
  req.kind = GuestChannelRequest::Kind::kTcp;
  req.port = static_cast<uint16_t>(port);
  std::string orig = orig_raw == nullptr ? "" : orig_raw;
  req.originator = orig.empty() || orig.size() > 64 ? "127.0.0.1" : orig;
  req.originator_port = static_cast<uint16_t>(std::clamp(orig_port, 0, 65535));
  std::shared_ptr<EventWaker> waker = waker_;
  Result<std::shared_ptr<GuestPipe>> pipe =
      OpenVmStream(interpreter_, caller_, vm_name_, req, [waker] { waker->Wake(); });
  if (!pipe.ok()) return false;  // its audit line says why; the client sees the open refused
  // Accepted at once (libssh answers an open only inside this callback); when nothing in the
  // guest listens on the port, the channel is closed as soon as the guest says so.
  ssh_channel ch = ssh_message_channel_request_open_reply_accept(message);
  if (ch == nullptr) {
    (*pipe)->Close();
    return true;  // the reply could not be sent: the connection is failing anyway
  }
  SessionChannel* c = new_channel(ch);
  if (c == nullptr) {
    (*pipe)->Close();
    ssh_channel_close(ch);
    return true;
  }
  c->tcp = true;
  c->started = true;
  c->pipe = std::move(pipe).value();
  return true;
}

size_t VmRoute::PushInput(SessionChannel& c, const void* data, size_t len) {
  // What the guest side has no room for stays in libssh: the client's window stops there.
  size_t n = c.pending_in.empty()
                 ? c.pipe->Write(std::string_view(static_cast<const char*>(data), len))
                 : 0;
  c.backlog = len - n;
  return n;
}

void VmRoute::FlushOutput(SessionChannel& c) {
  std::string bytes;
  for (bool is_stderr : {false, true}) {
    for (;;) {
      size_t room = WritableNow(c.ch);
      if (room == 0) return;
      if (!c.pipe->PeekOutput(is_stderr, room, &bytes)) break;
      int n = WriteToClient(c.ch, is_stderr, bytes);
      if (n < 0) {
        c.broken = true;
        c.pipe->Close();
        return;
      }
      c.pipe->ConsumeOutput(is_stderr, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < bytes.size()) return;
    }
  }
}

void VmRoute::Service(SessionChannel& c) {
  GuestPipe& p = *c.pipe;
  if (c.finished || c.broken) return;
  if (c.remote_closed) {
    p.Close();
    return;
  }
  // Client -> guest: what libssh kept back, once the pipe has room again.
  if (!c.pending_in.empty()) c.pending_in.erase(0, p.Write(c.pending_in));
  while (c.pending_in.empty() && c.backlog > 0) {
    char buf[16 * 1024];
    size_t want = std::min(c.backlog, sizeof buf);
    int n = ssh_channel_read_nonblocking(c.ch, buf, static_cast<uint32_t>(want), 0);
    if (n <= 0) {
      c.backlog = 0;
      break;
    }
    size_t got = static_cast<size_t>(n);
    c.backlog -= std::min(c.backlog, got);
    size_t taken = p.Write(std::string_view(buf, got));
    if (taken < got) c.pending_in.assign(buf + taken, got - taken);
  }
  if (c.remote_eof && c.backlog == 0 && c.pending_in.empty() && !c.eof_delivered) {
    p.CloseInput();
    c.eof_delivered = true;
  }
  if (p.opening()) return;

  // Guest -> client, then the end in the order clients rely on.
  FlushOutput(c);
  if (c.broken) return;
  GuestPipe::End end = p.end();
  Status st = p.status();
  if (!st.ok() && !end.closed) {
    std::string rest;
    if (p.PeekOutput(false, 1, &rest) || p.PeekOutput(true, 1, &rest)) return;  // flush first
    LogInfo("ssh vm channel failed peer=" + peer_ + " vm=" + LogQuote(vm_name_) +
            " error=" + LogQuote(st.message()));
    p.Close();
    if (c.tcp) {
      // A TCP forward has no stderr: the client sees its connection closed.
      if (!c.eof_sent) ssh_channel_send_eof(c.ch);
      ssh_channel_close(c.ch);
      c.finished = true;
    } else {
      c.pipe.reset();
      FailChannel(c, st);
    }
    return;
  }
  if (end.output_eof && !c.eof_sent) {
    ssh_channel_send_eof(c.ch);
    c.eof_sent = true;
  }
  if (end.closed) {
    if (end.exit_status.has_value()) {
      ssh_channel_request_send_exit_status(c.ch, *end.exit_status);
    } else if (!end.exit_signal.empty()) {
      ssh_channel_request_send_exit_signal(c.ch, end.exit_signal.c_str(), 0, "", "");
    }
    if (!c.eof_sent) ssh_channel_send_eof(c.ch);
    c.eof_sent = true;
    ssh_channel_close(c.ch);
    c.finished = true;
  }
}

}  // namespace warren::ssh
