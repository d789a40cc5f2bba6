// IntegrationProxy: the host-side HTTP reverse proxy behind every VM's integrations endpoint
// (http://NAME.<int-domain>/ and https://…). Each connection arrives with the calling VM's
// id already known (it came over that VM's control connection), so nothing the VM says
// decides who it is. Per connection: TLS terminated first for the https port, one request
// head read (bounded in size and time), Host mapped to an integration name, the lookup asked
// (403 with its one-line reason, 404 unknown, 400 malformed, 502 upstream failure, 503 past
// the connection limits), then the request is rewritten as a reverse proxy does and relayed
// to the target, the request body and the response streamed through unbuffered (32 KiB at a
// time), `Connection: close` both ways. Revoke cuts open connections at once. The headers
// the lookup adds (the secret) are never logged; one log line per request names VM,
// integration, method, status, bytes and duration.
//
// Threads: one worker thread per admitted connection, so threads are bounded by
// max_connections (plus max_rejecting short-lived ones answering 503), at most
// max_connections_per_vm for one VM and max_connections_per_user for one owner's VMs. Serve,
// Revoke* and the destructor may be called from any thread; the destructor cancels every connection
// and waits for the workers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "lobby/integrations/integration_lookup.h"
#include "lobby/relay/byte_stream.h"
#include "lobby/relay/tls_stream.h"

namespace warren::integrations {

// The relay's streams (lobby/relay), as the proxy has always named them.
using relay::ByteStream;
using relay::ConnectTcp;
using relay::FdStream;
using relay::GuestPipeStream;
using relay::MakeClientContext;
using relay::SslCtxPtr;
using relay::TlsStream;

struct IntegrationProxyOptions {
  std::string domain = "int.warren.internal";  // Host must be NAME.<domain>
  SslCtxPtr tls_server;             // for https connections (IntegrationCa::server); null: refused
  SslCtxPtr tls_client;             // for https targets (MakeClientContext); null: system CAs
  int max_connections = 256;        // in total; past it: 503
  int max_connections_per_vm = 32;  // past it: 503
  int max_connections_per_user = 64;    // all of one owner's VMs together; past it: 503
  int max_rejecting = 8;                // connections answered 503 at once; past it: closed
  size_t max_header_bytes = 32 * 1024;  // the request head (and the response head: 2x)
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};   // TLS + request head
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};     // no byte either way
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};  // to the target
};

class IntegrationProxy {
 public:
  IntegrationProxy(IntegrationProxyOptions options, IntegrationLookup* lookup);
  ~IntegrationProxy();
  IntegrationProxy(const IntegrationProxy&) = delete;
  IntegrationProxy& operator=(const IntegrationProxy&) = delete;

  // Takes a connection VM `vm_id` made to its endpoint (`https`: the TLS port) and serves it
  // on a worker of its own; returns at once.
  void Serve(std::string vm_id, bool https, std::unique_ptr<ByteStream> stream);

  // Closes at once every open connection of VM `vm_id` (or of any VM of `owner`) using the
  // integration `name` (every integration when `name` is empty): detach, removal, a changed
  // egress policy. Returns how many were cut.
  int RevokeVm(std::string_view vm_id, std::string_view name);
  int RevokeOwner(std::string_view owner, std::string_view name);
  // Asks the lookup again for every open connection of `owner`'s VMs and cuts those it now
  // refuses: for a change whose effect is known only to the lookup (an attachment, a tag, an
  // egress policy). Calls the lookup without the lock held. Returns how many were cut.
  int Revalidate(std::string_view owner);

  // Connections being served now (for tests and metrics).
  int active();

 private:
  struct Conn;
  void Run(std::shared_ptr<Conn> conn);
  void Handle(Conn& conn);
  void Finish(const std::shared_ptr<Conn>& conn);
  // Marks `c` revoked and cuts both its streams; mu_ held.
  static void Cancel(Conn& c);
  void Reject(std::string vm_id, bool https, std::unique_ptr<ByteStream> stream);
  int RevokeWhere(const std::function<bool(const Conn&)>& match);

  const IntegrationProxyOptions options_;
  IntegrationLookup* const lookup_;

  std::mutex mu_;
  std::condition_variable cv_;  // a worker ended
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Conn>> conns_;
  std::map<std::string, int, std::less<>> per_vm_;
  std::map<std::string, int, std::less<>> per_owner_;  // by the VM's owner at admission
  int rejecting_ = 0;
  int workers_ = 0;  // threads still running (admitted and rejecting)
};

}  // namespace warren::integrations
