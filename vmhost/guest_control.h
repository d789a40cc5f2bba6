// GuestControl: runs commands inside running VMs over each VM's control connection (an SSH
// client session to the guest's sshd over a virtio-serial port; no network needed). Every
// command runs under the guest runner, which gives it its own process group and spools its
// output inside the guest, so a command can outlive its caller as a job and be waited on,
// read back (also after a warren restart) and killed. The interface lives here without
// libssh so the interpreter can use it; the implementation links libssh. Implementations are
// thread-safe: many commands may run in one VM, on one shared connection, at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"

namespace warren {

// What to run. The command line is handed to the VM user's shell, as OpenSSH does.
struct GuestCommand {
  std::string command;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;  // empty: the user's home
};

// Where a command's bytes go, and how long to stay attached.
struct GuestStreams {
  InputStream* in = nullptr;  // stdin for the command; nullptr: none (immediate EOF)
  OutputSink* out = nullptr;  // stdout; must not be null
  OutputSink* err = nullptr;  // stderr; must not be null
  // Set when the caller goes away. Before the hand-back deadline this kills the command
  // (and its whole process tree); once a command was handed back as a job, cancelling a
  // later Wait only detaches.
  std::shared_ptr<CancelSignal> cancel;
  // How long to stream before handing back while the command keeps running; < 0 streams
  // until the command ends.
  int wait_ms = -1;
};

// Where a command stands after Exec or Wait returned.
struct GuestProgress {
  std::string job;  // the runner's id for the command, [0-9a-f]{8}; always set
  bool finished = false;
  // When finished: the exit status, or nullopt when it ended without one (killed by a
  // signal, or the VM restarted under it).
  std::optional<int> exit_code;
  int signal = 0;              // the signal that ended it, when one did
  uint64_t stdout_offset = 0;  // bytes of stdout delivered so far: where a later Wait resumes
  uint64_t stderr_offset = 0;
};

struct GuestJob {
  std::string job;
  std::string command;  // as started, truncated to a sane length for listings
  int64_t started_at = 0;
  bool finished = false;
  std::optional<int> exit_code;
  int64_t finished_at = 0;
};

// A terminal for a raw session: what the client's pty-req and window-change carry. Terminal
// modes are not forwarded (libssh 0.10 cannot send them): the guest's pty starts with its
// defaults (echo, canonical input, ^C interrupts).
struct GuestTerminal {
  std::string term = "xterm";
  uint32_t cols = 80, rows = 24, width_px = 0, height_px = 0;
};

// What a raw channel into a VM is: a session running the user's shell, a command or a
// subsystem (sftp), with or without a terminal, a TCP connection to a port inside the
// guest (`ssh -L`, `-W`), or a connection to a unix socket in the guest (warren's own: the
// guest's sshd connects it as the VM's user; no surface opens one for a client).
struct GuestChannelRequest {
  // kIdentityPort: not a channel of the control connection but the VM's warren.identity
  // virtio-serial port (vmhost/domain_xml.h kIdentityChannelName), dialled beside it, on
  // which the guest's root process waiting for a restored VM's identity reads it
  // (vmhost/guest/identity.h). A byte stream: open at once, no stderr or exit status, no
  // half-close (CloseInput does nothing); Unavailable when the VM has no such port.
  enum class Kind { kShell, kExec, kSubsystem, kTcp, kUnix, kIdentityPort };
  Kind kind = Kind::kShell;
  std::string command;  // kExec: the command line (for the user's shell); kSubsystem: its name
  std::optional<GuestTerminal> terminal;
  // Set in the session's environment (kShell, kExec); names [A-Za-z_][A-Za-z0-9_]*.
  std::vector<std::pair<std::string, std::string>> env;
  uint16_t port = 0;  // kTcp: the port on the guest's 127.0.0.1
  std::string path;   // kUnix: the socket's absolute path in the guest
  std::string originator = "127.0.0.1";
  uint16_t originator_port = 0;
};

// A kUnix path the guest's sshd can connect: absolute, no NUL byte, and short enough for a
// unix socket address (107 bytes). Also what the host takes from a guest that names one.
inline bool ValidGuestSocketPath(std::string_view path) {
  return !path.empty() && path[0] == '/' && path.size() <= 107 &&
         path.find('\0') == std::string_view::npos;
}

// One raw channel into a VM, for an event loop that bridges it to a client's channel: every
// call is non-blocking, and the `notify` given to OpenChannel is called (from another thread,
// with no lock held) whenever something here may have changed: opened or failed, output,
// room for input, the end. Buffers are bounded both ways, per channel, so a slow client
// stalls only its own channel's guest window and a slow guest only this channel's input.
// Destroying it closes the channel. Thread-safe.
class GuestPipe {
 public:
  virtual ~GuestPipe() = default;

  // True until the guest answered the open (and the requests that start the session).
  virtual bool opening() = 0;
  // OK while the channel is open (or still opening); the failure once the guest refused it
  // or the connection went.
  virtual Status status() = 0;

  // Queues input (the session's stdin, or bytes for the TCP port); returns how many bytes
  // fitted, possibly 0: call again after a notify.
  virtual size_t Write(std::string_view bytes) = 0;
  // EOF on the input, sent once every queued byte is out.
  virtual void CloseInput() = 0;
  // The client's terminal changed size / the client sent a signal ("INT", "TERM"...).
  virtual void Resize(const GuestTerminal& size) = 0;
  virtual void Signal(std::string_view name) = 0;

  // Output from the guest, stdout (is_stderr false) or stderr, without removing it: false
  // when there is none right now. Consume removes bytes once the client took them.
  virtual bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) = 0;
  virtual void ConsumeOutput(bool is_stderr, size_t n) = 0;

  // How it ended, as far as known. `output_eof`: the guest sent EOF and every output byte
  // was consumed; `closed`: the guest closed the channel and every output byte was consumed.
  struct End {
    bool output_eof = false;
    bool closed = false;
    std::optional<int> exit_status;
    std::string exit_signal;  // "TERM", "KILL"... when the command was killed
  };
  virtual End end() = 0;

  // The client is gone or done: closes the guest's channel. Idempotent.
  virtual void Close() = 0;
};

// ---- The integrations endpoint: connections a VM opens towards the host ----

// Where the host's integrations proxy is reached from inside each VM: a fixed loopback
// address on which the guest's control sshd listens for us (SSH remote forwards requested
// on the control connection), so every connection made there arrives on the host over THAT
// VM's control connection, and the host knows the caller without trusting the guest.
struct GuestEndpoint {
  std::string address = "127.77.0.1";
  // The ports the guest's clients use (the URLs': http://NAME.<domain>/ and https://…).
  uint16_t http_port = 80;
  uint16_t https_port = 443;
  // Where the forwards listen when the guest setup could redirect address:http_port and
  // :https_port to them (a NAT rule for the guest's own traffic), so that the endpoint holds
  // no port a service in the VM may want (a wildcard bind of :80 fails while a specific
  // address listens on it). 0: no redirect, the forwards listen on http_port/https_port (as
  // they do in a guest without nft or iptables).
  uint16_t http_listen_port = 17780;
  uint16_t https_listen_port = 17743;
  // Names NAME.<domain> are mapped to `address` in the guest's /etc/hosts.
  std::string domain = "int.warren.internal";
  // PEM of the CA that signs the proxy's certificate: the guest is told to trust it (Debian
  // guests: update-ca-certificates; an image without a CA store gets http only). May be
  // empty (nothing installed).
  std::string ca_pem;
};

// Whoever answers the connections VMs make to their endpoint (the integrations proxy).
// Thread-safe: called from the control connections' owner threads, so nothing may block.
class GuestInboundSink {
 public:
  virtual ~GuestInboundSink() = default;
  // Whether VM `vm_id` gets the endpoint at all (asked on every control connection; a VM
  // whose egress is `none` gets no forwards).
  virtual bool WantsEndpoint(std::string_view vm_id) = 0;
  // The integration names attached to the VM: each NAME.<domain> goes into its /etc/hosts.
  virtual std::vector<std::string> EndpointNames(std::string_view vm_id) = 0;
  // A connection VM `vm_id` opened to its endpoint (`https`: to the TLS port), already
  // open. Returns the callback the pipe calls whenever it may have changed (see GuestPipe;
  // it is installed right after this returns, and called once then, unless the pipe was
  // closed by then), or an empty function to refuse: the channel is closed.
  virtual std::function<void()> Accept(std::string_view vm_id, bool https,
                                       std::shared_ptr<GuestPipe> pipe) = 0;
};

class GuestControl {
 public:
  virtual ~GuestControl() = default;

  // Starts `command` in VM `vm_id` and streams it per `streams`. Returns when it ends, or
  // at the deadline with finished=false (it keeps running as a job). Unavailable when the
  // VM's control connection cannot be made; Cancelled when streams.cancel fired first (the
  // command was killed).
  virtual Result<GuestProgress> Exec(std::string_view vm_id, const GuestCommand& command,
                                     const GuestStreams& streams) = 0;
  // Streams a job's output from the given offsets until it ends or streams.wait_ms passes.
  // NotFound for an unknown job (or one whose output has expired).
  virtual Result<GuestProgress> Wait(std::string_view vm_id, std::string_view job,
                                     uint64_t stdout_from, uint64_t stderr_from,
                                     const GuestStreams& streams) = 0;
  // Kills a job's whole process tree. NotFound for an unknown job; OK if it already ended.
  virtual Status Kill(std::string_view vm_id, std::string_view job) = 0;
  // The runner's jobs in a VM, newest first, including finished ones still kept.
  virtual Result<std::vector<GuestJob>> Jobs(std::string_view vm_id) = 0;
  // Drops the VM's control connection (the VM stopped, restarted or is being removed).
  virtual void Disconnect(std::string_view vm_id) = 0;
  // From now on the VM's control connection accepts only the guest host key
  // `public_key_line` ("ssh-ed25519 AAAA…"): a VM restored from a template has just taken its
  // own key in place of the template's, with which its open connection was made (that
  // connection stays). InvalidArgument for a line that is no public key.
  virtual Status RepinHostKey(std::string_view vm_id, std::string_view public_key_line) = 0;
  // The guest's runner, run just now on VM `vm_id`'s control connection, said it is `version`
  // (the identity report names it): when that is this warren's runner, the connection's
  // runner check (once per connection, before the first command) is already done; and when
  // `serve_socket` is not empty, the runner's server there serves this connection's
  // commands (a template clone's, which came with the template).
  virtual void NoteRunnerVersion(std::string_view vm_id, std::string_view version,
                                 std::string_view serve_socket) = 0;
  // Opens a raw channel into VM `vm_id` (connecting first if needed) and returns at once:
  // the pipe reports when the guest answered. Unlike Exec, nothing runs under the runner:
  // closing a session channel ends the session the way sshd ends it (a terminal's hangup,
  // a closed pipe). `notify` is called whenever the pipe may have changed (see GuestPipe).
  virtual Result<std::shared_ptr<GuestPipe>> OpenChannel(std::string_view vm_id,
                                                         const GuestChannelRequest& request,
                                                         std::function<void()> notify) = 0;
  // Returns once VM `vm_id`'s control connection is up, making it first when there is none
  // (a VM just restored: its handshake runs while its identity goes over the identity port).
  // Unavailable when it could not be made by `deadline`; NotFound or Conflict at once when
  // the VM has no port to dial (gone, not running). `answered` (when set) is called once,
  // on another thread, as soon as the guest's sshd for the connection has sent its
  // identification line (or at once with a connection up already): the guest has chosen
  // the sshd, and with it the host key, that this connection gets. It may be called after
  // Connect returned, so it must own what it touches; a failed connection may never call it.
  virtual Status Connect(std::string_view vm_id, std::chrono::steady_clock::time_point deadline,
                         std::function<void()> answered) = 0;
};

}  // namespace warren
