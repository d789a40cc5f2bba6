// The integrations endpoint end to end against a local OpenSSH sshd standing in for the
// guest (guest_test_targets.h): SshGuestControl asks it for remote forwards on 127.77.0.1,
// a client of the "guest" side (curl, or a socket of the test's) connects there, and the
// connection arrives over the control connection, tagged with the VM, at the real proxy,
// which adds the secret before a loopback upstream of the test's own. The guest setup
// (sudo, /etc/hosts) is off here: this machine is the "guest" (guest_endpoint_vm_test
// covers it in a real VM).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "lobby/integrations/endpoint_sink.h"
#include "lobby/integrations/integration_ca.h"
#include "lobby/integrations/integration_proxy.h"
#include "tests/unit/guest_test_targets.h"
#include "tests/unit/integration_test_peers.h"
#include "tests/unit/skip_or_fail.h"

namespace warren::guest::testing {
namespace {

using integrations::HttpHeaders;
using integrations::IntegrationRoute;
using integrations::test::AnswerBearer;
using integrations::test::BodyOf;
using integrations::test::PeerIo;
using integrations::test::ReadUntilEof;
using integrations::test::RunShell;
using integrations::test::TestLookup;
using integrations::test::Upstream;
using integrations::test::WriteAllFd;

constexpr char kSecret[] = "l0cal-s3cret-42";
constexpr char kAddress[] = "127.77.0.1";

// A port free on kAddress right now.
uint16_t FreePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, kAddress, &addr.sin_addr);
  ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(s);
  return ntohs(addr.sin_port);
}

sockaddr_in AddressOf(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, kAddress, &addr.sin_addr);
  return addr;
}

// A listening socket on kAddress:port (what a slow guest's previous sshd may still hold).
int ListenOn(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = AddressOf(port);
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(s, 4), 0);
  return s;
}

int ConnectTo(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = AddressOf(port);
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

class GuestEndpointLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl >/dev/null 2>&1") != 0) {
      WARREN_SKIP_OR_FAIL() << "curl is not installed";
    }
    Result<std::unique_ptr<GuestTarget>> t = StartLocalSshd();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(*t);
    Result<integrations::IntegrationCa> ca =
        integrations::LoadOrCreateIntegrationCa(target_->dir(), "int.warren.internal");
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_file_ = target_->dir() + "/integrations-ca.crt";
    integrations::IntegrationProxyOptions po;
    po.tls_server = ca->server;
    proxy_ = std::make_unique<integrations::IntegrationProxy>(po, &lookup_);
    sink_ = std::make_unique<integrations::IntegrationEndpointSink>(proxy_.get(), &lookup_);
    http_ = FreePort();
    https_ = FreePort();
    if (hold_http_) held_ = ListenOn(http_);
    SshGuestControlOptions o = target_->ControlOptions();
    o.inbound = sink_.get();
    o.endpoint.address = kAddress;
    o.endpoint.http_port = http_;
    o.endpoint.https_port = https_;
    o.endpoint.ca_pem = ca->ca_pem;
    o.endpoint_guest_setup = false;
    o.endpoint_setup_delay = delay_;
    if (keepalive_after_.count() > 0) o.keepalive_after = keepalive_after_;
    Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(o);
    ASSERT_TRUE(control.ok()) << control.status().ToString();
    control_ = std::move(*control);
    created_ = std::chrono::steady_clock::now();
    if (delay_.count() > 0) return;  // the test watches the endpoint come
    control_->EnsureEndpoint(kTestVm);
    for (int i = 0; i < 1000 && !control_->EndpointReady(kTestVm); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(control_->EndpointReady(kTestVm)) << target_->LogTail();
  }
  void TearDown() override {
    if (held_ >= 0) ::close(held_);
    control_.reset();  // before the sink and proxy it calls
    sink_.reset();
    proxy_.reset();
  }
  void Route(const std::string& vm, const std::string& name, uint16_t port) {
    lookup_.Set(
        vm, name,
        IntegrationRoute{"ann", name,
                         *ParseTargetUrl("http://127.0.0.1:" + std::to_string(port) + "/v1"),
                         HttpHeaders{{"Authorization", std::string("Bearer ") + kSecret}}});
  }
  std::string Curl(const std::string& scheme, uint16_t port, const std::string& name,
                   const std::string& extra = "") {
    std::string host = name + ".int.warren.internal";
    auto [rc, out] = RunShell("curl -sS --max-time 20 --resolve " + host + ":" +
                              std::to_string(port) + ":" + kAddress + " " + extra + " " + scheme +
                              "://" + host + ":" + std::to_string(port) + "/x?q=1");
    return out;
  }

  std::unique_ptr<GuestTarget> target_;
  std::string ca_file_;
  TestLookup lookup_;
  std::unique_ptr<integrations::IntegrationProxy> proxy_;
  std::unique_ptr<integrations::IntegrationEndpointSink> sink_;
  std::unique_ptr<SshGuestControl> control_;
  uint16_t http_ = 0, https_ = 0;
  std::chrono::milliseconds delay_{0};            // SshGuestControlOptions::endpoint_setup_delay
  std::chrono::milliseconds keepalive_after_{0};  // 0: the default
  bool hold_http_ = false;  // something else listens on the http port when the forwards come
  int held_ = -1;
  std::chrono::steady_clock::time_point created_;
};

// With the delay production has: the endpoint comes that long after its connection.
class GuestEndpointDelayTest : public GuestEndpointLocalTest {
 protected:
  GuestEndpointDelayTest() { delay_ = std::chrono::milliseconds(2500); }
  // Waits (up to 20 s) for the endpoint; when it came, relative to created_.
  std::optional<std::chrono::steady_clock::duration> WaitReady() {
    for (int i = 0; i < 1000; ++i) {
      if (control_->EndpointReady(kTestVm)) return std::chrono::steady_clock::now() - created_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }
};

TEST_F(GuestEndpointLocalTest, HttpAndHttpsReachTheIntegrationWithTheSecretAdded) {
  Upstream up(AnswerBearer(kSecret));
  Route(kTestVm, "api", up.port());
  EXPECT_EQ(Curl("http", http_, "api"), "auth=ok");
  EXPECT_EQ(Curl("https", https_, "api", "--cacert " + ca_file_), "auth=ok");
  ASSERT_EQ(up.heads().size(), 2u);
  EXPECT_EQ(up.heads()[0].rfind("GET /v1/x?q=1 HTTP/1.1\r\n", 0), 0u) << up.heads()[0];
  // The forwarded channels are gone once the requests are done.
  for (int i = 0; i < 200 && control_->OpenChannels(kTestVm) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(control_->OpenChannels(kTestVm), 0);
}

// The guest refuses a forward because its port is taken, as by the sshd of a connection just
// dropped that a slow guest has not ended yet: the forward is asked for again (1, 2, 4, 8 s
// later) and works once the port is free, and the problem it showed is gone.
class GuestEndpointHeldPortTest : public GuestEndpointLocalTest {
 protected:
  GuestEndpointHeldPortTest() { hold_http_ = true; }
};

TEST_F(GuestEndpointHeldPortTest, ARefusedForwardIsAskedForAgain) {
  EXPECT_NE(control_->EndpointProblem(kTestVm).find("refused to listen"), std::string::npos)
      << control_->EndpointProblem(kTestVm);
  Upstream up(AnswerBearer(kSecret));
  Route(kTestVm, "api", up.port());
  EXPECT_EQ(Curl("https", https_, "api", "--cacert " + ca_file_), "auth=ok");
  ::close(held_);
  held_ = -1;
  for (int i = 0; i < 1000 && !control_->EndpointProblem(kTestVm).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(control_->EndpointProblem(kTestVm), "");
  EXPECT_EQ(Curl("http", http_, "api"), "auth=ok");
}

TEST_F(GuestEndpointLocalTest, AnotherVmsIntegrationIsNotThisVms) {
  Upstream up(AnswerBearer(kSecret));
  Route("other-vm", "theirs", up.port());
  EXPECT_EQ(Curl("http", http_, "theirs"), "no integration named theirs\n");
  EXPECT_TRUE(up.heads().empty());
}

TEST_F(GuestEndpointLocalTest, RevokeCutsAForwardedDownload) {
  Upstream up([](PeerIo& io, const std::string&, std::string) {
    if (!io.WriteAll("HTTP/1.1 200 OK\r\n\r\n")) return;
    std::string block(1024, 'x');
    for (int i = 0; i < 3000 && io.WriteAll(block); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  Route(kTestVm, "api", up.port());
  int fd = ConnectTo(http_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WriteAllFd(fd, "GET /s HTTP/1.1\r\nHost: api.int.warren.internal\r\n\r\n"));
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 10000), 0);
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(proxy_->RevokeVm(kTestVm, "api"), 1);
  ReadUntilEof(fd, 5000);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  ::close(fd);
}

TEST_F(GuestEndpointLocalTest, AVmWithoutTheEndpointGetsItsConnectionsClosed) {
  Upstream up(AnswerBearer(kSecret));
  Route(kTestVm, "api", up.port());
  lookup_.wants.store(false);  // egress none since this connection was made
  int fd = ConnectTo(http_);
  ASSERT_GE(fd, 0);
  WriteAllFd(fd, "GET / HTTP/1.1\r\nHost: api.int.warren.internal\r\n\r\n");
  EXPECT_EQ(ReadUntilEof(fd, 5000), "");
  ::close(fd);
  EXPECT_TRUE(up.heads().empty());
}

TEST_F(GuestEndpointDelayTest, ANewConnectionsSetupWaitsItsDelay) {
  // A command makes the connection; the endpoint is not set up beside it.
  control_->EnsureEndpoint(kTestVm);
  Result<std::vector<GuestJob>> jobs = control_->Jobs(kTestVm);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  if (std::chrono::steady_clock::now() - created_ < std::chrono::milliseconds(2000)) {
    EXPECT_FALSE(control_->EndpointReady(kTestVm));
  }
  std::optional<std::chrono::steady_clock::duration> ready = WaitReady();
  ASSERT_TRUE(ready.has_value()) << target_->LogTail();
  EXPECT_GE(*ready, delay_);
  // The ports FreePort found free were free 2 s before the setup: another process may have
  // taken one meanwhile (seen once in CI, under ctest -j). The refused forward is asked for
  // again (GuestEndpointHeldPortTest); wait for that, as that test does.
  for (int i = 0; i < 500 && !control_->EndpointProblem(kTestVm).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(control_->EndpointProblem(kTestVm), "");
  Upstream up(AnswerBearer(kSecret));
  Route(kTestVm, "api", up.port());
  EXPECT_EQ(Curl("http", http_, "api"), "auth=ok");
}

TEST_F(GuestEndpointDelayTest, ARefreshSetsItUpAtOnce) {
  control_->EnsureEndpoint(kTestVm);
  ASSERT_TRUE(control_->Jobs(kTestVm).ok());  // connected
  const auto refreshed = std::chrono::steady_clock::now() - created_;
  control_->RefreshEndpoint(kTestVm);  // the VM's integrations changed: no waiting
  std::optional<std::chrono::steady_clock::duration> ready = WaitReady();
  ASSERT_TRUE(ready.has_value()) << target_->LogTail();
  // Well before the delay would have run out (judged only when the machine was quick
  // enough for the two to differ).
  if (refreshed < std::chrono::milliseconds(1000)) {
    EXPECT_LT(*ready - refreshed, std::chrono::milliseconds(1500));
  }
}

TEST_F(GuestEndpointDelayTest, SettleEndpointRunsAHeldBackSetupAtOnce) {
  // The warm pool's way before it pauses a VM: the setup now, and word when it is done.
  EXPECT_FALSE(control_->SettleEndpoint(kTestVm));  // no connection: nothing to settle
  control_->EnsureEndpoint(kTestVm);
  ASSERT_TRUE(control_->Jobs(kTestVm).ok());  // connected
  const auto asked = std::chrono::steady_clock::now() - created_;
  bool pending = control_->SettleEndpoint(kTestVm);
  for (int i = 0; i < 1000 && pending; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pending = control_->SettleEndpoint(kTestVm);
  }
  EXPECT_FALSE(pending);
  EXPECT_TRUE(control_->EndpointReady(kTestVm));
  const auto settled = std::chrono::steady_clock::now() - created_;
  if (asked < std::chrono::milliseconds(1000)) {
    EXPECT_LT(settled, delay_) << "the setup waited for its delay";
  }
}

// A keepalive went out on the connection before its held-back setup came due: the forwards
// need a new connection (libssh's one global-request slot), which is made once the
// caller's command is done, not under it.
class GuestEndpointKeepaliveTest : public GuestEndpointDelayTest {
 protected:
  GuestEndpointKeepaliveTest() {
    delay_ = std::chrono::milliseconds(1500);
    keepalive_after_ = std::chrono::milliseconds(300);
  }
};

TEST_F(GuestEndpointKeepaliveTest, TheReconnectForTheForwardsWaitsForTheCallersCommand) {
  control_->EnsureEndpoint(kTestVm);
  // A raw channel, as a clone's identity is (an Exec would re-attach to its job): silent past
  // keepalive_after and the delay.
  GuestChannelRequest request;
  request.kind = GuestChannelRequest::Kind::kExec;
  request.command = "sleep 3; echo done";
  Result<std::shared_ptr<GuestPipe>> pipe = control_->OpenChannel(kTestVm, request, [] {});
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  std::string out;
  GuestPipe::End end;
  for (int i = 0; i < 1000; ++i) {
    std::string chunk;
    while (!(*pipe)->opening() && (*pipe)->PeekOutput(false, 4096, &chunk)) {
      out += chunk;
      (*pipe)->ConsumeOutput(false, chunk.size());
    }
    end = (*pipe)->end();
    if (end.closed || (!(*pipe)->opening() && !(*pipe)->status().ok())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE((*pipe)->status().ok()) << (*pipe)->status().ToString();
  EXPECT_TRUE(end.closed);
  EXPECT_EQ(end.exit_status, 0);
  EXPECT_EQ(out, "done\n");
  (*pipe)->Close();
  std::optional<std::chrono::steady_clock::duration> ready = WaitReady();
  ASSERT_TRUE(ready.has_value()) << target_->LogTail();
  Upstream up(AnswerBearer(kSecret));
  Route(kTestVm, "api", up.port());
  EXPECT_EQ(Curl("http", http_, "api"), "auth=ok");
}

}  // namespace
}  // namespace warren::guest::testing
