// The web proxy end to end on loopback: a WebServer on port 0 with a fake gate, reaching a
// "guest" server of the test's own (web_peers.py) through a GuestPipe over a socket; driven
// with real curl, raw sockets and a small WebSocket client. Every test's log is checked for
// the fake gate's secrets (they all contain "-secret").
#include "lobby/web/web_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lobby/base/log.h"
#include "lobby/web/web_names.h"
#include "tests/unit/skip_or_fail.h"
#include "tests/unit/web_test_peers.h"

namespace warren::web {
namespace {

using test::FakeWebGate;

constexpr char kDomain[] = "warren.localhost";
constexpr char kAliceToken[] = "wr1.alice-secret-token";
constexpr char kBobToken[] = "wr1.bob-secret-token";
constexpr char kLink[] = "link-secret-one";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs `cmd` under /bin/sh: its output (stdout only).
std::string Shell(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string Here() { return std::filesystem::path(__FILE__).parent_path().string(); }

// The "guest" server: a child running web_peers.py serve.
class GuestServer {
 public:
  GuestServer() {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      std::string script = Here() + "/web_peers.py";
      ::execl("/usr/bin/python3", "python3", script.c_str(), "serve", nullptr);
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);
    port_ = line.empty() ? 0 : std::stoi(line);
  }
  ~GuestServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Reply {
  int status = 0;
  std::string head, body;
  std::string Header(const std::string& name) const {
    std::istringstream in(head);
    std::string line;
    std::string want = name + ":";
    while (std::getline(in, line)) {
      if (strncasecmp(line.c_str(), want.c_str(), want.size()) == 0) {
        std::string v = line.substr(want.size());
        while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
        while (!v.empty() && (v.back() == '\r')) v.pop_back();
        return v;
      }
    }
    return "";
  }
  int Count(const std::string& name) const {
    int n = 0;
    std::istringstream in(head);
    std::string line;
    while (std::getline(in, line)) {
      if (strncasecmp(line.c_str(), (name + ":").c_str(), name.size() + 1) == 0) ++n;
    }
    return n;
  }
};

// The last answer of what curl -i printed (after redirects it followed and 100 Continue).
Reply ParseReply(const std::string& raw) {
  Reply r;
  r.body = raw;
  do {
    size_t end = r.body.find("\r\n\r\n");
    r.head = r.body.substr(0, end);
    r.body = end == std::string::npos ? "" : r.body.substr(end + 4);
  } while ((r.body.rfind("HTTP/1.1 ", 0) == 0 && r.head.find("\nLocation:") != std::string::npos) ||
           r.head.rfind("HTTP/1.1 100", 0) == 0);
  if (r.head.size() > 12) r.status = std::atoi(r.head.c_str() + 9);
  return r;
}

int ConnectFrom(const char* source, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &src.sin_addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string ReadAll(int fd, int timeout_s = 10) {
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

class WebServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "web-server-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(OpenLogFile(dir_ + "/warren.log").ok());
    if (Shell("command -v curl").empty()) {
      WARREN_SKIP_OR_FAIL() << "curl is not installed";
    }
    ASSERT_GT(guest_.port(), 0) << "the guest server did not start";
    FakeWebGate::Vm one;
    one.id = "vm-1";
    one.name = "web-one";
    one.owner = "user:alice";
    one.ports = {{8000, guest_.port()}, {3000, guest_.port()}};
    one.shared_with = {"user:carol"};
    gate_.AddVm(one);
    FakeWebGate::Vm two;
    two.id = "vm-2";
    two.name = "web-two";
    two.owner = "user:alice";
    two.ports = {{8000, guest_.port()}};
    gate_.AddVm(two);
    gate_.AddBearer(kAliceToken, "user:alice");
    gate_.AddBearer(kBobToken, "user:bob");
    gate_.AddShareLink(kLink, "web-one");
  }
  void TearDown() override {
    server_.reset();
    std::string log = ReadFile(dir_ + "/warren.log");
    EXPECT_EQ(log.find("-secret"), std::string::npos) << log;
    if (HasFailure()) std::fprintf(stderr, "LOG:\n%s\n", log.c_str());
    std::filesystem::remove_all(dir_);
  }

  void Start(WebServerOptions options = {}) {
    options.listen = "127.0.0.1:0";
    options.domain = kDomain;
    options.sign_in_command = "ssh -p 2222 warren.test browser";
    server_ = std::make_unique<WebServer>(std::move(options), &gate_);
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    port_ = server_->port();
  }
  std::string Url(const std::string& host, const std::string& path = "/") {
    return std::string(server_->https() ? "https" : "http") + "://" + host + ":" +
           std::to_string(port_) + path;
  }
  std::string Site(const std::string& name) { return name + "." + kDomain; }
  // curl with every host sent to the proxy; `args` as for the shell.
  Reply Curl(const std::string& args, const std::string& url) {
    std::string cmd = "curl -s -i --max-time 30 --connect-to ::127.0.0.1:" + std::to_string(port_) +
                      " " + args + " " + Quote(url);
    return ParseReply(Shell(cmd));
  }
  // A sign-in: the magic link redeemed; returns the domain's session cookie value.
  std::string SignIn(const std::string& who = "user:alice") {
    std::string token = gate_.AddMagicLink(who);
    Reply r = Curl("", Url(kDomain, "/__warren/login?token=" + token));
    EXPECT_EQ(r.status, 302) << r.head;
    std::string c = r.Header("Set-Cookie");
    std::string prefix = server_->https() ? "__Host-warren_session=" : "warren_session=";
    EXPECT_EQ(c.rfind(prefix, 0), 0u) << c;
    return c.substr(prefix.size(), c.find(';') - prefix.size());
  }
  std::string CookieJar() { return dir_ + "/jar"; }

  std::string dir_;
  GuestServer guest_;
  FakeWebGate gate_;
  std::unique_ptr<WebServer> server_;
  uint16_t port_ = 0;
};

TEST_F(WebServerTest, AMagicLinkSignsInOnTheDomainWithAHostOnlyCookie) {
  Start();
  // The start line names the bound port (the harness reads it).
  EXPECT_NE(ReadFile(dir_ + "/warren.log")
                .find("web listening on 127.0.0.1:" + std::to_string(port_) + " (http)"),
            std::string::npos);
  std::string token = gate_.AddMagicLink("user:alice");
  Reply r = Curl("", Url(kDomain, "/__warren/login?token=" + token));
  ASSERT_EQ(r.status, 302) << r.head;
  EXPECT_EQ(r.Header("Location"), "/");
  std::string cookie = r.Header("Set-Cookie");
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("SameSite=Lax"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("Path=/"), std::string::npos) << cookie;
  EXPECT_EQ(cookie.find("Domain"), std::string::npos) << cookie;
  EXPECT_EQ(cookie.find("Secure"), std::string::npos) << cookie;  // plain HTTP
  std::string value = cookie.substr(15, cookie.find(';') - 15);

  Reply home = Curl("-b " + Quote("warren_session=" + value), Url(kDomain));
  EXPECT_EQ(home.status, 200);
  EXPECT_NE(home.body.find("Signed in as <b>user:alice</b>"), std::string::npos) << home.body;
  // Single use.
  Reply again = Curl("", Url(kDomain, "/__warren/login?token=" + token));
  EXPECT_EQ(again.status, 401);
  EXPECT_NE(again.body.find("already used or has expired"), std::string::npos);
  // Not signed in: the sign-in page names the command.
  Reply anon = Curl("", Url(kDomain));
  EXPECT_EQ(anon.status, 200);
  EXPECT_NE(anon.body.find("ssh -p 2222 warren.test browser"), std::string::npos);
}

TEST_F(WebServerTest, ABrowserIsSentThroughTheDomainAndGetsACookieForThisHostOnly) {
  Start();
  std::string domain_session = SignIn();
  // The private page, as a browser asks for it, with no cookie of this host: to the domain.
  Reply first = Curl("-H 'Accept: text/html'", Url(Site("web-one"), "/page?a=1"));
  ASSERT_EQ(first.status, 302) << first.head;
  std::string auth = first.Header("Location");
  EXPECT_EQ(auth,
            Url(kDomain, "/__warren/auth?to=") + PercentEncode(Url(Site("web-one"), "/page?a=1")));
  EXPECT_EQ(gate_.opens(), 0);  // not a byte of the VM
  // The domain, with its session: a ticket for exactly that host.
  Reply hand = Curl("-b " + Quote("warren_session=" + domain_session), auth);
  ASSERT_EQ(hand.status, 302) << hand.head;
  std::string session_url = hand.Header("Location");
  EXPECT_EQ(session_url.rfind(Url(Site("web-one"), "/__warren/session?ticket="), 0), 0u)
      << session_url;
  // The VM's host: its own session, then the check, then the page.
  Reply set = Curl("", session_url);
  ASSERT_EQ(set.status, 302) << set.head;
  std::string cookie = set.Header("Set-Cookie");
  EXPECT_EQ(cookie.find("Domain"), std::string::npos);
  std::string host_session = cookie.substr(15, cookie.find(';') - 15);
  EXPECT_NE(host_session, domain_session);
  EXPECT_EQ(set.Header("Location"), "/__warren/check?to=/page%3Fa%3D1");
  Reply check = Curl("-b " + Quote("warren_session=" + host_session),
                     Url(Site("web-one"), set.Header("Location")));
  ASSERT_EQ(check.status, 302);
  EXPECT_EQ(check.Header("Location"), "/page?a=1");
  Reply page =
      Curl("-b " + Quote("warren_session=" + host_session), Url(Site("web-one"), "/page?a=1"));
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, "hello from the guest /page?a=1\n");
  // The same ticket once more: refused, and no loop (a page).
  Reply reuse = Curl("", session_url);
  EXPECT_EQ(reuse.status, 401);

  // The whole dance as curl -L with a cookie jar does it, as a browser would.
  std::string jar = CookieJar();
  std::string token = gate_.AddMagicLink("user:alice");
  Curl("-c " + jar + " -b " + jar, Url(kDomain, "/__warren/login?token=" + token));
  Reply followed =
      Curl("-L -c " + jar + " -b " + jar + " -H 'Accept: text/html'", Url(Site("web-two"), "/x"));
  EXPECT_NE(followed.body.find("hello from the guest /x"), std::string::npos) << followed.head;
  // The jar holds host-only cookies: one for the domain, one for web-two, none for a parent.
  std::string jar_text = ReadFile(jar);
  EXPECT_NE(jar_text.find("web-two.warren.localhost\tFALSE"), std::string::npos) << jar_text;
  EXPECT_EQ(jar_text.find(".warren.localhost\tTRUE"), std::string::npos) << jar_text;
}

TEST_F(WebServerTest, AfterSigningInTheMagicLinkLeadsBackToThePageThatAskedForIt) {
  Start();
  std::string jar = CookieJar();
  std::string follow = "-L -c " + jar + " -b " + jar + " -H 'Accept: text/html'";
  Reply asked = Curl(follow, Url(Site("web-one"), "/wanted?q=1"));
  EXPECT_EQ(asked.status, 401);
  EXPECT_NE(asked.body.find("ssh -p 2222 warren.test browser"), std::string::npos);
  std::string token = gate_.AddMagicLink("user:alice");
  Reply back = Curl(follow, Url(kDomain, "/__warren/login?token=" + token));
  EXPECT_EQ(back.status, 200) << back.head;
  EXPECT_EQ(back.body, "hello from the guest /wanted?q=1\n");
  // The return is used once: the login clears it (curl's jar keeps a cookie cleared during
  // -L, so this looks at the answer itself).
  token = gate_.AddMagicLink("user:alice");
  Reply login = Curl("-b " + Quote("warren_return=" + PercentEncode(Url(Site("web-two"), "/"))),
                     Url(kDomain, "/__warren/login?token=" + token));
  EXPECT_EQ(login.Header("Location"),
            "/__warren/auth?to=" + PercentEncode(Url(Site("web-two"), "/")));
  EXPECT_NE(
      login.head.find("Set-Cookie: warren_return=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
      std::string::npos)
      << login.head;
  // Nothing but a site of this server is returned to.
  token = gate_.AddMagicLink("user:alice");
  Reply evil = Curl("-b " + Quote("warren_return=http%3A//evil.example/"),
                    Url(kDomain, "/__warren/login?token=" + token));
  EXPECT_EQ(evil.Header("Location"), "/");
}

TEST_F(WebServerTest, ASessionOfOneHostIsRefusedOnAnotherAndTheDomainsOnAVm) {
  Start();
  std::string domain_session = SignIn();
  Reply hand = Curl("-b " + Quote("warren_session=" + domain_session),
                    Url(kDomain, "/__warren/auth?to=" + PercentEncode(Url(Site("web-one")))));
  Reply set = Curl("", hand.Header("Location"));
  std::string cookie = set.Header("Set-Cookie");
  std::string one = cookie.substr(15, cookie.find(';') - 15);
  // web-one's session works there...
  EXPECT_EQ(Curl("-b " + Quote("warren_session=" + one), Url(Site("web-one"))).status, 200);
  // ...and not on web-two (the same owner), nor is the domain's own session a VM's.
  EXPECT_EQ(Curl("-b " + Quote("warren_session=" + one), Url(Site("web-two"))).status, 401);
  EXPECT_EQ(Curl("-b " + Quote("warren_session=" + domain_session), Url(Site("web-one"))).status,
            401);
  // A ticket for web-one presented on web-two: refused.
  Reply hand2 = Curl("-b " + Quote("warren_session=" + domain_session),
                     Url(kDomain, "/__warren/auth?to=" + PercentEncode(Url(Site("web-one")))));
  std::string moved = hand2.Header("Location");
  moved.replace(moved.find("web-one"), 7, "web-two");
  EXPECT_EQ(Curl("", moved).status, 401);
  EXPECT_EQ(gate_.opens(), 1);
}

TEST_F(WebServerTest, OfSeveralSessionCookiesTheLiveOneOfThisHostCounts) {
  // On HTTP a VM page can plant a same-named cookie for the parent domain from script; the
  // browser then sends both.
  Start();
  std::string domain_session = SignIn();
  Reply home = Curl("-b " + Quote("warren_session=planted-1; warren_session=" + domain_session),
                    Url(kDomain));
  EXPECT_NE(home.body.find("Signed in as <b>user:alice</b>"), std::string::npos) << home.body;
}

TEST_F(WebServerTest, TheUnauthenticatedGetASignInPageJsonOrARedirectAndNothingOfTheVm) {
  Start();
  Reply html = Curl("", Url(Site("web-one")));
  EXPECT_EQ(html.status, 401);
  EXPECT_NE(html.body.find("ssh -p 2222 warren.test browser"), std::string::npos);
  Reply json = Curl("-H 'Accept: application/json'", Url(Site("web-one")));
  EXPECT_EQ(json.status, 401);
  EXPECT_EQ(json.Header("Content-Type"), "application/json");
  EXPECT_NE(json.body.find("\"sign_in\":\"ssh -p 2222 warren.test browser\""), std::string::npos)
      << json.body;
  Reply post = Curl("-X POST -d x=1 -H 'Accept: text/html'", Url(Site("web-one")));
  EXPECT_EQ(post.status, 401);  // only a GET is sent round to sign in
  EXPECT_EQ(Curl("-H 'Authorization: Bearer wr1.unknown'", Url(Site("web-one"))).status, 401);
  EXPECT_EQ(gate_.opens(), 0);
}

TEST_F(WebServerTest, ABearerTokenAdmitsAndNeverReachesTheVm) {
  Start();
  Reply r = Curl(std::string("-H 'Authorization: Bearer ") + kAliceToken + "'",
                 Url(Site("web-one"), "/headers"));
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body.find("secret"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("Authorization"), std::string::npos) << r.body;
  // The VM's own authorization passes untouched.
  Reply basic = Curl(std::string("-H 'Authorization: Bearer ") + kAliceToken +
                         "' -H 'Authorization: Basic dm06cHc='",
                     Url(Site("web-one"), "/headers"));
  EXPECT_NE(basic.body.find("Basic dm06cHc="), std::string::npos) << basic.body;
  // Another user's token: not allowed, and told so.
  Reply bob =
      Curl(std::string("-H 'Authorization: Bearer ") + kBobToken + "'", Url(Site("web-one")));
  EXPECT_EQ(bob.status, 403);
  EXPECT_NE(bob.body.find("web-one is not shared with user:bob"), std::string::npos) << bob.body;
}

TEST_F(WebServerTest, TheVmSeesNoWarrenCookieTokenOrShareParameterAndForwardedHeaders) {
  Start();
  std::string jar = CookieJar();
  Reply r = Curl(std::string("-L -c ") + jar + " -b " + jar + " -H 'X-Forwarded-For: 1.2.3.4'" +
                     " -H 'X-Forwarded-Proto: gopher' -b " +
                     Quote("warren_session=s-secret-1; app=1; __Host-warren_link=l-secret-2; "
                           "__Host-warren_session=h-secret-3; warren_link=x-secret-4; b=2"),
                 Url(Site("web-one"), std::string("/headers?x=1&share=") + kLink + "&y=2"));
  ASSERT_EQ(r.status, 200) << r.head << r.body;
  EXPECT_EQ(r.body.find("secret"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"target\": \"/headers?x=1&y=2\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("[\"Cookie\", \"app=1; b=2\"]"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("[\"X-Forwarded-For\", \"1.2.3.4, 127.0.0.1\"]"), std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("[\"X-Forwarded-Proto\", \"http\"]"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("[\"X-Forwarded-Host\", \"web-one.warren.localhost:" +
                        std::to_string(port_) + "\"]"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("[\"Connection\", \"close\"]"), std::string::npos) << r.body;
}

TEST_F(WebServerTest, AShareLinkBecomesThisHostsCookieAndStopsWorkingWhenRemoved) {
  Start();
  Reply r = Curl("", Url(Site("web-one"), std::string("/p?share=") + kLink + "&q=1"));
  ASSERT_EQ(r.status, 302) << r.head;
  EXPECT_EQ(r.Header("Location"), "/p?q=1");
  std::string cookie = r.Header("Set-Cookie");
  EXPECT_EQ(cookie.rfind(std::string("warren_link=") + kLink + ";", 0), 0u) << cookie;
  EXPECT_EQ(cookie.find("Domain"), std::string::npos);
  Reply page = Curl("-b " + Quote(std::string("warren_link=") + kLink), Url(Site("web-one"), "/p"));
  EXPECT_EQ(page.status, 200);
  // Not a key to web-two.
  EXPECT_EQ(Curl("-b " + Quote(std::string("warren_link=") + kLink), Url(Site("web-two"))).status,
            401);
  gate_.RemoveShareLink(kLink);
  EXPECT_EQ(Curl("-b " + Quote(std::string("warren_link=") + kLink), Url(Site("web-one"))).status,
            401);
  Reply dead = Curl("", Url(Site("web-one"), std::string("/?share=") + kLink));
  EXPECT_EQ(dead.status, 401);
  EXPECT_NE(dead.body.find("share link is not valid"), std::string::npos);
}

TEST_F(WebServerTest, PublicOpensToEveryoneAndPrivateClosesAtOnceButNotOwnerPorts) {
  Start();
  EXPECT_EQ(Curl("", Url(Site("web-one"))).status, 401);
  gate_.SetPublic("web-one", true);
  Reply pub = Curl("", Url(Site("web-one")));
  EXPECT_EQ(pub.status, 200);
  EXPECT_EQ(pub.body, "hello from the guest /\n");
  // An owner-only port stays the owner's.
  EXPECT_EQ(Curl("", Url(Site("web-one-p3000"))).status, 401);
  EXPECT_EQ(
      Curl(std::string("-H 'Authorization: Bearer ") + kBobToken + "'", Url(Site("web-one-p3000")))
          .status,
      403);
  EXPECT_EQ(Curl(std::string("-H 'Authorization: Bearer ") + kAliceToken + "'",
                 Url(Site("web-one-p3000")))
                .status,
            200);
  gate_.SetPublic("web-one", false);
  EXPECT_EQ(Curl("", Url(Site("web-one"))).status, 401);
}

TEST_F(WebServerTest, AVmCannotSetCookiesForOtherHostsOrWarrensOwn) {
  Start();
  Reply r = Curl(std::string("-H 'Authorization: Bearer ") + kAliceToken + "'",
                 Url(Site("web-one"), "/cookies"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Count("Set-Cookie"), 2) << r.head;
  EXPECT_NE(r.head.find("Set-Cookie: app=1; Path=/\r"), std::string::npos) << r.head;
  EXPECT_NE(r.head.find("Set-Cookie: other=2; path=/; HttpOnly\r"), std::string::npos) << r.head;
  EXPECT_EQ(r.head.find("stolen"), std::string::npos) << r.head;
}

TEST_F(WebServerTest, NothingListeningIsA502PageAndAStoppedVmA503) {
  Start();
  std::string bearer = std::string("-H 'Authorization: Bearer ") + kAliceToken + "'";
  Reply r = Curl(bearer, Url(Site("web-one-p4000")));
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("listening on port 4000"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("python3 -m http.server 4000"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("0.0.0.0"), std::string::npos);
  Reply j = Curl(bearer + " -H 'Accept: application/json'", Url(Site("web-one-p4000")));
  EXPECT_EQ(j.status, 502);
  EXPECT_NE(j.body.find("\"port\":4000"), std::string::npos) << j.body;
  gate_.SetRunning("web-one", false);
  Reply stopped = Curl(bearer, Url(Site("web-one")));
  EXPECT_EQ(stopped.status, 503);
  EXPECT_NE(stopped.body.find("start it with: ssh HOST start web-one"), std::string::npos)
      << stopped.body;
  Reply sj = Curl(bearer + " -H 'Accept: application/json'", Url(Site("web-one")));
  EXPECT_EQ(sj.status, 503);
  EXPECT_EQ(sj.body.rfind("{\"error\":\"VM web-one is stopped", 0), 0u) << sj.body;
}

TEST_F(WebServerTest, OnlyTheDomainAndOneLabelUnderItAreSites) {
  Start();
  EXPECT_EQ(Curl("", Url("example.com")).status, 404);
  EXPECT_EQ(Curl("", Url("a.web-one.warren.localhost")).status, 404);
  EXPECT_EQ(Curl("", Url("nope.warren.localhost")).status, 404);
  EXPECT_EQ(Curl("", Url("WEB-ONE.Warren.Localhost")).status, 401);  // any case
  EXPECT_EQ(Curl("", Url(kDomain, "/nope")).status, 404);
  EXPECT_EQ(gate_.opens(), 0);
}

TEST_F(WebServerTest, RedirectsStayOnTheServerAndABlockedCookieEndsInAPage) {
  Start();
  std::string domain_session = SignIn();
  std::string b = "-b " + Quote("warren_session=" + domain_session);
  EXPECT_EQ(Curl(b, Url(kDomain, "/__warren/auth?to=http%3A%2F%2Fevil.example%2F")).status, 400);
  EXPECT_EQ(Curl(b, Url(kDomain, "/__warren/auth?to=" + PercentEncode(Url(kDomain)))).status, 400);
  // `to` must be a local path: anything else lands on "/".
  Reply hand = Curl(b, Url(kDomain, "/__warren/auth?to=" + PercentEncode(Url(Site("web-one")))));
  std::string loc = hand.Header("Location");
  loc = loc.substr(0, loc.find("&to=")) + "&to=%2F%2Fevil.example";
  Reply set = Curl("", loc);
  EXPECT_EQ(set.Header("Location"), "/__warren/check?to=/");
  EXPECT_EQ(Curl("", Url(Site("web-one"), "/__warren/check?to=%2F%5Cevil")).status, 401);
  Reply check = Curl(
      "-b " + Quote("warren_session=" +
                    set.Header("Set-Cookie").substr(15, set.Header("Set-Cookie").find(';') - 15)),
      Url(Site("web-one"), "/__warren/check?to=%2F%2Fevil.example"));
  EXPECT_EQ(check.Header("Location"), "/");
  // A browser that keeps no cookie: the check says so instead of going round again.
  Reply blocked = Curl("", Url(Site("web-one"), "/__warren/check?to=/"));
  EXPECT_EQ(blocked.status, 401);
  EXPECT_NE(blocked.body.find("did not keep"), std::string::npos);
}

TEST_F(WebServerTest, SigningOutEndsTheSessionAndEveryHostSessionFromIt) {
  Start();
  std::string domain_session = SignIn();
  std::string b = "-b " + Quote("warren_session=" + domain_session);
  Reply hand = Curl(b, Url(kDomain, "/__warren/auth?to=" + PercentEncode(Url(Site("web-one")))));
  Reply set = Curl("", hand.Header("Location"));
  std::string c = set.Header("Set-Cookie");
  std::string one = c.substr(15, c.find(';') - 15);
  EXPECT_EQ(Curl("-b " + Quote("warren_session=" + one), Url(Site("web-one"))).status, 200);
  Reply page = Curl(b, Url(kDomain, "/__warren/logout"));
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("method=\"post\""), std::string::npos);
  Reply out = Curl(b + " -X POST", Url(kDomain, "/__warren/logout"));
  EXPECT_EQ(out.status, 200);
  EXPECT_NE(out.Header("Set-Cookie").find("Max-Age=0"), std::string::npos) << out.head;
  EXPECT_EQ(Curl("-b " + Quote("warren_session=" + one), Url(Site("web-one"))).status, 401);
  EXPECT_EQ(Curl(b, Url(kDomain)).body.find("Signed in as"), std::string::npos);
}

TEST_F(WebServerTest, BodiesStreamChunkedCloseDelimitedEventsAndUploads) {
  Start();
  std::string bearer = std::string("-H 'Authorization: Bearer ") + kAliceToken + "'";
  Reply chunked = Curl(bearer, Url(Site("web-one"), "/chunked"));
  EXPECT_EQ(chunked.status, 200);
  EXPECT_EQ(chunked.body, "one two three");
  EXPECT_EQ(Curl(bearer, Url(Site("web-one"), "/close")).body, "until the end");
  auto t0 = std::chrono::steady_clock::now();
  Reply sse = Curl(bearer + " -N", Url(Site("web-one"), "/sse"));
  EXPECT_EQ(sse.body, "data: event 0\n\ndata: event 1\n\ndata: event 2\n\n");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(400));
  std::string file = dir_ + "/upload";
  Shell("head -c 5242880 /dev/zero > " + file);
  Reply up = Curl(bearer + " --data-binary @" + file, Url(Site("web-one"), "/upload"));
  EXPECT_EQ(up.body, "read 5242880\n") << up.head;
  Reply up2 = Curl(bearer + " -H 'Transfer-Encoding: chunked' --data-binary @" + file,
                   Url(Site("web-one"), "/upload"));
  EXPECT_EQ(up2.status, 200);  // the guest reads Content-Length only; the framing went through
}

TEST_F(WebServerTest, AConnectionIsKeptAliveBetweenForwardedAnswersEachWithItsOwnChannel) {
  Start();
  gate_.SetPublic("web-one", true);
  int fd = ConnectFrom("127.0.0.1", port_);
  // Three requests at once (pipelined): one with a body, then two more; the last says close.
  std::string reqs =
      "POST /upload HTTP/1.1\r\nHost: web-one.warren.localhost\r\nContent-Length: 5\r\n\r\n"
      "hello"
      "GET /chunked HTTP/1.1\r\nHost: web-one.warren.localhost\r\n\r\n"
      "GET /a HTTP/1.1\r\nHost: web-one.warren.localhost\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(fd, reqs.data(), reqs.size(), MSG_NOSIGNAL), static_cast<ssize_t>(reqs.size()));
  std::string all = ReadAll(fd);
  ::close(fd);
  size_t first = all.find("read 5\n");
  size_t second = all.find("\r\n\r\n4\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n0\r\n\r\n");
  size_t third = all.find("hello from the guest /a\n");
  EXPECT_NE(first, std::string::npos) << all;
  EXPECT_NE(second, std::string::npos) << all;
  EXPECT_NE(third, std::string::npos) << all;
  EXPECT_TRUE(first < second && second < third) << all;
  EXPECT_EQ(gate_.opens(), 3);
  // The first two answers keep the connection; the last one closes it.
  EXPECT_EQ(all.find("Connection: close"), all.rfind("Connection: close")) << all;
  // A close-delimited answer from the VM ends the connection with it.
  int fd2 = ConnectFrom("127.0.0.1", port_);
  std::string two =
      "GET /close HTTP/1.1\r\nHost: web-one.warren.localhost\r\n\r\n"
      "GET /never HTTP/1.1\r\nHost: web-one.warren.localhost\r\n\r\n";
  ::send(fd2, two.data(), two.size(), MSG_NOSIGNAL);
  std::string got = ReadAll(fd2);
  ::close(fd2);
  EXPECT_NE(got.find("until the end"), std::string::npos) << got;
  EXPECT_EQ(got.find("/never"), std::string::npos) << got;
  // curl reuses the connection for two URLs.
  std::string v = Shell(
      "curl -sv -o /dev/null -o /dev/null --connect-to ::127.0.0.1:" + std::to_string(port_) + " " +
      Quote(Url(Site("web-one"), "/1")) + " " + Quote(Url(Site("web-one"), "/2")) + " 2>&1");
  EXPECT_NE(v.find("Re-using existing connection"), std::string::npos) << v;
}

TEST_F(WebServerTest, AWebSocketEchoesThroughTheProxy) {
  Start();
  gate_.SetPublic("web-one", true);
  for (const char* mode : {"ws", "ws-eager"}) {
    std::string out = Shell("/usr/bin/python3 " + Here() + "/web_peers.py " + mode + " " +
                            Quote("ws://" + Site("web-one") + ":" + std::to_string(port_) + "/ws"));
    EXPECT_EQ(out,
              "HTTP/1.1 101 Switching Protocols\necho: first 11\necho: second 12\n"
              "echo: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx 70006\nclosed\n")
        << mode;
  }
}

// Under AddressSanitizer (tests/sanitizers) freed memory waits in ASan's quarantine (256 MiB)
// before it is reused, so the process's RSS says nothing about how much the proxy holds.
#if defined(__SANITIZE_ADDRESS__)  // gcc
#define WARREN_UNDER_ASAN 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define WARREN_UNDER_ASAN 1
#endif
#endif
#ifdef WARREN_UNDER_ASAN
constexpr bool kRssMeansWhatWeHold = false;
#else
constexpr bool kRssMeansWhatWeHold = true;
#endif

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

TEST_F(WebServerTest, A200MiBDownloadStreamsInBoundedMemory) {
  Start();
  gate_.SetPublic("web-one", true);
  long before = RssKiB();
  std::atomic<long> peak{before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), RssKiB());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string out = Shell(
      "curl -s -o /dev/null -w '%{http_code} %{size_download}' --max-time 120 "
      "--connect-to ::127.0.0.1:" +
      std::to_string(port_) + " " + Quote(Url(Site("web-one"), "/bytes?n=209715200")));
  done = true;
  sampler.join();
  EXPECT_EQ(out, "200 209715200");
  if (kRssMeansWhatWeHold) {
    EXPECT_LT(peak - before, 48 * 1024) << "peak RSS grew by " << (peak - before) << " KiB";
  }
}

TEST_F(WebServerTest, TwoHundredVisitorsAtOnceAcrossFiveVmsAllServed) {
  Start();
  for (int i = 3; i <= 5; ++i) {
    FakeWebGate::Vm vm;
    vm.id = "vm-" + std::to_string(i);
    vm.name = "web-" + std::to_string(i);
    vm.owner = "user:alice";
    vm.ports = {{8000, guest_.port()}};
    gate_.AddVm(vm);
  }
  const char* names[] = {"web-one", "web-two", "web-3", "web-4", "web-5"};
  for (const char* n : names) gate_.SetPublic(n, true);
  constexpr int kVisitors = 200;
  std::vector<std::thread> visitors;
  std::atomic<int> ok{0};
  std::mutex mu;
  std::vector<std::string> bad;
  for (int i = 0; i < kVisitors; ++i) {
    visitors.emplace_back([&, i] {
      int fd = ConnectFrom("127.0.0.1", port_);
      std::string req = "GET /bytes?n=200000 HTTP/1.1\r\nHost: " + std::string(names[i % 5]) +
                        ".warren.localhost\r\nConnection: close\r\n\r\n";
      ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
      Reply r = ParseReply(ReadAll(fd, 60));
      ::close(fd);
      if (r.status == 200 && r.body.size() == 200000) {
        ++ok;
      } else {
        std::lock_guard<std::mutex> lock(mu);
        bad.push_back(std::to_string(r.status) + " " + std::to_string(r.body.size()));
      }
    });
  }
  for (std::thread& t : visitors) t.join();
  EXPECT_EQ(ok.load(), kVisitors) << (bad.empty() ? "" : bad.front());
  EXPECT_EQ(gate_.opens(), kVisitors);
}

TEST_F(WebServerTest, PastTheLimitsA503WhileOthersAreStillServed) {
  WebServerOptions o;
  o.max_connections = 3;
  o.max_connections_per_source = 2;
  Start(o);
  gate_.SetPublic("web-one", true);
  auto send_get = [&](int fd) {
    std::string req =
        "GET / HTTP/1.1\r\nHost: web-one.warren.localhost\r\nConnection: close\r\n\r\n";
    return ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  };
  // Two held connections from 127.0.0.2 (a head never finished).
  int a = ConnectFrom("127.0.0.2", port_), b = ConnectFrom("127.0.0.2", port_);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ::send(a, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);
  ::send(b, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);
  for (int i = 0; i < 100 && server_->active() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int c = ConnectFrom("127.0.0.2", port_);
  ASSERT_TRUE(send_get(c));
  EXPECT_EQ(ParseReply(ReadAll(c)).status, 503);
  ::close(c);
  // Another source still gets in...
  int d = ConnectFrom("127.0.0.3", port_);
  ASSERT_TRUE(send_get(d));
  Reply ok = ParseReply(ReadAll(d));
  EXPECT_EQ(ok.status, 200);
  ::close(d);
  for (int i = 0; i < 300 && server_->active() > 2; ++i) {  // d's worker ends
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // ...until the total is reached.
  int e = ConnectFrom("127.0.0.3", port_);
  ::send(e, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);
  for (int i = 0; i < 100 && server_->active() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int f = ConnectFrom("127.0.0.4", port_);
  ASSERT_TRUE(send_get(f));
  EXPECT_EQ(ParseReply(ReadAll(f)).status, 503);
  ::close(f);
  ::close(a);
  ::close(b);
  ::close(e);
  for (int i = 0; i < 300 && server_->active() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Curl("", Url(Site("web-one"))).status, 200);
}

TEST_F(WebServerTest, PastTheSiteLimitA503OtherSitesServedAndStopCutsDownloads) {
  WebServerOptions o;
  o.max_connections_per_site = 1;
  Start(o);
  gate_.SetPublic("web-one", true);
  gate_.SetPublic("web-two", true);
  // A download nobody reads: it holds web-one's one connection (backpressure keeps it open).
  int slow = ConnectFrom("127.0.0.1", port_);
  std::string req = "GET /bytes?n=104857600 HTTP/1.1\r\nHost: web-one.warren.localhost\r\n\r\n";
  ASSERT_EQ(::send(slow, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  for (int i = 0; i < 200 && gate_.opens() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Reply busy = Curl("", Url(Site("web-one")));
  EXPECT_EQ(busy.status, 503);
  EXPECT_NE(busy.body.find("too many connections to this site"), std::string::npos);
  EXPECT_EQ(Curl("", Url(Site("web-two"))).status, 200);
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(server_->active(), 0);
  ::close(slow);
}

TEST_F(WebServerTest, MadePrivateAnOpenDownloadIsCutAndRevokeVmCutsTheRest) {
  Start();
  gate_.SetPublic("web-one", true);
  auto hold = [&](const char* host) {
    int fd = ConnectFrom("127.0.0.1", port_);
    std::string req = "GET /bytes?n=104857600 HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n";
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    return fd;
  };
  int pub = hold("web-one.warren.localhost");
  int own = ConnectFrom("127.0.0.1", port_);
  std::string req = std::string(
                        "GET /bytes?n=104857600 HTTP/1.1\r\nHost: web-one.warren.localhost"
                        "\r\nAuthorization: Bearer ") +
                    kAliceToken + "\r\n\r\n";
  ::send(own, req.data(), req.size(), MSG_NOSIGNAL);
  for (int i = 0; i < 300 && gate_.opens() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(server_->Revalidate(), 0);  // nothing changed
  gate_.SetPublic("web-one", false);
  EXPECT_EQ(server_->Revalidate(), 1);  // the anonymous one; the owner's goes on
  for (int i = 0; i < 300 && server_->active() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->active(), 1);
  EXPECT_EQ(server_->RevokeVm("vm-2"), 0);
  EXPECT_EQ(server_->RevokeVm("vm-1"), 1);
  for (int i = 0; i < 300 && server_->active() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->active(), 0);
  ::close(pub);
  ::close(own);
}

TEST_F(WebServerTest, AHeadThatNeverEndsTimesOutAndAHugeOneIsRefused) {
  WebServerOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  o.max_header_bytes = 4096;
  Start(o);
  int a = ConnectFrom("127.0.0.1", port_);
  ::send(a, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);
  EXPECT_EQ(ParseReply(ReadAll(a)).status, 408);
  ::close(a);
  Reply big = Curl("-H 'X-Big: " + std::string(8000, 'b') + "'", Url(Site("web-one")));
  EXPECT_EQ(big.status, 431);
}

// ---- HTTPS

class WebTlsTest : public WebServerTest {
 protected:
  void MakeCert() {
    cert_ = dir_ + "/web.crt";
    key_ = dir_ + "/web.key";
    std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        "-days 2 -subj /CN=warren.localhost -addext "
        "'subjectAltName=DNS:warren.localhost,DNS:*.warren.localhost' -keyout " +
        key_ + " -out " + cert_ + " 2>/dev/null && echo made";
    ASSERT_EQ(Shell(cmd), "made\n");
  }
  void StartTls() {
    MakeCert();
    WebServerOptions o;
    o.tls_cert_file = cert_;
    o.tls_key_file = key_;
    Start(o);
  }
  std::string Resolve(const std::string& host) {
    return "--cacert " + cert_ + " --resolve " + host + ":" + std::to_string(port_) + ":127.0.0.1 ";
  }
  std::string cert_, key_;
};

TEST_F(WebTlsTest, HttpsWithAWildcardCertificateAndHostPrefixedSecureCookies) {
  StartTls();
  std::string token = gate_.AddMagicLink("user:alice");
  Reply r = ParseReply(Shell("curl -s -i --max-time 20 " + Resolve(kDomain) +
                             Quote(Url(kDomain, "/__warren/login?token=" + token))));
  ASSERT_EQ(r.status, 302) << r.head;
  std::string cookie = r.Header("Set-Cookie");
  EXPECT_EQ(cookie.rfind("__Host-warren_session=", 0), 0u) << cookie;
  EXPECT_NE(cookie.find("; Secure"), std::string::npos) << cookie;
  EXPECT_EQ(cookie.find("Domain"), std::string::npos) << cookie;
  Reply page = ParseReply(Shell("curl -s -i --max-time 20 " + Resolve(Site("web-one")) + "-H " +
                                Quote(std::string("Authorization: Bearer ") + kAliceToken) + " " +
                                Quote(Url(Site("web-one"), "/headers"))));
  EXPECT_EQ(page.status, 200) << page.head;
  EXPECT_NE(page.body.find("[\"X-Forwarded-Proto\", \"https\"]"), std::string::npos) << page.body;
  // An unauthenticated browser is sent to https://DOMAIN:PORT.
  Reply anon = ParseReply(Shell("curl -s -i --max-time 20 -H 'Accept: text/html' " +
                                Resolve(Site("web-one")) + Quote(Url(Site("web-one")))));
  EXPECT_EQ(anon.Header("Location")
                .rfind("https://warren.localhost:" + std::to_string(port_) +
                           "/__warren/auth?to=https%3A//web-one",
                       0),
            0u)
      << anon.head;
  // The plain cookie name is not accepted over HTTPS.
  std::string value = cookie.substr(22, cookie.find(';') - 22);
  Reply home = ParseReply(Shell("curl -s -i --max-time 20 " + Resolve(kDomain) + "-b " +
                                Quote("warren_session=" + value) + " " + Quote(Url(kDomain))));
  EXPECT_EQ(home.body.find("Signed in as"), std::string::npos);
}

TEST_F(WebTlsTest, AWebSocketEchoesOverTls) {
  StartTls();
  gate_.SetPublic("web-one", true);
  std::string out =
      Shell("/usr/bin/python3 " + Here() + "/web_peers.py ws " +
            Quote("wss://" + Site("web-one") + ":" + std::to_string(port_) + "/ws") + " " + cert_);
  EXPECT_EQ(out,
            "HTTP/1.1 101 Switching Protocols\necho: first 11\necho: second 12\n"
            "echo: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx 70006\nclosed\n");
}

TEST_F(WebTlsTest, AStartWithABadCertificateSaysWhichFile) {
  WebServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = dir_ + "/missing.crt";
  o.tls_key_file = dir_ + "/missing.key";
  WebServer s(o, &gate_);
  Status st = s.Start();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("missing.crt"), std::string::npos) << st.message();
  o.tls_key_file.clear();
  WebServer s2(o, &gate_);
  EXPECT_EQ(s2.Start().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace warren::web
