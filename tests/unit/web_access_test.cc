// WebAccess, the web's rules: host labels (route and owner-only port hosts, names holding
// "-p"), every admission rule (owner by session or bearer token, shared user, share link,
// public, owner-only ports, tag scope, revoked credentials, removed links, set-private at
// once), sessions bound to their host, single-use magic links and tickets (also raced),
// expiry by the clock, share-link use counts, the stream to the guest's port, and what
// rename, user rm and a restart do.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "keys/token.h"
#include "lobby/commands/web_access.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

constexpr std::string_view kLoginPrefix = "http://warren.localhost:8081/__warren/login?token=";
constexpr char kDomain[] = "warren.localhost";
constexpr char kWebOne[] = "web-one.warren.localhost";

WebCredentials Session(const std::string& cookie) {
  WebCredentials c;
  c.session = cookie;
  return c;
}
WebCredentials Bearer(const std::string& token) {
  WebCredentials c;
  c.bearer = token;
  return c;
}
WebCredentials Link(const std::string& token) {
  WebCredentials c;
  c.share_link = token;
  return c;
}

class WebAccessTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    interpreter_->services().token_signer = &signer_;
    New(Alice(), {"--name", "web-one"});
    web_ = std::make_unique<WebAccess>(*interpreter_);
  }
  void TearDown() override {
    web_.reset();
    VmCommandTest::TearDown();
  }
  // After a restart: the store reopened, a fresh interpreter and rules.
  void Restart() {
    web_.reset();
    interpreter_.reset();
    OpenStore();
    MakeInterpreter();
    interpreter_->services().token_signer = &signer_;
    web_ = std::make_unique<WebAccess>(*interpreter_);
  }

  void Run(const Caller& c, std::vector<std::string> argv) {
    Outcome o = Exec(c, argv);
    ASSERT_TRUE(o.status.ok()) << o.out << o.err;
  }
  std::string MagicToken(const Caller& caller) {
    Outcome o = Exec(caller, {"browser", "--json"});
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    if (!o.status.ok()) return "";
    return o.Json()["url"].get<std::string>().substr(kLoginPrefix.size());
  }
  // A session of `caller` for the domain.
  std::string SignIn(const Caller& caller) {
    Result<std::string> cookie = web_->RedeemMagicLink(MagicToken(caller));
    EXPECT_TRUE(cookie.ok()) << cookie.status().ToString();
    return cookie.ok() ? *cookie : "";
  }
  // A session for `host`, through a ticket from the domain session `domain`.
  std::string HostSession(const std::string& domain, const std::string& host) {
    Result<std::string> ticket = web_->IssueHostTicket(domain, host);
    EXPECT_TRUE(ticket.ok()) << ticket.status().ToString();
    if (!ticket.ok()) return "";
    Result<std::string> cookie = web_->RedeemHostTicket(*ticket, host);
    EXPECT_TRUE(cookie.ok()) << cookie.status().ToString();
    return cookie.ok() ? *cookie : "";
  }
  std::string SignInTo(const Caller& caller, const std::string& host) {
    return HostSession(SignIn(caller), host);
  }
  std::string Token(const Caller& caller, std::vector<std::string> flags) {
    std::vector<std::string> argv = {"ssh-key", "generate-api-key"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--json");
    Outcome o = Exec(caller, argv);
    EXPECT_TRUE(o.status.ok()) << o.out << o.err;
    return o.status.ok() ? o.Json()["token"].get<std::string>() : "";
  }
  WebSite Site(const std::string& label) {
    Result<WebSite> site = web_->Resolve(label);
    EXPECT_TRUE(site.ok()) << label << ": " << site.status().ToString();
    return site.ok() ? *site : WebSite{};
  }
  Code AdmitCode(const std::string& label, const WebCredentials& creds) {
    return web_->Admit(Site(label), creds).status().code();
  }
  std::string Who(const std::string& label, const WebCredentials& creds) {
    Result<WebVisitor> v = web_->Admit(Site(label), creds);
    EXPECT_TRUE(v.ok()) << label << ": " << v.status().ToString();
    return v.ok() ? v->who : "";
  }
  std::string AddLink(const std::string& vm = "web-one") {
    Outcome o = Exec(Alice(), {"share", "add-link", vm, "--json"});
    EXPECT_TRUE(o.status.ok()) << o.err;
    return o.Json()["token"];
  }

  TokenSigner signer_ = TokenSigner::FromSecret(std::string(32, 's')).value();
  std::unique_ptr<WebAccess> web_;
};

TEST_F(WebAccessTest, ResolvesRouteAndPortHosts) {
  WebSite s = Site("web-one");
  EXPECT_EQ(s.vm_name, "web-one");
  EXPECT_EQ(s.vm_id, IdOf("web-one"));
  EXPECT_EQ(s.port, 8000);
  EXPECT_FALSE(s.owner_only);
  Run(Alice(), {"share", "port", "web-one", "3000"});
  EXPECT_EQ(Site("web-one").port, 3000);
  EXPECT_EQ(Site("Web-One").vm_name, "web-one");

  s = Site("web-one-p4000");
  EXPECT_EQ(s.vm_name, "web-one");
  EXPECT_EQ(s.port, 4000);
  EXPECT_TRUE(s.owner_only);
  EXPECT_EQ(Site("web-one-p3000").port, 3000);
  EXPECT_EQ(Site("web-one-p9999").port, 9999);
  for (const char* label : {"web-one-p80", "web-one-p2999", "web-one-p10000", "web-one-p03000",
                            "web-one-p00000000000000000000003000", "nosuch", "nosuch-p3000"}) {
    EXPECT_EQ(web_->Resolve(label).status().code(), Code::kNotFound) << label;
  }
  for (const char* label : {"", "a.b", "bad_label", "x y", "ünï"}) {
    EXPECT_EQ(web_->Resolve(label).status().code(), Code::kInvalidArgument) << label;
  }
  EXPECT_EQ(web_->Resolve(std::string(64, 'a')).status().code(), Code::kInvalidArgument);
}

TEST_F(WebAccessTest, NoVmNameLooksLikeAPortHost) {
  // The name rule keeps "-pDIGITS" off the end of VM names, so a port host is never a VM's
  // own name, and nobody's "web-one-p5000" can take alice's port host.
  Outcome o = Exec(Bob(), {"new", "--name", "web-one-p5000"});
  EXPECT_EQ(o.status.code(), Code::kInvalidArgument) << o.err;
  WebSite s = Site("web-one-p5000");
  EXPECT_EQ(s.vm_name, "web-one");
  EXPECT_TRUE(s.owner_only);
  // Names with "-p" elsewhere are names.
  New(Bob(), {"--name", "api-pro"});
  EXPECT_EQ(Site("api-pro").vm_name, "api-pro");
  EXPECT_FALSE(Site("api-pro").owner_only);
}

TEST_F(WebAccessTest, AnonymousVisitorsMustSignIn) {
  Result<WebVisitor> v = web_->Admit(Site("web-one"), {});
  EXPECT_EQ(v.status().code(), Code::kUnauthenticated);
  EXPECT_TRUE(Has(v.status().message(), "ssh -p 2222 warren.test browser")) << v.status().message();
  EXPECT_EQ(AdmitCode("web-one", Session("made-up")), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one", Bearer("wr1.bogus.bogus")), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one", Link("made-up")), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, TheOwnerBySessionOnItsOwnHostOnly) {
  const std::string domain = SignIn(Alice());
  EXPECT_EQ(web_->SessionVisitor(domain, kDomain)->who, "user:alice");
  // The domain's session is not the VM host's.
  EXPECT_EQ(AdmitCode("web-one", Session(domain)), Code::kUnauthenticated);
  const std::string vm_cookie = HostSession(domain, kWebOne);
  EXPECT_EQ(Who("web-one", Session(vm_cookie)), "user:alice");
  // Nor is one VM host's session another's, or a port host's, or the domain's.
  New(Alice(), {"--name", "web-two"});
  EXPECT_EQ(AdmitCode("web-two", Session(vm_cookie)), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one-p3000", Session(vm_cookie)), Code::kUnauthenticated);
  EXPECT_EQ(web_->SessionVisitor(vm_cookie, kDomain).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(web_->SessionVisitor(vm_cookie, kWebOne)->who, "user:alice");
  // The port host has its own.
  const std::string port_cookie = HostSession(domain, "web-one-p3000.warren.localhost");
  EXPECT_EQ(Who("web-one-p3000", Session(port_cookie)), "user:alice");
}

TEST_F(WebAccessTest, SharedUsersSeeTheRoutePortNotThePortHosts) {
  const std::string bob = SignInTo(Bob(), kWebOne);
  Result<WebVisitor> v = web_->Admit(Site("web-one"), Session(bob));
  EXPECT_EQ(v.status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(Has(v.status().message(), "signed in as bob")) << v.status().message();

  Run(Alice(), {"share", "add", "web-one", "bob"});
  EXPECT_EQ(Who("web-one", Session(bob)), "user:bob");
  const std::string bob_port = SignInTo(Bob(), "web-one-p3000.warren.localhost");
  EXPECT_EQ(AdmitCode("web-one-p3000", Session(bob_port)), Code::kPermissionDenied);

  Run(Alice(), {"share", "remove", "web-one", "bob"});
  EXPECT_EQ(AdmitCode("web-one", Session(bob)), Code::kPermissionDenied);
}

TEST_F(WebAccessTest, PublicAndPrivateTakeEffectAtOnce) {
  Run(Alice(), {"share", "set-public", "web-one"});
  EXPECT_EQ(Who("web-one", {}), "public");
  // A signed-in visitor it is not shared with is let in as the public.
  EXPECT_EQ(Who("web-one", Session(SignInTo(Bob(), kWebOne))), "public");
  EXPECT_EQ(AdmitCode("web-one-p3000", {}), Code::kUnauthenticated);  // ports stay the owner's
  Run(Alice(), {"share", "set-private", "web-one"});
  EXPECT_EQ(AdmitCode("web-one", {}), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, ShareLinksWorkUntilRemovedAndOnlyForTheirVm) {
  const std::string token = AddLink();
  const std::string who = Who("web-one", Link(token));
  ASSERT_TRUE(who.starts_with("link:")) << who;
  EXPECT_EQ(AdmitCode("web-one-p3000", Link(token)), Code::kUnauthenticated);
  New(Alice(), {"--name", "web-two"});
  EXPECT_EQ(AdmitCode("web-two", Link(token)), Code::kUnauthenticated);

  Run(Alice(), {"share", "remove-link", "web-one", who.substr(5)});
  EXPECT_EQ(AdmitCode("web-one", Link(token)), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, LinkUsesAreCountedInBatches) {
  const std::string token = AddLink();
  EXPECT_FALSE(Who("web-one", Link(token)).empty());  // the first use is written at once
  auto uses = [&] {
    Outcome o = Exec(Alice(), {"share", "show", "web-one", "--json"});
    return o.Json()["links"][0];
  };
  EXPECT_EQ(uses()["use_count"], 1);
  EXPECT_EQ(uses()["last_used_at"], kStart);
  for (int i = 0; i < 5; ++i) Who("web-one", Link(token));
  EXPECT_EQ(uses()["use_count"], 1);  // within kShareLinkWriteSeconds: held
  clock_.now += kShareLinkWriteSeconds;
  Who("web-one", Link(token));
  EXPECT_EQ(uses()["use_count"], 7);
  EXPECT_EQ(uses()["last_used_at"], kStart + kShareLinkWriteSeconds);
  Who("web-one", Link(token));
  web_->FlushLinkUses();
  EXPECT_EQ(uses()["use_count"], 8);
}

TEST_F(WebAccessTest, OwnerOnlyPortsWhateverIsShared) {
  Run(Alice(), {"share", "set-public", "web-one"});
  Run(Alice(), {"share", "add", "web-one", "bob"});
  const std::string token = AddLink();
  EXPECT_EQ(AdmitCode("web-one-p4000", {}), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one-p4000", Link(token)), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one-p4000", Session(SignInTo(Bob(), "web-one-p4000.warren.localhost"))),
            Code::kPermissionDenied);
  EXPECT_EQ(Who("web-one-p4000", Session(SignInTo(Alice(), "web-one-p4000.warren.localhost"))),
            "user:alice");
  EXPECT_EQ(Who("web-one-p4000", Bearer(Token(Alice(), {"--label", "owner"}))), "user:alice");
}

TEST_F(WebAccessTest, BearerTokensAsExecChecksThem) {
  const std::string token = Token(Alice(), {"--label", "agent"});
  EXPECT_EQ(Who("web-one", Bearer(token)), "user:alice");
  // --cmds play no part in viewing a page.
  EXPECT_EQ(Who("web-one", Bearer(Token(Alice(), {"--label", "ls", "--cmds", "ls"}))),
            "user:alice");
  // A token limited to a tag the VM lacks is not its owner.
  const std::string ci = Token(Alice(), {"--label", "citok", "--tag", "ci"});
  EXPECT_EQ(AdmitCode("web-one", Bearer(ci)), Code::kPermissionDenied);
  Run(Alice(), {"tag", "web-one", "ci"});
  EXPECT_EQ(Who("web-one", Bearer(ci)), "user:alice");
  // Nor is it anyone else's shared user: bob's tag-limited token does not reach alice's VM.
  Run(Alice(), {"share", "add", "web-one", "bob"});
  EXPECT_EQ(Who("web-one", Bearer(Token(Bob(), {"--label", "bob-token"}))), "user:bob");
  EXPECT_EQ(AdmitCode("web-one", Bearer(Token(Bob(), {"--label", "bt", "--tag", "ci"}))),
            Code::kPermissionDenied);
  // Revoked: its label removed.
  Run(Alice(), {"ssh-key", "remove", "agent"});
  EXPECT_EQ(AdmitCode("web-one", Bearer(token)), Code::kUnauthenticated);
  // Expired.
  const std::string brief = Token(Alice(), {"--label", "brief", "--exp", "1h"});
  EXPECT_EQ(Who("web-one", Bearer(brief)), "user:alice");
  clock_.now += 3600;
  EXPECT_EQ(AdmitCode("web-one", Bearer(brief)), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, SessionsKeepTheLimitsOfTheirCredential) {
  // Alice's key limited to the tag "ci" signs in: its session sees only ci's VMs.
  const std::string ci = SignInTo(AliceCi(), kWebOne);
  EXPECT_EQ(AdmitCode("web-one", Session(ci)), Code::kPermissionDenied);
  Run(Alice(), {"tag", "web-one", "ci"});
  EXPECT_EQ(Who("web-one", Session(ci)), "user:alice");
  // A session from a token keeps the token's signed limits.
  const std::string token = Token(Alice(), {"--label", "t", "--tag", "other"});
  Result<Caller> caller = interpreter_->CallerForToken(token, "exec");
  ASSERT_TRUE(caller.ok());
  const std::string from_token = SignInTo(*caller, kWebOne);
  EXPECT_EQ(AdmitCode("web-one", Session(from_token)), Code::kPermissionDenied);
  // Removing the label ends the session.
  Run(Alice(), {"ssh-key", "remove", "t"});
  EXPECT_EQ(web_->SessionVisitor(from_token, kWebOne).status().code(), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, RemovingTheKeyEndsItsSessionsEvenIfAddedBack) {
  const std::string domain = SignIn(AliceCi());
  const std::string vm = HostSession(domain, kWebOne);
  Run(Alice(), {"ssh-key", "remove", "ci"});
  EXPECT_EQ(web_->SessionVisitor(domain, kDomain).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one", Session(vm)), Code::kUnauthenticated);
  EXPECT_EQ(web_->IssueHostTicket(domain, kWebOne).status().code(), Code::kUnauthenticated);
  clock_.now += 10;
  Scope scope;
  scope.tag = "ci";
  SshKey again = KeyRecord(kAliceCiKey, "alice", "ci", scope);
  again.added_at = clock_.now;
  ASSERT_TRUE(store_->AddKey(again).ok());
  EXPECT_EQ(web_->SessionVisitor(domain, kDomain).status().code(), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, MagicLinksWorkOnceAndExpire) {
  const std::string token = MagicToken(Alice());
  ASSERT_TRUE(web_->RedeemMagicLink(token).ok());
  Result<std::string> again = web_->RedeemMagicLink(token);
  EXPECT_EQ(again.status().code(), Code::kUnauthenticated);
  EXPECT_TRUE(Has(again.status().message(), "browser")) << again.status().message();

  const std::string late = MagicToken(Alice());
  clock_.now += kMagicLinkSeconds;
  EXPECT_EQ(web_->RedeemMagicLink(late).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(web_->RedeemMagicLink("").status().code(), Code::kUnauthenticated);
  EXPECT_EQ(web_->RedeemMagicLink(std::string(10000, 'x')).status().code(), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, ConcurrentRedeemsHaveExactlyOneWinner) {
  const std::string token = MagicToken(Alice());
  std::atomic<int> wins{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      Result<std::string> c = web_->RedeemMagicLink(token);
      if (c.ok()) ++wins;
      if (c.status().code() == Code::kUnauthenticated) ++refused;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(refused.load(), 7);

  const std::string domain = SignIn(Alice());
  Result<std::string> ticket = web_->IssueHostTicket(domain, kWebOne);
  ASSERT_TRUE(ticket.ok());
  wins = 0;
  threads.clear();
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (web_->RedeemHostTicket(*ticket, kWebOne).ok()) ++wins;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
}

TEST_F(WebAccessTest, TicketsAreForOneHostOnceAndBriefly) {
  const std::string domain = SignIn(Alice());
  // Only from a domain session, only for a host under the domain.
  const std::string vm_cookie = HostSession(domain, kWebOne);
  EXPECT_EQ(web_->IssueHostTicket(vm_cookie, "web-two.warren.localhost").status().code(),
            Code::kUnauthenticated);
  for (const char* host : {"evil.example", "warren.localhost", "a.b.warren.localhost",
                           "xwarren.localhost", ".warren.localhost"}) {
    EXPECT_EQ(web_->IssueHostTicket(domain, host).status().code(), Code::kInvalidArgument) << host;
  }
  Result<std::string> ticket = web_->IssueHostTicket(domain, kWebOne);
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(web_->RedeemHostTicket(*ticket, "web-two.warren.localhost").status().code(),
            Code::kUnauthenticated);
  EXPECT_EQ(web_->RedeemHostTicket(*ticket, kWebOne).status().code(), Code::kUnauthenticated);

  ticket = web_->IssueHostTicket(domain, kWebOne);
  clock_.now += kHostTicketSeconds;
  EXPECT_EQ(web_->RedeemHostTicket(*ticket, kWebOne).status().code(), Code::kUnauthenticated);
  // Upper case is the same host.
  ticket = web_->IssueHostTicket(domain, "WEB-ONE.warren.localhost");
  ASSERT_TRUE(ticket.ok());
  Result<std::string> c = web_->RedeemHostTicket(*ticket, kWebOne);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Who("web-one", Session(*c)), "user:alice");
}

TEST_F(WebAccessTest, SessionsExpireAndSigningOutEndsTheSignIn) {
  const std::string domain = SignIn(Alice());
  const std::string vm = HostSession(domain, kWebOne);
  const std::string other = SignInTo(Alice(), kWebOne);  // another sign-in, untouched
  ASSERT_TRUE(web_->EndSession(vm).ok());
  EXPECT_EQ(web_->SessionVisitor(domain, kDomain).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(AdmitCode("web-one", Session(vm)), Code::kUnauthenticated);
  EXPECT_EQ(Who("web-one", Session(other)), "user:alice");
  EXPECT_TRUE(web_->EndSession("never-was").ok());

  clock_.now += kBrowserSessionSeconds;
  EXPECT_EQ(AdmitCode("web-one", Session(other)), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, OpenReachesTheSitePortOfARunningVm) {
  WebSite site = Site("web-one-p3000");
  Result<std::shared_ptr<GuestPipe>> pipe = web_->Open(site, {"user:alice"}, [] {});
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  std::vector<GuestChannelRequest> requests = guests_.channel_requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.back().kind, GuestChannelRequest::Kind::kTcp);
  EXPECT_EQ(requests.back().port, 3000);

  Run(Alice(), {"stop", "web-one"});
  pipe = web_->Open(Site("web-one"), {"public"}, [] {});
  EXPECT_EQ(pipe.status().code(), Code::kUnavailable);
  EXPECT_EQ(pipe.status().message(),
            "web-one is stopped; start it with: ssh -p 2222 warren.test start web-one");
}

TEST_F(WebAccessTest, RenameMovesTheHostAndKeepsTheShares) {
  Run(Alice(), {"share", "set-public", "web-one"});
  const std::string old_cookie = SignInTo(Alice(), kWebOne);
  Run(Alice(), {"rename", "web-one", "web-new"});
  EXPECT_EQ(web_->Resolve("web-one").status().code(), Code::kNotFound);
  EXPECT_EQ(Who("web-new", {}), "public");
  // The old host's cookie is not the new host's.
  Run(Alice(), {"share", "set-private", "web-new"});
  EXPECT_EQ(AdmitCode("web-new", Session(old_cookie)), Code::kUnauthenticated);
}

TEST_F(WebAccessTest, RemovedVmsAndUsers) {
  Run(Alice(), {"share", "add", "web-one", "bob"});
  const std::string bob = SignInTo(Bob(), kWebOne);
  EXPECT_EQ(Who("web-one", Session(bob)), "user:bob");
  Run(Root(), {"user", "rm", "bob"});
  EXPECT_EQ(AdmitCode("web-one", Session(bob)), Code::kUnauthenticated);

  WebSite site = Site("web-one");
  Run(Alice(), {"rm", "web-one"});
  EXPECT_EQ(web_->Admit(site, {}).status().code(), Code::kNotFound);
  EXPECT_EQ(web_->Open(site, {"user:alice"}, [] {}).status().code(), Code::kNotFound);
}

TEST_F(WebAccessTest, ARestartLosesNothing) {
  Run(Alice(), {"share", "add", "web-one", "bob"});
  const std::string token = AddLink();
  const std::string domain = SignIn(Alice());
  const std::string vm = HostSession(domain, kWebOne);
  const std::string pending = MagicToken(Alice());
  Restart();
  EXPECT_EQ(Who("web-one", Session(vm)), "user:alice");
  EXPECT_TRUE(Who("web-one", Link(token)).starts_with("link:"));
  EXPECT_TRUE(web_->IssueHostTicket(domain, kWebOne).ok());
  EXPECT_TRUE(web_->RedeemMagicLink(pending).ok());
}

}  // namespace
}  // namespace warren::vmtest
