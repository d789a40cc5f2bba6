// OAuth sign-in: the pure rules (keys/oauth.h, bridge/oauth/oauth_web.h), the token's
// audience (keys/token.h), the state machine of pending sign-ins, codes and refresh tokens
// in the real LmdbStore (in a temp dir), its fair shares under floods (per-source pending
// caps, client expiry and eviction), and the handler's per-source rate limits.
#include <lmdb.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bridge/oauth/oauth_handler.h"
#include "bridge/oauth/oauth_web.h"
#include "keys/lmdb_store.h"
#include "keys/oauth.h"
#include "keys/token.h"
#include "lobby/base/clock.h"

namespace warren {
namespace {

// ---- Pure rules

TEST(OAuthRules, PkceS256MatchesAnIndependentlyComputedPair) {
  // Python: base64.urlsafe_b64encode(sha256(verifier)).rstrip("=")
  const std::string verifier = "dBjftJeZ4CVP-mJ92K9ZJ8DE8jw69n0xjNH2R2VK4zQ";
  const std::string challenge = "YBpy_QcixV7HxitFqYXisSjeNB-vQAW11tNTrf5axkY";
  EXPECT_TRUE(VerifyPkceS256(verifier, challenge));
  EXPECT_TRUE(ValidateCodeChallenge(challenge).ok());
  // One character off on either side fails; so does "plain" (verifier == challenge).
  std::string other = verifier;
  other.back() = 'R';
  EXPECT_FALSE(VerifyPkceS256(other, challenge));
  EXPECT_FALSE(VerifyPkceS256(verifier, challenge.substr(0, 42) + "Z"));
  EXPECT_FALSE(VerifyPkceS256(challenge, challenge));
  // Verifier length and alphabet (RFC 7636 §4.1).
  EXPECT_FALSE(VerifyPkceS256("short", challenge));
  EXPECT_FALSE(VerifyPkceS256(std::string(129, 'a'), challenge));
  EXPECT_FALSE(VerifyPkceS256(std::string(43, '+'), challenge));
  EXPECT_FALSE(ValidateCodeChallenge("abc").ok());
  EXPECT_FALSE(ValidateCodeChallenge(std::string(43, '=')).ok());
}

TEST(OAuthRules, RedirectUris) {
  for (const char* ok :
       {"http://127.0.0.1:33418/callback", "http://localhost/cb", "http://[::1]:8080/x?y=1",
        "https://app.example/oauth/cb", "HTTP://LOCALHOST:1/cb", "https://app.example:8443/cb",
        "http://127.0.0.1:65535/cb", "https://[2001:db8::1]/cb"}) {
    EXPECT_TRUE(ValidateRedirectUri(ok).ok()) << ok;
  }
  for (const char* bad : {"",
                          "http://evil.example/cb",
                          "http://127.0.0.2/cb",
                          "http://localhost.evil.example/cb",
                          "https://app.example/cb#frag",
                          "https://user@app.example/cb",
                          "javascript:alert(1)",
                          "custom://cb",
                          "https:///nohost",
                          "https://app.example/a b",
                          "https://app.example/\"><script>",
                          "http://127.0.0.1:abc/cb",
                          "http://127.0.0.1:/cb",
                          "http://127.0.0.1:99999/cb",
                          "http://[::1]junk/cb",
                          "http://[::1/cb",
                          "http://[::1]:80x/cb",
                          "https://a_b.example/cb",
                          "https://app.example:443:1/cb",
                          "https://[evil.example]/cb",
                          "https://:443/cb"}) {
    EXPECT_FALSE(ValidateRedirectUri(bad).ok()) << bad;
  }
  EXPECT_FALSE(
      ValidateRedirectUri("https://a.example/" + std::string(kMaxRedirectUriBytes, 'a')).ok());
  EXPECT_EQ(UriHost("http://127.0.0.1:33418/callback?x"), "127.0.0.1:33418");
  EXPECT_EQ(UriHost("nothing"), "");
}

TEST(OAuthRules, ClientNames) {
  EXPECT_TRUE(ValidateClientName("Claude Code").ok());
  EXPECT_TRUE(ValidateClientName("Cursor — ünïcode").ok());
  EXPECT_FALSE(ValidateClientName("").ok());
  EXPECT_FALSE(ValidateClientName(std::string(kMaxClientNameBytes + 1, 'a')).ok());
  EXPECT_FALSE(ValidateClientName("evil\nname").ok());
}

TEST(OAuthRules, UserCodesAreShortRandomAndTypable) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    Result<std::string> code = NewUserCode();
    ASSERT_TRUE(code.ok());
    ASSERT_EQ(code->size(), 9u);
    EXPECT_EQ((*code)[4], '-');
    Result<std::string> normal = NormalizeUserCode(*code);
    ASSERT_TRUE(normal.ok()) << *code;
    EXPECT_EQ(normal->size(), 8u);
    for (char c : *normal) EXPECT_NE(kUserCodeAlphabet.find(c), std::string_view::npos);
    seen.insert(*normal);
  }
  EXPECT_GT(seen.size(), 195u);  // ~39 bits each: repeats would mean a broken generator
  // Typing variations all name the same code.
  EXPECT_EQ(NormalizeUserCode("kq7m-x2pd").value(), "KQ7MX2PD");
  EXPECT_EQ(NormalizeUserCode("KQ7M X2PD").value(), "KQ7MX2PD");
  EXPECT_FALSE(NormalizeUserCode("KQ7M-X2P").ok());    // too short
  EXPECT_FALSE(NormalizeUserCode("KQ7M-X2P0").ok());   // 0 is not in the alphabet
  EXPECT_FALSE(NormalizeUserCode("KQ7M-X2PDD").ok());  // too long
}

TEST(OAuthRules, SecretsAreHashedNotStored) {
  EXPECT_EQ(HashSecret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // FIPS 180-2
  Result<std::string> a = NewSecret();
  Result<std::string> b = NewSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->size(), 43u);  // 32 bytes, base64url unpadded
  Result<std::string> id = NewClientId();
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(id->starts_with("wc-"));
  EXPECT_EQ(id->size(), 35u);
}

// ---- Web helpers

TEST(OAuthWeb, FormsAndQueries) {
  auto f = oauth::ParseForm("a=1&b=x+y%2Fz&empty=&flag");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->at("a"), "1");
  EXPECT_EQ(f->at("b"), "x y/z");
  EXPECT_EQ(f->at("empty"), "");
  EXPECT_EQ(f->at("flag"), "");
  EXPECT_FALSE(oauth::ParseForm("a=%4").ok());
  EXPECT_FALSE(oauth::ParseForm("a=%zz").ok());
  EXPECT_FALSE(oauth::ParseForm("code=1&code=2").ok());  // RFC 6749 §3.1
  EXPECT_EQ(oauth::AppendQuery("http://l/cb", {{"code", "a b"}, {"state", "s&t"}}),
            "http://l/cb?code=a%20b&state=s%26t");
  EXPECT_EQ(oauth::AppendQuery("http://l/cb?x=1", {{"code", "c"}}), "http://l/cb?x=1&code=c");
  EXPECT_EQ(MarkupEscape("<b a=\"'&'\">"), "&lt;b a=&quot;&#39;&amp;&#39;&quot;&gt;");
}

TEST(OAuthWeb, BaseUrlAndResources) {
  EXPECT_EQ(oauth::NormalizeBaseUrl("https://warren.example/").value(), "https://warren.example");
  EXPECT_EQ(oauth::NormalizeBaseUrl("http://127.0.0.1:8080").value(), "http://127.0.0.1:8080");
  EXPECT_FALSE(oauth::NormalizeBaseUrl("ftp://x").ok());
  EXPECT_FALSE(oauth::NormalizeBaseUrl("https://x/path").ok());
  EXPECT_FALSE(oauth::NormalizeBaseUrl("https://").ok());

  oauth::Urls urls{"https://w.example"};
  EXPECT_EQ(
      oauth::WwwAuthenticate(urls),
      "Bearer resource_metadata=\"https://w.example/.well-known/oauth-protected-resource/mcp\"");
  for (const char* same : {"", "https://w.example", "https://w.example/", "https://w.example/mcp",
                           "https://w.example/mcp/claude", "https://w.example/mcp/openai"}) {
    EXPECT_EQ(oauth::CanonicalResource(urls, same).value(), "https://w.example/mcp") << same;
  }
  for (const char* other : {"https://evil.example/mcp", "https://w.example/mcpx",
                            "http://w.example/mcp", "https://w.example/exec"}) {
    EXPECT_FALSE(oauth::CanonicalResource(urls, other).ok()) << other;
  }
}

TEST(OAuthWeb, SignInPageIsSelfContainedAndEscaped) {
  oauth::SignInPage page;
  page.user_code = "KQ7M-X2PD";
  page.ssh_command = "ssh -p 2222 localhost authorize KQ7M-X2PD";
  page.client_name = "<script>alert(1)</script>";
  page.redirect_host = "127.0.0.1:5555";
  page.page_secret = "sec\"ret</script>";
  page.nonce = "N0NCE";
  std::string html = oauth::RenderSignInPage(page);
  EXPECT_NE(html.find(">KQ7M-X2PD<"), std::string::npos);
  EXPECT_NE(html.find("ssh -p 2222 localhost authorize KQ7M-X2PD"), std::string::npos);
  EXPECT_NE(html.find("name=\"viewport\""), std::string::npos);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  // The secret is a JSON string inside the script; "</script>" in it cannot close the tag.
  EXPECT_EQ(html.find("</script>\""), std::string::npos);
  EXPECT_NE(html.find("<script nonce=\"N0NCE\">"), std::string::npos);
  EXPECT_NE(html.find("<style nonce=\"N0NCE\">"), std::string::npos);
  // No external assets.
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  std::string csp = oauth::PageCsp("N0NCE");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'nonce-N0NCE'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos);
}

// ---- Token audience

TEST(OAuthToken, AudienceIsSignedAndOldTokensStayValid) {
  Result<TokenSigner> signer = TokenSigner::FromSecret(std::string(32, '3'));
  ASSERT_TRUE(signer.ok());
  TokenClaims plain{"alice", std::string(32, 'a'), Scope{}, 1000, ""};
  TokenClaims bound = plain;
  bound.audience = "https://w.example/mcp";
  Result<std::string> t1 = signer->Sign(plain);
  Result<std::string> t2 = signer->Sign(bound);
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_EQ(signer->Verify(*t1).value(), plain);
  EXPECT_EQ(signer->Verify(*t2).value(), bound);
  // A plain token carries no "a" at all, as tokens did before audiences existed.
  EXPECT_EQ(t1->find("\"a\""), std::string::npos);
}

// ---- The store's state machine

class OAuthStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("oauth-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    auto opened = LmdbStore::Open(dir_.string());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(store_->CreateUser(User{"alice", false, 1}, {}).ok());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  OAuthRequest Request(const std::string& secret, const std::string& user_code, int64_t now) {
    OAuthRequest r;
    r.id = HashSecret(secret);
    r.user_code_hash = HashSecret(user_code);
    r.client_id = "wc-1";
    r.redirect_uri = "http://127.0.0.1:1/cb";
    r.code_challenge = std::string(43, 'c');
    r.resource = "https://w.example/mcp";
    r.created_at = now;
    r.expires_at = now + 600;
    return r;
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(OAuthStoreTest, ClientsPersistAcrossReopen) {
  OAuthClient c{"wc-1", "Claude Code", {"http://127.0.0.1:1/cb"}, 5, ""};
  ASSERT_TRUE(store_->CreateOAuthClient(c).ok());
  EXPECT_EQ(store_->CreateOAuthClient(c).code(), Code::kConflict);
  store_.reset();
  store_ = LmdbStore::Open(dir_.string()).value();
  Result<OAuthClient> back = store_->GetOAuthClient("wc-1");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, "Claude Code");
  EXPECT_EQ(back->redirect_uris, c.redirect_uris);
  EXPECT_EQ(store_->GetOAuthClient("wc-2").status().code(), Code::kNotFound);
}

TEST_F(OAuthStoreTest, RequestsAreFoundByHashesAndCodesIndexed) {
  ASSERT_TRUE(store_->CreateOAuthRequest(Request("page", "CODE1", 100), 100).ok());
  EXPECT_EQ(store_->CreateOAuthRequest(Request("page2", "CODE1", 100), 100).code(),
            Code::kConflict);  // one user code names one sign-in
  EXPECT_EQ(store_->FindOAuthRequestByUserCode(HashSecret("CODE1"))->id, HashSecret("page"));
  EXPECT_EQ(store_->FindOAuthRequestByUserCode(HashSecret("CODE2")).status().code(),
            Code::kNotFound);
  ASSERT_TRUE(store_
                  ->UpdateOAuthRequest(HashSecret("page"),
                                       [](OAuthRequest& r) {
                                         r.phase = OAuthPhase::kCodeIssued;
                                         r.code_hash = HashSecret("authcode");
                                         r.code_expires_at = 160;
                                         return Status::Ok();
                                       })
                  .ok());
  Result<OAuthRequest> by_code = store_->FindOAuthRequestByCode(HashSecret("authcode"));
  ASSERT_TRUE(by_code.ok());
  EXPECT_EQ(by_code->phase, OAuthPhase::kCodeIssued);
  // The id and user code are fixed; a failing change writes nothing.
  EXPECT_EQ(store_
                ->UpdateOAuthRequest(HashSecret("page"),
                                     [](OAuthRequest& r) {
                                       r.id = "x";
                                       return Status::Ok();
                                     })
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_
                ->UpdateOAuthRequest(HashSecret("page"),
                                     [](OAuthRequest& r) {
                                       r.phase = OAuthPhase::kRedeemed;
                                       return Conflict("no");
                                     })
                .code(),
            Code::kConflict);
  EXPECT_EQ(store_->GetOAuthRequest(HashSecret("page"))->phase, OAuthPhase::kCodeIssued);
}

TEST_F(OAuthStoreTest, ExpiredRequestsArePruned) {
  ASSERT_TRUE(store_->CreateOAuthRequest(Request("old", "OLD", 0), 0).ok());
  // At t=601 the old one has expired: the next creation drops it and its user code.
  ASSERT_TRUE(store_->CreateOAuthRequest(Request("new", "NEW", 601), 601).ok());
  EXPECT_EQ(store_->GetOAuthRequest(HashSecret("old")).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->FindOAuthRequestByUserCode(HashSecret("OLD")).status().code(), Code::kNotFound);
}

TEST_F(OAuthStoreTest, PendingSignInsAreCappedPerSource) {
  auto from = [&](const std::string& source, const std::string& name) {
    OAuthRequest r = Request(name, "U-" + name, 10);
    r.source = source;
    return store_->CreateOAuthRequest(r, 10);
  };
  for (size_t i = 0; i < kMaxPendingOAuthRequestsPerSource; ++i) {
    ASSERT_TRUE(from("192.0.2.1", "a" + std::to_string(i)).ok()) << i;
  }
  Status over = from("192.0.2.1", "a-over");
  EXPECT_EQ(over.code(), Code::kLimitExceeded);
  EXPECT_NE(over.message().find("your address"), std::string::npos) << over.message();
  EXPECT_TRUE(from("192.0.2.2", "b").ok());  // another source is not held up
  // An approved one no longer counts as pending.
  ASSERT_TRUE(store_
                  ->UpdateOAuthRequest(HashSecret("a0"),
                                       [](OAuthRequest& r) {
                                         r.phase = OAuthPhase::kApproved;
                                         return Status::Ok();
                                       })
                  .ok());
  EXPECT_TRUE(from("192.0.2.1", "a-again").ok());
}

// The issue's case: 1,000 pending sign-ins used to block every sign-in for 10 minutes. Now
// a full table makes room by dropping the oldest pending sign-in of the source that holds
// the most, so a flood evicts itself and a lone sign-in from elsewhere gets in.
TEST_F(OAuthStoreTest, AFullTableEvictsFromTheSourceHoldingTheMost) {
  // A cap of 100 (the product's is kMaxPendingOAuthRequests): every create scans the table,
  // so filling 1,000 took minutes in the unoptimized and sanitizer builds.
  constexpr size_t kCap = 100;
  store_.reset();
  LmdbStore::Options options;
  options.max_pending_oauth_requests = kCap;
  auto reopened = LmdbStore::Open(dir_.string(), options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(reopened).value();
  std::vector<std::string> flood;
  auto create = [&](const std::string& source, const std::string& name, int64_t at) {
    OAuthRequest r = Request(name, "U-" + name, at);
    r.source = source;
    return store_->CreateOAuthRequest(r, at);
  };
  ASSERT_TRUE(create("198.51.100.7", "lone", 1).ok());
  for (size_t i = 1; i < kCap; ++i) {
    const std::string name = "f" + std::to_string(i);
    // Ten per source: each flooding address stays within its own cap.
    ASSERT_TRUE(
        create("203.0.113." + std::to_string(i / kMaxPendingOAuthRequestsPerSource), name, 10).ok())
        << i;
    flood.push_back(name);
  }
  ASSERT_TRUE(create("198.51.100.8", "newcomer", 20).ok());
  EXPECT_TRUE(store_->GetOAuthRequest(HashSecret("lone")).ok());
  EXPECT_TRUE(store_->GetOAuthRequest(HashSecret("newcomer")).ok());
  size_t gone = 0;
  for (const std::string& name : flood) {
    gone += store_->GetOAuthRequest(HashSecret(name)).ok() ? 0 : 1;
  }
  EXPECT_EQ(gone, 1u);
}

TEST_F(OAuthStoreTest, RefreshTokensRotateAndAReplayRevokesTheSignIn) {
  const std::string label_id(32, 'b');
  ASSERT_TRUE(
      store_->RecordToken("alice", "oauth-claude-1", label_id, IssuedToken{Scope{}, 10}, 10).ok());
  OAuthRefresh r0{HashSecret("r0"),        label_id, "alice", "wc-1",
                  "https://w.example/mcp", Scope{},  10,      false};
  ASSERT_TRUE(store_->PutOAuthRefresh(r0).ok());

  // Another client cannot use it, and that attempt changes nothing.
  EXPECT_EQ(
      store_->RotateOAuthRefresh(HashSecret("r0"), "wc-2", HashSecret("r1"), 20).status().code(),
      Code::kInvalidArgument);
  Result<OAuthRefresh> r1 =
      store_->RotateOAuthRefresh(HashSecret("r0"), "wc-1", HashSecret("r1"), 20);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->label_id, label_id);
  EXPECT_EQ(r1->hash, HashSecret("r1"));
  Result<OAuthRefresh> r2 =
      store_->RotateOAuthRefresh(HashSecret("r1"), "wc-1", HashSecret("r2"), 30);
  ASSERT_TRUE(r2.ok());

  // r0 again: a replay. The label goes (every access token of it stops working) and the
  // current refresh token r2 with it.
  EXPECT_EQ(
      store_->RotateOAuthRefresh(HashSecret("r0"), "wc-1", HashSecret("r3"), 40).status().code(),
      Code::kPermissionDenied);
  EXPECT_EQ(store_->GetTokenLabel(label_id).status().code(), Code::kNotFound);
  EXPECT_EQ(
      store_->RotateOAuthRefresh(HashSecret("r2"), "wc-1", HashSecret("r4"), 50).status().code(),
      Code::kNotFound);
  EXPECT_EQ(
      store_->RotateOAuthRefresh(HashSecret("nope"), "wc-1", HashSecret("r5"), 50).status().code(),
      Code::kNotFound);
}

TEST_F(OAuthStoreTest, RemovingTheLabelRevokesRefreshTokens) {
  const std::string label_id(32, 'c');
  ASSERT_TRUE(
      store_->RecordToken("alice", "oauth-x-1", label_id, IssuedToken{Scope{}, 10}, 10).ok());
  ASSERT_TRUE(store_
                  ->PutOAuthRefresh(OAuthRefresh{HashSecret("r"), label_id, "alice", "wc-1", "",
                                                 Scope{}, 10, false})
                  .ok());
  ASSERT_TRUE(store_->RemoveTokenLabel("alice", label_id).ok());
  EXPECT_EQ(
      store_->RotateOAuthRefresh(HashSecret("r"), "wc-1", HashSecret("r2"), 20).status().code(),
      Code::kNotFound);
}

TEST_F(OAuthStoreTest, ExpiredGrantCannotRefresh) {
  const std::string label_id(32, 'd');
  ASSERT_TRUE(
      store_->RecordToken("alice", "oauth-x-1", label_id, IssuedToken{Scope{}, 10}, 10).ok());
  Scope day;
  day.expires_at = 100;
  ASSERT_TRUE(store_
                  ->PutOAuthRefresh(
                      OAuthRefresh{HashSecret("r"), label_id, "alice", "wc-1", "", day, 10, false})
                  .ok());
  EXPECT_EQ(
      store_->RotateOAuthRefresh(HashSecret("r"), "wc-1", HashSecret("r2"), 100).status().code(),
      Code::kNotFound);
}

// ---- Clients: expiry, eviction, listing, removal

OAuthClient Client(const std::string& id, int64_t created_at, const std::string& source = "") {
  OAuthClient c{id, "App " + id, {"http://127.0.0.1:1/cb"}, created_at, ""};
  c.source = source;
  return c;
}

TEST(OAuthRules, ClientsExpireUnusedForADayOrIdleForNinetyDays) {
  OAuthClient c = Client("wc-1", 1000);
  EXPECT_FALSE(OAuthClientExpired(c, 1000 + kOAuthUnusedClientSeconds - 1));
  EXPECT_TRUE(OAuthClientExpired(c, 1000 + kOAuthUnusedClientSeconds));
  c.last_used_at = 5000;
  EXPECT_FALSE(OAuthClientExpired(c, 5000 + kOAuthIdleClientSeconds - 1));
  EXPECT_TRUE(OAuthClientExpired(c, 5000 + kOAuthIdleClientSeconds));
}

TEST_F(OAuthStoreTest, UnusedClientsAreRemovedAtTheNextRegistration) {
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-unused", 100)).ok());
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-used", 100)).ok());
  ASSERT_TRUE(store_->MarkOAuthClientUsed("wc-used", 200).ok());
  EXPECT_EQ(store_->GetOAuthClient("wc-used")->last_used_at, 200);
  // Marked at most once a day: the record is not rewritten for every refresh.
  ASSERT_TRUE(store_->MarkOAuthClientUsed("wc-used", 300).ok());
  EXPECT_EQ(store_->GetOAuthClient("wc-used")->last_used_at, 200);
  EXPECT_EQ(store_->MarkOAuthClientUsed("wc-none", 300).code(), Code::kNotFound);

  const int64_t next_day = 100 + kOAuthUnusedClientSeconds;
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-late", next_day)).ok());
  EXPECT_EQ(store_->GetOAuthClient("wc-unused").status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetOAuthClient("wc-used").ok());
  ASSERT_TRUE(store_->MarkOAuthClientUsed("wc-late", next_day).ok());
  // Ninety days without use: gone too.
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-later", 200 + kOAuthIdleClientSeconds)).ok());
  EXPECT_EQ(store_->GetOAuthClient("wc-used").status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetOAuthClient("wc-late").ok());
}

TEST_F(OAuthStoreTest, RemovingAClientSignsOutEverythingSignedInThroughIt) {
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-1", 10, "192.0.2.1")).ok());
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-2", 10)).ok());
  const std::string label_1(32, 'f'), label_2(32, '2');
  ASSERT_TRUE(store_->RecordToken("alice", "oauth-app-1", label_1, IssuedToken{}, 10).ok());
  ASSERT_TRUE(store_->RecordToken("alice", "oauth-app-2", label_2, IssuedToken{}, 10).ok());
  ASSERT_TRUE(store_
                  ->PutOAuthRefresh(
                      OAuthRefresh{HashSecret("r1"), label_1, "alice", "wc-1", "", {}, 10, false})
                  .ok());
  ASSERT_TRUE(store_
                  ->PutOAuthRefresh(
                      OAuthRefresh{HashSecret("r2"), label_2, "alice", "wc-2", "", {}, 10, false})
                  .ok());
  ASSERT_TRUE(store_->CreateOAuthRequest(Request("pending", "PEND", 10), 10).ok());  // wc-1's

  Result<std::vector<OAuthClient>> listed = store_->ListOAuthClients();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, "wc-1");
  EXPECT_EQ((*listed)[0].source, "192.0.2.1");

  Result<OAuthClientRemoval> removed = store_->RemoveOAuthClient("wc-1");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->requests, 1u);
  EXPECT_EQ(removed->refresh_tokens, 1u);
  EXPECT_EQ(removed->token_labels, 1u);
  EXPECT_EQ(store_->GetOAuthClient("wc-1").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetTokenLabel(label_1).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetOAuthRequest(HashSecret("pending")).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->FindOAuthRequestByUserCode(HashSecret("PEND")).status().code(),
            Code::kNotFound);
  // The label's name is free again; the other client's sign-in is untouched.
  EXPECT_TRUE(store_->RecordToken("alice", "oauth-app-1", std::string(32, '4'), {}, 20).ok());
  EXPECT_TRUE(store_->GetTokenLabel(label_2).ok());
  EXPECT_TRUE(store_->RotateOAuthRefresh(HashSecret("r2"), "wc-2", HashSecret("r3"), 20).ok());
  EXPECT_EQ(store_->RemoveOAuthClient("wc-1").status().code(), Code::kNotFound);
}

// Runs `body` in one write transaction on a closed store's LMDB environment, for states
// the API does not make (old schemas, 10,000 registrations in a moment).
void WithRawTxn(const std::filesystem::path& dir, const std::function<void(MDB_txn*)>& body) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  body(txn);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

void PutRaw(MDB_txn* txn, const char* table, std::string key, std::string value) {
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, table, 0, &dbi), 0) << table;
  MDB_val k{key.size(), key.data()};
  MDB_val v{value.size(), value.data()};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
}

// OAuth client records written straight into a closed store (10,000 registrations through
// the API would take a minute).
void PutClientsRaw(const std::filesystem::path& dir, const std::vector<nlohmann::json>& clients) {
  WithRawTxn(dir, [&](MDB_txn* txn) {
    for (const nlohmann::json& c : clients) {
      PutRaw(txn, "oauth_clients", c.at("id").get<std::string>(), c.dump());
    }
  });
}

nlohmann::json RawClient(const std::string& id, int64_t created_at, int64_t last_used_at) {
  return {{"id", id},
          {"name", "App"},
          {"redirect_uris", {"http://127.0.0.1:1/cb"}},
          {"created_at", created_at},
          {"last_used_at", last_used_at}};
}

// The issue's case: 10,000 registrations used to block new MCP apps for good. Now a full
// table evicts the oldest client never used; only a table of clients in use refuses.
TEST_F(OAuthStoreTest, AFullClientTableEvictsTheOldestNeverUsedClient) {
  store_.reset();
  std::vector<nlohmann::json> clients;
  const int64_t now = 1'000'000;
  for (size_t i = 0; i + 2 < kMaxOAuthClients; ++i) {
    clients.push_back(RawClient("wc-used-" + std::to_string(i), now - 100, now - 50));
  }
  clients.push_back(RawClient("wc-unused-old", now - 300, 0));
  clients.push_back(RawClient("wc-unused-new", now - 200, 0));
  PutClientsRaw(dir_, clients);
  store_ = LmdbStore::Open(dir_.string()).value();

  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-newcomer", now)).ok());
  EXPECT_EQ(store_->GetOAuthClient("wc-unused-old").status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetOAuthClient("wc-unused-new").ok());
  EXPECT_TRUE(store_->GetOAuthClient("wc-used-0").ok());
  // Once every client has been used, the table refuses.
  ASSERT_TRUE(store_->MarkOAuthClientUsed("wc-unused-new", now).ok());
  ASSERT_TRUE(store_->MarkOAuthClientUsed("wc-newcomer", now).ok());
  Status full = store_->CreateOAuthClient(Client("wc-refused", now));
  EXPECT_EQ(full.code(), Code::kLimitExceeded);
  EXPECT_NE(full.message().find("oauth clients remove"), std::string::npos) << full.message();
}

TEST_F(OAuthStoreTest, ClientsStoredBeforeUsesWereRecordedAreJudgedByTheirSignIns) {
  store_.reset();
  auto legacy = [](const std::string& id) {
    return nlohmann::json{{"id", id},
                          {"name", "Old"},
                          {"redirect_uris", {"http://127.0.0.1:1/cb"}},
                          {"created_at", 1}};
  };
  PutClientsRaw(dir_, {legacy("wc-signed-in"), legacy("wc-never")});
  store_ = LmdbStore::Open(dir_.string()).value();
  ASSERT_TRUE(store_->RecordToken("alice", "oauth-old-1", std::string(32, '3'), {}, 1).ok());
  ASSERT_TRUE(
      store_
          ->PutOAuthRefresh(OAuthRefresh{
              HashSecret("old"), std::string(32, '3'), "alice", "wc-signed-in", "", {}, 1, false})
          .ok());
  const int64_t later = 10 * kOAuthUnusedClientSeconds;
  ASSERT_TRUE(store_->CreateOAuthClient(Client("wc-new", later)).ok());
  EXPECT_EQ(store_->GetOAuthClient("wc-never").status().code(), Code::kNotFound);
  Result<OAuthClient> kept = store_->GetOAuthClient("wc-signed-in");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->last_used_at, later);
}

// ---- The handler's per-source rate limits

// Records the one answer a handler gives (OAuthHandler answers synchronously).
class CapturedResponse final : public HttpResponder {
 public:
  void Respond(int s, HttpHeaders h, std::string b) override {
    status = s;
    headers = std::move(h);
    body = std::move(b);
  }
  void BeginStream(int s, HttpHeaders h) override { Respond(s, std::move(h), ""); }
  bool Write(std::string_view) override { return false; }
  void End() override {}
  std::shared_ptr<CancelSignal> closed() const override { return closed_; }

  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return "";
  }
  int status = 0;
  HttpHeaders headers;
  std::string body;

 private:
  std::shared_ptr<CancelSignal> closed_ = std::make_shared<CancelSignal>();
};

class FixedClock final : public Clock {
 public:
  int64_t NowUnix() const override { return 1'700'000'000; }
};

class OAuthHandlerLimitsTest : public OAuthStoreTest {
 protected:
  void SetUp() override {
    OAuthStoreTest::SetUp();
    signer_ = std::make_unique<TokenSigner>(TokenSigner::FromSecret(std::string(32, 's')).value());
    OAuthOptions o;
    o.public_url = "http://127.0.0.1:8080";
    o.registrations_per_minute = 5;
    o.sign_ins_per_minute = 100;  // the store's per-source cap is what the test meets
    handler_ = std::make_unique<OAuthHandler>(*store_, *store_, *signer_, clock_, o);
  }
  void TearDown() override {
    handler_.reset();
    OAuthStoreTest::TearDown();
  }

  std::shared_ptr<CapturedResponse> Call(const std::string& method, const std::string& target,
                                         const std::string& source, std::string body = "") {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.path = target.substr(0, target.find('?'));
    req.body = std::move(body);
    req.remote_address = source;
    req.source = source;
    auto res = std::make_shared<CapturedResponse>();
    handler_->Handle(std::move(req), res);
    return res;
  }

  std::shared_ptr<CapturedResponse> Register(const std::string& source) {
    return Call("POST", "/oauth/register", source,
                R"({"client_name":"x","redirect_uris":["http://127.0.0.1:1/cb"]})");
  }

  std::shared_ptr<CapturedResponse> OpenPage(const std::string& client_id,
                                             const std::string& source) {
    return Call("GET",
                "/oauth/authorize?response_type=code&client_id=" + client_id +
                    "&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&code_challenge=" +
                    std::string(43, 'c') + "&code_challenge_method=S256&state=s",
                source);
  }

  FixedClock clock_;
  std::unique_ptr<TokenSigner> signer_;
  std::unique_ptr<OAuthHandler> handler_;
};

TEST_F(OAuthHandlerLimitsTest, RegistrationsAreRateLimitedPerSource) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Register("192.0.2.1")->status, 201) << i;
  auto limited = Register("192.0.2.1");
  EXPECT_EQ(limited->status, 429) << limited->body;
  EXPECT_EQ(limited->Header("Retry-After"), "12");
  EXPECT_EQ(nlohmann::json::parse(limited->body)["error"], "temporarily_unavailable");
  auto other = Register("192.0.2.2");
  ASSERT_EQ(other->status, 201);
  // Where a client registered from is kept for admins.
  std::string id = nlohmann::json::parse(other->body)["client_id"];
  EXPECT_EQ(store_->GetOAuthClient(id)->source, "192.0.2.2");
}

TEST_F(OAuthHandlerLimitsTest, PendingSignInsFromOneSourceDoNotBlockAnother) {
  auto reg = Register("192.0.2.1");
  ASSERT_EQ(reg->status, 201);
  std::string id = nlohmann::json::parse(reg->body)["client_id"];
  for (size_t i = 0; i < kMaxPendingOAuthRequestsPerSource; ++i) {
    ASSERT_EQ(OpenPage(id, "192.0.2.9")->status, 200) << i;
  }
  auto refused = OpenPage(id, "192.0.2.9");
  EXPECT_EQ(refused->status, 429);
  EXPECT_NE(refused->body.find("Too many sign-ins"), std::string::npos);
  EXPECT_EQ(OpenPage(id, "192.0.2.10")->status, 200);
}

TEST_F(OAuthStoreTest, SchemaThreeStoreIsUpgradedInPlace) {
  ASSERT_TRUE(store_->RecordToken("alice", "ci", std::string(32, 'e'), IssuedToken{}, 1).ok());
  store_.reset();
  // Make it what warren with schema 3 left: no OAuth tables, version 3.
  WithRawTxn(dir_, [](MDB_txn* txn) {
    for (const char* name :
         {"oauth_clients", "oauth_requests", "oauth_user_codes", "oauth_codes", "oauth_refresh"}) {
      MDB_dbi dbi;
      ASSERT_EQ(mdb_dbi_open(txn, name, 0, &dbi), 0) << name;
      ASSERT_EQ(mdb_drop(txn, dbi, 1), 0);
    }
    PutRaw(txn, "meta", "schema_version", "3");
  });
  auto opened = LmdbStore::Open(dir_.string());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store_ = std::move(opened).value();
  // Schema 3's data is intact and the OAuth tables work.
  EXPECT_TRUE(store_->GetTokenLabel(std::string(32, 'e')).ok());
  EXPECT_TRUE(
      store_->CreateOAuthClient(OAuthClient{"wc-9", "x", {"http://localhost/cb"}, 1, ""}).ok());
  EXPECT_TRUE(store_->CreateOAuthRequest(Request("s", "U", 1), 1).ok());
}

}  // namespace
}  // namespace warren
