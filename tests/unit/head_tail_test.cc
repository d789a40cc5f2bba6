// HeadTailBuffer: the start and end of output over its bound, cut at character boundaries.
#include <thread>

#include "keys/base64.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/head_tail.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

TEST(HeadTailBufferTest, KeepsEverythingThatFits) {
  HeadTailBuffer b(10);
  b.Write("hello");
  b.Write("world");
  EXPECT_EQ(b.Text(), "helloworld");
  EXPECT_FALSE(b.truncated());
  EXPECT_EQ(b.total_bytes(), 10u);
}

TEST(HeadTailBufferTest, KeepsStartAndEnd) {
  HeadTailBuffer b(10);
  b.Write("abcdefghij");
  b.Write("klmnopqrstuvwxyz");
  EXPECT_TRUE(b.truncated());
  EXPECT_EQ(b.Text(), "abcde\n[… 16 bytes left out of 26 …]\nvwxyz");
}

TEST(HeadTailBufferTest, ManySmallWritesAndOneHuge) {
  HeadTailBuffer small(8);
  for (char c = 'a'; c <= 'z'; ++c) small.Write(std::string(1, c));
  EXPECT_EQ(small.Text(), "abcd\n[… 18 bytes left out of 26 …]\nwxyz");
  HeadTailBuffer huge(8);
  huge.Write(std::string(1000, 'x') + "tail");
  EXPECT_EQ(huge.Text(), "xxxx\n[… 996 bytes left out of 1004 …]\ntail");
}

TEST(HeadTailBufferTest, CutsAtCharacterBoundaries) {
  HeadTailBuffer b(8);
  b.Write("aaa\xC3\xA9");  // 'é' straddles the head's end
  b.Write(std::string(20, '-'));
  b.Write(
      "\xE2\x82\xAC"
      "zz");  // '€' straddles the tail's start
  std::string text = b.Text();
  EXPECT_EQ(text.substr(0, 4), "aaa\n");
  EXPECT_EQ(text.substr(text.size() - 2), "zz");
  // Only whole characters: the output is valid UTF-8, which JSON needs.
  EXPECT_NO_THROW((void)json(text).dump());
  EXPECT_EQ(text.find("\xC3"), std::string::npos);
  EXPECT_EQ(text.find("\x82"), std::string::npos);
}

}  // namespace
}  // namespace warren::vmtest
