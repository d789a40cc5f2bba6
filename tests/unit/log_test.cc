#include "lobby/base/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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

// Runs `body` with stderr sent elsewhere, restoring it afterwards.
template <class F>
void WithStderrSaved(F body) {
  int saved = dup(STDERR_FILENO);
  body();
  dup2(saved, STDERR_FILENO);
  close(saved);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  return st.st_mode & 07777;
}

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/warren-log-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/warren.log";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string Contents() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_, path_;
};

TEST_F(LogFileTest, ANewLogIsOwnerAndGroupOnlyAndGetsTheLines) {
  const mode_t old_umask = umask(022);
  WithStderrSaved([&] {
    ASSERT_TRUE(OpenLogFile(path_).ok());
    LogInfo("hello log");
  });
  umask(old_umask);
  EXPECT_EQ(ModeOf(path_), 0640u);
  EXPECT_NE(Contents().find("INFO hello log\n"), std::string::npos) << Contents();
}

TEST_F(LogFileTest, AnExistingWorldReadableLogIsNarrowedAndAppended) {
  {
    std::ofstream out(path_);
    out << "earlier line\n";
  }
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  WithStderrSaved([&] {
    ASSERT_TRUE(OpenLogFile(path_).ok());
    LogWarn("later line");
  });
  EXPECT_EQ(ModeOf(path_), 0640u);
  EXPECT_EQ(Contents().rfind("earlier line\n", 0), 0u) << Contents();
  EXPECT_NE(Contents().find("WARN later line"), std::string::npos);
  // A tighter mode the operator chose stays.
  ASSERT_EQ(chmod(path_.c_str(), 0600), 0);
  WithStderrSaved([&] { ASSERT_TRUE(OpenLogFile(path_).ok()); });
  EXPECT_EQ(ModeOf(path_), 0600u);
}

TEST_F(LogFileTest, ADirectoryIsRefused) {
  WithStderrSaved([&] { EXPECT_EQ(OpenLogFile(dir_).code(), Code::kUnavailable); });
}

constexpr char kTs[] = "2026-01-02T03:04:05.678Z";

TEST(LogLineTest, TextIsTimeLevelMessage) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, kTs, LogLevel::kWarn, "a b\nc"),
            "2026-01-02T03:04:05.678Z WARN a b c");
}

TEST(LogLineTest, JsonAuditLineHasItsFields) {
  const std::string line = "audit cmd=" + LogQuote("ssh-key add") + " user=alice surface=ssh " +
                           "note=" + LogQuote("say \"hi\"\n") + " code=ok";
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, kTs, LogLevel::kInfo, line),
            "{\"ts\":\"2026-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":\"audit\","
            "\"cmd\":\"ssh-key add\",\"user\":\"alice\",\"surface\":\"ssh\","
            "\"note\":\"say \\\"hi\\\"\\u000a\",\"code\":\"ok\"}");
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, kTs, LogLevel::kDebug, "ssh login peer=1.2.3.4:5"),
            "{\"ts\":\"2026-01-02T03:04:05.678Z\",\"level\":\"debug\",\"msg\":\"ssh login\","
            "\"peer\":\"1.2.3.4:5\"}");
}

TEST(LogLineTest, JsonOtherMessagesAreMsgWhole) {
  auto msg_of = [](std::string_view m) {
    std::string line = FormatLogLine(LogFormat::kJson, kTs, LogLevel::kError, m);
    size_t at = line.find("\"msg\":");
    return line.substr(at + 6, line.size() - at - 7);
  };
  EXPECT_EQ(msg_of("open files limit 1024 (was 1024)"), "\"open files limit 1024 (was 1024)\"");
  EXPECT_EQ(msg_of("a=1 b=2"), "\"a=1 b=2\"");                    // no words first
  EXPECT_EQ(msg_of("x a=1 then words"), "\"x a=1 then words\"");  // a word after a pair
  EXPECT_EQ(msg_of("x a=1 a=2"), "\"x a=1 a=2\"");                // a repeated key
  EXPECT_EQ(msg_of("x msg=forged"), "\"x msg=forged\"");          // the object's own keys
  EXPECT_EQ(msg_of("x level=debug"), "\"x level=debug\"");
  EXPECT_EQ(msg_of("x a=\"open"), "\"x a=\\\"open\"");  // an unclosed quote
  EXPECT_EQ(msg_of("tab\there \x01"), "\"tab\\u0009here \\u0001\"");
  EXPECT_EQ(msg_of("bad \xff utf8 \xc3\xa9"), "\"bad \xef\xbf\xbd utf8 \xc3\xa9\"");
}

TEST(LogLevelTest, NamesAndThreshold) {
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
  EXPECT_STREQ(LogLevelName(LogLevel::kWarn), "warn");
}

}  // namespace
}  // namespace warren
