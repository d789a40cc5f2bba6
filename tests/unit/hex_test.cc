#include "lobby/base/hex.h"

#include <gtest/gtest.h>

#include <string>

namespace warren {
namespace {

TEST(HexTest, TwoLowercaseDigitsPerByte) {
  EXPECT_EQ(HexEncode(""), "");
  EXPECT_EQ(HexEncode("abc"), "616263");
  EXPECT_EQ(HexEncode(std::string("\x00\x0f\xf0\xff", 4)), "000ff0ff");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  std::string hex = HexEncode(all);
  ASSERT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 6), "000102");
  EXPECT_EQ(hex.substr(506), "fdfeff");
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace warren
