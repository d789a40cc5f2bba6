#include "lobby/base/target_url.h"

#include <gtest/gtest.h>

#include <vector>

namespace warren {
namespace {

TEST(TargetUrlTest, ParsedStrictlyAndNormalised) {
  struct Case {
    const char* in;
    const char* normalised;
  };
  for (const Case& c : std::vector<Case>{
           {"https://api.stripe.com", "https://api.stripe.com"},
           {"HTTPS://API.Stripe.COM/", "https://api.stripe.com"},
           {"https://api.example.com:443/v1/", "https://api.example.com/v1"},
           {"http://127.0.0.1:8080/base/path", "http://127.0.0.1:8080/base/path"},
           {"http://localhost:80", "http://localhost"},
           {"https://[::1]:9443/x", "https://[::1]:9443/x"},
           {"http://[2001:DB8:0::1]", "http://[2001:db8::1]"},
           {"https://h/a%2Fb/~c", "https://h/a%2Fb/~c"},
       }) {
    Result<TargetUrl> url = ParseTargetUrl(c.in);
    ASSERT_TRUE(url.ok()) << c.in << ": " << url.status().ToString();
    EXPECT_EQ(url->ToString(), c.normalised) << c.in;
    EXPECT_EQ(ParseTargetUrl(url->ToString())->ToString(), c.normalised);  // a fixed point
  }
  Result<TargetUrl> url = ParseTargetUrl("https://api.example.com:8443/v1");
  EXPECT_EQ(url->scheme, "https");
  EXPECT_EQ(url->host, "api.example.com");
  EXPECT_EQ(url->EffectivePort(), 8443);
  EXPECT_EQ(url->path_prefix, "/v1");
  EXPECT_EQ(url->Authority(), "api.example.com:8443");
  EXPECT_EQ(ParseTargetUrl("http://h")->EffectivePort(), 80);
  // What the proxy sends as Host: brackets for IPv6, the scheme's own port left out.
  EXPECT_EQ(ParseTargetUrl("https://api.example.com/v1/")->Authority(), "api.example.com");
  EXPECT_EQ(ParseTargetUrl("http://[::1]:8080")->Authority(), "[::1]:8080");
  EXPECT_EQ(ParseTargetUrl("http://[::1]:8080")->host, "::1");
  EXPECT_EQ(ParseTargetUrl("http://[::1]:8080")->path_prefix, "");

  for (const char* bad : {"",
                          "api.stripe.com",
                          "ftp://h",
                          "https://",
                          "https://:443",
                          "https://h:0",
                          "https://h:65536",
                          "https://h:x",
                          "https://h/a b",
                          "https://h/a?b=1",
                          "https://h/#x",
                          "https://h/a/../b",
                          "https://h/./b",
                          "https://h_/",
                          "https://-h",
                          "https://h..com",
                          "https://999.1.1.1",
                          "https://[::g]",
                          "https://h/%zz",
                          "https://h/\x01",
                          "http://u@x/",
                          "http://x:99999",
                          "http://x y/"}) {
    EXPECT_EQ(ParseTargetUrl(bad).status().code(), Code::kInvalidArgument) << bad;
  }
  // Credentials in the URL are refused without being repeated.
  Result<TargetUrl> creds = ParseTargetUrl("https://user:hunter2@api.example.com");
  ASSERT_FALSE(creds.ok());
  EXPECT_EQ(creds.status().message().find("hunter2"), std::string::npos);
  EXPECT_NE(creds.status().message().find("--bearer"), std::string::npos);
}

}  // namespace
}  // namespace warren
