// OAuth sign-in: the pure rules (keys/oauth.h, bridge/oauth/oauth_web.h), the token's
// audience (keys/token.h), and the state machine of pending sign-ins, codes and refresh
// tokens in the real LmdbStore (in a temp dir).
#include <lmdb.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "bridge/oauth/oauth_web.h"
#include "keys/lmdb_store.h"
#include "keys/oauth.h"
#include "keys/token.h"

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
        "https://app.example/oauth/cb", "HTTP://LOCALHOST:1/cb"}) {
    EXPECT_TRUE(ValidateRedirectUri(ok).ok()) << ok;
  }
  for (const char* bad :
       {"", "http://evil.example/cb", "http://127.0.0.2/cb", "http://localhost.evil.example/cb",
        "https://app.example/cb#frag", "https://user@app.example/cb", "javascript:alert(1)",
        "custom://cb", "https:///nohost", "https://app.example/a b",
        "https://app.example/\"><script>"}) {
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
  EXPECT_EQ(oauth::HtmlEscape("<b a=\"'&'\">"), "&lt;b a=&quot;&#39;&amp;&#39;&quot;&gt;");
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
  Result<TokenSigner> signer = TokenSigner::FromSecret(std::string(32, 'k'));
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
  OAuthClient c{"wc-1", "Claude Code", {"http://127.0.0.1:1/cb"}, 5};
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

TEST_F(OAuthStoreTest, ExpiredRequestsArePrunedAndPendingOnesBounded) {
  ASSERT_TRUE(store_->CreateOAuthRequest(Request("old", "OLD", 0), 0).ok());
  // At t=601 the old one has expired: the next creation drops it and its user code.
  ASSERT_TRUE(store_->CreateOAuthRequest(Request("new", "NEW", 601), 601).ok());
  EXPECT_EQ(store_->GetOAuthRequest(HashSecret("old")).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->FindOAuthRequestByUserCode(HashSecret("OLD")).status().code(), Code::kNotFound);
  for (size_t i = 1; i < kMaxPendingOAuthRequests; ++i) {
    ASSERT_TRUE(store_
                    ->CreateOAuthRequest(
                        Request("p" + std::to_string(i), "U" + std::to_string(i), 601), 601)
                    .ok());
  }
  EXPECT_EQ(store_->CreateOAuthRequest(Request("over", "OVER", 601), 601).code(),
            Code::kLimitExceeded);
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

TEST_F(OAuthStoreTest, SchemaThreeStoreIsUpgradedInPlace) {
  ASSERT_TRUE(store_->RecordToken("alice", "ci", std::string(32, 'e'), IssuedToken{}, 1).ok());
  store_.reset();
  // Make it what warren with schema 3 left: no OAuth tables, version 3.
  {
    MDB_env* env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
    ASSERT_EQ(mdb_env_open(env, dir_.c_str(), 0, 0600), 0);
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    for (const char* name :
         {"oauth_clients", "oauth_requests", "oauth_user_codes", "oauth_codes", "oauth_refresh"}) {
      MDB_dbi dbi;
      ASSERT_EQ(mdb_dbi_open(txn, name, 0, &dbi), 0) << name;
      ASSERT_EQ(mdb_drop(txn, dbi, 1), 0);
    }
    MDB_dbi meta;
    ASSERT_EQ(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    std::string key = "schema_version", value = "3";
    MDB_val k{key.size(), key.data()};
    MDB_val v{value.size(), value.data()};
    ASSERT_EQ(mdb_put(txn, meta, &k, &v, 0), 0);
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
  }
  auto opened = LmdbStore::Open(dir_.string());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store_ = std::move(opened).value();
  // Schema 3's data is intact and the OAuth tables work.
  EXPECT_TRUE(store_->GetTokenLabel(std::string(32, 'e')).ok());
  EXPECT_TRUE(store_->CreateOAuthClient(OAuthClient{"wc-9", "x", {"http://localhost/cb"}, 1}).ok());
  EXPECT_TRUE(store_->CreateOAuthRequest(Request("s", "U", 1), 1).ok());
}

}  // namespace
}  // namespace warren
