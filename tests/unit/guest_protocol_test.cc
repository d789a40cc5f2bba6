// The host's half of the guest runner protocol (vmhost/guest/runner_protocol.h): pure
// encoding and parsing, including what a hostile guest might send.
#include "vmhost/guest/runner_protocol.h"

#include <gtest/gtest.h>

#include <set>

namespace warren::guest {
namespace {

std::string FrameBytes(char type, std::string_view payload) {
  std::string f(1, type);
  uint32_t n = static_cast<uint32_t>(payload.size());
  f.push_back(static_cast<char>(n >> 24));
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.append(payload);
  return f;
}

TEST(GuestProtocolTest, JobIds) {
  EXPECT_TRUE(ValidJobId("0123abcd"));
  EXPECT_FALSE(ValidJobId("0123ABCD"));
  EXPECT_FALSE(ValidJobId("0123abc"));
  EXPECT_FALSE(ValidJobId("0123abcde"));
  EXPECT_FALSE(ValidJobId("../../x1"));
  EXPECT_FALSE(ValidJobId(""));
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string id = NewJobId();
    EXPECT_TRUE(ValidJobId(id)) << id;
    ids.insert(id);
  }
  EXPECT_GT(ids.size(), 990u);
}

TEST(GuestProtocolTest, StartHeaderIsLengthPrefixed) {
  GuestCommand c;
  c.command = "echo 'a\nb'";
  c.cwd = "/tmp";
  c.env = {{"A", "1=2"}, {"_B9", ""}};
  Result<std::string> h = EncodeStartHeader(c, true);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h,
            "warren-run 1\n1\n"
            "cmd 10\necho 'a\nb'\n"
            "cwd 4\n/tmp\n"
            "env 5\nA=1=2\n"
            "env 4\n_B9=\n"
            "stdin 1\n1\n"
            "end 0\n\n");
  c.cwd.clear();
  c.env.clear();
  h = EncodeStartHeader(c, false);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, "warren-run 1\n1\ncmd 10\necho 'a\nb'\nstdin 1\n0\nend 0\n\n");
}

TEST(GuestProtocolTest, StartHeaderRefusesWhatTheRunnerWould) {
  GuestCommand c;
  c.command.assign(kMaxCommandBytes + 1, 'x');
  EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kTooLarge);
  c.command.assign(kMaxCommandBytes, 'x');
  EXPECT_TRUE(EncodeStartHeader(c, false).ok());
  c.command = std::string("a\0b", 3);
  EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kInvalidArgument);
  c.command = "true";
  for (const char* bad : {"", "1A", "A-B", "A B", "A=B", "\xc3\xa9"}) {
    c.env = {{bad, "x"}};
    EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kInvalidArgument) << bad;
  }
  c.env = {{"A", std::string("x\0y", 3)}};
  EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kInvalidArgument);
  c.env = {{"A", std::string(kMaxEnvEntryBytes, 'v')}};
  EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kTooLarge);
  c.env.assign(kMaxEnvCount + 1, {"A", "1"});
  EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kTooLarge);
  c.env.clear();
  c.cwd.assign(kMaxCwdBytes + 1, '/');
  EXPECT_EQ(EncodeStartHeader(c, false).status().code(), Code::kInvalidArgument);
}

TEST(GuestProtocolTest, FrameReaderReassemblesAnySplit) {
  std::string stream = FrameBytes('S', "0123abcd") + FrameBytes('o', "hello") +
                       FrameBytes('e', std::string(40000, 'e')) + FrameBytes('o', "") +
                       FrameBytes('x', "exit 3");
  for (size_t step : {size_t{1}, size_t{3}, size_t{4096}, stream.size()}) {
    FrameReader r;
    std::vector<Frame> frames;
    for (size_t i = 0; i < stream.size(); i += step) {
      r.Feed(std::string_view(stream).substr(i, step));
      for (;;) {
        Result<std::optional<Frame>> f = r.Next();
        ASSERT_TRUE(f.ok());
        if (!f->has_value()) break;
        frames.push_back(std::move(**f));
      }
    }
    ASSERT_EQ(frames.size(), 5u) << step;
    EXPECT_EQ(frames[0].type, FrameType::kStarted);
    EXPECT_EQ(frames[0].payload, "0123abcd");
    EXPECT_EQ(frames[1].payload, "hello");
    EXPECT_EQ(frames[2].type, FrameType::kStderr);
    EXPECT_EQ(frames[2].payload.size(), 40000u);
    EXPECT_EQ(frames[3].payload, "");
    EXPECT_EQ(frames[4].type, FrameType::kEnd);
    EXPECT_EQ(r.buffered(), 0u);
  }
}

TEST(GuestProtocolTest, FrameReaderRefusesGarbage) {
  FrameReader bad_type;
  bad_type.Feed(FrameBytes('z', "x"));
  EXPECT_FALSE(bad_type.Next().ok());

  FrameReader huge;
  huge.Feed(std::string("o\x7f\xff\xff\xff", 5));
  EXPECT_FALSE(huge.Next().ok()) << "a 2 GiB frame must be refused before it is buffered";

  FrameReader limit;
  limit.Feed(FrameBytes('o', std::string(kMaxFramePayload, 'a')));
  Result<std::optional<Frame>> f = limit.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->has_value());
  FrameReader over;
  over.Feed(FrameBytes('o', std::string(kMaxFramePayload + 1, 'a')));
  EXPECT_FALSE(over.Next().ok());
}

TEST(GuestProtocolTest, JobEnd) {
  Result<JobEnd> e = ParseJobEnd("exit 0");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->exit_code, 0);
  e = ParseJobEnd("exit 255");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->exit_code, 255);
  e = ParseJobEnd("signal 9");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->exit_code.has_value());
  EXPECT_EQ(e->signal, 9);
  e = ParseJobEnd("lost");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->exit_code.has_value());
  EXPECT_EQ(e->signal, 0);
  for (const char* bad : {"exit 256", "exit -1", "exit", "exit 1 ", "exit 0x1", "signal 0",
                          "signal 128", "quit 1", "", "exit 99999999999999999999"}) {
    EXPECT_FALSE(ParseJobEnd(bad).ok()) << bad;
  }
}

TEST(GuestProtocolTest, RunnerErrors) {
  EXPECT_EQ(ParseRunnerError("notfound no job 0123abcd").code(), Code::kNotFound);
  EXPECT_EQ(ParseRunnerError("notfound no job 0123abcd").message(), "no job 0123abcd");
  EXPECT_EQ(ParseRunnerError("invalid bad header").code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseRunnerError("exists job x exists").code(), Code::kConflict);
  EXPECT_EQ(ParseRunnerError("internal boom").code(), Code::kInternal);
  Status full = ParseRunnerError("full cannot create /home/dev/.warren/jobs/0123abcd: No space");
  EXPECT_EQ(full.code(), Code::kUnavailable);
  EXPECT_EQ(full.message(),
            "the VM's disk is full: cannot create /home/dev/.warren/jobs/0123abcd: No space");
  EXPECT_EQ(ParseRunnerError("whatever").code(), Code::kInternal);
  Status s = ParseRunnerError("notfound \x1b[31mred\nline" + std::string(1000, 'x'));
  EXPECT_EQ(s.message().find('\x1b'), std::string::npos);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_LE(s.message().size(), 310u);
}

TEST(GuestProtocolTest, JobListIsParsedSortedAndBounded) {
  std::string text =
      "0000000a 100 exit 3 105 echo a\\\\b\n"
      "0000000b 300 running 0 0 sleep 10\\x0aecho \\xe2\\x96\\xb6\n"
      "0000000c 200 signal 15 201 kill me\n"
      "0000000d 250 lost 0 0 gone\n"
      "XYZ 1 exit 0 1 bad id\n"
      "0000000e 1 exit 300 1 bad code\n"
      "0000000f 1 weird 0 1 bad state\n"
      "00000010 -5 exit 0 1 negative\n"
      "00000011 1 exit 0\n"
      "00000012 400 exit 0 401 cut off";
  std::vector<GuestJob> jobs = ParseJobList(text);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].job, "0000000b");
  EXPECT_FALSE(jobs[0].finished);
  EXPECT_EQ(jobs[0].command, "sleep 10\necho \xe2\x96\xb6");
  EXPECT_EQ(jobs[1].job, "0000000d");
  EXPECT_TRUE(jobs[1].finished);
  EXPECT_FALSE(jobs[1].exit_code.has_value());
  EXPECT_EQ(jobs[2].job, "0000000c");
  EXPECT_FALSE(jobs[2].exit_code.has_value());
  EXPECT_EQ(jobs[2].finished_at, 201);
  EXPECT_EQ(jobs[3].job, "0000000a");
  EXPECT_EQ(jobs[3].exit_code, 3);
  EXPECT_EQ(jobs[3].command, "echo a\\b");
  EXPECT_EQ(jobs[3].started_at, 100);

  std::string many;
  for (int i = 0; i < 5000; ++i) {
    char id[9];
    std::snprintf(id, sizeof id, "%08x", i);
    many += std::string(id) + " 1 exit 0 1 " + std::string(2000, 'c') + "\n";
  }
  jobs = ParseJobList(many);
  EXPECT_LE(jobs.size(), kMaxListedJobs);
  for (const GuestJob& j : jobs) EXPECT_LE(j.command.size(), kMaxListedCommand);
}

TEST(GuestProtocolTest, Unescape) {
  EXPECT_EQ(UnescapeListed("a\\\\b"), "a\\b");
  EXPECT_EQ(UnescapeListed("\\x41\\x7e"), "A~");
  EXPECT_EQ(UnescapeListed("\\x4"), "\\x4");
  EXPECT_EQ(UnescapeListed("\\xzz"), "\\xzz");
  EXPECT_EQ(UnescapeListed("tail\\"), "tail\\");
}

TEST(GuestProtocolTest, SanitizeGuestText) {
  EXPECT_EQ(SanitizeGuestText("ok text\n", 100), "ok text");
  EXPECT_EQ(SanitizeGuestText("a\x1b[2Jb", 100), "a?[2Jb");
  EXPECT_EQ(SanitizeGuestText(std::string(50, 'x'), 10), std::string(10, 'x') + "...");
}

TEST(GuestProtocolTest, RunnerCommandLine) {
  EXPECT_EQ(RunnerCommandLine("start 0123abcd"), "~/.warren/bin/warren-run start 0123abcd");
}

}  // namespace
}  // namespace warren::guest
