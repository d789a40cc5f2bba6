#include "lobby/base/status.h"

#include <gtest/gtest.h>

#include <set>

#include "lobby/base/error_map.h"

namespace warren {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return InvalidArgument("odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  WARREN_ASSIGN_OR_RETURN(int h, Half(v));
  WARREN_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, AnnotateKeepsCode) {
  Status s = NotFound("no VM named web").Annotate("rm");
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "rm: no VM named web");
  EXPECT_EQ(s.ToString(), "not_found: rm: no VM named web");
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST(ErrorMapTest, EveryCodeHasADistinctExitStatusAndHttpStatus) {
  std::set<int> exits, https;
  for (int c = 0; c <= static_cast<int>(Code::kCancelled); ++c) {
    const ErrorMapping& m = MappingFor(static_cast<Code>(c));
    EXPECT_EQ(static_cast<int>(m.code), c);
    if (m.code != Code::kCommandFailed) {
      EXPECT_TRUE(exits.insert(m.exit_status).second) << CodeName(m.code);
    }
    EXPECT_TRUE(https.insert(m.http_status).second) << CodeName(m.code);
  }
  EXPECT_EQ(HttpStatusFor(Code::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(Code::kCommandFailed), 422);
  EXPECT_EQ(HttpStatusFor(Code::kTimeout), 504);
  EXPECT_EQ(ExitStatusFor(Code::kOk), 0);
}

}  // namespace
}  // namespace warren
