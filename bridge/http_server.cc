#include "bridge/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "bridge/metrics.h"
#include "lobby/base/error_map.h"
#include "lobby/base/log.h"

namespace warren {

void RespondJsonError(HttpResponder& responder, int status, std::string_view message,
                      HttpHeaders extra_headers) {
  extra_headers.emplace_back("Content-Type", "application/json");
  extra_headers.emplace_back("Cache-Control", "no-store");
  nlohmann::json body = {{"error", std::string(message)}};
  responder.Respond(status, std::move(extra_headers),
                    body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr auto kDrainTimeout = std::chrono::seconds(2);
// Out of file descriptors, accepting waits this long before it tries again: at once would
// fail at once, a busy loop (the kernel keeps the listening socket readable).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Refusals over the connection caps are logged at most this often (a flood would fill the
// log otherwise); metrics count every one.
constexpr auto kRefusalLogInterval = std::chrono::seconds(10);
constexpr size_t kMaxHeaderBytes = 16 * 1024;
// Body limit for paths no handler serves: they get a 404 anyway.
constexpr size_t kUnroutedBodyBytes = 64 * 1024;
// Bytes a client may send ahead (pipelining) while its request is being served.
constexpr size_t kMaxPipelinedBytes = 64 * 1024;
// After refusing an oversize body, at most this much more of it is read and thrown away
// so the client sees the answer rather than a reset.
constexpr size_t kMaxDrainBytes = 8 * 1024 * 1024;

// The status line and headers of a response, serialised by Beast.
template <class Body>
std::string HeadText(const http::response<Body>& res) {
  std::ostringstream os;
  os << res.base();
  return os.str();
}

// Open connections, in all and by source. A connection holds a Slot from accept until its
// socket closes. Thread-safe; shared, since a connection (held by a responder) may outlive
// the server.
class ConnectionCounts : public std::enable_shared_from_this<ConnectionCounts> {
 public:
  ConnectionCounts(int max_total, int max_per_source)
      : max_total_(max_total), max_per_source_(max_per_source) {}

  class Slot {
   public:
    Slot(std::shared_ptr<ConnectionCounts> counts, std::string source)
        : counts_(std::move(counts)), source_(std::move(source)) {}
    ~Slot() { counts_->Release(source_); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    std::shared_ptr<ConnectionCounts> counts_;
    std::string source_;
  };

  // A slot for a new connection from `source`, or null with *refusal set to "total" or
  // "per_source" when a cap is reached.
  std::unique_ptr<Slot> TryAcquire(const std::string& source, std::string* refusal) {
    std::lock_guard lock(mu_);
    if (total_ >= max_total_) {
      *refusal = "total";
      return nullptr;
    }
    int& mine = per_source_[source];
    if (mine >= max_per_source_) {
      *refusal = "per_source";
      return nullptr;
    }
    ++mine;
    ++total_;
    return std::make_unique<Slot>(shared_from_this(), source);
  }

  int total() const {
    std::lock_guard lock(mu_);
    return total_;
  }
  int of(const std::string& source) const {
    std::lock_guard lock(mu_);
    auto it = per_source_.find(source);
    return it == per_source_.end() ? 0 : it->second;
  }
  int max_total() const { return max_total_; }
  int max_per_source() const { return max_per_source_; }

 private:
  void Release(const std::string& source) {
    std::lock_guard lock(mu_);
    --total_;
    auto it = per_source_.find(source);
    if (it != per_source_.end() && --it->second <= 0) per_source_.erase(it);
  }

  const int max_total_;
  const int max_per_source_;
  mutable std::mutex mu_;
  int total_ = 0;
  std::unordered_map<std::string, int> per_source_;
};

// What the server itself knows of every request it routes.
struct ServerCore {
  std::vector<std::shared_ptr<HttpHandler>> handlers;
  Metrics* metrics = nullptr;
  std::chrono::milliseconds header_timeout{0};
  std::chrono::milliseconds idle_timeout{0};

  HttpHandler* Find(std::string_view path) const {
    for (const auto& h : handlers) {
      if (h->Matches(path)) return h.get();
    }
    return nullptr;
  }

  void Count(const std::string& route, int status) const {
    if (metrics == nullptr) return;
    metrics->Inc("warren_http_requests_total",
                 {{"route", route}, {"code", std::to_string(status)}});
  }
};

// One client connection: read a request (headers first, then a body no longer than its
// route allows), hand it to its handler with a responder, write what the responder sends,
// repeat while keep-alive. While a request is served the connection keeps reading, so it
// notices a client that goes away (and cancels the request's `closed` signal).
// Deadlines: from accept, the first request's header (and the TLS handshake) must be in
// within the header timeout; between requests the connection may idle for the idle timeout,
// and once the next request's first bytes are in, its header has the header timeout again;
// a body has the idle timeout. While a handler serves a request there is none.
// Every member function runs on the connection's strand.
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Connection(Stream stream, const ServerCore& core, std::string remote, std::string source,
             std::unique_ptr<ConnectionCounts::Slot> slot)
      : stream_(std::move(stream)),
        core_(core),
        remote_(std::move(remote)),
        source_(std::move(source)),
        slot_(std::move(slot)) {}

  void Run() {
    Lowest().expires_after(core_.header_timeout);
    if constexpr (kTls) {
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Close(false);
                                self->ReadHeader(/*fresh=*/true);
                              });
    } else {
      ReadHeader(/*fresh=*/true);
    }
  }

  // From a responder (posted onto the strand): bytes of request `id`'s response. `status`
  // is set on the first part (for metrics); `end` on the last.
  void Deliver(uint64_t id, std::string bytes, int status, bool end) {
    if (id != request_id_ || closing_ || !in_flight_) return;
    if (status != 0) {
      core_.Count(route_, status);
      // The path without its query; never a header (credentials travel there).
      if (GetLogLevel() == LogLevel::kDebug) {
        LogDebug("http request peer=" + remote_ + " route=" + LogQuote(route_) +
                 " path=" + LogQuote(path_) + " status=" + std::to_string(status));
      }
    }
    queue_.push_back(std::move(bytes));
    if (end) end_queued_ = true;
    DoWrite();
  }

  auto executor() { return stream_.get_executor(); }
  uint64_t request_id() const { return request_id_; }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // `fresh`: the connection's first request, whose deadline runs from accept (Run).
  void ReadHeader(bool fresh = false) {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    // The route's own limit is set once the path is known (OnHeader); until then Beast must
    // not judge the Content-Length against its default.
    parser_->body_limit(boost::none);
    if (fresh) return ReadHeaderBytes();
    if (buffer_.size() > 0) {
      // The next request has begun (pipelined, or read while the last was served).
      Lowest().expires_after(core_.header_timeout);
      return ReadHeaderBytes();
    }
    // Kept alive: wait for the next request to begin.
    Lowest().expires_after(core_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close(false);
                              self->buffer_.commit(n);
                              self->Lowest().expires_after(self->core_.header_timeout);
                              self->ReadHeaderBytes();
                            });
  }

  void ReadHeaderBytes() {
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted) {
      return Close(false);
    }
    if (ec) {
      // Malformed or oversize input gets a JSON error, then the connection closes.
      Status st = ec == http::error::header_limit ? TooLarge("request headers too large")
                                                  : InvalidArgument("malformed HTTP request");
      return RespondEarly("other", st, /*drain=*/false);
    }
    auto& req = parser_->get();
    std::string_view target = req.target();
    path_ = std::string(target.substr(0, target.find('?')));
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    handler_ = path_ == "/healthz" ? nullptr : core_.Find(path_);
    route_ = path_ == "/healthz" ? "/healthz" : handler_ != nullptr ? handler_->route() : "other";
    body_limit_ = handler_ != nullptr ? handler_->max_body_bytes() : kUnroutedBodyBytes;
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      return RespondEarly(route_, TooLarge(BodyTooLarge(body_limit_)), /*drain=*/true);
    }
    parser_->body_limit(body_limit_);
    Lowest().expires_after(core_.idle_timeout);  // for the body
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      // Tell the client to send the body it is holding back (curl waits a second otherwise).
      in_flight_ = true;  // so the write below is allowed; Dispatch keeps it so
      queue_.push_back("HTTP/1.1 100 Continue\r\n\r\n");
      DoWrite();
    }
    if (parser_->is_done()) return OnBody({});
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  static std::string BodyTooLarge(size_t limit) {
    return "request body too large: at most " + std::to_string(limit) + " bytes here";
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return RespondEarly(route_, TooLarge(BodyTooLarge(body_limit_)), /*drain=*/true);
    }
    if (ec) {
      if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
          ec == http::error::partial_message || ec == asio::error::operation_aborted) {
        return Close(false);
      }
      return RespondEarly(route_, InvalidArgument("malformed HTTP request body"), false);
    }
    Dispatch();
  }

  void Dispatch();

  // An answer chosen before any handler ran (the request was malformed or too large). The
  // connection closes after it.
  void RespondEarly(const std::string& route, const Status& st, bool drain) {
    in_flight_ = true;
    keep_alive_ = false;
    drain_after_ = drain;
    route_ = route;
    http::response<http::string_body> res{static_cast<http::status>(HttpStatusFor(st.code())),
                                          version_ == 10 ? 10u : 11u};
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    res.keep_alive(false);
    res.body() = nlohmann::json{{"error", st.message()}}.dump() + "\n";
    res.prepare_payload();
    Deliver(request_id_, HeadText(res) + res.body(), HttpStatusFor(st.code()), true);
  }

  void DoWrite() {
    if (writing_ || queue_.empty() || closing_) return;
    writing_ = true;
    asio::async_write(
        stream_, asio::buffer(queue_.front()),
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    if (ec) return Close(false);
    queue_.pop_front();
    if (!queue_.empty()) return DoWrite();
    if (end_queued_) FinishRequest();
  }

  void FinishRequest() {
    in_flight_ = false;
    end_queued_ = false;
    ++request_id_;  // a stale responder can no longer write into the connection
    if (!keep_alive_) return Close(drain_after_);
    if (watching_) {
      // The watch read must end before the next request is parsed from the same buffer.
      want_next_ = true;
      Lowest().cancel();
      return;
    }
    ReadHeader();
  }

  // While a request is served: read ahead, to learn when the client goes away.
  void Watch() {
    if (watching_ || closing_) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->OnWatch(ec, n);
                            });
  }

  void OnWatch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (!ec) buffer_.commit(n);
    if (want_next_) {
      want_next_ = false;
      if (ec && ec != asio::error::operation_aborted) return Close(false);
      return ReadHeader();
    }
    if (ec) {
      if (ec != asio::error::operation_aborted) {
        // The client is gone: stop the work done for it, unless its answer is complete
        // (its write may still be finishing: a client that read it and hung up leaves the
        // work alone, as a 504's command goes on) or the request is over (this read's end
        // was queued before FinishRequest closed the connection, which reset end_queued_).
        if (closed_ && in_flight_ && !end_queued_) closed_->Cancel();
        Close(false);
      }
      return;
    }
    if (in_flight_ && buffer_.size() < kMaxPipelinedBytes) Watch();
  }

  void Close(bool drain) {
    if (closing_) return;
    closing_ = true;
    if (closed_ && in_flight_ && !end_queued_) closed_->Cancel();
    beast::error_code ignored;
    if (drain) {
      // Half-close and read what the client still sends for a moment, so it reads our
      // answer instead of a reset.
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Lowest().expires_after(kDrainTimeout);
      return Drain();
    }
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    CloseSocket();
  }

  // The socket is gone: its slot counts no more, even while a handler still holds us.
  void CloseSocket() {
    Lowest().close();
    slot_.reset();
  }

  void Drain() {
    Lowest().async_read_some(asio::buffer(drain_buf_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                               self->drained_ += n;
                               if (ec || self->drained_ > kMaxDrainBytes) {
                                 return self->CloseSocket();
                               }
                               self->Drain();
                             });
  }

  Stream stream_;
  const ServerCore& core_;
  std::string remote_;
  std::string source_;
  std::unique_ptr<ConnectionCounts::Slot> slot_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;

  // The request being served.
  std::string path_;
  std::string route_ = "other";
  HttpHandler* handler_ = nullptr;
  size_t body_limit_ = kUnroutedBodyBytes;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  uint64_t request_id_ = 0;
  bool in_flight_ = false;
  std::shared_ptr<CancelSignal> closed_;

  std::deque<std::string> queue_;
  bool writing_ = false;
  bool end_queued_ = false;
  bool watching_ = false;
  bool want_next_ = false;
  bool closing_ = false;
  bool drain_after_ = false;
  size_t drained_ = 0;
  char drain_buf_[4096];
};

// The HttpResponder of one request: formats what the handler says and posts it onto the
// connection's strand. Thread-safe.
template <class Stream>
class ConnectionResponder final : public HttpResponder {
 public:
  ConnectionResponder(std::shared_ptr<Connection<Stream>> conn, uint64_t id,
                      std::shared_ptr<CancelSignal> closed, unsigned version, bool keep_alive,
                      bool head)
      : conn_(std::move(conn)),
        id_(id),
        closed_(std::move(closed)),
        version_(version),
        keep_alive_(keep_alive),
        head_(head) {}

  ~ConnectionResponder() override {
    std::unique_lock lock(mu_);
    State state = state_;
    lock.unlock();
    if (state == State::kNone) {
      RespondJsonError(*this, 500, "the handler gave no response");
    } else if (state == State::kStreaming) {
      End();
    }
  }

  void Respond(int status, HttpHeaders headers, std::string body) override {
    {
      std::lock_guard lock(mu_);
      if (state_ != State::kNone) return;
      state_ = State::kDone;
    }
    http::response<http::string_body> res{static_cast<http::status>(status), version_};
    for (auto& [k, v] : headers) res.set(k, v);
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    std::string bytes = HeadText(res);
    if (!head_) bytes += res.body();
    Post(std::move(bytes), status, true);
  }

  void BeginStream(int status, HttpHeaders headers) override {
    {
      std::lock_guard lock(mu_);
      if (state_ != State::kNone) return;
      state_ = State::kStreaming;
    }
    http::response<http::empty_body> res{static_cast<http::status>(status), version_};
    for (auto& [k, v] : headers) res.set(k, v);
    // HTTP/1.0 has no chunked encoding: the body then ends when the connection closes.
    chunked_ = version_ >= 11;
    res.keep_alive(keep_alive_ && chunked_);
    if (chunked_) res.chunked(true);
    Post(HeadText(res), status, false);
  }

  bool Write(std::string_view bytes) override {
    {
      std::lock_guard lock(mu_);
      if (state_ != State::kStreaming) return false;
    }
    if (closed_->cancelled()) return false;
    if (bytes.empty() || head_) return true;
    std::string out;
    if (chunked_) {
      char size[24];
      std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
      out = size;
      out.append(bytes);
      out += "\r\n";
    } else {
      out = std::string(bytes);
    }
    Post(std::move(out), 0, false);
    return true;
  }

  void End() override {
    {
      std::lock_guard lock(mu_);
      if (state_ != State::kStreaming) return;
      state_ = State::kDone;
    }
    Post(chunked_ && !head_ ? "0\r\n\r\n" : "", 0, true);
  }

  std::shared_ptr<CancelSignal> closed() const override { return closed_; }

 private:
  enum class State { kNone, kStreaming, kDone };

  void Post(std::string bytes, int status, bool end) {
    asio::post(conn_->executor(),
               [conn = conn_, id = id_, bytes = std::move(bytes), status, end]() mutable {
                 conn->Deliver(id, std::move(bytes), status, end);
               });
  }

  std::shared_ptr<Connection<Stream>> conn_;
  const uint64_t id_;
  const std::shared_ptr<CancelSignal> closed_;
  const unsigned version_;
  const bool keep_alive_;
  const bool head_;
  std::mutex mu_;
  State state_ = State::kNone;
  bool chunked_ = true;
};

template <class Stream>
void Connection<Stream>::Dispatch() {
  auto& req = parser_->get();
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.path = path_;
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  request.body = std::move(req.body());
  request.remote_address = remote_;
  request.source = source_;
  request.tls = kTls;

  in_flight_ = true;
  closed_ = std::make_shared<CancelSignal>();
  // A command or an event stream may take long: no idle timeout while it is served.
  Lowest().expires_never();
  auto responder = std::make_shared<ConnectionResponder<Stream>>(
      this->shared_from_this(), request_id_, closed_, version_, keep_alive_, head_);
  Watch();

  if (path_ == "/healthz") {
    if (request.method != "GET" && request.method != "HEAD") {
      RespondJsonError(*responder, 405, "use GET", {{"Allow", "GET, HEAD"}});
      return;
    }
    responder->Respond(200, {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}},
                       "{\"status\":\"ok\"}\n");
    return;
  }
  if (handler_ == nullptr) {
    RespondJsonError(*responder, 404, "no such endpoint");
    return;
  }
  try {
    handler_->Handle(std::move(request), responder);
  } catch (const std::exception& e) {
    LogError("http handler for " + LogQuote(route_) + " threw: " + LogQuote(e.what()));
    RespondJsonError(*responder, 500, "internal error");
  }
}

// Whether an accept failed for want of file descriptors or kernel memory: trying again at
// once would fail the same way.
bool OutOfResources(const beast::error_code& ec) {
  namespace errc = boost::system::errc;
  return ec == errc::too_many_files_open || ec == errc::too_many_files_open_in_system ||
         ec == errc::no_buffer_space || ec == errc::not_enough_memory;
}

}  // namespace

std::string SourceKey(std::string_view address) {
  beast::error_code ec;
  asio::ip::address a = asio::ip::make_address(std::string(address), ec);
  if (ec) return std::string(address);
  if (a.is_v4()) return a.to_string();
  asio::ip::address_v6 v6 = a.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string();
  asio::ip::address_v6::bytes_type bytes = v6.to_bytes();
  for (size_t i = 8; i < bytes.size(); ++i) bytes[i] = 0;
  return asio::ip::address_v6(bytes).to_string() + "/64";
}

class HttpServer::State {
 public:
  explicit State(HttpServerOptions o)
      : options(std::move(o)),
        acceptor(io),
        pause_timer(io),
        counts(
            std::make_shared<ConnectionCounts>(std::max(1, options.max_connections),
                                               std::max(1, options.max_connections_per_source))) {
    core.metrics = options.metrics;
    core.header_timeout = options.header_timeout;
    core.idle_timeout = options.idle_timeout;
  }

  // One accept at a time; its handler runs on an I/O thread.
  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (ec && OutOfResources(ec)) return PauseAccepting(ec);
      if (paused) {
        paused = false;
        LogInfo(options.name + ": accepting connections again");
      }
      if (!ec) Admit(std::move(s));
      Accept();
    });
  }

  void PauseAccepting(const beast::error_code& ec) {
    if (!paused) {
      paused = true;
      LogWarn(options.name + ": cannot accept connections (" + ec.message() + ", " +
              std::to_string(counts->total()) +
              " open); pausing accepts until descriptors free up");
    }
    if (core.metrics != nullptr) core.metrics->Inc("warren_http_accept_pauses_total", {});
    pause_timer.expires_after(kAcceptPause);
    pause_timer.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) Accept();
    });
  }

  // A new connection: served when the caps allow it, else refused at once.
  void Admit(tcp::socket s) {
    beast::error_code ignored;
    std::string remote = s.remote_endpoint(ignored).address().to_string();
    std::string source = SourceKey(remote);
    std::string refusal;
    std::unique_ptr<ConnectionCounts::Slot> slot = counts->TryAcquire(source, &refusal);
    if (!slot) return Refuse(std::move(s), source, refusal);
    if (std::shared_ptr<ssl::context> ctx = TlsContext()) {
      using TlsStream = beast::ssl_stream<beast::tcp_stream>;
      // The stream's SSL holds its own reference to the SSL_CTX, so a reload may drop ctx.
      std::make_shared<Connection<TlsStream>>(TlsStream(std::move(s), *ctx), core,
                                              std::move(remote), std::move(source), std::move(slot))
          ->Run();
    } else {
      std::make_shared<Connection<beast::tcp_stream>>(beast::tcp_stream(std::move(s)), core,
                                                      std::move(remote), std::move(source),
                                                      std::move(slot))
          ->Run();
    }
  }

  // Over a cap: a plain-HTTP client gets a 503 it can read (one non-blocking write into an
  // empty send buffer), a TLS one just the close; nothing waits on either.
  void Refuse(tcp::socket s, const std::string& source, const std::string& reason) {
    if (core.metrics != nullptr) {
      core.metrics->Inc("warren_http_connections_refused_total", {{"reason", reason}});
    }
    const bool per_source = reason == "per_source";
    const auto now = std::chrono::steady_clock::now();
    if (now - last_refusal_log >= kRefusalLogInterval) {
      last_refusal_log = now;
      LogWarn(options.name + ": refusing connections: " +
              (per_source ? std::to_string(counts->of(source)) + " open from " + source +
                                " (--http-max-connections-per-source " +
                                std::to_string(counts->max_per_source()) + ")"
                          : std::to_string(counts->total()) + " open (--http-max-connections " +
                                std::to_string(counts->max_total()) + ")") +
              "; further refusals are counted in warren_http_connections_refused_total");
    }
    beast::error_code ignored;
    if (!TlsContext()) {
      const std::string body = nlohmann::json{{"error", per_source ? "too many connections from "
                                                                     "your address"
                                                                   : "too many connections"}}
                                   .dump() +
                               "\n";
      const std::string response =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
          "Cache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      s.non_blocking(true, ignored);
      s.write_some(asio::buffer(response), ignored);
    }
    s.shutdown(tcp::socket::shutdown_both, ignored);
    s.close(ignored);
  }

  Status LoadTls() {
    const auto& o = options;
    if (o.tls_cert_file.empty() && o.tls_key_file.empty()) return Status::Ok();
    if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
      return InvalidArgument("HTTPS needs both --tls-cert and --tls-key");
    }
    WARREN_ASSIGN_OR_RETURN(std::shared_ptr<ssl::context> ctx,
                            MakeTlsContext(o.tls_cert_file, o.tls_key_file));
    std::lock_guard<std::mutex> lock(ssl_mu);
    ssl_ctx = std::move(ctx);
    return Status::Ok();
  }

  static Result<std::shared_ptr<ssl::context>> MakeTlsContext(const std::string& cert_file,
                                                              const std::string& key_file) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                     ssl::context::single_dh_use);
    beast::error_code ec;
    ctx->use_certificate_chain_file(cert_file, ec);
    if (ec) return InvalidArgument("TLS certificate " + cert_file + ": " + ec.message());
    ctx->use_private_key_file(key_file, ssl::context::pem, ec);
    if (ec) return InvalidArgument("TLS key " + key_file + ": " + ec.message());
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      return InvalidArgument("TLS key " + key_file + " does not match the certificate");
    }
    return ctx;
  }

  std::shared_ptr<ssl::context> TlsContext() {
    std::lock_guard<std::mutex> lock(ssl_mu);
    return ssl_ctx;
  }

  HttpServerOptions options;
  ServerCore core;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::steady_timer pause_timer;
  std::shared_ptr<ConnectionCounts> counts;
  // Touched only by the accept handler (one accept is pending at a time).
  bool paused = false;
  std::chrono::steady_clock::time_point last_refusal_log{};
  std::mutex ssl_mu;
  std::shared_ptr<ssl::context> ssl_ctx;  // swapped whole by ReloadTls, under ssl_mu
  std::vector<std::thread> threads;
  std::atomic<int> port{0};
};

HttpServer::HttpServer(HttpServerOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::AddHandler(std::shared_ptr<HttpHandler> handler) {
  state_->core.handlers.push_back(std::move(handler));
}

Status HttpServer::Start() {
  WARREN_RETURN_IF_ERROR(state_->LoadTls());
  if (Metrics* m = state_->core.metrics; m != nullptr) {
    m->DeclareCounter("warren_http_requests_total",
                      "HTTP requests answered, by route and status code");
    m->DeclareCounter("warren_http_connections_refused_total",
                      "HTTP connections closed at once over a connection cap, by cap");
    m->DeclareCounter("warren_http_accept_pauses_total",
                      "pauses of the HTTP accept loop for want of file descriptors");
    m->AddGauge("warren_http_connections", "open HTTP connections",
                [counts = std::weak_ptr<ConnectionCounts>(state_->counts)] {
                  auto c = counts.lock();
                  return std::vector<GaugeSample>{{{}, c ? static_cast<double>(c->total()) : 0}};
                });
  }
  beast::error_code ec;
  auto address = asio::ip::make_address(state_->options.address, ec);
  if (ec) return InvalidArgument("bad HTTP address " + state_->options.address);
  tcp::endpoint endpoint(address, static_cast<unsigned short>(state_->options.port));
  auto& acc = state_->acceptor;
  acc.open(endpoint.protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(endpoint, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + state_->options.address + ":" +
                       std::to_string(state_->options.port) + ": " + ec.message());
  }
  state_->port = acc.local_endpoint().port();
  state_->Accept();
  for (int i = 0; i < std::max(1, state_->options.threads); ++i) {
    state_->threads.emplace_back([this] { state_->io.run(); });
  }
  LogInfo(state_->options.name + " listening on " + state_->options.address + ":" +
          std::to_string(port()) + (tls() ? " (HTTPS)" : ""));
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!state_ || state_->threads.empty()) return;
  asio::post(state_->io, [this] {
    beast::error_code ignored;
    state_->acceptor.close(ignored);
  });
  state_->io.stop();
  for (auto& t : state_->threads) t.join();
  state_->threads.clear();
}

int HttpServer::port() const { return state_->port.load(); }

bool HttpServer::tls() const { return state_->TlsContext() != nullptr; }

Status HttpServer::ReloadTls(const std::string& cert_file, const std::string& key_file) {
  if (!tls()) return InvalidArgument(state_->options.name + " serves plain HTTP: no TLS to reload");
  if (cert_file.empty() || key_file.empty()) {
    return InvalidArgument("HTTPS needs both --tls-cert and --tls-key");
  }
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<ssl::context> ctx,
                          State::MakeTlsContext(cert_file, key_file));
  std::lock_guard<std::mutex> lock(state_->ssl_mu);
  state_->ssl_ctx = std::move(ctx);
  return Status::Ok();
}

}  // namespace warren
