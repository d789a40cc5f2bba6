// The web proxy's pure pieces: hosts and URLs, warren's cookies, the rewrites both ways, the
// pages' escaping.
#include <gtest/gtest.h>

#include "lobby/web/web_cookies.h"
#include "lobby/web/web_forward.h"
#include "lobby/web/web_names.h"
#include "lobby/web/web_pages.h"

namespace warren::web {
namespace {

TEST(WebNamesTest, TheDomainAndOneLabelUnderIt) {
  Result<WebHost> d = ParseWebHost("Warren.Localhost:8081", "warren.localhost");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, WebHost::Kind::kDomain);
  Result<WebHost> s = ParseWebHost("WEB-one.warren.localhost.", "warren.localhost");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, WebHost::Kind::kSite);
  EXPECT_EQ(s->label, "web-one");
  EXPECT_EQ(s->host, "web-one.warren.localhost");
  for (const char* bad : {"a.b.warren.localhost", "xwarren.localhost", "example.com", "",
                          "web one.warren.localhost", "w.warren.localhost:x", ":80"}) {
    EXPECT_EQ(ParseWebHost(bad, "warren.localhost").status().code(), Code::kNotFound) << bad;
  }
}

TEST(WebNamesTest, OriginsLeaveOutTheSchemesOwnPort) {
  EXPECT_EQ((PublicOrigin{false, 80}.Of("a.d")), "http://a.d");
  EXPECT_EQ((PublicOrigin{true, 443}.Of("a.d")), "https://a.d");
  EXPECT_EQ((PublicOrigin{false, 8081}.Of("a.d")), "http://a.d:8081");
  EXPECT_EQ((PublicOrigin{true, 80}.Of("a.d")), "https://a.d:80");
}

TEST(WebNamesTest, SiteUrlsAreOnlyLabelsUnderTheDomain) {
  auto u = ParseSiteUrl("http://web-one.warren.localhost:8081/a/b?c=d#frag", "warren.localhost");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->host, "web-one.warren.localhost");
  EXPECT_EQ(u->path, "/a/b?c=d");
  EXPECT_EQ(ParseSiteUrl("https://web-one.warren.localhost", "warren.localhost")->path, "/");
  EXPECT_EQ(ParseSiteUrl("https://web-one.warren.localhost?x", "warren.localhost")->path, "/?x");
  for (const char* bad : {"http://warren.localhost/", "http://evil.example/",
                          "http://u@web-one.warren.localhost/", "javascript:alert(1)",
                          "//web-one.warren.localhost/", "http://web-one.warren.localhost//x"}) {
    EXPECT_FALSE(ParseSiteUrl(bad, "warren.localhost").has_value()) << bad;
  }
}

TEST(WebNamesTest, QueryParametersAndLocalPaths) {
  EXPECT_EQ(*QueryParam("a=1&to=%2Fx%3Fy%3D1&b", "to"), "/x?y=1");
  EXPECT_EQ(*QueryParam("b&a=x+y", "a"), "x y");
  EXPECT_EQ(*QueryParam("b", "b"), "");
  EXPECT_FALSE(QueryParam("ab=1", "a").has_value());
  EXPECT_EQ(WithoutParam("/p?x=1&share=s&y=2&share=t", "share"), "/p?x=1&y=2");
  EXPECT_EQ(WithoutParam("/p?share=s", "share"), "/p");
  EXPECT_EQ(WithoutParam("/p", "share"), "/p");
  EXPECT_EQ(PercentEncode("/a b?c=d&e"), "/a%20b%3Fc%3Dd%26e");
  EXPECT_EQ(PercentDecode(PercentEncode("x/y?z=1&%")), "x/y?z=1&%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
  EXPECT_TRUE(IsLocalPath("/a?b"));
  for (const char* bad : {"", "a", "//evil", "/\\evil", "/a\r\nSet-Cookie: x", "http://x/"}) {
    EXPECT_FALSE(IsLocalPath(bad)) << bad;
  }
}

TEST(WebCookiesTest, NamesAttributesAndLookup) {
  EXPECT_EQ(CookieName(WarrenCookie::kSession, false), "warren_session");
  EXPECT_EQ(CookieName(WarrenCookie::kLink, true), "__Host-warren_link");
  EXPECT_EQ(SetCookieValue(WarrenCookie::kSession, true, "v", 60),
            "__Host-warren_session=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure");
  EXPECT_EQ(SetCookieValue(WarrenCookie::kLink, false, "", 0),
            "warren_link=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0");
  relay::HttpHeaders h = {{"Cookie", "a=1; warren_session=s1"},
                          {"cookie", "__Host-warren_session=s2"}};
  EXPECT_EQ(*FindCookie(h, WarrenCookie::kSession, false), "s1");
  EXPECT_EQ(*FindCookie(h, WarrenCookie::kSession, true), "s2");
  EXPECT_FALSE(FindCookie(h, WarrenCookie::kLink, false).has_value());
}

TEST(WebCookiesTest, WarrensCookiesNeverReachTheVmNorCanItSetThem) {
  EXPECT_EQ(StripWarrenCookies("a=1; warren_session=x; __Host-warren_link=y; "
                               "WARREN_LINK=z; b=2"),
            "a=1; b=2");
  EXPECT_EQ(StripWarrenCookies("warren_session=x"), "");
  EXPECT_EQ(*RewriteVmSetCookie("a=1; Domain=warren.localhost; Path=/; domain=.x"), "a=1; Path=/");
  EXPECT_FALSE(RewriteVmSetCookie("warren_session=1; Path=/").has_value());
  EXPECT_FALSE(RewriteVmSetCookie(" __host-warren_session=1").has_value());
  EXPECT_FALSE(RewriteVmSetCookie("").has_value());
  EXPECT_TRUE(IsCookieSafe("link-secret_1.~+/="));
  for (const char* bad : {"", "a b", "a;Domain=x", "a\r\nSet-Cookie: x", "a,b", "\"a\""}) {
    EXPECT_FALSE(IsCookieSafe(bad)) << bad;
  }
}

TEST(WebForwardTest, TheVmsRequestHead) {
  relay::RequestHead r = *relay::ParseRequestHead(
      "GET /x?share=s HTTP/1.1\r\nHost: web-one.d:81\r\nConnection: keep-alive, X-Hop\r\n"
      "X-Hop: 1\r\nKeep-Alive: 5\r\nCookie: warren_session=s; app=1\r\n"
      "Authorization: Bearer wr1.abc\r\nX-Forwarded-For: 9.9.9.9\r\nX-Forwarded-Host: evil\r\n"
      "Expect: 100-continue\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(WarrenBearer(r.headers), "wr1.abc");
  ForwardContext ctx{"/x", "10.0.0.1", true, false};
  EXPECT_EQ(VmRequestHead(r, ctx),
            "GET /x HTTP/1.1\r\nHost: web-one.d:81\r\nCookie: app=1\r\nAccept: */*\r\n"
            "X-Forwarded-For: 9.9.9.9, 10.0.0.1\r\nX-Forwarded-Proto: https\r\n"
            "X-Forwarded-Host: web-one.d:81\r\nConnection: close\r\n\r\n");
  relay::RequestHead basic =
      *relay::ParseRequestHead("GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Basic eDp5\r\n\r\n");
  EXPECT_EQ(WarrenBearer(basic.headers), "");
  relay::RequestHead old = *relay::ParseRequestHead("GET / HTTP/1.0\r\nHost: h\r\n\r\n");
  EXPECT_EQ(VmRequestHead(old, {"/", "p", false, false}).rfind("GET / HTTP/1.0\r\n", 0), 0u);
  EXPECT_NE(VmRequestHead(basic, {"/", "p", false, false}).find("Authorization: Basic eDp5"),
            std::string::npos);
}

TEST(WebForwardTest, AnUpgradeKeepsItsHeadersBothWays) {
  relay::RequestHead r = *relay::ParseRequestHead(
      "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Key: k\r\n\r\n");
  EXPECT_TRUE(IsUpgrade(r));
  std::string head = VmRequestHead(r, {"/ws", "p", false, true});
  EXPECT_NE(head.find("Sec-WebSocket-Key: k\r\n"), std::string::npos);
  EXPECT_NE(head.find("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"), std::string::npos);
  relay::ResponseHead resp = *relay::ParseResponseHead(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: a\r\n\r\n");
  EXPECT_EQ(VisitorResponseHead(resp),
            "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: a\r\n"
            "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  relay::RequestHead post = *relay::ParseRequestHead(
      "POST /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_FALSE(IsUpgrade(post));
}

TEST(WebForwardTest, TheVisitorsResponseHead) {
  relay::ResponseHead resp = *relay::ParseResponseHead(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nKeep-Alive: 5\r\n"
      "Set-Cookie: a=1; Domain=d\r\nSet-Cookie: warren_session=x\r\n\r\n");
  EXPECT_EQ(VisitorResponseHead(resp),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=1\r\n"
            "Connection: close\r\n\r\n");
}

TEST(WebPagesTest, WhatIsQuotedIsEscaped) {
  WebAnswer a = MessagePage(403, "No", "<script>\"x\"&'", Wants::kHtml);
  EXPECT_NE(a.body.find("&lt;script&gt;&quot;x&quot;&amp;&#39;"), std::string::npos);
  WebAnswer j = MessagePage(403, "No", "a\"b\\c\n", Wants::kJson);
  EXPECT_EQ(j.body, "{\"error\":\"a\\\"b\\\\c\\u000a\"}\n");
  std::string wire = Render(a, true);
  EXPECT_NE(wire.find("Content-Length: " + std::to_string(a.body.size())), std::string::npos);
  EXPECT_EQ(wire.find("<script"), std::string::npos);
  relay::HttpHeaders browser = {{"Accept", "text/html,application/json;q=0.9"}};
  relay::HttpHeaders api = {{"Accept", "application/json"}};
  EXPECT_EQ(WantsOf(browser), Wants::kHtml);
  EXPECT_EQ(WantsOf(api), Wants::kJson);
  EXPECT_EQ(WantsOf({}), Wants::kHtml);
}

}  // namespace
}  // namespace warren::web
