// tag and comment through Interpreter::Execute.
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "keys/vm_rules.h"
#include "lobby/base/error_map.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/image_catalog.h"
#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using nlohmann::json;

// --- new ---------------------------------------------------------------------------------

TEST_F(VmCommandTest, TagAndComment) {
  New(Alice(), {"--name", "web-one", "--tag", "a"});
  Outcome o = Exec(Alice(), {"tag", "web-one", "prod", "b,c"});
  ASSERT_TRUE(o.status.ok()) << o.err;
  EXPECT_EQ(o.out, "web-one tags: a,b,c,prod\n");
  EXPECT_EQ(store_->GetVmByName("web-one")->tags,
            (std::vector<std::string>{"a", "b", "c", "prod"}));
  o = Exec(Alice(), {"tag", "-d", "web-one", "a", "c", "absent", "--json"});
  ASSERT_TRUE(o.status.ok()) << o.out;
  EXPECT_EQ(o.Json()["tags"], json::array({"b", "prod"}));
  EXPECT_EQ(Exec(Alice(), {"tag", "web-one", "Bad"}).status.code(), Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"tag", "web-one"}).status.code(), Code::kInvalidArgument);

  ASSERT_TRUE(Exec(Alice(), {"comment", "web-one", "the", "front", "end"}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-one")->comment, "the front end");
  EXPECT_EQ(Exec(Alice(), {"comment", "web-one", std::string(201, 'x')}).status.code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Exec(Alice(), {"comment", "web-one", "line\nbreak"}).status.code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(Exec(Alice(), {"comment", "web-one", std::string(200, 'x')}).status.ok());
  ASSERT_TRUE(Exec(Alice(), {"comment", "web-one", ""}).status.ok());
  EXPECT_EQ(store_->GetVmByName("web-one")->comment, "");
}

}  // namespace
}  // namespace warren::vmtest
