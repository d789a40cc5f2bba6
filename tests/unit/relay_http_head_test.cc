// HTTP heads as warren's proxies read and rewrite them (lobby/relay, pure).
#include "lobby/relay/http_head.h"

#include <gtest/gtest.h>

namespace warren::relay {
namespace {

TEST(HttpHeadTest, ARequestHeadParses) {
  Result<RequestHead> r =
      ParseRequestHead("POST /a/b?c=d HTTP/1.1\r\nHost: x\r\nX-A:  v v \r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->target, "/a/b?c=d");
  ASSERT_EQ(r->headers.size(), 2u);
  EXPECT_EQ(r->headers[1].value, "v v");
}

TEST(HttpHeadTest, MalformedRequestHeadsAreRefused) {
  for (const char* bad : {"GET /\r\n\r\n", "GET / HTTP/2\r\n\r\n", "GET http://x/ HTTP/1.1\r\n\r\n",
                          "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", "GET / HTTP/1.1\r\nA b\r\n\r\n",
                          "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n",
                          "GET / HTTP/1.1\r\nA: b\r\n"}) {
    EXPECT_EQ(ParseRequestHead(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(HttpHeadTest, RequestFramingRefusesSmuggling) {
  auto framing = [](const std::string& headers) {
    return RequestFraming(*ParseRequestHead("POST / HTTP/1.1\r\n" + headers + "\r\n"));
  };
  EXPECT_EQ(framing("").value().kind, BodyFraming::Kind::kNone);
  EXPECT_EQ(framing("Content-Length: 12\r\n").value().length, 12u);
  EXPECT_EQ(framing("Transfer-Encoding: gzip, chunked\r\n").value().kind,
            BodyFraming::Kind::kChunked);
  EXPECT_FALSE(framing("Content-Length: 1\r\nTransfer-Encoding: chunked\r\n").ok());
  EXPECT_FALSE(framing("Content-Length: 1\r\nContent-Length: 2\r\n").ok());
  EXPECT_FALSE(framing("Content-Length: -1\r\n").ok());
  EXPECT_FALSE(framing("Transfer-Encoding: chunked, gzip\r\n").ok());
}

TEST(HttpHeadTest, ChunkedScannerFindsTheEnd) {
  ChunkedScanner s;
  std::string body = "4\r\nwiki\r\nA;x=y\r\n0123456789\r\n0\r\nT: 1\r\n\r\n";
  // Fed a byte at a time, it takes exactly the body.
  size_t taken = 0;
  for (size_t i = 0; i < body.size(); ++i) taken += *s.Feed(body.substr(i, 1));
  EXPECT_TRUE(s.done());
  EXPECT_EQ(taken, body.size());
  ChunkedScanner t;
  EXPECT_EQ(*t.Feed("0\r\n\r\nNEXT"), 5u);
  EXPECT_TRUE(t.done());
  ChunkedScanner u;
  EXPECT_FALSE(u.Feed("2\r\nabc\r\n").ok());
  ChunkedScanner v;
  EXPECT_FALSE(v.Feed("zz\r\n").ok());
}

TEST(HttpHeadTest, ResponseFraming) {
  ResponseHead r = *ParseResponseHead("HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_EQ(ResponseFraming("GET", r)->kind, BodyFraming::Kind::kUntilClose);
  EXPECT_EQ(ResponseFraming("HEAD", r)->kind, BodyFraming::Kind::kNone);
  r = *ParseResponseHead("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(ResponseFraming("GET", r)->kind, BodyFraming::Kind::kNone);
  r = *ParseResponseHead("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(ResponseFraming("GET", r)->kind, BodyFraming::Kind::kLength);
  EXPECT_FALSE(ParseResponseHead("HTTP/1.1 20 OK\r\n\r\n").ok());
  EXPECT_FALSE(ParseResponseHead("ICY 200 OK\r\n\r\n").ok());
}

TEST(HttpHeadTest, TheDownstreamHeadLosesHopByHopHeaders) {
  ResponseHead resp = *ParseResponseHead(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive, X-Y\r\n"
      "X-Y: 1\r\nProxy-Authenticate: z\r\n\r\n");
  EXPECT_EQ(DownstreamResponseHead(resp),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
}

}  // namespace
}  // namespace warren::relay
