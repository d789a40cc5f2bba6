// The bridge's HTTP listener on a loopback port 0, driven over raw sockets so the test sees
// exactly the bytes a client would.
#include "bridge/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace warren {
namespace {

// Sends `request` and reads until the server closes or `timeout_s` passes.
std::string RoundTrip(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  (void)!write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions o;
    o.port = 0;
    server_ = std::make_unique<HttpServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, HealthzAnswersOk) {
  std::string r =
      RoundTrip(server_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("{\"status\":\"ok\"}"), std::string::npos) << r;
}

TEST_F(HttpServerTest, WrongMethodIs405WithAllow) {
  std::string r = RoundTrip(server_->port(),
                            "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                            "Connection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  EXPECT_NE(r.find("Allow: GET, HEAD"), std::string::npos) << r;
}

TEST_F(HttpServerTest, UnknownPathIsJson404) {
  std::string r =
      RoundTrip(server_->port(), "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
  EXPECT_NE(r.find("{\"error\":"), std::string::npos) << r;
}

TEST_F(HttpServerTest, GarbageGetsJson400AndServerKeepsServing) {
  std::string r = RoundTrip(server_->port(), std::string("\x16\x03\x01\x00\xff garbage\r\n\r\n"));
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  std::string ok =
      RoundTrip(server_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
}

TEST_F(HttpServerTest, OversizeHeaderIs413) {
  std::string big = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 * 1024, 'a') +
                    "\r\nConnection: close\r\n\r\n";
  std::string r = RoundTrip(server_->port(), big);
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r.substr(0, 100);
}

TEST(HttpServerStartTest, BusyPortIsUnavailable) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer first(o);
  ASSERT_TRUE(first.Start().ok());
  o.port = first.port();
  HttpServer second(o);
  Status st = second.Start();
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
}

}  // namespace
}  // namespace warren
