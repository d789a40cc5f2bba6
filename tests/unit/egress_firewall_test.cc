// The host isolation rules (vmhost/egress_firewall.h): the ruleset text, pinned by a golden
// file; ranges and resolv.conf parsed; nft's listing read; and the errors when nft is
// missing or refuses (a stand-in program, so no rule touches this host).
#include "vmhost/egress_firewall.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/unit/golden_file.h"

namespace warren {
namespace {

Cidr Range(const char* text) {
  Result<Cidr> c = ParseCidr(text);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().ToString();
  return c.ok() ? *c : Cidr{};
}

TEST(EgressFirewallTest, RulesetMatchesGolden) {
  EgressFirewallConfig c;
  c.qemu_uid = 64055;
  c.data_dir = "/var/lib/warren";
  c.allow = {Range("10.213.0.0/24"), Range("2001:db8:5::/48")};
  c.resolvers = {Range("127.0.0.53"), Range("fd00::53")};
  c.remove_chains = {"vms_0000000000000001"};
  ExpectGolden("egress_ruleset.nft", EgressRulesetText(c));
}

TEST(EgressFirewallTest, ChainIsNamedByTheDataDirectory) {
  EXPECT_EQ(EgressChainName("/var/lib/warren"), EgressChainName("/var/lib/warren"));
  EXPECT_NE(EgressChainName("/var/lib/warren"), EgressChainName("/var/lib/warren2"));
  EXPECT_EQ(EgressChainName("/x").size(), 4u + 16u);
  EXPECT_EQ(EgressChainName("/x").rfind("vms_", 0), 0u);
}

TEST(EgressFirewallTest, AnUnsafeDataDirectoryGetsNoComment) {
  EgressFirewallConfig c;
  c.qemu_uid = 1;
  c.data_dir = "/tmp/a\"b";
  EXPECT_EQ(EgressRulesetText(c).find("comment"), std::string::npos);
  // nft takes comments of up to 128 characters, the prefix included.
  c.data_dir = "/" + std::string(127 - kEgressChainCommentPrefix.size(), 'a');
  EXPECT_NE(EgressRulesetText(c).find("comment"), std::string::npos);
  c.data_dir += "a";
  EXPECT_EQ(EgressRulesetText(c).find("comment"), std::string::npos);
}

TEST(EgressFirewallTest, ParsesRanges) {
  EXPECT_EQ(Range("203.0.113.7").text, "203.0.113.7/32");
  EXPECT_EQ(Range("10.0.0.0/8").text, "10.0.0.0/8");
  EXPECT_FALSE(Range("10.0.0.0/8").ipv6);
  EXPECT_EQ(Range("2001:DB8::/32").text, "2001:db8::/32");
  EXPECT_TRUE(Range("::1").ipv6);
  EXPECT_EQ(Range("::1").text, "::1/128");
  EXPECT_EQ(Range("0.0.0.0/0").text, "0.0.0.0/0");
  for (const char* bad : {"", "10.0.0.0/33", "fe80::/129", "10.0.0.0/", "10.0.0.0/x", "host",
                          "10.0.0.0/8/1", "1.2.3.4 ", "10.0.0.0/-1"}) {
    Result<Cidr> c = ParseCidr(bad);
    EXPECT_FALSE(c.ok()) << bad;
    if (!c.ok()) EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
  }
  Result<Cidr> host_bits = ParseCidr("10.1.2.3/16");
  ASSERT_FALSE(host_bits.ok());
  EXPECT_NE(host_bits.status().message().find("10.1.0.0/16"), std::string::npos)
      << host_bits.status().message();
}

TEST(EgressFirewallTest, ReadsResolvConf) {
  std::vector<Cidr> r = ParseResolvConf(
      "# generated\nsearch example.org\nnameserver 10.255.255.53\n"
      "nameserver\tfe80::1%eth0\n  nameserver 127.0.0.53 # stub\nnameserver bogus\n"
      "nameservers 1.1.1.1\noptions edns0\n");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].text, "10.255.255.53/32");
  EXPECT_EQ(r[1].text, "fe80::1/128");
  EXPECT_TRUE(r[1].ipv6);
  EXPECT_EQ(r[2].text, "127.0.0.53/32");
}

TEST(EgressFirewallTest, ReadsTheTableListing) {
  // `nft list table inet warren` of nftables 1.0.6 (its -j form leaves comments out).
  const char* listing =
      "table inet warren {\n"
      "\tchain vms_aaaaaaaaaaaaaaaa {\n"
      "\t\tcomment \"warren data_dir=/var/lib/warren\"\n"
      "\t\ttype filter hook output priority filter; policy accept;\n"
      "\t\tmeta skuid != 64055 return\n"
      "\t}\n"
      "\tchain other {\n"
      "\t\ttype filter hook output priority filter; policy accept;\n"
      "\t}\n"
      "}\n";
  Result<std::vector<EgressChainInfo>> chains = ParseEgressChains(listing);
  ASSERT_TRUE(chains.ok()) << chains.status().ToString();
  ASSERT_EQ(chains->size(), 2u);
  EXPECT_EQ((*chains)[0].name, "vms_aaaaaaaaaaaaaaaa");
  EXPECT_EQ((*chains)[0].data_dir, "/var/lib/warren");
  EXPECT_EQ((*chains)[1].name, "other");
  EXPECT_EQ((*chains)[1].data_dir, "");
  EXPECT_FALSE(ParseEgressChains("garbage").ok());
}

class EgressFirewallNftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-nft-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A stand-in nft: a shell script with `body`.
  std::string Script(const std::string& body) {
    const std::string path = dir_ + "/nft";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  EgressFirewallConfig Config() {
    EgressFirewallConfig c;
    c.qemu_uid = 64055;
    c.data_dir = dir_;
    return c;
  }
  std::string dir_;
};

TEST_F(EgressFirewallNftTest, MissingNftIsAClearError) {
  EgressFirewallOptions o;
  o.nft = dir_ + "/no-such-nft";
  EgressFirewall fw(Config(), o);
  Status st = fw.Apply();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("nftables"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not found"), std::string::npos) << st.message();
}

TEST_F(EgressFirewallNftTest, RefusalCarriesNftsWords) {
  EgressFirewallOptions o;
  // Lists an empty table, refuses every transaction.
  o.nft = Script(
      "if [ \"$1\" = list ]; then echo 'table inet warren {'; echo '}'; exit 0; fi\n"
      "cat >/dev/null; echo 'Error: Could not process rule: Operation not supported' >&2; exit 1");
  o.resolv_conf = dir_ + "/resolv.conf";
  EgressFirewall fw(Config(), o);
  Status st = fw.Apply();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("Operation not supported"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("installing the VM isolation rules"), std::string::npos)
      << st.message();
}

TEST_F(EgressFirewallNftTest, AppliesOneTransactionAndRemovesStaleChains) {
  EgressFirewallOptions o;
  // Records each transaction it is fed; lists our chain plus one of a warren whose data
  // directory is gone and one of a live warren.
  o.nft = Script(
      "if [ \"$1\" = list ]; then\n"
      "  echo 'table inet warren {'\n"
      "  echo '  chain vms_1111111111111111 {'\n"
      "  echo '    comment \"warren data_dir=" +
      dir_ +
      "/gone\"'\n  echo '  }'\n"
      "  echo '  chain vms_2222222222222222 {'\n"
      "  echo '    comment \"warren data_dir=" +
      dir_ +
      "\"'\n  echo '  }'\n"
      "  echo '}'\n  exit 0\nfi\n"
      "n=$(ls " +
      dir_ + " | grep -c '^tx') ; cat > " + dir_ + "/tx$n");
  std::ofstream(dir_ + "/resolv.conf") << "nameserver 192.0.2.53\n";
  o.resolv_conf = dir_ + "/resolv.conf";
  EgressFirewall fw(Config(), o);
  ASSERT_TRUE(fw.Apply().ok());
  std::ifstream tx0(dir_ + "/tx0");
  std::stringstream first;
  first << tx0.rdbuf();
  EXPECT_NE(first.str().find("flush chain inet warren " + fw.chain()), std::string::npos);
  EXPECT_NE(first.str().find("ip daddr 192.0.2.53/32 meta l4proto { tcp, udp } th dport 53"),
            std::string::npos)
      << first.str();
  std::ifstream tx1(dir_ + "/tx1");
  std::stringstream second;
  second << tx1.rdbuf();
  EXPECT_EQ(second.str(), "delete chain inet warren vms_1111111111111111\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/tx2"));  // the live warren's chain stays
}

}  // namespace
}  // namespace warren
