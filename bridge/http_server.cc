#include "bridge/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lobby/base/error_map.h"
#include "lobby/base/log.h"

namespace warren {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(30);
constexpr size_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxBodyBytes = 1024 * 1024;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

Response JsonResponse(const Request& req, int status, const nlohmann::json& body) {
  Response res{static_cast<http::status>(status), req.version()};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(req.keep_alive());
  res.body() = body.dump() + "\n";
  res.prepare_payload();
  return res;
}

Response ErrorResponse(const Request& req, const Status& status) {
  return JsonResponse(req, HttpStatusFor(status.code()), {{"error", status.message()}});
}

// Routes one request. The one place HTTP statuses are chosen: from Status codes.
Response Route(const Request& req) {
  std::string_view target = req.target();
  std::string_view path = target.substr(0, target.find('?'));
  if (path == "/healthz") {
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      Response res = ErrorResponse(req, Status(Code::kMethodNotAllowed, "use GET"));
      res.set(http::field::allow, "GET, HEAD");
      return res;
    }
    return JsonResponse(req, 200, {{"status", "ok"}});
  }
  return ErrorResponse(req, NotFound("no such endpoint"));
}

// One connection: read a request, answer it, repeat while keep-alive.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(tcp::socket socket) : stream_(std::move(socket)) {}

  void Run() { ReadNext(); }

 private:
  void ReadNext() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout) return Close();
    if (ec) {
      // Malformed or oversize input gets a JSON error, then the connection closes.
      Request bad;
      bad.version(11);
      Status st = ec == http::error::body_limit || ec == http::error::header_limit
                      ? TooLarge("request too large")
                      : InvalidArgument("malformed HTTP request");
      auto res = std::make_shared<Response>(ErrorResponse(bad, st));
      res->keep_alive(false);
      return Write(res);
    }
    auto res = std::make_shared<Response>(Route(parser_->get()));
    Write(res);
  }

  void Write(std::shared_ptr<Response> res) {
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || !res->keep_alive()) return self->Close();
                        self->ReadNext();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

}  // namespace

class HttpServer::State {
 public:
  explicit State(HttpServerOptions o) : options(std::move(o)), acceptor(io) {}

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Connection>(std::move(s))->Run();
      Accept();
    });
  }

  HttpServerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::atomic<int> port{0};
};

HttpServer::HttpServer(HttpServerOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
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
  LogInfo("http listening on " + state_->options.address + ":" + std::to_string(port()));
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

}  // namespace warren
