#include "lobby/integrations/integration_proxy.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "lobby/base/log.h"
#include "lobby/relay/http_relay.h"

namespace warren::integrations {

using relay::ReadHead;
using relay::RelayBody;

namespace {

using Clock = ByteStream::Clock;
// How long a short answer of our own (an error, 100 Continue) may take to write.
constexpr auto kAnswerWait = std::chrono::seconds(5);

long long MillisSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

struct IntegrationProxy::Conn {
  uint64_t id = 0;
  std::string vm_id;
  std::string vm_owner;  // counted in per_owner_ from admission to Finish
  bool https = false;
  // The VM's side and the target's: the streams underneath (kept for Cancel) and what the
  // worker speaks over them (TLS on top, or the same stream).
  std::shared_ptr<ByteStream> down_base, down;
  std::shared_ptr<ByteStream> up_base, up;

  // Guarded by IntegrationProxy::mu_.
  std::string name;
  std::string owner;
  bool cancelled = false;
  uint64_t revocations_seen = 0;

  std::atomic<bool> cancel_flag{false};
  // Log fields.
  std::string method = "-";
  int status = 0;
  uint64_t up_bytes = 0, down_bytes = 0;
  std::string error;
};

IntegrationProxy::IntegrationProxy(IntegrationProxyOptions options, IntegrationLookup* lookup)
    : options_(std::move(options)), lookup_(lookup) {}

IntegrationProxy::~IntegrationProxy() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  for (auto& [id, c] : conns_) {
    Cancel(*c);
  }
  cv_.wait(lock, [&] { return workers_ == 0; });
}

int IntegrationProxy::active() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(conns_.size());
}

void IntegrationProxy::Serve(std::string vm_id, bool https, std::unique_ptr<ByteStream> stream) {
  auto conn = std::make_shared<Conn>();
  // A store read (the lookup's): quick enough for the owner thread this runs on.
  std::string owner = lookup_->OwnerOf(vm_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    int& mine = per_vm_[vm_id];
    int& owners = per_owner_[owner];
    if (static_cast<int>(conns_.size()) >= options_.max_connections ||
        mine >= options_.max_connections_per_vm || owners >= options_.max_connections_per_user) {
      if (mine == 0) per_vm_.erase(vm_id);
      if (owners == 0) per_owner_.erase(owner);
      if (rejecting_ >= options_.max_rejecting) return;  // dropped: closes the stream
      ++rejecting_;
      ++workers_;
      std::thread([this, vm_id = std::move(vm_id), https, s = std::move(stream)]() mutable {
        Reject(std::move(vm_id), https, std::move(s));
      }).detach();
      return;
    }
    ++mine;
    ++owners;
    conn->id = next_id_++;
    conn->vm_id = std::move(vm_id);
    conn->vm_owner = std::move(owner);
    conn->https = https;
    conn->down_base = std::move(stream);
    conn->down = conn->down_base;
    conns_.emplace(conn->id, conn);
    ++workers_;
  }
  std::thread([this, conn]() mutable { Run(std::move(conn)); }).detach();
}

void IntegrationProxy::Reject(std::string vm_id, bool https, std::unique_ptr<ByteStream> stream) {
  auto deadline = Clock::now() + kAnswerWait;
  std::shared_ptr<ByteStream> down = std::move(stream);
  if (https && options_.tls_server != nullptr) {
    Result<std::unique_ptr<TlsStream>> tls = TlsStream::Accept(options_.tls_server, down, deadline);
    down = tls.ok() ? std::shared_ptr<ByteStream>(std::move(tls.value())) : nullptr;
  }
  if (down != nullptr) {
    // The request is read first (bounded): an answer and a close before it would leave it
    // unread, and a socket closed with unread bytes resets the 503 away.
    std::string rest;
    (void)ReadHead(*down, options_.max_header_bytes, deadline, &rest);
    (void)down->Write(ErrorResponse(503, "too many connections to integrations; try again"),
                      deadline);
    down->CloseWrite();
  }
  LogInfo("integration vm=" + LogQuote(vm_id) + " status=503 reason=limit");
  down.reset();
  std::lock_guard<std::mutex> lock(mu_);
  --rejecting_;
  --workers_;
  cv_.notify_all();
}

void IntegrationProxy::Run(std::shared_ptr<Conn> conn) {
  auto t0 = Clock::now();
  Handle(*conn);
  LogInfo("integration vm=" + LogQuote(conn->vm_id) +
          " name=" + LogQuote(conn->name.empty() ? "-" : conn->name) +
          " method=" + LogQuote(conn->method) + " status=" + std::to_string(conn->status) +
          " up_bytes=" + std::to_string(conn->up_bytes) + " down_bytes=" +
          std::to_string(conn->down_bytes) + " dur_ms=" + std::to_string(MillisSince(t0)) +
          (conn->error.empty() ? "" : " error=" + LogQuote(conn->error)));
  Finish(conn);
  conn.reset();
  std::lock_guard<std::mutex> lock(mu_);
  --workers_;
  cv_.notify_all();
}

void IntegrationProxy::Finish(const std::shared_ptr<Conn>& conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.erase(conn->id);
    auto it = per_vm_.find(conn->vm_id);
    if (it != per_vm_.end() && --it->second <= 0) per_vm_.erase(it);
    auto owned = per_owner_.find(conn->vm_owner);
    if (owned != per_owner_.end() && --owned->second <= 0) per_owner_.erase(owned);
  }
  conn->up.reset();
  conn->up_base.reset();
  conn->down.reset();
  conn->down_base.reset();
}

void IntegrationProxy::Cancel(Conn& c) {
  c.cancelled = true;
  c.cancel_flag.store(true);
  c.down_base->Cancel();
  if (c.up_base != nullptr) c.up_base->Cancel();
}

void IntegrationProxy::Handle(Conn& c) {
  auto header_deadline = Clock::now() + options_.header_timeout;
  auto answer = [&](int status, std::string_view line) {
    c.status = status;
    if (c.error.empty()) c.error = std::string(line);
    (void)c.down->Write(ErrorResponse(status, line), Clock::now() + kAnswerWait);
    c.down->CloseWrite();
  };
  if (c.https) {
    if (options_.tls_server == nullptr) {
      c.error = "https is not set up";
      return;
    }
    Result<std::unique_ptr<TlsStream>> tls =
        TlsStream::Accept(options_.tls_server, c.down_base, header_deadline);
    if (!tls.ok()) {
      c.error = tls.status().message();
      return;
    }
    c.down = std::move(tls.value());
  }

  std::string rest;
  Result<std::string> head = ReadHead(*c.down, options_.max_header_bytes, header_deadline, &rest);
  if (!head.ok()) {
    Code code = head.status().code();
    if (code == Code::kTooLarge) return answer(431, "the request head is too large");
    if (code == Code::kTimeout) return answer(408, "the request head did not arrive in time");
    if (code == Code::kInvalidArgument) return answer(400, head.status().message());
    c.error = head.status().message();
    return;
  }
  Result<RequestHead> req = ParseRequestHead(*head);
  if (!req.ok()) return answer(400, "bad request: " + req.status().message());
  c.method = req->method;
  Result<BodyFraming> framing = RequestFraming(*req);
  if (!framing.ok()) return answer(400, "bad request: " + framing.status().message());
  const HttpHeader* host = FindHeader(req->headers, "host");
  if (host == nullptr) return answer(400, "bad request: no Host header");
  Result<std::string> name = IntegrationNameFromHost(host->value, options_.domain);
  if (!name.ok()) return answer(400, name.status().message());

  // Registered under its name before the lookup, so a detach racing it is not missed; a
  // revocation while the lookup ran (this connection had no owner yet) redoes the lookup.
  Result<IntegrationRoute> route = Internal("no lookup");
  for (int attempt = 0;; ++attempt) {
    uint64_t epoch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      c.name = *name;
      epoch = c.revocations_seen;
      if (c.cancelled) return;
    }
    route = lookup_->Find(c.vm_id, *name);
    if (!route.ok()) break;
    std::lock_guard<std::mutex> lock(mu_);
    if (c.cancelled) return;
    if (c.revocations_seen == epoch || attempt == 3) {
      c.owner = route->owner;
      break;
    }
  }
  if (!route.ok()) {
    Code code = route.status().code();
    if (code == Code::kNotFound) return answer(404, route.status().message());
    if (code == Code::kPermissionDenied) return answer(403, route.status().message());
    return answer(502, "integration " + *name + " cannot be used now");
  }
  const TargetUrl& target = route->target;
  Result<std::unique_ptr<FdStream>> tcp =
      ConnectTcp(target.host, static_cast<uint16_t>(target.EffectivePort()),
                 Clock::now() + options_.connect_timeout, c.cancel_flag);
  if (!tcp.ok()) {
    c.error = tcp.status().message();
    return answer(502, "integration " + *name + ": cannot reach its target");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.up_base = std::move(tcp.value());
    if (c.cancelled) c.up_base->Cancel();
  }
  c.up = c.up_base;
  if (target.https()) {
    SslCtxPtr client = options_.tls_client;
    if (client == nullptr) {
      Result<SslCtxPtr> made = MakeClientContext("");
      if (!made.ok()) return answer(502, "integration " + *name + ": no TLS client");
      client = *made;
    }
    Result<std::unique_ptr<TlsStream>> tls =
        TlsStream::Connect(client, c.up_base, target.host, Clock::now() + options_.connect_timeout);
    if (!tls.ok()) {
      c.error = tls.status().message();
      return answer(502, "integration " + *name + ": TLS with its target failed");
    }
    c.up = std::move(tls.value());
  }

  const auto idle = options_.idle_timeout;
  const HttpHeader* expect = FindHeader(req->headers, "expect");
  if (expect != nullptr && EqualsIgnoreCase(expect->value, "100-continue") &&
      framing->kind != BodyFraming::Kind::kNone) {
    // Answered here: Expect is not sent upstream, the body follows at once.
    Status st = c.down->Write("HTTP/1.1 100 Continue\r\n\r\n", Clock::now() + idle);
    if (!st.ok()) {
      c.error = st.message();
      return;
    }
  }
  Status st = c.up->Write(UpstreamRequestHead(*req, target, route->headers), Clock::now() + idle);
  if (!st.ok()) {
    c.error = st.message();
    return answer(502, "integration " + *name + ": its target did not take the request");
  }
  Status sent = RelayBody(*c.down, *c.up, *framing, std::move(rest), idle, &c.up_bytes);
  if (!sent.ok()) {
    c.error = "request body: " + sent.message();
    if (sent.code() == Code::kInvalidArgument) return answer(400, "bad request body");
    if (sent.code() == Code::kCancelled) return;
    return answer(502, "integration " + *name + ": the request body did not go through");
  }

  // The response: 1xx heads (we sent no Expect, but 103 may come) are skipped.
  std::string up_rest;
  Result<ResponseHead> resp = InvalidArgument("no response");
  for (;;) {
    Result<std::string> rhead =
        ReadHead(*c.up, 2 * options_.max_header_bytes, Clock::now() + idle, &up_rest);
    if (!rhead.ok()) {
      c.error = "response head: " + rhead.status().message();
      if (rhead.status().code() == Code::kCancelled) return;
      return answer(502, "integration " + *name + ": its target sent no valid response");
    }
    resp = ParseResponseHead(*rhead);
    if (!resp.ok()) {
      c.error = "response head: " + resp.status().message();
      return answer(502, "integration " + *name + ": its target sent no valid response");
    }
    if (resp->status >= 200) break;
    if (resp->status == 101)
      return answer(502, "integration " + *name + ": upgrades are not proxied");
  }
  Result<BodyFraming> rframing = ResponseFraming(req->method, *resp);
  if (!rframing.ok()) {
    c.error = "response: " + rframing.status().message();
    return answer(502, "integration " + *name + ": its target sent no valid response");
  }
  c.status = resp->status;
  st = c.down->Write(DownstreamResponseHead(*resp), Clock::now() + idle);
  if (!st.ok()) {
    c.error = st.message();
    return;
  }
  Status got = RelayBody(*c.up, *c.down, *rframing, std::move(up_rest), idle, &c.down_bytes);
  if (!got.ok()) {
    c.error = "response body: " + got.message();
    return;
  }
  c.down->CloseWrite();
}

int IntegrationProxy::RevokeWhere(const std::function<bool(const Conn&)>& match) {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (auto& [id, c] : conns_) {
    ++c->revocations_seen;  // a lookup in flight is redone (see Handle)
    if (c->cancelled || c->name.empty() || !match(*c)) continue;
    Cancel(*c);
    ++n;
  }
  return n;
}

int IntegrationProxy::RevokeVm(std::string_view vm_id, std::string_view name) {
  return RevokeWhere(
      [&](const Conn& c) { return c.vm_id == vm_id && (name.empty() || c.name == name); });
}

int IntegrationProxy::RevokeOwner(std::string_view owner, std::string_view name) {
  // A connection whose lookup has not answered yet has no owner: its lookup is redone.
  return RevokeWhere(
      [&](const Conn& c) { return c.owner == owner && (name.empty() || c.name == name); });
}

int IntegrationProxy::Revalidate(std::string_view owner) {
  struct Check {
    uint64_t id;
    std::string vm_id, name;
  };
  std::vector<Check> checks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, c] : conns_) {
      ++c->revocations_seen;  // a lookup in flight is redone (see Handle)
      if (!c->cancelled && !c->name.empty() && c->owner == owner) {
        checks.push_back({id, c->vm_id, c->name});
      }
    }
  }
  std::vector<uint64_t> refused;
  for (const Check& check : checks) {
    if (!lookup_->Find(check.vm_id, check.name).ok()) refused.push_back(check.id);
  }
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (uint64_t id : refused) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->cancelled) continue;
    Cancel(*it->second);
    ++n;
  }
  return n;
}

}  // namespace warren::integrations
