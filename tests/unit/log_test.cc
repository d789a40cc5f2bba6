#include "lobby/base/log.h"

#include <gtest/gtest.h>

namespace warren {
namespace {

TEST(LogQuoteTest, PlainValuesStayBare) { EXPECT_EQ(LogQuote("web-1"), "web-1"); }

TEST(LogQuoteTest, SpacesAndQuotesAreQuoted) {
  EXPECT_EQ(LogQuote("a b"), "\"a b\"");
  EXPECT_EQ(LogQuote("x\"y"), "\"x\\\"y\"");
  EXPECT_EQ(LogQuote(""), "\"\"");
}

TEST(LogQuoteTest, ControlBytesCannotForgeLines) {
  EXPECT_EQ(LogQuote("a\nb"), "\"a\\x0ab\"");
  EXPECT_EQ(LogQuote("k=v"), "\"k=v\"");
}

}  // namespace
}  // namespace warren
