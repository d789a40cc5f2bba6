// The integrations proxy over socketpairs (the VM's side) against a loopback upstream of
// the test's own: header and bearer injection, the reverse-proxy rewrite, request bodies
// (chunked, Content-Length with Expect), a 50 MiB response under back-pressure, revocation
// mid-stream, the error lines, the limits, and TLS with warren's CA (OpenSSL and curl).
#include "lobby/integrations/integration_proxy.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lobby/base/log.h"
#include "lobby/integrations/integration_ca.h"
#include "tests/unit/integration_test_peers.h"
#include "tests/unit/skip_or_fail.h"

namespace warren::integrations {
namespace {

using test::AnswerBearer;
using test::BodyOf;
using test::PeerIo;
using test::ReadUntilEof;
using test::RunShell;
using test::TestLookup;
using test::Upstream;
using test::WriteAllFd;

constexpr char kSecret[] = "s3cr3t-7f1e9c2d";

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "intproxy-XXXXXX";
  char* d = ::mkdtemp(tmpl.data());
  return d == nullptr ? "" : std::string(d);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class IntegrationProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(OpenLogFile(dir_ + "/warren.log").ok());
  }
  void TearDown() override {
    proxy_.reset();
    // Never a secret in the log, whatever the test did.
    EXPECT_EQ(ReadFile(dir_ + "/warren.log").find(kSecret), std::string::npos);
    if (HasFailure()) std::fprintf(stderr, "LOG:\n%s\n", ReadFile(dir_ + "/warren.log").c_str());
    std::filesystem::remove_all(dir_);
  }

  void Start(IntegrationProxyOptions options = {}) {
    proxy_ = std::make_unique<IntegrationProxy>(std::move(options), &lookup_);
  }
  void Route(const std::string& vm, const std::string& name, uint16_t port,
             HttpHeaders headers = {{"Authorization", std::string("Bearer ") + kSecret}},
             const std::string& scheme_host = "http://127.0.0.1",
             const std::string& owner = "ann") {
    lookup_.Set(vm, name,
                IntegrationRoute{owner, name,
                                 *ParseTargetUrl(scheme_host + ":" + std::to_string(port) + "/v1"),
                                 std::move(headers)});
  }
  // A connection from VM `vm`: the test's end of a socketpair.
  int Connect(const std::string& vm, bool https = false) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    proxy_->Serve(vm, https, std::make_unique<FdStream>(sv[1]));
    return sv[0];
  }
  std::string Exchange(const std::string& vm, const std::string& request) {
    int fd = Connect(vm);
    EXPECT_TRUE(WriteAllFd(fd, request));
    std::string out = ReadUntilEof(fd);
    ::close(fd);
    return out;
  }
  bool WaitIdle(int ms = 3000) {
    for (int i = 0; i < ms / 10; ++i) {
      if (proxy_->active() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string dir_;
  TestLookup lookup_;
  std::unique_ptr<IntegrationProxy> proxy_;
};

TEST_F(IntegrationProxyTest, BearerReplacesTheVmsAuthorizationAndHopByHopHeadersGo) {
  Upstream up(
      AnswerBearer(kSecret, "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Up: 1\r\n"));
  Route("vm-1", "api", up.port());
  Start();
  std::string resp = Exchange(
      "vm-1",
      "GET /x?q=1 HTTP/1.1\r\nHost: API.int.warren.internal\r\nAuthorization: Bearer from-vm\r\n"
      "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 300\r\nTE: trailers\r\n"
      "Upgrade: h2c\r\nProxy-Authorization: Basic eA==\r\nX-Kept: yes\r\n\r\n");
  EXPECT_EQ(resp.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << resp;
  EXPECT_EQ(BodyOf(resp), "auth=ok");
  EXPECT_NE(resp.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(resp.find("Keep-Alive"), std::string::npos);
  EXPECT_NE(resp.find("X-Up: 1\r\n"), std::string::npos);

  ASSERT_EQ(up.heads().size(), 1u);
  const std::string head = up.heads()[0];
  EXPECT_EQ(head.rfind("GET /v1/x?q=1 HTTP/1.1\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Host: 127.0.0.1:" + std::to_string(up.port()) + "\r\n"), std::string::npos);
  EXPECT_EQ(head.find("from-vm"), std::string::npos);
  EXPECT_EQ(head.find("api.int.warren.internal"), std::string::npos);
  for (const char* gone : {"X-Hop", "Keep-Alive", "TE:", "Upgrade", "Proxy-Authorization"}) {
    EXPECT_EQ(head.find(gone), std::string::npos) << gone << " in " << head;
  }
  EXPECT_NE(head.find("X-Kept: yes\r\n"), std::string::npos);
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos);
}

TEST_F(IntegrationProxyTest, AHeaderIntegrationKeepsTheVmsAuthorization) {
  Upstream up([](PeerIo& io, const std::string& head, std::string) {
    bool key = head.find(std::string("X-Api-Key: ") + kSecret + "\r\n") != std::string::npos;
    bool auth = head.find("Authorization: Basic dm06eA==\r\n") != std::string::npos;
    std::string body = std::string(key ? "key=ok" : "key=bad") + (auth ? " auth=vm" : " auth=-");
    io.WriteAll("HTTP/1.1 201 Created\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n\r\n" + body);
  });
  Route("vm-1", "api", up.port(), {{"X-Api-Key", kSecret}});
  Start();
  std::string resp = Exchange("vm-1",
                              "GET / HTTP/1.1\r\nHost: api.int.warren.internal:80\r\n"
                              "X-Api-Key: forged\r\nAuthorization: Basic dm06eA==\r\n\r\n");
  EXPECT_EQ(resp.rfind("HTTP/1.1 201 Created\r\n", 0), 0u) << resp;
  EXPECT_EQ(BodyOf(resp), "key=ok auth=vm");
  EXPECT_EQ(up.heads().at(0).find("forged"), std::string::npos);
}

TEST_F(IntegrationProxyTest, AChunkedRequestBodyPassesFramedAndEndsWhereItEnds) {
  std::string got;
  Upstream up([&](PeerIo& io, const std::string&, std::string rest) {
    const std::string end = "0\r\nX-Trailer: t\r\n\r\n";
    char buf[4096];
    while (rest.find(end) == std::string::npos) {
      long n = io.Read(buf, sizeof buf);
      if (n <= 0) break;
      rest.append(buf, static_cast<size_t>(n));
    }
    // Anything the VM sent past the body must not arrive.
    pollfd p{io.fd(), POLLIN, 0};
    if (::poll(&p, 1, 300) > 0) {
      long n = io.Read(buf, sizeof buf);
      if (n > 0) rest.append(buf, static_cast<size_t>(n));
    }
    got = rest;
    io.WriteAll("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  Route("vm-1", "api", up.port());
  Start();
  const std::string body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
  std::string resp = Exchange("vm-1",
                              "POST /up HTTP/1.1\r\nHost: api.int.warren.internal\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n" +
                                  body + "GARBAGE");
  EXPECT_EQ(BodyOf(resp), "ok") << resp;
  EXPECT_EQ(got, body);
  EXPECT_NE(up.heads().at(0).find("Transfer-Encoding: chunked\r\n"), std::string::npos);
}

TEST_F(IntegrationProxyTest, ExpectContinueIsAnsweredHereAndTheBodyFollows) {
  std::string got;
  Upstream up([&](PeerIo& io, const std::string&, std::string rest) {
    char buf[64];
    while (rest.size() < 10) {
      long n = io.Read(buf, sizeof buf);
      if (n <= 0) break;
      rest.append(buf, static_cast<size_t>(n));
    }
    got = rest;
    io.WriteAll("HTTP/1.1 204 No Content\r\n\r\n");
  });
  Route("vm-1", "api", up.port());
  Start();
  int fd = Connect("vm-1");
  ASSERT_TRUE(WriteAllFd(fd,
                         "PUT /p HTTP/1.1\r\nHost: api.int.warren.internal\r\n"
                         "Content-Length: 10\r\nExpect: 100-continue\r\n\r\n"));
  char buf[64];
  long n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(WriteAllFd(fd, "0123456789"));
  std::string resp = ReadUntilEof(fd);
  ::close(fd);
  EXPECT_EQ(resp.rfind("HTTP/1.1 204 No Content\r\n", 0), 0u) << resp;
  EXPECT_EQ(got, "0123456789");
  EXPECT_EQ(up.heads().at(0).find("Expect"), std::string::npos);
}

TEST_F(IntegrationProxyTest, A50MiBResponseStreamsUnderBackPressure) {
  constexpr size_t kTotal = size_t{50} << 20;
  std::atomic<size_t> written{0};
  Upstream up(
      [&](PeerIo& io, const std::string&, std::string) {
        if (!io.WriteAll("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kTotal) +
                         "\r\n\r\n")) {
          return;
        }
        std::string block(64 * 1024, '\0');
        for (size_t off = 0; off < kTotal; off += block.size()) {
          for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>((off + i) % 251);
          if (!io.WriteAll(block)) return;
          written.fetch_add(block.size());
        }
      },
      nullptr, /*sndbuf=*/64 * 1024);
  Route("vm-1", "big", up.port());
  Start();
  int fd = Connect("vm-1");
  int small = 64 * 1024;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(WriteAllFd(fd, "GET /blob HTTP/1.1\r\nHost: big.int.warren.internal\r\n\r\n"));
  // Nobody reads the VM's side for a while: the proxy must stop reading the upstream.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  size_t stalled = written.load();
  RecordProperty("stalled_upstream_bytes", std::to_string(stalled));
  EXPECT_LT(stalled, size_t{16} << 20) << "the proxy buffered the response";
  std::string head;
  char buf[65536];
  size_t body = 0;
  bool pattern_ok = true;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    long n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    size_t i = 0;
    if (head.find("\r\n\r\n") == std::string::npos) {
      head.append(buf, static_cast<size_t>(n));
      size_t end = head.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      i = static_cast<size_t>(n) - (head.size() - end - 4);
    }
    for (; i < static_cast<size_t>(n); ++i, ++body) {
      if (static_cast<unsigned char>(buf[i]) != body % 251) pattern_ok = false;
    }
  }
  ::close(fd);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_EQ(body, kTotal);
  EXPECT_TRUE(pattern_ok);
}

TEST_F(IntegrationProxyTest, RevokeCutsARunningDownloadAtOnce) {
  std::atomic<bool> upstream_cut{false};
  Upstream up([&](PeerIo& io, const std::string&, std::string) {
    if (!io.WriteAll("HTTP/1.1 200 OK\r\n\r\n")) return;
    std::string block(1024, 'x');
    for (int i = 0; i < 3000; ++i) {  // 30 s at most
      if (!io.WriteAll(block)) {
        upstream_cut.store(true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  Route("vm-1", "api", up.port());
  Route("vm-2", "api", up.port(), {{"Authorization", std::string("Bearer ") + kSecret}},
        "http://127.0.0.1", "bob");
  Start();
  int a = Connect("vm-1");
  int b = Connect("vm-2");
  for (int fd : {a, b}) {
    ASSERT_TRUE(WriteAllFd(fd, "GET /stream HTTP/1.1\r\nHost: api.int.warren.internal\r\n\r\n"));
  }
  char buf[4096];
  for (int fd : {a, b}) {
    // Past the head: some of the body has gone down.
    ssize_t got = 0;
    while (got < 512) {
      pollfd p{fd, POLLIN, 0};
      ASSERT_GT(::poll(&p, 1, 5000), 0);
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      ASSERT_GT(n, 0);
      got += n;
    }
  }
  EXPECT_EQ(proxy_->RevokeVm("vm-1", "other"), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(proxy_->RevokeVm("vm-1", "api"), 1);
  ReadUntilEof(a, 3000);  // EOF, not the 3 s timeout
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // The other VM's download goes on until its owner's integration is revoked.
  pollfd p{b, POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 2000), 0);
  ASSERT_GT(::recv(b, buf, sizeof buf, 0), 0);
  EXPECT_EQ(proxy_->RevokeOwner("bob", "api"), 1);
  ReadUntilEof(b, 3000);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  ::close(a);
  ::close(b);
  EXPECT_TRUE(WaitIdle());
  for (int i = 0; i < 100 && !upstream_cut.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(upstream_cut.load());
  // The log lines of the cut downloads count what went down before the cut.
  const std::string log = ReadFile(dir_ + "/warren.log");
  int cut_lines = 0;
  for (size_t at = log.find("revoked"); at != std::string::npos; at = log.find("revoked", at + 1)) {
    const size_t start = log.rfind('\n', at) + 1;
    const std::string line = log.substr(start, at - start);
    EXPECT_EQ(line.find("down_bytes=0 "), std::string::npos) << line;
    ++cut_lines;
  }
  EXPECT_EQ(cut_lines, 2) << log;
}

TEST_F(IntegrationProxyTest, RefusalsAnswerWithOneLine) {
  lookup_.Set("vm-1", "detached",
              PermissionDenied("integration detached is not attached to this VM"));
  // A port with nothing listening: bound, then closed.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  uint16_t dead = ntohs(addr.sin_port);
  ::close(s);
  Route("vm-1", "down", dead);
  Start();
  auto get = [&](const std::string& host) {
    return Exchange("vm-1", "GET /x HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  };
  std::string r = get("detached.int.warren.internal");
  EXPECT_EQ(r.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << r;
  EXPECT_EQ(BodyOf(r), "integration detached is not attached to this VM\n");
  r = get("nosuch.int.warren.internal");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;
  EXPECT_EQ(BodyOf(r), "no integration named nosuch\n");
  r = get("down.int.warren.internal");
  EXPECT_EQ(r.rfind("HTTP/1.1 502 Bad Gateway\r\n", 0), 0u) << r;
  EXPECT_EQ(BodyOf(r), "integration down: cannot reach its target\n");
  r = get("example.com");
  EXPECT_EQ(r.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << r;
  r = get("a.b.int.warren.internal");
  EXPECT_EQ(r.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << r;
  r = Exchange("vm-1", "GET /x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(BodyOf(r), "bad request: no Host header\n");
  r = Exchange("vm-1", "GARBAGE\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << r;
  r = Exchange("vm-1",
               "POST /x HTTP/1.1\r\nHost: down.int.warren.internal\r\nContent-Length: 3\r\n"
               "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(BodyOf(r), "bad request: both Content-Length and Transfer-Encoding\n");
  r = Exchange("vm-1", "GET /x HTTP/1.1\r\nHost: x.int.warren.internal\r\nX-Big: " +
                           std::string(40000, 'a') + "\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 431 ", 0), 0u) << r.substr(0, 80);
}

TEST_F(IntegrationProxyTest, PastTheLimitsA503AndOtherVmsStillServed) {
  IntegrationProxyOptions o;
  o.max_connections_per_vm = 1;
  o.header_timeout = std::chrono::seconds(5);
  Start(o);
  int hold = Connect("vm-1");  // says nothing: holds vm-1's one connection
  for (int i = 0; i < 100 && proxy_->active() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string r = Exchange("vm-1", "GET / HTTP/1.1\r\nHost: a.int.warren.internal\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << r;
  r = Exchange("vm-2", "GET / HTTP/1.1\r\nHost: a.int.warren.internal\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 ", 0), 0u) << r;
  ::close(hold);
}

TEST_F(IntegrationProxyTest, OneOwnersVmsTogetherHitTheirBoundAndOtherOwnersAreStillServed) {
  IntegrationProxyOptions o;
  o.max_connections_per_user = 2;
  o.header_timeout = std::chrono::seconds(5);
  Start(o);
  lookup_.SetOwner("bob-1", "bob");
  // ann's two VMs hold ann's two connections, one each: no VM is past its own bound.
  int hold1 = Connect("vm-1");
  int hold2 = Connect("vm-2");
  for (int i = 0; i < 100 && proxy_->active() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(proxy_->active(), 2);
  std::string r = Exchange("vm-3", "GET / HTTP/1.1\r\nHost: a.int.warren.internal\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << r;
  r = Exchange("bob-1", "GET / HTTP/1.1\r\nHost: a.int.warren.internal\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 ", 0), 0u) << r;
  // A connection ending gives ann's slot back.
  ::close(hold1);
  for (int i = 0; i < 300 && proxy_->active() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r = Exchange("vm-3", "GET / HTTP/1.1\r\nHost: a.int.warren.internal\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 ", 0), 0u) << r;
  ::close(hold2);
}

TEST_F(IntegrationProxyTest, AnIdleVmGets408AfterTheHeaderTimeout) {
  IntegrationProxyOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  Start(o);
  int fd = Connect("vm-1");
  ASSERT_TRUE(WriteAllFd(fd, "GET / HTTP/1.1\r\n"));
  std::string r = ReadUntilEof(fd, 3000);
  ::close(fd);
  EXPECT_EQ(r.rfind("HTTP/1.1 408 ", 0), 0u) << r;
}

// ---- TLS ----

TEST(IntegrationCaTest, MadeOnceWithAPrivateKeyAndReusedAfter) {
  std::string dir = TempDir();
  Result<IntegrationCa> a = LoadOrCreateIntegrationCa(dir, "int.warren.internal");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat((dir + "/integrations-ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<IntegrationCa> b = LoadOrCreateIntegrationCa(dir, "other.example");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->ca_pem, b->ca_pem);
  EXPECT_NE(a->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  std::filesystem::remove(dir + "/integrations-ca.crt");
  EXPECT_EQ(LoadOrCreateIntegrationCa(dir, "x").status().code(), Code::kInternal);
  std::filesystem::remove_all(dir);
}

class IntegrationTlsTest : public IntegrationProxyTest {
 protected:
  void StartTls() {
    Result<IntegrationCa> ca = LoadOrCreateIntegrationCa(dir_, "int.warren.internal");
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_file_ = dir_ + "/integrations-ca.crt";
    IntegrationProxyOptions o;
    o.tls_server = ca->server;
    Start(o);
  }
  std::string ca_file_;
};

TEST_F(IntegrationTlsTest, HttpsIsTerminatedWithACertificateWarrensCaSigned) {
  Upstream up(
      AnswerBearer(kSecret, "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Up: 1\r\n"));
  Route("vm-1", "api", up.port());
  StartTls();
  int fd = Connect("vm-1", /*https=*/true);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_EQ(SSL_CTX_load_verify_locations(ctx, ca_file_.c_str(), nullptr), 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "api.int.warren.internal");
  SSL_set1_host(ssl, "api.int.warren.internal");
  ASSERT_EQ(SSL_connect(ssl), 1);
  EXPECT_EQ(SSL_get_verify_result(ssl), X509_V_OK);
  PeerIo io(fd, ssl);
  ASSERT_TRUE(io.WriteAll("GET /t HTTP/1.1\r\nHost: api.int.warren.internal\r\n\r\n"));
  std::string resp;
  char buf[4096];
  for (long n; (n = io.Read(buf, sizeof buf)) > 0;) resp.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(BodyOf(resp), "auth=ok") << resp;
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
}

TEST_F(IntegrationTlsTest, CurlTrustsTheEndpointWithWarrensCaOnly) {
  if (std::system("command -v curl >/dev/null 2>&1") != 0) {
    WARREN_SKIP_OR_FAIL() << "curl is not installed";
  }
  Upstream up(
      AnswerBearer(kSecret, "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Up: 1\r\n"));
  Route("vm-1", "api", up.port());
  StartTls();
  // A TCP front of the test's own, handing each connection to the proxy as VM vm-1.
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(lfd, 8), 0);
  socklen_t len = sizeof addr;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string port = std::to_string(ntohs(addr.sin_port));
  std::thread front([&] {
    for (int i = 0; i < 2; ++i) {
      int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      proxy_->Serve("vm-1", true, std::make_unique<FdStream>(fd));
    }
  });
  std::string base = "curl -sS --max-time 20 --resolve api.int.warren.internal:" + port +
                     ":127.0.0.1 https://api.int.warren.internal:" + port + "/x";
  auto [rc, out] = RunShell(base + " --cacert " + ca_file_);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "auth=ok");
  // Without warren's CA, curl refuses the certificate.
  auto [rc2, out2] = RunShell(base + " --capath /nonexistent --cacert /dev/null");
  EXPECT_NE(rc2, 0) << out2;
  ::shutdown(lfd, SHUT_RDWR);
  front.join();
  ::close(lfd);
}

TEST_F(IntegrationTlsTest, AnHttpsTargetIsVerifiedAndGivenSni) {
  // The upstream's certificate comes from a CA of its own, for "localhost".
  std::string updir = dir_ + "/up";
  std::filesystem::create_directory(updir);
  Result<IntegrationCa> upca = LoadOrCreateIntegrationCa(updir, "localhost");
  ASSERT_TRUE(upca.ok());
  Upstream up(
      AnswerBearer(kSecret, "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Up: 1\r\n"),
      upca->server.get());
  Route("vm-1", "api", up.port(), {{"Authorization", std::string("Bearer ") + kSecret}},
        "https://localhost");
  Route("vm-1", "wrongca", up.port(), {}, "https://localhost");
  Result<SslCtxPtr> client = MakeClientContext(updir + "/integrations-ca.crt");
  ASSERT_TRUE(client.ok());
  IntegrationProxyOptions o;
  o.tls_client = *client;
  Start(o);
  std::string r = Exchange("vm-1", "GET / HTTP/1.1\r\nHost: api.int.warren.internal\r\n\r\n");
  EXPECT_EQ(BodyOf(r), "auth=ok") << r;
  EXPECT_NE(up.heads().at(0).find("Host: localhost:" + std::to_string(up.port())),
            std::string::npos);
  // The system CAs do not know the upstream's CA: 502.
  proxy_.reset();
  Start();
  r = Exchange("vm-1", "GET / HTTP/1.1\r\nHost: wrongca.int.warren.internal\r\n\r\n");
  EXPECT_EQ(BodyOf(r), "integration wrongca: TLS with its target failed\n") << r;
}

}  // namespace
}  // namespace warren::integrations
