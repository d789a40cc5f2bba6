#include "lobby/commands/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace warren {
namespace {

using Words = std::vector<std::string>;

Words Split(std::string_view line) {
  Result<Words> r = Tokenize(line);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : Words{};
}

Status SplitError(std::string_view line) {
  Result<Words> r = Tokenize(line);
  EXPECT_FALSE(r.ok()) << "expected an error for: " << line;
  return r.status();
}

TEST(TokenizerTest, BlanksSeparateWords) {
  EXPECT_EQ(Split("ssh-key add  KEY"), (Words{"ssh-key", "add", "KEY"}));
  EXPECT_EQ(Split(" \t ls\t-l \r\n"), (Words{"ls", "-l"}));
}

TEST(TokenizerTest, EmptyAndBlankLinesGiveNoWords) {
  EXPECT_TRUE(Split("").empty());
  EXPECT_TRUE(Split("   \t\n").empty());
}

TEST(TokenizerTest, SingleQuotesAreLiteral) {
  EXPECT_EQ(Split(R"(echo 'a b' '$HOME' 'x\y' '"q"')"),
            (Words{"echo", "a b", "$HOME", R"(x\y)", R"("q")"}));
}

TEST(TokenizerTest, DoubleQuotesHonourFourEscapes) {
  EXPECT_EQ(Split(R"("a \"b\" \\ \$x \`c\`")"), (Words{R"(a "b" \ $x `c`)"}));
  // Any other backslash inside double quotes stays, as in sh.
  EXPECT_EQ(Split(R"("a\nb\'")"), (Words{R"(a\nb\')"}));
  EXPECT_EQ(Split(R"("it's")"), (Words{"it's"}));
}

TEST(TokenizerTest, BackslashOutsideQuotesEscapesOneByte) {
  EXPECT_EQ(Split(R"(a\ b c\"d \\ \')"), (Words{"a b", "c\"d", "\\", "'"}));
}

TEST(TokenizerTest, BackslashNewlineContinuesTheLine) {
  EXPECT_EQ(Split("ab\\\ncd ef"), (Words{"abcd", "ef"}));
  EXPECT_EQ(Split("ab \\\n cd"), (Words{"ab", "cd"}));
}

TEST(TokenizerTest, AdjacentPartsJoin) {
  EXPECT_EQ(Split(R"(a'b'"c"d --name="x y")"), (Words{"abcd", "--name=x y"}));
}

TEST(TokenizerTest, EmptyQuotesAreAnEmptyWord) {
  EXPECT_EQ(Split(R"(comment vm '' "")"), (Words{"comment", "vm", "", ""}));
}

TEST(TokenizerTest, NothingIsExpanded) {
  EXPECT_EQ(Split("echo $HOME * ~ `id` $(id) ; | & > < # x"),
            (Words{"echo", "$HOME", "*", "~", "`id`", "$(id)", ";", "|", "&", ">", "<", "#", "x"}));
}

TEST(TokenizerTest, UnterminatedQuotesAreInvalid) {
  Status s = SplitError("echo 'abc");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("unterminated single quote"), std::string::npos) << s.message();
  s = SplitError(R"(echo "abc\")");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("unterminated double quote"), std::string::npos) << s.message();
}

TEST(TokenizerTest, TrailingBackslashIsInvalid) {
  Status s = SplitError("echo abc\\");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("trailing backslash"), std::string::npos) << s.message();
}

TEST(TokenizerTest, NulBytesAreRejected) {
  using namespace std::string_literals;
  Status s = SplitError("echo a\0b"s);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("NUL"), std::string::npos);
  EXPECT_EQ(SplitError("'\0'"s).code(), Code::kInvalidArgument);
}

TEST(TokenizerTest, LineLimitIs64KiB) {
  std::string at_limit(kMaxCommandLineBytes, 'a');
  EXPECT_EQ(Split(at_limit).size(), 1u);
  Status s = SplitError(at_limit + "a");
  EXPECT_EQ(s.code(), Code::kTooLarge);
  EXPECT_EQ(SplitError(std::string(1 << 20, 'x')).code(), Code::kTooLarge);
}

TEST(TokenizerTest, Utf8PassesThrough) {
  EXPECT_EQ(Split("comment vm 'héllo wörld ✓'"), (Words{"comment", "vm", "héllo wörld ✓"}));
}

}  // namespace
}  // namespace warren
