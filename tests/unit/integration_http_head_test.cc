// HTTP heads as only the integrations proxy rewrites them (pure): Host → name, the head sent
// upstream.
#include "lobby/integrations/http_head.h"

#include <gtest/gtest.h>

namespace warren::integrations {
namespace {

TEST(HttpHeadTest, HostNamesOneIntegrationUnderTheDomain) {
  EXPECT_EQ(*IntegrationNameFromHost("GitHub.Int.Warren.Internal:443", "int.warren.internal"),
            "github");
  EXPECT_EQ(*IntegrationNameFromHost("api.int.warren.internal.", "int.warren.internal"), "api");
  EXPECT_FALSE(IntegrationNameFromHost("int.warren.internal", "int.warren.internal").ok());
  EXPECT_FALSE(IntegrationNameFromHost("a.b.int.warren.internal", "int.warren.internal").ok());
  EXPECT_FALSE(IntegrationNameFromHost("api.example.com", "int.warren.internal").ok());
  EXPECT_FALSE(IntegrationNameFromHost("xint.warren.internal", "int.warren.internal").ok());
}

TEST(HttpHeadTest, TheUpstreamHeadIsRewritten) {
  RequestHead r = *ParseRequestHead(
      "GET /x HTTP/1.1\r\nHost: a.int.d\r\nConnection: foo\r\nFoo: 1\r\nAuthorization: vm\r\n"
      "Expect: 100-continue\r\nAccept: */*\r\n\r\n");
  TargetUrl t = *ParseTargetUrl("http://up:81/p");
  EXPECT_EQ(UpstreamRequestHead(r, t, {{"Authorization", "Bearer k"}}),
            "GET /p/x HTTP/1.1\r\nHost: up:81\r\nAccept: */*\r\nAuthorization: Bearer k\r\n"
            "Connection: close\r\n\r\n");
}

}  // namespace
}  // namespace warren::integrations
