// The integrations endpoint in a real Debian guest under QEMU TCG (booted once): the guest
// setup (sudo, the NAT redirect, /etc/hosts, warren's CA, and for an image older than the
// endpoint the sshd config and a new connection), then curl inside the guest to
// http:// and https://NAME.int.warren.internal reaching a loopback upstream of the test's
// own with the secret added, while servers of the guest's own hold 0.0.0.0:80 and :443 (and
// a reconnect does not double the redirect), the secret nowhere in the guest, and a detach
// that rewrites /etc/hosts. Skips (saying why; fails under CI) only when no image can be found or
// built. The image is debian unless WARREN_GUEST_TEST_IMAGE names another (tiny: the Tiny test).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

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
using integrations::test::PeerIo;
using integrations::test::TestLookup;
using integrations::test::Upstream;

// Never written whole where the guest could see it (a job's command is kept in the guest):
// only the proxy's request upstream holds it.
constexpr char kSecretA[] = "vm-s3cret-";
constexpr char kSecretB[] = "9d41c7";
std::string Secret() { return std::string(kSecretA) + kSecretB; }

struct Guest {
  BootedGuest booted;
  TestLookup lookup;
  std::unique_ptr<Upstream> upstream;
  std::unique_ptr<integrations::IntegrationProxy> proxy;
  std::unique_ptr<integrations::IntegrationEndpointSink> sink;
  std::unique_ptr<SshGuestControl> control;
  std::string setup_error;
};
Guest* g = nullptr;

std::string Exec(const std::string& command, int* exit_code = nullptr) {
  StringSink out, err;
  GuestStreams s;
  s.out = &out;
  s.err = &err;
  GuestCommand c;
  c.command = command;
  Result<GuestProgress> p = g->control->Exec(kTestVm, c, s);
  if (exit_code != nullptr) *exit_code = p.ok() && p->exit_code ? *p->exit_code : -1;
  return out.str() + err.str();
}

class GuestEndpointVmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Guest;
    const char* image = std::getenv("WARREN_GUEST_TEST_IMAGE");
    g->booted = BootGuest(image != nullptr && *image != '\0' ? image : "debian");
    if (g->booted.target == nullptr) return;
    std::fprintf(stderr, "the guest answered %.1f s after QEMU started\n", g->booted.boot_seconds);
    Result<integrations::IntegrationCa> ca =
        integrations::LoadOrCreateIntegrationCa(g->booted.target->dir(), "int.warren.internal");
    if (!ca.ok()) {
      g->setup_error = ca.status().ToString();
      return;
    }
    g->upstream = std::make_unique<Upstream>(AnswerBearer(Secret()));
    g->lookup.Set(
        kTestVm, "api",
        IntegrationRoute{
            "ann", "api",
            *ParseTargetUrl("http://127.0.0.1:" + std::to_string(g->upstream->port()) + "/v1"),
            HttpHeaders{{"Authorization", "Bearer " + Secret()}}});
    integrations::IntegrationProxyOptions po;
    po.tls_server = ca->server;
    g->proxy = std::make_unique<integrations::IntegrationProxy>(po, &g->lookup);
    g->sink = std::make_unique<integrations::IntegrationEndpointSink>(g->proxy.get(), &g->lookup);
    SshGuestControlOptions o = g->booted.target->ControlOptions();
    o.inbound = g->sink.get();
    o.endpoint.ca_pem = ca->ca_pem;
    Result<std::unique_ptr<SshGuestControl>> control = SshGuestControl::Create(o);
    if (!control.ok()) {
      g->setup_error = control.status().ToString();
      return;
    }
    g->control = std::move(*control);
    auto t0 = std::chrono::steady_clock::now();
    g->control->EnsureEndpoint(kTestVm);
    // The first connection may be remade once (an image from before the endpoint), and a
    // forward refused is asked for again (the first connection's sshd may hold its port yet).
    while ((!g->control->EndpointReady(kTestVm) || g->control->SettleEndpoint(kTestVm)) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(180)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!g->control->EndpointReady(kTestVm)) {
      g->setup_error = "the endpoint was not ready in 180 s: " + g->booted.target->LogTail();
      return;
    }
    std::fprintf(stderr, "the endpoint was ready %.1f s after the first connect\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  static void TearDownTestSuite() {
    if (g == nullptr) return;
    g->control.reset();
    g->sink.reset();
    g->proxy.reset();
    delete g;
    g = nullptr;
  }
  void SetUp() override {
    if (g->booted.target == nullptr && !g->booted.skip_reason.empty()) {
      WARREN_SKIP_OR_FAIL() << g->booted.skip_reason;
    }
    ASSERT_TRUE(g->booted.error.ok()) << g->booted.error.ToString();
    ASSERT_TRUE(g->setup_error.empty()) << g->setup_error;
  }
};

TEST_F(GuestEndpointVmTest, CurlInTheGuestReachesTheIntegrationOverHttpAndHttps) {
  int rc = -1;
  std::string out = Exec(
      "grep int.warren.internal /etc/hosts; "
      "curl -sS --max-time 60 'http://api.int.warren.internal/x?q=1'; echo; "
      "curl -sS --max-time 60 'https://api.int.warren.internal/x?q=2'; echo",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "127.77.0.1 api.int.warren.internal\nauth=ok\nauth=ok\n")
      << g->booted.target->LogTail();
  std::vector<std::string> heads = g->upstream->heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].rfind("GET /v1/x?q=1 HTTP/1.1\r\n", 0), 0u) << heads[0];
  EXPECT_EQ(heads[1].rfind("GET /v1/x?q=2 HTTP/1.1\r\n", 0), 0u) << heads[1];
}

// The redirect's rules in the guest (debian has iptables, no nft): "DNAT-rules jumps".
std::string RedirectRules() {
  return Exec(
      "if command -v nft >/dev/null; then "
      "echo \"$(sudo -n nft list table ip warren_int | grep -c dnat) 0\"; else "
      "echo \"$(sudo -n iptables -t nat -S WARREN_INT | grep -c DNAT) "
      "$(sudo -n iptables -t nat -S OUTPUT | grep -c 'j WARREN_INT')\"; fi");
}

bool WaitEndpointReady() {
  for (int i = 0;
       i < 1800 && (!g->control->EndpointReady(kTestVm) || g->control->SettleEndpoint(kTestVm));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return g->control->EndpointReady(kTestVm);
}

TEST_F(GuestEndpointVmTest, AServiceInTheGuestBindsPorts80And443WhileTheEndpointAnswers) {
  // The endpoint's forwards listen on high ports; the guest's own connections to
  // 127.77.0.1:80/:443 are redirected to them, so 0.0.0.0:80 and :443 are free.
  EXPECT_EQ(g->control->EndpointProblem(kTestVm), "");
  EXPECT_EQ(RedirectRules(), "2 1\n");
  int rc = -1;
  std::string out = Exec(
      "sudo -n sh -c 'for p in 80 443; do mkdir -p /tmp/www$p; echo own-$p > "
      "/tmp/www$p/index.html; python3 -m http.server $p --bind 0.0.0.0 --directory /tmp/www$p "
      ">/tmp/www$p.log 2>&1 </dev/null & echo $! > /tmp/www$p.pid; done'; "
      "for i in $(seq 150); do curl -s http://127.0.0.1:80/ >/dev/null && "
      "curl -s http://127.0.0.1:443/ >/dev/null && break; sleep 0.2; done; "
      "curl -sS --max-time 30 http://127.0.0.1/; curl -sS --max-time 30 http://127.0.0.1:443/; "
      "curl -sS --max-time 60 http://api.int.warren.internal/web; echo; "
      "curl -sS --max-time 60 https://api.int.warren.internal/web; echo",
      &rc);
  EXPECT_EQ(out, "own-80\nown-443\nauth=ok\nauth=ok\n")
      << Exec("cat /tmp/www80.log /tmp/www443.log") << g->booted.target->LogTail();
  // A new connection runs the setup again: the rules are replaced, not doubled, and the
  // forwards come back on the high ports (the guest's servers keep 80 and 443).
  g->control->Disconnect(kTestVm);
  g->control->EnsureEndpoint(kTestVm);
  ASSERT_TRUE(WaitEndpointReady()) << g->booted.target->LogTail();
  EXPECT_EQ(RedirectRules(), "2 1\n");
  EXPECT_EQ(Exec("curl -sS --max-time 30 http://127.0.0.1/; "
                 "curl -sS --max-time 60 https://api.int.warren.internal/again"),
            "own-80\nauth=ok");
  EXPECT_EQ(g->control->EndpointProblem(kTestVm), "");
  Exec("sudo -n sh -c 'kill $(cat /tmp/www80.pid) $(cat /tmp/www443.pid)'", &rc);
  EXPECT_EQ(rc, 0);
}

TEST_F(GuestEndpointVmTest, A50MiBResponseStreamsIntoTheGuest) {
  constexpr size_t kTotal = size_t{50} << 20;
  Upstream big([](PeerIo& io, const std::string&, std::string) {
    if (!io.WriteAll("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kTotal) + "\r\n\r\n")) {
      return;
    }
    std::string block(64 * 1024, 'w');
    for (size_t off = 0; off < kTotal && io.WriteAll(block); off += block.size()) {
    }
  });
  g->lookup.Set(kTestVm, "big",
                IntegrationRoute{"ann", "big",
                                 *ParseTargetUrl("http://127.0.0.1:" + std::to_string(big.port())),
                                 HttpHeaders{}});
  auto t0 = std::chrono::steady_clock::now();
  // Only 'w' bytes are counted: kTotal of them means all of it, and nothing else (curl
  // stops at the Content-Length).
  std::string out = Exec(
      "curl -sS --max-time 300 -H 'Host: big.int.warren.internal' http://127.77.0.1/ | "
      "tr -dc w | wc -c");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(out, std::to_string(kTotal) + "\n");
  std::fprintf(stderr, "50 MiB into the guest in %.1f s (%.1f MB/s)\n", secs, 52.4288 / secs);
  g->lookup.Set(kTestVm, "big", NotFound("no integration named big"));
  // The forwarded channel goes once the answer is out.
  for (int i = 0; i < 100 && g->control->OpenChannels(kTestVm) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(g->control->OpenChannels(kTestVm), 0);
}

TEST_F(GuestEndpointVmTest, TheSecretIsNowhereInTheGuest) {
  // The guest has used the integration (the test above, or now).
  Exec("curl -sS --max-time 60 http://api.int.warren.internal/y >/dev/null");
  int rc = -1;
  // The pattern matches the secret but is not it ("[9]"), so grep's own command line (in
  // /proc, read below) does not match.
  std::string pattern = std::string(kSecretA) + "[" + kSecretB[0] + "]" + (kSecretB + 1);
  std::string out = Exec(
      "sudo -n grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e '" + pattern +
          "' / 2>/dev/null; "
          "sudo -n sh -c 'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline' "
          "2>/dev/null | tr '\\0' '\\n' | grep -c -e '" +
          pattern + "'",
      &rc);
  EXPECT_EQ(out, "0\n") << "found in the guest: " << out;
  // Nor on the VM's disk (its overlay), once the guest wrote out what it had.
  Exec("sync");
  std::ifstream disk(g->booted.target->dir() + "/disk.qcow2", std::ios::binary);
  ASSERT_TRUE(disk.good());
  const std::string secret = Secret();
  std::string window;
  std::vector<char> buf(1 << 20);
  bool found = false;
  while (!found && disk.read(buf.data(), static_cast<std::streamsize>(buf.size())).gcount() > 0) {
    // The tail of the previous block too, for a secret across the boundary.
    window = window.substr(window.size() > secret.size() ? window.size() - secret.size() : 0) +
             std::string(buf.data(), static_cast<size_t>(disk.gcount()));
    found = window.find(secret) != std::string::npos;
  }
  EXPECT_FALSE(found) << "the secret is on the VM's disk";
}

TEST_F(GuestEndpointVmTest, ADetachRewritesTheHostsBlockAtOnce) {
  g->lookup.Set(kTestVm, "api", NotFound("no integration named api"));
  g->lookup.Set(
      kTestVm, "second",
      IntegrationRoute{"ann", "second",
                       *ParseTargetUrl("http://127.0.0.1:" + std::to_string(g->upstream->port())),
                       HttpHeaders{{"Authorization", "Bearer " + Secret()}}});
  g->control->RefreshEndpoint(kTestVm);
  std::string hosts;
  for (int i = 0; i < 120; ++i) {
    hosts = Exec("grep int.warren.internal /etc/hosts");
    if (hosts == "127.77.0.1 second.int.warren.internal\n") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(hosts, "127.77.0.1 second.int.warren.internal\n");
  EXPECT_EQ(Exec("curl -sS --max-time 60 http://api.int.warren.internal/ 2>&1 | head -c 80"),
            "curl: (6) Could not resolve host: api.int.warren.internal\n");
  EXPECT_EQ(Exec("curl -sS --max-time 60 -H 'Host: api.int.warren.internal' http://127.77.0.1/"),
            "no integration named api\n");
  EXPECT_EQ(Exec("curl -sS --max-time 60 http://second.int.warren.internal/"), "auth=ok");
}

TEST_F(GuestEndpointVmTest, ASetupThatCannotSudoIsReportedAndTheEndpointStillAnswers) {
  EXPECT_EQ(g->control->EndpointProblem(kTestVm), "");
  // sudo away until the test says (a root job puts it back when /tmp/sudo-back appears,
  // or after 300 s), and the setup run meanwhile.
  Exec(
      "rm -f /tmp/sudo-back; sudo -n sh -c 'mv /usr/bin/sudo /usr/bin/sudo.off; i=0; "
      "while [ ! -e /tmp/sudo-back ] && [ $i -lt 300 ]; do sleep 1; i=$((i+1)); done; "
      "mv /usr/bin/sudo.off /usr/bin/sudo' >/dev/null 2>&1 & "
      "while [ -e /usr/bin/sudo ]; do sleep 0.2; done");
  g->control->RefreshEndpoint(kTestVm);
  std::string problem;
  for (int i = 0; i < 600 && problem.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    problem = g->control->EndpointProblem(kTestVm);
  }
  EXPECT_NE(problem.find("the guest setup failed"), std::string::npos) << problem;
  EXPECT_EQ(Exec("curl -sS --max-time 60 -H 'Host: second.int.warren.internal' http://127.77.0.1/"),
            "auth=ok");
  // Once sudo is back, the next setup clears it.
  Exec("touch /tmp/sudo-back; while [ ! -e /usr/bin/sudo ]; do sleep 0.2; done");
  g->control->RefreshEndpoint(kTestVm);
  for (int i = 0; i < 600 && !problem.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    problem = g->control->EndpointProblem(kTestVm);
  }
  EXPECT_EQ(problem, "");
}

// tiny (WARREN_GUEST_TEST_IMAGE=tiny, CTest guest_endpoint_vm_tiny): busybox only, no CA
// store and no curl, so http only; the same setup (busybox sh, sed, grep) must work there.
TEST_F(GuestEndpointVmTest, TinyGetsHttpThroughBusyboxWget) {
  int rc = -1;
  std::string out = Exec(
      "grep int.warren.internal /etc/hosts; "
      "wget -q -O - 'http://api.int.warren.internal/x?q=3'; echo; "
      "test -d /usr/local/share/ca-certificates || echo no-ca-store",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "127.77.0.1 api.int.warren.internal\nauth=ok\nno-ca-store\n")
      << g->booted.target->LogTail();
  // No netfilter tools in tiny: the forwards hold 80 and 443 themselves, and stat says so.
  EXPECT_EQ(g->control->EndpointProblem(kTestVm),
            "no nft or iptables in the guest: the endpoint holds ports 80 and 443");
}

}  // namespace
}  // namespace warren::guest::testing
