#include "keys/scope.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace warren {
namespace {

constexpr int64_t kNow = 1'700'000'000;
constexpr int64_t kHour = 3600;
constexpr int64_t kDay = 24 * kHour;

Scope WithCmds(std::vector<std::string> cmds) {
  Scope s;
  s.cmds = std::move(cmds);
  return s;
}

TEST(ScopeTest, EmptyScopeIsUnrestrictedAndAllowsEverything) {
  Scope s;
  EXPECT_TRUE(s.Unrestricted());
  EXPECT_TRUE(s.AllowsCommand("ls"));
  EXPECT_TRUE(s.AllowsCommand("share set-public"));
  EXPECT_FALSE(s.Expired(kNow));
}

TEST(ScopeTest, AllowsCommandMatchesWholeWordsOnly) {
  Scope s = WithCmds({"ls", "share", "ssh-key list"});
  EXPECT_FALSE(s.Unrestricted());
  EXPECT_TRUE(s.AllowsCommand("ls"));
  EXPECT_TRUE(s.AllowsCommand("share"));
  EXPECT_TRUE(s.AllowsCommand("share show"));
  EXPECT_TRUE(s.AllowsCommand("share set-public"));
  EXPECT_TRUE(s.AllowsCommand("ssh-key list"));
  EXPECT_FALSE(s.AllowsCommand("sharex"));
  EXPECT_FALSE(s.AllowsCommand("lsx"));
  EXPECT_FALSE(s.AllowsCommand("ssh-key"));  // the parent of an allowed path is not allowed
  EXPECT_FALSE(s.AllowsCommand("ssh-key remove"));
  EXPECT_FALSE(s.AllowsCommand("ssh"));
  EXPECT_FALSE(s.AllowsCommand("new"));
  EXPECT_FALSE(s.AllowsCommand(""));
}

TEST(ScopeTest, ExpiredAtAndAfterTheInstant) {
  Scope s;
  s.expires_at = kNow;
  EXPECT_FALSE(s.Expired(kNow - 1));
  EXPECT_TRUE(s.Expired(kNow));
  EXPECT_TRUE(s.Expired(kNow + 1));
}

TEST(ScopeTest, UnrestrictedCoversEverything) {
  Scope parent;
  Scope child = WithCmds({"ls"});
  child.tag = "ci";
  child.expires_at = kNow;
  EXPECT_TRUE(parent.Covers(child));
  EXPECT_TRUE(parent.Covers(Scope()));
}

TEST(ScopeTest, CoversCommands) {
  Scope parent = WithCmds({"ls", "share"});
  EXPECT_TRUE(parent.Covers(WithCmds({"ls"})));
  EXPECT_TRUE(parent.Covers(WithCmds({"share show", "ls"})));
  EXPECT_TRUE(parent.Covers(parent));
  EXPECT_FALSE(parent.Covers(WithCmds({"ls", "new"})));
  EXPECT_FALSE(parent.Covers(Scope()));  // every command is wider than two
  EXPECT_FALSE(WithCmds({"share show"}).Covers(WithCmds({"share"})));
}

TEST(ScopeTest, CoversTag) {
  Scope parent;
  parent.tag = "ci";
  Scope same;
  same.tag = "ci";
  Scope other;
  other.tag = "prod";
  EXPECT_TRUE(parent.Covers(same));
  EXPECT_FALSE(parent.Covers(other));
  EXPECT_FALSE(parent.Covers(Scope()));  // no tag sees every VM
}

TEST(ScopeTest, CoversExpiry) {
  Scope parent;
  parent.expires_at = kNow + kDay;
  Scope sooner, same, later, never;
  sooner.expires_at = kNow + kHour;
  same.expires_at = kNow + kDay;
  later.expires_at = kNow + 2 * kDay;
  EXPECT_TRUE(parent.Covers(sooner));
  EXPECT_TRUE(parent.Covers(same));
  EXPECT_FALSE(parent.Covers(later));
  EXPECT_FALSE(parent.Covers(never));
}

TEST(ScopeTest, CoversNeedsEveryDimension) {
  Scope parent = WithCmds({"ls"});
  parent.tag = "ci";
  parent.expires_at = kNow + kDay;
  Scope child = parent;
  EXPECT_TRUE(parent.Covers(child));
  child.tag = "prod";
  EXPECT_FALSE(parent.Covers(child));  // commands and expiry fit, the tag does not
  child = parent;
  child.cmds = {"new"};
  EXPECT_FALSE(parent.Covers(child));
  child = parent;
  child.expires_at = 0;
  EXPECT_FALSE(parent.Covers(child));
}

TEST(ScopeTest, JsonRoundTrip) {
  Scope s = WithCmds({"ls", "share show"});
  s.tag = "ci";
  s.expires_at = kNow;
  Result<Scope> back = Scope::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);

  Result<Scope> empty = Scope::FromJson(Scope().ToJson());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->Unrestricted());
  // Missing fields are defaults, so older records read.
  Result<Scope> bare = Scope::FromJson(nlohmann::json::object());
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->Unrestricted());
}

TEST(ScopeTest, FromJsonRejectsMalformedScopes) {
  using nlohmann::json;
  for (const json& j :
       {json::array(), json("ls"), json{{"cmds", "ls"}}, json{{"cmds", {1, 2}}},
        json{{"cmds", {"Share"}}}, json{{"cmds", {"share  show"}}}, json{{"cmds", {""}}},
        json{{"tag", 5}}, json{{"tag", "Bad Tag"}}, json{{"expires_at", "soon"}},
        json{{"expires_at", -1}}, json{{"expires_at", 1.5}},
        json{{"expires_at", uint64_t{18'000'000'000'000'000'000u}}}}) {
    Result<Scope> r = Scope::FromJson(j);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << j.dump();
  }
}

TEST(ScopeTest, ParseCommandListNormalises) {
  Result<std::vector<std::string>> r = ParseCommandList(" ls ,share   show,\tssh-key  list ");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{"ls", "share show", "ssh-key list"}));

  Result<std::vector<std::string>> one = ParseCommandList("ls");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<std::string>{"ls"}));

  Result<std::vector<std::string>> dup = ParseCommandList("ls,ls, ls");
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(*dup, (std::vector<std::string>{"ls"}));
}

TEST(ScopeTest, ParseCommandListRejectsBadEntries) {
  struct Case {
    const char* text;
    const char* message_part;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"  ", "empty"}, Case{"ls,,new", "empty entry"},
        Case{"ls,", "empty entry"}, Case{",ls", "empty entry"}, Case{"ls, ,new", "empty entry"},
        Case{"Share", "uppercase"}, Case{"share;rm", "character"},
        Case{"1ls", "start with a letter"}, Case{"share -x", "start with a letter"},
        Case{"ls/x", "character"}, Case{"caf\xc3\xa9", "character"}}) {
    Result<std::vector<std::string>> r = ParseCommandList(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
  std::string many;
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string("c") + std::to_string(i);
  EXPECT_FALSE(ParseCommandList(many).ok());
  EXPECT_FALSE(ParseCommandList(std::string(129, 'a')).ok());
}

TEST(ScopeTest, ParseExpiry) {
  struct Case {
    const char* text;
    int64_t expect;
  };
  for (const Case& c :
       {Case{"never", 0}, Case{"1h", kNow + kHour}, Case{"12h", kNow + 12 * kHour},
        Case{"30d", kNow + 30 * kDay}, Case{"2w", kNow + 14 * kDay}, Case{"1y", kNow + 365 * kDay},
        Case{"100y", kNow + 100 * 365 * kDay}, Case{"876000h", kNow + 876000 * kHour}}) {
    Result<int64_t> r = ParseExpiry(c.text, kNow);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.expect) << c.text;
  }
}

TEST(ScopeTest, ParseExpiryRejects) {
  for (const char* bad : {"",
                          "h",
                          "0h",
                          "0d",
                          "-1d",
                          "+1d",
                          "1",
                          "1m",
                          "1s",
                          "1D",
                          "1.5d",
                          " 1d",
                          "1d ",
                          "1 d",
                          "Never",
                          "forever",
                          "101y",
                          "876001h",
                          "99999999999999d",
                          "1dd",
                          "d1"}) {
    Result<int64_t> r = ParseExpiry(bad, kNow);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
  }
  Result<int64_t> r = ParseExpiry("5x", kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("never"), std::string::npos);  // says what is valid
}

TEST(ScopeTest, ValidateTag) {
  for (const char* good : {"a", "ci", "team-1", "build_bot", "x0-_"}) {
    EXPECT_TRUE(ValidateTag(good).ok()) << good;
  }
  EXPECT_TRUE(ValidateTag(std::string(64, 'a')).ok());
  for (const std::string& bad : {std::string(""), std::string("1ci"), std::string("-ci"),
                                 std::string("_ci"), std::string("Ci"), std::string("c i"),
                                 std::string("ci!"), std::string("ci\n"), std::string(65, 'a')}) {
    Status s = ValidateTag(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace warren
