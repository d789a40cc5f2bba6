// The sandbox API's shapes (lobby/commands/sandbox_view.h): request fields checked and
// turned into the lobby command each call runs, and command data mapped to the wire —
// {id, status, size, expires_at} in RFC 3339, exec's result (non-zero exits, timeouts and
// base64 output included), extend and destroy.
#include "lobby/commands/sandbox_view.h"

#include <regex>

#include <gtest/gtest.h>

#include "lobby/base/time_format.h"

namespace warren {
namespace {

using nlohmann::json;
using Argv = std::vector<std::string>;

TEST(SandboxViewTest, Rfc3339IsUtcToTheSecond) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1796169540), "2026-12-01T23:59:00Z");
}

// The argv without its generated --name (checked apart).
Argv Unnamed(Argv argv) {
  EXPECT_GE(argv.size(), 3u);
  EXPECT_TRUE(std::regex_match(argv[2], std::regex("--name=sbx-[a-z0-9]{8}"))) << argv[2];
  EXPECT_EQ(SandboxCreateId(argv), argv[2].substr(7));
  argv.erase(argv.begin() + 2);
  return argv;
}

TEST(SandboxViewTest, CreateTakesSizeAndTimeoutMinutesOnly) {
  EXPECT_EQ(Unnamed(SandboxCreateArgv(json::object()).value()), (Argv{"new", "--sandbox"}));
  EXPECT_EQ(Unnamed(SandboxCreateArgv({{"size", "small"}, {"timeout_minutes", 30}}).value()),
            (Argv{"new", "--sandbox", "--size=small", "--timeout=30m"}));
  // null is absent; 30.0 is the integer 30.
  EXPECT_EQ(Unnamed(SandboxCreateArgv({{"size", nullptr}, {"timeout_minutes", 30.0}}).value()),
            (Argv{"new", "--sandbox", "--timeout=30m"}));
  // Each create names a sandbox of its own.
  EXPECT_NE(SandboxCreateArgv(json::object()).value()[2],
            SandboxCreateArgv(json::object()).value()[2]);
  EXPECT_EQ(SandboxCreateId({"new", "--sandbox"}), "");
  EXPECT_EQ(SandboxCreateId({"ls", "--sandbox", "--name=x"}), "");
  for (const json& bad : {json{{"timeout_minutes", 0}}, json{{"timeout_minutes", 1441}},
                          json{{"timeout_minutes", 2.5}}, json{{"timeout_minutes", "15"}},
                          json{{"timeout_minutes", 18446744073709551615ull}}, json{{"size", 2}},
                          json{{"size", ""}}, json{{"name", "x"}}, json::array(), json("small")}) {
    Result<Argv> r = SandboxCreateArgv(bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad.dump();
  }
  EXPECT_NE(SandboxCreateArgv({{"timeout_minutes", 0}}).status().message().find("1 to 1440"),
            std::string::npos);
  EXPECT_NE(SandboxCreateArgv({{"nmae", "x"}}).status().message().find("unknown field \"nmae\""),
            std::string::npos);
}

TEST(SandboxViewTest, ExecMapsOntoSshWithItsOwnTimeout) {
  EXPECT_EQ(SandboxExecArgv("sbx-1", {{"command", "ls -l"}}).value(),
            (Argv{"ssh", "--timeout=60000ms", "--", "sbx-1", "ls -l"}));
  EXPECT_EQ(SandboxExecArgv("sbx-1", {{"command", "npm ci"},
                                      {"timeout_ms", 300000},
                                      {"cwd", "/srv/app"},
                                      {"env", {{"A", "1"}, {"B", "x=y z"}}}})
                .value(),
            (Argv{"ssh", "--timeout=300000ms", "--cwd=/srv/app", "--env=A=1", "--env=B=x=y z", "--",
                  "sbx-1", "npm ci"}));
  // MCP names the sandbox in the arguments; REST in the path, where the field is unknown.
  EXPECT_TRUE(
      SandboxExecArgv("sbx-1", {{"sandbox_id", "sbx-1"}, {"command", "true"}}, "sandbox_id").ok());
  EXPECT_FALSE(SandboxExecArgv("sbx-1", {{"sandbox_id", "sbx-1"}, {"command", "true"}}).ok());
  for (const json& bad :
       {json::object(), json{{"command", ""}}, json{{"command", 1}},
        json{{"command", "x"}, {"timeout_ms", 600001}}, json{{"command", "x"}, {"timeout_ms", 0}},
        json{{"command", "x"}, {"env", {{"A", 1}}}}, json{{"command", "x"}, {"env", "A=1"}},
        json{{"command", "x"}, {"cwd", 3}}, json{{"command", "x"}, {"stdin", "y"}}}) {
    Result<Argv> r = SandboxExecArgv("sbx-1", bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad.dump();
  }
  EXPECT_EQ(SandboxExecArgv("sbx-1", {{"command", "x"}, {"timeout_ms", 600000}}).value()[1],
            "--timeout=600000ms");
}

TEST(SandboxViewTest, ExtendStatDestroyAndList) {
  EXPECT_EQ(SandboxExtendArgv("sbx-1", {{"additional_minutes", 20}}).value(),
            (Argv{"extend", "--minutes=20", "--", "sbx-1"}));
  EXPECT_FALSE(SandboxExtendArgv("sbx-1", json::object()).ok());
  EXPECT_FALSE(SandboxExtendArgv("sbx-1", {{"additional_minutes", -5}}).ok());
  EXPECT_FALSE(SandboxExtendArgv("sbx-1", {{"additional_minutes", 5}, {"x", 1}}).ok());
  EXPECT_EQ(SandboxStatArgv("sbx-1"), (Argv{"stat", "--", "sbx-1"}));
  EXPECT_EQ(SandboxDestroyArgv("sbx-1"), (Argv{"rm", "--sandbox", "--", "sbx-1"}));
  EXPECT_EQ(SandboxListArgv(), (Argv{"ls", "--sandbox"}));
}

json Vm(const std::string& name, const std::string& kind) {
  json vm = {{"name", name}, {"state", "running"}, {"kind", kind}, {"cpus", 2}};
  vm["size"] = kind == "sandbox" ? json("small") : json(nullptr);
  vm["expires_at"] = kind == "sandbox" ? json(1796169540) : json(nullptr);
  return vm;
}

TEST(SandboxViewTest, ASandboxIsItsNameStateSizeAndExpiry) {
  EXPECT_EQ(SandboxJson(Vm("sbx-8f2c19a4", "sandbox")).value(),
            (json{{"id", "sbx-8f2c19a4"},
                  {"status", "running"},
                  {"size", "small"},
                  {"expires_at", "2026-12-01T23:59:00Z"}}));
  Result<json> vm = SandboxJson(Vm("web-1", "vm"));
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kNotFound);
  EXPECT_EQ(SandboxJson(json{{"state", "running"}}).status().code(), Code::kInternal);

  json both = json::array({Vm("sbx-a", "sandbox"), Vm("web-1", "vm"), Vm("sbx-b", "sandbox")});
  json list = SandboxListJson(both).value();
  ASSERT_EQ(list["sandboxes"].size(), 2u);
  EXPECT_EQ(list["sandboxes"][1]["id"], "sbx-b");
  EXPECT_EQ(SandboxListJson(json{{"vms", both}}).value(), list);
  EXPECT_EQ(SandboxListJson(json{{"vms", json::array()}}).value(),
            (json{{"sandboxes", json::array()}}));
}

TEST(SandboxViewTest, ExecResultsKeepExitCodesTimeoutsAndBytes) {
  json ssh = {{"stdout", "2 failing\n"},
              {"stderr", ""},
              {"exit_code", 1},
              {"finished", true},
              {"duration_ms", 812}};
  EXPECT_EQ(SandboxExecJson(ssh), (json{{"stdout", "2 failing\n"},
                                        {"stderr", ""},
                                        {"exit_code", 1},
                                        {"duration_ms", 812},
                                        {"truncated", false}}));
  json timed = {{"stdout", "a"},     {"stderr", ""},        {"exit_code", 124}, {"finished", true},
                {"truncated", true}, {"duration_ms", 1000}, {"timed_out", true}};
  json t = SandboxExecJson(timed);
  EXPECT_EQ(t["timed_out"], true);
  EXPECT_EQ(t["truncated"], true);
  EXPECT_EQ(t["exit_code"], 124);
  EXPECT_FALSE(t.contains("finished"));
  json binary = {{"stdout", ""}, {"stdout_base64", "AP8="}, {"stderr", ""}, {"exit_code", nullptr},
                 {"signal", 9},  {"finished", true}};
  json b = SandboxExecJson(binary);
  EXPECT_EQ(b["stdout_base64"], "AP8=");
  EXPECT_TRUE(b["exit_code"].is_null());
  EXPECT_EQ(b["signal"], 9);
  EXPECT_FALSE(b.contains("stderr_base64"));
  EXPECT_FALSE(b.contains("timed_out"));
}

TEST(SandboxViewTest, ExtendAndDestroyAnswers) {
  EXPECT_EQ(SandboxExtendJson({{"name", "sbx-1"}, {"expires_at", 1796169540}}).value(),
            (json{{"id", "sbx-1"}, {"expires_at", "2026-12-01T23:59:00Z"}}));
  EXPECT_FALSE(SandboxExtendJson({{"name", "sbx-1"}, {"expires_at", "soon"}}).ok());
  EXPECT_EQ(
      SandboxExtendJson({{"name", "sbx-1"}, {"expires_at", 0}, {"capped", true}}).value()["capped"],
      true);
  EXPECT_FALSE(SandboxExtendJson({{"name", "sbx-1"}, {"expires_at", 0}, {"capped", false}})
                   ->contains("capped"));
  json rm = {{"deleted", {"sbx-1"}}, {"failed", json::array()}};
  EXPECT_EQ(SandboxDestroyJson(rm, "sbx-1").value(),
            (json{{"id", "sbx-1"}, {"status", "destroyed"}}));
  json failed = {{"deleted", json::array()},
                 {"failed", {{{"name", "sbx-1"}, {"error", "disk busy"}}}}};
  Result<json> f = SandboxDestroyJson(failed, "sbx-1");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("disk busy"), std::string::npos);
}

TEST(SandboxViewTest, SchemasRequireWhatTheShapesAlwaysHave) {
  EXPECT_EQ(SandboxSchema()["required"], (json{"id", "status", "size", "expires_at"}));
  EXPECT_EQ(SandboxExecSchema()["required"],
            (json{"stdout", "stderr", "exit_code", "duration_ms", "truncated"}));
  EXPECT_EQ(SandboxExtendSchema()["required"], (json{"id", "expires_at"}));
  EXPECT_EQ(SandboxDestroySchema()["required"], (json{"id", "status"}));
}

}  // namespace
}  // namespace warren
