// `warren serve`'s config file: every flag is a key, flag > file > default, errors name the key
// and the line, repeatable flags take arrays, and packaging/warren.conf is what the flags
// generate.
#include "lobby/serve_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace warren {
namespace {

class ServeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/serve_config_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Write(const std::string& text, const std::string& name = "warren.conf") {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // Parses `args` with the config file `text`; the error's message, or "" when it parsed.
  std::string ParseError(ServeCli& cli, const std::string& text,
                         std::vector<std::string> args = {}) {
    std::string path = Write(text);
    args.insert(args.begin(), {"--config", path});
    try {
      cli.Parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(ServeConfigTest, KeysSetTheirFlags) {
  ServeCli cli;
  EXPECT_EQ(ParseError(cli,
                       "# a comment\n"
                       "; another\n"
                       "\n"
                       "ssh = \"0.0.0.0:2200\"\n"
                       "http = 127.0.0.1:9090   # a comment after a value\n"
                       "vm-ready-timeout = 77\n"
                       "sandbox-overcommit = 1.5\n"
                       "log-level = debug\n"
                       "log-format = 'json'\n"
                       "mcp-conformance-fixtures = true\n"
                       "user-max-vms = 7\n"
                       "max-sandboxes = 3\n"
                       "ssh-max-logins = 12\n"
                       "web-max-connections-per-vm = 9\n"
                       "tls-cert = \"/etc/warren/cert.pem\"\n"
                       "public-url = \"https://warren.example\"\n"),
            "");
  const ServeFlags& f = cli.flags();
  EXPECT_EQ(f.ssh, "0.0.0.0:2200");
  EXPECT_EQ(f.http, "127.0.0.1:9090");
  EXPECT_EQ(f.vm_ready_timeout_s, 77);
  EXPECT_DOUBLE_EQ(f.sandbox_overcommit, 1.5);
  EXPECT_EQ(f.log_level, "debug");
  EXPECT_EQ(f.log_format, "json");
  EXPECT_TRUE(f.mcp.conformance_fixtures);
  EXPECT_EQ(f.user_limits[0], "7");
  EXPECT_EQ(f.user_limits[kLimitFields.size() - 1], "3");  // the alias of user-max-sandboxes
  EXPECT_EQ(f.ssh_limits.logins, 12);
  EXPECT_EQ(f.web_limits.max_connections_per_site, 9);
  EXPECT_EQ(f.tls_cert_file, "/etc/warren/cert.pem");
  EXPECT_EQ(f.public_url, "https://warren.example");
  EXPECT_EQ(f.data_dir, "/var/lib/warren");  // untouched: the default
  EXPECT_EQ(cli.config_file(), dir_ + "/warren.conf");
}

// Every option is a key: the example config with every key uncommented (each at its default)
// parses, and --print-config says each value came from that file's line.
TEST_F(ServeConfigTest, EveryFlagIsAKey) {
  ServeCli example;
  std::string text;
  std::istringstream lines(example.ExampleConfig());
  std::string line;
  int keys = 0;
  while (std::getline(lines, line)) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' &&
        line.find(" = ") != std::string::npos) {
      text += line.substr(1) + "\n";
      ++keys;
    } else {
      text += line + "\n";
    }
  }
  EXPECT_GT(keys, 60);
  ServeCli cli;
  ASSERT_EQ(ParseError(cli, text), "");
  std::string effective = cli.EffectiveConfig();
  int from_file = 0;
  for (const CLI::Option* op : cli.app().get_options()) {
    if (!op->get_configurable() || op->get_lnames().front() == "help") continue;
    const std::string key = op->get_lnames().front();
    size_t at = effective.find("\n" + key + " = ");
    ASSERT_NE(at, std::string::npos) << key;
    std::string row = effective.substr(at + 1, effective.find('\n', at + 1) - at - 1);
    // [] for a key whose default is empty is that default.
    const bool empty_default = row == key + " = []  # default";
    EXPECT_TRUE(empty_default || row.find("# " + dir_ + "/warren.conf line ") != std::string::npos)
        << row;
    ++from_file;
  }
  EXPECT_EQ(from_file, keys);
}

TEST_F(ServeConfigTest, FlagsWinOverTheFileAndTheFileOverDefaults) {
  ServeCli cli;
  ASSERT_EQ(ParseError(cli, "ssh = \"0.0.0.0:2200\"\nhttp = \"0.0.0.0:8000\"\n",
                       {"--ssh", "127.0.0.1:0"}),
            "");
  EXPECT_EQ(cli.flags().ssh, "127.0.0.1:0");         // flag
  EXPECT_EQ(cli.flags().http, "0.0.0.0:8000");       // file
  EXPECT_EQ(cli.flags().metrics, "127.0.0.1:9464");  // default
  std::string effective = cli.EffectiveConfig();
  EXPECT_NE(effective.find("ssh = \"127.0.0.1:0\"  # command line\n"), std::string::npos)
      << effective;
  EXPECT_NE(effective.find("http = \"0.0.0.0:8000\"  # " + dir_ + "/warren.conf line 2\n"),
            std::string::npos)
      << effective;
  EXPECT_NE(effective.find("metrics = \"127.0.0.1:9464\"  # default\n"), std::string::npos)
      << effective;
}

TEST_F(ServeConfigTest, RepeatableFlagsTakeArrays) {
  ServeCli cli;
  ASSERT_EQ(ParseError(cli,
                       "pool = [\"debian=2\",\n"
                       "        \"tiny:1,512M,2G=1\", # comments inside\n"
                       "]\n"
                       "mcp-allow-origin = [\"https://a.example\"]\n"
                       "vm-egress-allow = \"10.1.0.0/16\"\n"),
            "");
  EXPECT_EQ(cli.flags().pool, (std::vector<std::string>{"debian=2", "tiny:1,512M,2G=1"}));
  EXPECT_EQ(cli.flags().mcp.allowed_origins, (std::vector<std::string>{"https://a.example"}));
  EXPECT_EQ(cli.flags().vm_egress_allow, (std::vector<std::string>{"10.1.0.0/16"}));
  // [] is the default of a key whose default is empty.
  ServeCli empty;
  ASSERT_EQ(ParseError(empty, "sandbox-size = []\n"), "");
  EXPECT_TRUE(empty.flags().sandbox_sizes.empty());
  // The command line replaces the whole array.
  ServeCli flagged;
  ASSERT_EQ(ParseError(flagged, "pool = [\"debian=2\", \"tiny=1\"]\n", {"--pool", "none"}), "");
  EXPECT_EQ(flagged.flags().pool, (std::vector<std::string>{"none"}));
  // Unset, the default.
  ServeCli plain;
  ASSERT_EQ(ParseError(plain, ""), "");
  EXPECT_EQ(plain.flags().pool, (std::vector<std::string>{"default"}));
  EXPECT_NE(plain.EffectiveConfig().find("\npool = [\"default\"]  # default\n"), std::string::npos);
}

TEST_F(ServeConfigTest, UnknownKeyNamesKeyAndLine) {
  ServeCli cli;
  std::string e = ParseError(cli, "ssh = \"0.0.0.0:2200\"\n\n# x\nshh-port = 22\n");
  EXPECT_NE(e.find(dir_ + "/warren.conf line 4"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key \"shh-port\""), std::string::npos) << e;
}

TEST_F(ServeConfigTest, BadValueNamesKeyAndLine) {
  {
    ServeCli cli;
    std::string e = ParseError(cli, "# x\nssh-max-logins = 0\n");
    EXPECT_NE(e.find("line 2"), std::string::npos) << e;
    EXPECT_NE(e.find("ssh-max-logins"), std::string::npos) << e;
  }
  {
    ServeCli cli;
    std::string e = ParseError(cli, "vms = on\nlog-level = loud\n");
    EXPECT_NE(e.find("line 2"), std::string::npos) << e;
    EXPECT_NE(e.find("log-level"), std::string::npos) << e;
  }
  {
    ServeCli cli;
    std::string e = ParseError(cli, "\nvm-ready-timeout = soon\n");
    EXPECT_NE(e.find("line 2"), std::string::npos) << e;
    EXPECT_NE(e.find("vm-ready-timeout"), std::string::npos) << e;
  }
  {
    ServeCli cli;
    std::string e = ParseError(cli, "mcp-conformance-fixtures = yes\n");
    EXPECT_NE(e.find("line 1"), std::string::npos) << e;
    EXPECT_NE(e.find("true or false"), std::string::npos) << e;
  }
  // The same bad value as a flag is CLI11's own error, with no line.
  ServeCli cli;
  std::string e = ParseError(cli, "", {"--ssh-max-logins", "0"});
  EXPECT_NE(e.find("ssh-max-logins"), std::string::npos) << e;
  EXPECT_EQ(e.find(" line "), std::string::npos) << e;
}

TEST_F(ServeConfigTest, MalformedLinesNameTheirLine) {
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {"ssh\n", "line 1: expected key = value"},
           {"\n[serve]\nssh = \"a:1\"\n", "line 2: sections are not used"},
           {"ssh = \n", "line 1: key \"ssh\" has no value"},
           {"ssh = \"a:1\n", "line 1: key \"ssh\": a quoted value is not closed"},
           {"ssh = a b\n", "line 1: key \"ssh\": unexpected \"b\""},
           {"ssh = \"a:1\"\nssh = \"b:2\"\n", "line 2: key \"ssh\" is set again (first on line 1)"},
           {"pool = [\"a=1\"]\npool = [\"b=1\"]\n", "give a repeatable key an array"},
           {"ssh = [\"a:1\", \"b:2\"]\n", "line 1: key \"ssh\" takes one value"},
           {"pool = [\n\"a=1\",\n", "line 1: key \"pool\": the array is not closed"},
           {"pool = []\n", "an empty array; comment the key out"},
           {"pool = [\"a=1\",,\"b=1\"]\n", "an empty item"},
           {"config = \"/x\"\n", "key \"config\" cannot be set in the config file"},
           {"print-config = true\n", "key \"print-config\" cannot be set"},
           {"Ssh = \"a:1\"\n", "keys are lowercase flag names"},
       }) {
    ServeCli cli;
    std::string e = ParseError(cli, c.text);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.text << " -> " << e;
    EXPECT_NE(e.find(dir_ + "/warren.conf"), std::string::npos) << e;
  }
}

TEST_F(ServeConfigTest, DefaultFileMayBeMissingAGivenOneMayNot) {
  ServeCli missing_default(dir_ + "/none.conf");
  EXPECT_NO_THROW(missing_default.Parse({}));
  EXPECT_EQ(missing_default.config_file(), "");
  EXPECT_EQ(missing_default.flags().ssh, "127.0.0.1:2222");

  ServeCli given;
  try {
    given.Parse({"--config", dir_ + "/none.conf"});
    ADD_FAILURE() << "a missing --config file parsed";
  } catch (const CLI::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/none.conf"), std::string::npos) << e.what();
  }

  // The default file, when present, is read.
  ServeCli present(Write("http = \"0.0.0.0:1\"\n", "default.conf"));
  present.Parse({});
  EXPECT_EQ(present.flags().http, "0.0.0.0:1");
}

TEST_F(ServeConfigTest, HelpWorksWithABrokenFile) {
  ServeCli cli(Write("no-such-key = 1\n"));
  try {
    cli.Parse({"--help"});
    ADD_FAILURE() << "--help did not ask for help";
  } catch (const CLI::CallForHelp&) {
  }
}

// --print-config's output is a config file giving the same configuration.
TEST_F(ServeConfigTest, EffectiveConfigReadsBack) {
  ServeCli first;
  ASSERT_EQ(ParseError(first, "pool = [\"a=1\", \"b:2,1G,4G=1\"]\nlog-level = warn\n",
                       {"--ssh", "0.0.0.0:22", "--mcp-conformance-fixtures"}),
            "");
  const std::string effective = first.EffectiveConfig();
  ServeCli second;
  ASSERT_EQ(ParseError(second, effective), "");
  EXPECT_EQ(second.flags().pool, first.flags().pool);
  EXPECT_EQ(second.flags().log_level, "warn");
  EXPECT_EQ(second.flags().ssh, "0.0.0.0:22");
  EXPECT_TRUE(second.flags().mcp.conformance_fixtures);
  EXPECT_EQ(second.flags().http_limits.max_connections, first.flags().http_limits.max_connections);
  EXPECT_DOUBLE_EQ(second.flags().exec.rate_per_second, first.flags().exec.rate_per_second);
}

// packaging/warren.conf is generated from the flags: a flag added, renamed or re-described
// without regenerating it fails here.
TEST(ServeExampleConfigTest, PackagingConfMatchesTheFlags) {
  ServeCli cli;
  const std::string expected = cli.ExampleConfig();
  std::ifstream in(std::string(WARREN_SOURCE_DIR) + "/packaging/warren.conf");
  std::stringstream actual;
  actual << in.rdbuf();
  if (actual.str() != expected) {
    const std::string fresh = std::string(WARREN_BINARY_DIR) + "/warren.conf.expected";
    std::ofstream(fresh) << expected;
    FAIL() << "packaging/warren.conf is not what the flags generate; review and run: cp " << fresh
           << " " << WARREN_SOURCE_DIR << "/packaging/warren.conf";
  }
}

}  // namespace
}  // namespace warren
