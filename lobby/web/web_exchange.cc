// One connection of the web proxy, request to answer: the head (bounded in size and time),
// the host, the domain's own pages or a VM's site (its sign-in hand-off, the gate's
// decision, the request forwarded and the answer streamed back).
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "lobby/relay/http_relay.h"
#include "lobby/web/web_conn.h"
#include "lobby/web/web_cookies.h"
#include "lobby/web/web_forward.h"
#include "lobby/web/web_pages.h"
#include "lobby/web/web_server.h"

namespace warren::web {

namespace {

using Clock = relay::ByteStream::Clock;
constexpr auto kAnswerWait = std::chrono::seconds(5);
// A body sent to one of our own pages is read (so closing does not reset our answer away)
// up to this much; past it the connection just closes.
constexpr uint64_t kMaxOwnBody = 64 * 1024;

// What the VM's channel's notify reaches: the stream waiting on it, while there is one.
struct PipeNotifier {
  std::mutex mu;
  relay::GuestPipeStream* stream = nullptr;
  void Call() {
    std::lock_guard<std::mutex> lock(mu);
    if (stream != nullptr) stream->Notify();
  }
  void Set(relay::GuestPipeStream* s) {
    std::lock_guard<std::mutex> lock(mu);
    stream = s;
  }
};

// The visitor's request body, sent to the VM on a thread of its own while the answer is read:
// a VM may answer (and stop reading) before the body is all there, and the answer must not
// wait behind it.
class BodySender {
 public:
  BodySender() = default;
  BodySender(const BodySender&) = delete;
  BodySender& operator=(const BodySender&) = delete;
  ~BodySender() { Cut(); }

  void Start(relay::ByteStream& from, relay::ByteStream& to, relay::BodyFraming framing,
             std::string first, std::chrono::milliseconds idle, uint64_t* moved) {
    from_ = &from;
    to_ = &to;
    thread_ =
        std::thread([this, &from, &to, framing, first = std::move(first), idle, moved]() mutable {
          status_ = relay::RelayBody(from, to, framing, std::move(first), idle, moved, &after_);
          // The VM would wait for a body that is not coming: its answer's read ends now.
          if (!status_.ok()) to.Cancel();
          done_ = true;
        });
  }
  // True when there was no body, or all of it was sent (then the thread is joined).
  bool SentWhole() {
    if (!thread_.joinable()) return status_.ok();
    if (!done_) return false;
    thread_.join();
    return status_.ok();
  }
  // What came after the body (a request pipelined behind it), once SentWhole.
  bool started() const { return from_ != nullptr; }
  std::string TakeAfter() { return std::move(after_); }
  // Waits for the body to be sent (or to fail) and returns how it went.
  Status Wait() {
    if (thread_.joinable()) thread_.join();
    return status_;
  }
  // The answer is out (or will not come): what is left of the body is not wanted. Cancels
  // both streams when the body is still going, so it stops, and waits for it.
  void Cut() {
    if (!thread_.joinable()) return;
    if (!done_) {
      from_->Cancel();
      to_->Cancel();
    }
    thread_.join();
  }

 private:
  relay::ByteStream* from_ = nullptr;
  relay::ByteStream* to_ = nullptr;
  std::thread thread_;
  std::atomic<bool> done_{false};
  Status status_;
  std::string after_;
};

void Answer(WebServer::Conn& c, const WebAnswer& a) {
  c.status = a.status;
  (void)c.down->Write(Render(a, c.req.method == "HEAD"), Clock::now() + kAnswerWait);
  c.down->CloseWrite();
}

// Reads away a small request body to one of our pages.
void DiscardBody(WebServer::Conn& c) {
  Result<relay::BodyFraming> framing = relay::RequestFraming(c.req);
  if (!framing.ok() || framing->kind == relay::BodyFraming::Kind::kNone) return;
  if (framing->kind == relay::BodyFraming::Kind::kLength && framing->length > kMaxOwnBody) return;
  uint64_t remaining = framing->length;
  relay::ChunkedScanner chunks;
  std::string buf = std::move(c.rest);
  uint64_t seen = 0;
  char chunk[4096];
  for (;;) {
    if (framing->kind == relay::BodyFraming::Kind::kLength) {
      uint64_t n = std::min<uint64_t>(remaining, buf.size());
      remaining -= n;
      if (remaining == 0) return;
    } else {
      Result<size_t> n = chunks.Feed(buf);
      if (!n.ok() || chunks.done()) return;
    }
    seen += buf.size();
    if (seen > kMaxOwnBody) return;
    Result<size_t> n = c.down->Read(chunk, sizeof chunk, Clock::now() + kAnswerWait);
    if (!n.ok() || *n == 0) return;
    buf.assign(chunk, *n);
  }
}

bool HasConnectionToken(const relay::HttpHeaders& headers, std::string_view token) {
  for (const std::string& t : relay::ListTokens(headers, "connection")) {
    if (t == token) return true;
  }
  return false;
}

bool IsGetOrHead(const WebServer::Conn& c) {
  return c.req.method == "GET" || c.req.method == "HEAD";
}

relay::HttpHeader SetCookie(WarrenCookie cookie, bool https, std::string_view value,
                            long long max_age) {
  return {"Set-Cookie", SetCookieValue(cookie, https, value, max_age)};
}

}  // namespace

void WebServer::Handle(Conn& c) {
  auto header_deadline = Clock::now() + options_.header_timeout;
  if (c.https) {
    Result<std::unique_ptr<relay::TlsStream>> tls =
        relay::TlsStream::Accept(Tls(), c.down_base, header_deadline);
    if (!tls.ok()) {
      c.error = tls.status().message();
      return;
    }
    c.down = std::move(tls.value());
  }
  for (bool first = true;; first = false) {
    auto t0 = Clock::now();
    c.keep_alive = false;
    HandleRequest(c, first ? header_deadline : t0 + options_.keepalive_timeout, first);
    LogRequest(c, t0);
    ReleaseSite(c);
    {
      std::lock_guard<std::mutex> lock(mu_);
      c.up.reset();
      if (c.cancelled) return;
    }
    if (!c.keep_alive) return;
    std::string rest = std::move(c.rest);
    c.Reset();
    c.rest = std::move(rest);  // a request pipelined behind this one
  }
}

void WebServer::HandleRequest(Conn& c, Clock::time_point header_deadline, bool first) {
  Result<std::string> head =
      relay::ReadHead(*c.down, options_.max_header_bytes, header_deadline, &c.rest);
  if (!head.ok()) {
    c.error = head.status().message();
    Code code = head.status().code();
    c.req.method = "-";
    if (code == Code::kTooLarge) {
      return Answer(c,
                    MessagePage(431, "Too large", "the request head is too large", Wants::kHtml));
    }
    if (code == Code::kTimeout && first) {
      return Answer(
          c, MessagePage(408, "Too slow", "the request did not arrive in time", Wants::kHtml));
    }
    if (code == Code::kInvalidArgument) {
      return Answer(c, MessagePage(400, "Bad request", c.error, Wants::kHtml));
    }
    // Closed before a request, cut, or a kept-alive connection that stayed quiet: nothing to
    // log per request.
    c.req.method.clear();
    if (!first) c.error.clear();
    return;
  }
  Result<relay::RequestHead> req = relay::ParseRequestHead(*head);
  if (!req.ok()) {
    c.req.method = "-";
    return Answer(c, MessagePage(400, "Bad request", req.status().message(), Wants::kHtml));
  }
  c.req = std::move(req.value());
  Wants wants = WantsOf(c.req.headers);
  Result<relay::BodyFraming> framing = relay::RequestFraming(c.req);
  if (!framing.ok()) {
    return Answer(c, MessagePage(400, "Bad request", framing.status().message(), wants));
  }
  const relay::HttpHeader* host = relay::FindHeader(c.req.headers, "host");
  Result<WebHost> parsed =
      host == nullptr ? NotFound("no such site") : ParseWebHost(host->value, options_.domain);
  if (!parsed.ok()) {
    return Answer(c,
                  MessagePage(404, "No such site",
                              "no such site: use http(s)://NAME." + options_.domain + "/", wants));
  }
  c.host = std::move(parsed.value());
  if (c.host.kind == WebHost::Kind::kDomain) return HandleDomain(c);
  return HandleSite(c);
}

std::optional<std::string> WebServer::PickSession(Conn& c) {
  std::vector<std::string> all = FindCookies(c.req.headers, WarrenCookie::kSession, c.https);
  if (all.size() <= 1) {
    return all.empty() ? std::nullopt : std::optional<std::string>(all.front());
  }
  // More than one: the one that is a live session of this host (a page's planted cookie is
  // not, or is someone else's; the first such wins).
  for (const std::string& v : all) {
    if (gate_->SessionVisitor(v, c.host.host).ok()) return v;
  }
  return all.front();
}

void WebServer::HandleDomain(Conn& c) {
  auto [path, query] = SplitTarget(c.req.target);
  Wants wants = WantsOf(c.req.headers);
  PublicOrigin origin{c.https, options_.public_port != 0 ? options_.public_port : port_};
  std::string session = PickSession(c).value_or("");
  const std::string& sign_in = options_.sign_in_command;
  DiscardBody(c);

  if (path == "/__warren/login") {
    if (!IsGetOrHead(c)) return Answer(c, MessagePage(405, "Not allowed", "use GET", wants));
    std::string token = QueryParam(query, "token").value_or("");
    if (token.empty()) {
      return Answer(c,
                    MessagePage(400, "Incomplete link", "this sign-in link has no token", wants));
    }
    Result<std::string> session_value = gate_->RedeemMagicLink(token);
    if (!session_value.ok()) {
      c.error = session_value.status().message();
      if (session_value.status().code() != Code::kUnauthenticated) {
        return Answer(c, MessagePage(503, "Try again", "cannot sign in right now", wants));
      }
      return Answer(c, SignInPage(401, sign_in,
                                  "This sign-in link was already used or has expired; run the "
                                  "command again for a new one.",
                                  wants));
    }
    // Back to the page the visitor was signing in for, if there was one.
    std::string next = "/";
    relay::HttpHeaders cookies = {
        SetCookie(WarrenCookie::kSession, c.https, *session_value, options_.cookie_max_age_s)};
    std::optional<std::string> back = FindCookie(c.req.headers, WarrenCookie::kReturn, c.https);
    if (back.has_value()) {
      std::string url = PercentDecode(*back);
      if (ParseSiteUrl(url, options_.domain).has_value()) {
        next = "/__warren/auth?to=" + PercentEncode(url);
      }
      cookies.push_back(SetCookie(WarrenCookie::kReturn, c.https, "", 0));
    }
    return Answer(c, Redirect(next, std::move(cookies)));
  }

  if (path == "/__warren/auth") {
    std::optional<SiteUrl> site =
        ParseSiteUrl(QueryParam(query, "to").value_or(""), options_.domain);
    if (!site.has_value()) {
      return Answer(c,
                    MessagePage(400, "Bad address",
                                "the address to sign in to is not a site of this server", wants));
    }
    if (session.empty()) {
      // Remembered (ten minutes, this domain only) so the magic link leads back here.
      WebAnswer page = SignInPage(401, sign_in, "", wants);
      page.headers.push_back(SetCookie(WarrenCookie::kReturn, c.https,
                                       PercentEncode(origin.Of(site->host) + site->path), 600));
      return Answer(c, page);
    }
    Result<std::string> ticket = gate_->IssueHostTicket(session, site->host);
    if (!ticket.ok()) {
      c.error = ticket.status().message();
      if (ticket.status().code() == Code::kUnauthenticated) {
        WebAnswer page = SignInPage(401, sign_in, "Your sign-in has ended; sign in again.", wants);
        page.headers.push_back(SetCookie(WarrenCookie::kReturn, c.https,
                                         PercentEncode(origin.Of(site->host) + site->path), 600));
        return Answer(c, page);
      }
      return Answer(c, MessagePage(503, "Try again", "cannot sign in right now", wants));
    }
    return Answer(c, Redirect(origin.Of(site->host) + "/__warren/session?ticket=" +
                              PercentEncode(*ticket) + "&to=" + PercentEncode(site->path)));
  }

  if (path == "/__warren/logout") {
    if (c.req.method == "POST") {
      if (!session.empty()) {
        Status st = gate_->EndSession(session);
        if (!st.ok()) c.error = st.message();
      }
      WebAnswer done = SignedOutPage();
      done.headers.push_back(SetCookie(WarrenCookie::kSession, c.https, "", 0));
      return Answer(c, done);
    }
    if (!IsGetOrHead(c)) return Answer(c, MessagePage(405, "Not allowed", "use POST", wants));
    std::string who;
    if (!session.empty()) {
      Result<WebVisitor> v = gate_->SessionVisitor(session, c.host.host);
      if (v.ok()) who = v->who;
    }
    c.visitor = who.empty() ? "-" : who;
    return Answer(c, SignOutPage(who));
  }

  if (path == "/") {
    if (!IsGetOrHead(c)) return Answer(c, MessagePage(405, "Not allowed", "use GET", wants));
    if (!session.empty()) {
      Result<WebVisitor> v = gate_->SessionVisitor(session, c.host.host);
      if (v.ok()) {
        c.visitor = v->who;
        return Answer(c, SignedInPage(v->who));
      }
    }
    return Answer(c, SignInPage(200, sign_in, "", wants));
  }
  return Answer(c, MessagePage(404, "Not found", "no such page", wants));
}

void WebServer::HandleSite(Conn& c) {
  auto [path, query] = SplitTarget(c.req.target);
  Wants wants = WantsOf(c.req.headers);
  PublicOrigin origin{c.https, options_.public_port != 0 ? options_.public_port : port_};
  std::optional<std::string> session = PickSession(c);

  if (path.starts_with("/__warren/")) {
    DiscardBody(c);
    std::string to = QueryParam(query, "to").value_or("/");
    if (!IsLocalPath(to)) to = "/";
    if (path == "/__warren/session" && IsGetOrHead(c)) {
      Result<std::string> mine =
          gate_->RedeemHostTicket(QueryParam(query, "ticket").value_or(""), c.host.host);
      if (!mine.ok()) {
        c.error = mine.status().message();
        return Answer(c, MessagePage(401, "Sign-in expired",
                                     "This sign-in hand-off was already used or has expired; "
                                     "open " +
                                         origin.Of(c.host.host) + to + " again.",
                                     wants));
      }
      // Through /__warren/check, so a browser that drops the cookie gets a page, not a loop.
      return Answer(
          c,
          Redirect("/__warren/check?to=" + PercentEncode(to),
                   {SetCookie(WarrenCookie::kSession, c.https, *mine, options_.cookie_max_age_s)}));
    }
    if (path == "/__warren/check" && IsGetOrHead(c)) {
      if (session.has_value() && gate_->SessionVisitor(*session, c.host.host).ok()) {
        return Answer(c, Redirect(to));
      }
      return Answer(
          c, MessagePage(401, "Cookies are blocked",
                         "This browser did not keep warren's sign-in cookie for " + c.host.host +
                             "; allow cookies for it and open the page "
                             "again.",
                         wants));
    }
    return Answer(c, MessagePage(404, "Not found", "no such page", wants));
  }

  Result<WebSite> site = gate_->Resolve(c.host.label);
  if (!site.ok()) {
    c.error = site.status().message();
    Code code = site.status().code();
    if (code == Code::kNotFound || code == Code::kInvalidArgument) {
      return Answer(c, MessagePage(404, "No such site", site.status().message(), wants));
    }
    return Answer(c, MessagePage(503, "Try again", "this site cannot be reached right now", wants));
  }
  c.site = std::move(site.value());

  WebCredentials creds;
  creds.source = c.peer;
  creds.session = session.value_or("");
  creds.bearer = WarrenBearer(c.req.headers);
  std::optional<std::string> share_param = QueryParam(query, "share");
  if (share_param.has_value() && !share_param->empty()) {
    creds.share_link = *share_param;
  } else {
    creds.share_link = FindCookie(c.req.headers, WarrenCookie::kLink, c.https).value_or("");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.creds = creds;  // Revalidate reads it under the lock
  }
  Result<WebVisitor> visitor = gate_->Admit(c.site, creds);
  if (!visitor.ok()) {
    c.error = visitor.status().message();
    Code code = visitor.status().code();
    if (code == Code::kPermissionDenied) {
      return Answer(c, MessagePage(403, "Not shared with you", visitor.status().message(), wants));
    }
    if (code == Code::kNotFound) {
      return Answer(c, MessagePage(404, "No such site", visitor.status().message(), wants));
    }
    if (code != Code::kUnauthenticated) {
      return Answer(c,
                    MessagePage(503, "Try again", "this site cannot be reached right now", wants));
    }
    const std::string& sign_in = options_.sign_in_command;
    if (share_param.has_value()) {
      return Answer(
          c, SignInPage(401, sign_in, "This share link is not valid (it may have been removed).",
                        wants));
    }
    // A browser goes to the domain to sign in, unless it already holds a session of this
    // host that is alive and still not enough (then another round would only loop).
    bool live_session = session.has_value() && gate_->SessionVisitor(*session, c.host.host).ok();
    if (IsGetOrHead(c) && AcceptsHtml(c.req.headers) && !live_session) {
      return Answer(c, Redirect(origin.Of(options_.domain) + "/__warren/auth?to=" +
                                PercentEncode(origin.Of(c.host.host) + c.req.target)));
    }
    return Answer(c, SignInPage(401, sign_in, "", wants));
  }
  c.visitor = visitor->who;

  if (share_param.has_value() && IsGetOrHead(c)) {
    // The link goes into this host's cookie and out of the address bar (and of Referer).
    relay::HttpHeaders cookies;
    if (IsCookieSafe(*share_param)) {
      WebCredentials link_only;
      link_only.source = c.peer;
      link_only.share_link = *share_param;
      if (gate_->Admit(c.site, link_only).ok()) {
        cookies.push_back(
            SetCookie(WarrenCookie::kLink, c.https, *share_param, options_.cookie_max_age_s));
      }
    }
    return Answer(c, Redirect(WithoutParam(c.req.target, "share"), std::move(cookies)));
  }
  if (!CountSite(c)) {
    return Answer(c,
                  MessagePage(503, "Busy", "too many connections to this site; try again", wants));
  }
  Forward(c);
}

void WebServer::Forward(Conn& c) {
  Wants wants = WantsOf(c.req.headers);
  const auto idle = options_.idle_timeout;
  auto notifier = std::make_shared<PipeNotifier>();
  Result<std::shared_ptr<GuestPipe>> pipe =
      gate_->Open(c.site, WebVisitor{c.visitor}, [notifier] { notifier->Call(); });
  if (!pipe.ok()) {
    c.error = pipe.status().message();
    if (pipe.status().code() == Code::kUnavailable) {
      return Answer(c, MessagePage(503, "The VM is not running", pipe.status().message(), wants));
    }
    return Answer(c, MessagePage(502, "Cannot reach the VM", pipe.status().message(), wants));
  }
  auto stream = std::make_shared<relay::GuestPipeStream>(*pipe);
  notifier->Set(stream.get());
  struct Unset {
    PipeNotifier* n;
    ~Unset() { n->Set(nullptr); }
  } unset{notifier.get()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.up = stream;
    if (c.cancelled) c.up->Cancel();
  }
  GuestPipe& raw = **pipe;
  auto not_listening = [&](const std::string& why) {
    c.error = why;
    return Answer(c, NothingListeningPage(c.site.vm_name, c.site.port, wants));
  };

  bool upgrade = IsUpgrade(c.req);
  Result<relay::BodyFraming> framing = relay::RequestFraming(c.req);
  const relay::HttpHeader* expect = relay::FindHeader(c.req.headers, "expect");
  if (expect != nullptr && relay::EqualsIgnoreCase(expect->value, "100-continue") &&
      framing->kind != relay::BodyFraming::Kind::kNone) {
    Status st = c.down->Write("HTTP/1.1 100 Continue\r\n\r\n", Clock::now() + idle);
    if (!st.ok()) {
      c.error = st.message();
      return;
    }
  }
  ForwardContext ctx{WithoutParam(c.req.target, "share"), c.peer, c.https, upgrade};
  // An upgrade's first bytes may have come right behind its head (a client that does not
  // wait for the 101): they go to the VM with it, as the VM reads them once switched.
  std::string head_out = VmRequestHead(c.req, ctx);
  if (upgrade) {
    c.up_bytes += c.rest.size();
    head_out += std::move(c.rest);
    c.rest.clear();
  }
  Status st = stream->Write(head_out, Clock::now() + idle);
  if (!st.ok()) {
    if (st.code() == Code::kCancelled) return;
    return not_listening(st.message());
  }
  BodySender body;
  if (!upgrade && framing->kind != relay::BodyFraming::Kind::kNone) {
    body.Start(*c.down, *stream, *framing, std::move(c.rest), idle, &c.up_bytes);
  }
  // When the answer cannot be read: the body's failure, if it failed, is the reason.
  auto body_failed = [&]() -> bool {
    Status sent = body.Wait();
    if (sent.ok()) return false;
    c.error = "request body: " + sent.message();
    if (sent.code() == Code::kInvalidArgument) {
      Answer(c, MessagePage(400, "Bad request", "a malformed request body", wants));
    } else if (!raw.status().ok()) {
      not_listening(raw.status().message());
    } else if (sent.code() != Code::kCancelled) {
      Answer(c, MessagePage(502, "The VM did not take the request",
                            "the request body did not go through", wants));
    }
    return true;
  };

  std::string up_rest;
  Result<relay::ResponseHead> resp = InvalidArgument("no response");
  for (;;) {
    Result<std::string> rhead =
        relay::ReadHead(*stream, 2 * options_.max_header_bytes, Clock::now() + idle, &up_rest);
    if (!rhead.ok()) {
      if (body_failed()) return;
      Code code = rhead.status().code();
      if (code == Code::kCancelled) {
        c.error = rhead.status().message();
        return;
      }
      if (!raw.status().ok()) return not_listening(raw.status().message());
      c.error = "response head: " + rhead.status().message();
      if (code == Code::kTimeout) {
        return Answer(c, MessagePage(504, "The VM did not answer",
                                     "the server in VM " + c.site.vm_name + " on port " +
                                         std::to_string(c.site.port) + " did not answer in time",
                                     wants));
      }
      return Answer(c, MessagePage(502, "No valid answer",
                                   "the server in VM " + c.site.vm_name + " on port " +
                                       std::to_string(c.site.port) +
                                       " closed the connection without a valid answer",
                                   wants));
    }
    resp = relay::ParseResponseHead(*rhead);
    if (!resp.ok()) {
      c.error = "response head: " + resp.status().message();
      return Answer(c, MessagePage(502, "No valid answer",
                                   "the server in VM " + c.site.vm_name + " on port " +
                                       std::to_string(c.site.port) + " sent no valid answer",
                                   wants));
    }
    if (resp->status >= 200 || resp->status == 101) break;
  }
  if (resp->status == 101) {
    if (!upgrade) {
      c.error = "a 101 to a request that asked no upgrade";
      return Answer(
          c, MessagePage(502, "No valid answer", "the VM switched protocols unasked", wants));
    }
    c.status = 101;
    st = c.down->Write(VisitorResponseHead(*resp) + up_rest, Clock::now() + idle);
    if (!st.ok()) {
      c.error = st.message();
      return;
    }
    c.down_bytes += up_rest.size();
    relay::Splice(*c.down, *stream, options_.upgrade_idle_timeout, &c.up_bytes, &c.down_bytes);
    return;
  }
  Result<relay::BodyFraming> rframing = relay::ResponseFraming(c.req.method, *resp);
  if (!rframing.ok()) {
    c.error = "response: " + rframing.status().message();
    return Answer(c, MessagePage(502, "No valid answer", "the VM sent no valid answer", wants));
  }
  c.status = resp->status;
  // Another request may follow on this connection when the visitor speaks HTTP/1.1 and did
  // not say close, and this answer's end is known from its framing (a VM's close-delimited
  // answer ends the connection with it).
  bool keep = c.req.version == "HTTP/1.1" && !upgrade &&
              !HasConnectionToken(c.req.headers, "close") &&
              rframing->kind != relay::BodyFraming::Kind::kUntilClose;
  st = c.down->Write(VisitorResponseHead(*resp, keep), Clock::now() + idle);
  if (!st.ok()) {
    c.error = st.message();
    return;
  }
  Status got =
      relay::RelayBody(*stream, *c.down, *rframing, std::move(up_rest), idle, &c.down_bytes);
  if (!got.ok()) {
    c.error = "response body: " + got.message();
    body.Cut();
    return;
  }
  // Kept only when the whole request body went to the VM: else what is left of it would be
  // read as the next request.
  if (keep && body.SentWhole()) {
    if (body.started()) c.rest = body.TakeAfter();
    c.keep_alive = true;
    return;
  }
  c.down->CloseWrite();
  body.Cut();
}

}  // namespace warren::web
