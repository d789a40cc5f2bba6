// The guest setup script of the integrations endpoint (vmhost/guest/endpoint_setup.h):
// which names reach /etc/hosts, that the script parses under the guest's /bin/sh (dash
// here; run for real in guest_endpoint_vm), its report line, and its NAT redirect run for
// real in a namespace of its own (`unshare -rnm`: a new network namespace, /etc a copy),
// with nft, with iptables only, and with neither. A fake `sudo` on PATH runs the command
// as the namespace's root; nothing on this machine is changed.
#include "vmhost/guest/endpoint_setup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/unit/integration_test_peers.h"
#include "tests/unit/skip_or_fail.h"

namespace warren::guest {
namespace {

TEST(EndpointSetupTest, OnlyDnsLabelsBecomeHostNames) {
  EXPECT_TRUE(ValidEndpointName("github"));
  EXPECT_TRUE(ValidEndpointName("a-1"));
  for (const char* bad : {"", "-a", "a-", "a.b", "a b", "a'b", "a;b"}) {
    EXPECT_FALSE(ValidEndpointName(bad)) << bad;
  }
  GuestEndpoint ep;
  std::string cmd = EndpointSetupCommand(ep, {"api", "x'; rm -rf /", "gh"}, true);
  EXPECT_NE(cmd.find("127.77.0.1 api.int.warren.internal gh.int.warren.internal"),
            std::string::npos);
  EXPECT_EQ(cmd.find("rm -rf"), std::string::npos);
  EXPECT_EQ(cmd.rfind("sudo -n /bin/sh -c ", 0), 0u);
}

TEST(EndpointSetupTest, TheReportLineSaysWhichPortsTheForwardsTake) {
  using Mode = EndpointSetupReport::Mode;
  EndpointSetupReport redirect = ParseEndpointSetupReport("warren-endpoint redirect nft\n");
  EXPECT_EQ(redirect.mode, Mode::kRedirect);
  EXPECT_EQ(redirect.detail, "nft");
  EndpointSetupReport direct =
      ParseEndpointSetupReport("warren-endpoint direct no nft or iptables in the guest\n");
  EXPECT_EQ(direct.mode, Mode::kDirect);
  EXPECT_EQ(direct.detail, "no nft or iptables in the guest");
  EXPECT_EQ(ParseEndpointSetupReport("warren-endpoint direct\x1b[2J\n").detail, "?[2J");
  EXPECT_EQ(ParseEndpointSetupReport("warren-endpoint direct").detail, "no redirect in the guest");
  for (const char* none : {"", "hello\nwarren-endpoint redirect\n", " warren-endpoint direct"}) {
    EXPECT_EQ(ParseEndpointSetupReport(none).mode, Mode::kUnknown) << none;
  }
}

TEST(EndpointSetupTest, TheScriptParsesUnderTheGuestsShell) {
  std::string dir = ::testing::TempDir() + "endpoint-setup-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream sudo(dir + "/sudo");
    // sudo -n /bin/sh -c SCRIPT  ->  /bin/sh -n -c SCRIPT
    sudo << "#!/bin/sh\nshift\nexec \"$1\" -n \"$2\" \"$3\"\n";
  }
  ::chmod((dir + "/sudo").c_str(), 0755);
  GuestEndpoint ep;
  ep.ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  for (bool want : {true, false}) {
    std::string cmd = EndpointSetupCommand(
        ep, want ? std::vector<std::string>{"api"} : std::vector<std::string>{}, want);
    auto [rc, out] = integrations::test::RunShell("PATH=" + dir + ":$PATH; " + cmd);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "");
  }
  std::filesystem::remove_all(dir);
}

// Runs the setup (twice, then with no endpoint) in a new user, network and mount namespace
// with `hide` made unfindable, and says what it saw: the report, the rules, what answers
// on 127.77.0.1:80/:443 and on the namespace's own :80/:443 (servers of "the guest's" on
// 0.0.0.0), and whether the redirect was gone after the setup without an endpoint.
class EndpointRedirectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"unshare", "socat", "ip"}) {
      if (RunShellRc(std::string("command -v ") + tool + " >/dev/null") != 0) {
        WARREN_SKIP_OR_FAIL() << tool << " is not installed";
      }
    }
    if (RunShellRc("unshare -rnm true") != 0) {
      WARREN_SKIP_OR_FAIL() << "no user namespaces here (unshare -rnm)";
    }
    dir_ = ::testing::TempDir() + "endpoint-redirect-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_ + "/bin");
    {
      std::ofstream sudo(dir_ + "/bin/sudo");
      sudo << "#!/bin/sh\nshift\nexec \"$@\"\n";  // sudo -n CMD... -> CMD...
    }
    ::chmod((dir_ + "/bin/sudo").c_str(), 0755);
    GuestEndpoint ep;
    std::ofstream(dir_ + "/setup.sh") << EndpointSetupCommand(ep, {"api"}, true) << "\n";
    std::ofstream(dir_ + "/teardown.sh") << EndpointSetupCommand(ep, {}, false) << "\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  static int RunShellRc(const std::string& cmd) { return integrations::test::RunShell(cmd).first; }

  std::string Run(const std::string& hide) {
    const std::string d = dir_;
    std::ofstream(d + "/driver.sh") << R"SH(D=)SH" << d << R"SH(
mount --make-rprivate / 2>/dev/null
mkdir $D/etc && cp -a /etc/. $D/etc/ 2>/dev/null
mount --bind $D/etc /etc || { echo 'cannot bind /etc'; exit 1; }
ip link set lo up
for t in )SH" << hide << R"SH(; do
  n=$(command -v $t) && mount --bind /dev/null "$(readlink -f "$n")"
done
PATH=$D/bin:$PATH
sh $D/setup.sh >/dev/null 2>$D/err1; sh $D/setup.sh >$D/out 2>$D/err2
echo "report: $(cat $D/out)"
if command -v nft >/dev/null; then echo "nft: $(nft list table ip warren_int | grep -c dnat)"; fi
if command -v iptables >/dev/null; then
  echo "iptables: $(iptables -t nat -S WARREN_INT 2>/dev/null | grep -c DNAT)"        "$(iptables -t nat -S OUTPUT | grep -c 'j WARREN_INT')"
fi
echo "sysctl: $(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)"
grep -h -v '^$' $D/err1 $D/err2
if grep -q redirect $D/out; then
socat TCP-LISTEN:17780,bind=127.77.0.1,reuseaddr,fork SYSTEM:'echo endpoint-http' & a=$!
socat TCP-LISTEN:17743,bind=127.77.0.1,reuseaddr,fork SYSTEM:'echo endpoint-https' & b=$!
socat TCP-LISTEN:80,reuseaddr,fork SYSTEM:'echo own-80' & c=$!
socat TCP-LISTEN:443,reuseaddr,fork SYSTEM:'echo own-443' & e=$!
for x in 127.77.0.1:17780 127.77.0.1:17743 127.0.0.1:80 127.0.0.1:443; do
  i=0; while [ $i -lt 50 ] && ! socat -u TCP:$x /dev/null 2>/dev/null; do sleep 0.1; i=$((i+1)); done
done
for x in 127.77.0.1:80 127.77.0.1:443 127.0.0.1:80 127.0.0.1:443; do
  socat -u TCP:$x - 2>/dev/null || echo "nothing at $x"
done
kill $a $b $c $e
fi
sh $D/teardown.sh 2>&1
socat -u TCP:127.77.0.1:80 - 2>/dev/null || echo "after teardown: nothing at 127.77.0.1:80"
)SH";
    return integrations::test::RunShell("unshare -rnm sh " + d + "/driver.sh").second;
  }

  std::string dir_;
};

TEST_F(EndpointRedirectTest, WithNftTheGuestsOwnServersHold80And443) {
  if (RunShellRc("command -v nft >/dev/null") != 0) {
    WARREN_SKIP_OR_FAIL() << "nft is not installed";
  }
  std::string out = Run("");
  // The first line of interest: nft made the redirect; iptables (when here) was not needed.
  EXPECT_NE(out.find("report: warren-endpoint redirect nft\nnft: 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("sysctl: 1024\nendpoint-http\nendpoint-https\nown-80\nown-443\n"
                     "after teardown: nothing at 127.77.0.1:80\n"),
            std::string::npos)
      << out;
}

TEST_F(EndpointRedirectTest, WithIptablesOnlyTheGuestsOwnServersHold80And443) {
  if (RunShellRc("command -v iptables >/dev/null && command -v iptables-restore >/dev/null") != 0) {
    WARREN_SKIP_OR_FAIL() << "iptables is not installed";
  }
  std::string out = Run("nft");
  EXPECT_EQ(out,
            "report: warren-endpoint redirect iptables\niptables: 2 1\nsysctl: 1024\n"
            "endpoint-http\nendpoint-https\nown-80\nown-443\n"
            "after teardown: nothing at 127.77.0.1:80\n");
}

TEST_F(EndpointRedirectTest, WithNeitherTheForwardsHoldThePortsThemselves) {
  std::string out = Run("nft iptables iptables-restore");
  EXPECT_EQ(out,
            "report: warren-endpoint direct no nft or iptables in the guest\nsysctl: 80\n"
            "after teardown: nothing at 127.77.0.1:80\n");
}

// The /etc/hosts block: written by a rename (a reader never sees the file empty or half
// written), and not at all when it is already right. Run in a user and mount namespace
// with /etc a copy, 40 setups alternating between two name sets while a reader loops.
TEST_F(EndpointRedirectTest, TheHostsBlockIsRenamedIntoPlaceAndOnlyWhenItChanges) {
  GuestEndpoint ep;
  std::ofstream(dir_ + "/two.sh") << EndpointSetupCommand(ep, {"api", "other"}, false) << "\n";
  std::ofstream(dir_ + "/one.sh") << EndpointSetupCommand(ep, {"api"}, false) << "\n";
  const std::string d = dir_;
  std::ofstream(d + "/hosts.sh") << "D=" << d << R"SH(
mount --make-rprivate / 2>/dev/null
mkdir $D/etc && cp -a /etc/. $D/etc/ 2>/dev/null
mount --bind $D/etc /etc || { echo 'cannot bind /etc'; exit 1; }
printf '127.0.0.1 localhost\n' > /etc/hosts
PATH=$D/bin:$PATH
i0=$(stat -c %i /etc/hosts)
sh $D/one.sh >/dev/null 2>&1; i1=$(stat -c %i /etc/hosts)
sh $D/one.sh >/dev/null 2>&1; i2=$(stat -c %i /etc/hosts)
[ "$i0" != "$i1" ] && echo renamed
[ "$i1" = "$i2" ] && echo kept
grep -c 'api\.' /etc/hosts
( n=0; while [ ! -e $D/stop ]; do
    grep -q '^127.0.0.1 localhost$' /etc/hosts && grep -q 'api\.' /etc/hosts || n=$((n+1))
  done; echo "torn reads: $n" ) & r=$!
i=0; while [ $i -lt 20 ]; do sh $D/two.sh >/dev/null 2>&1; sh $D/one.sh >/dev/null 2>&1; i=$((i+1)); done
touch $D/stop; wait $r
ls /etc | grep -c 'hosts.warren-int'
)SH";
  std::string out = integrations::test::RunShell("unshare -rnm sh " + d + "/hosts.sh").second;
  EXPECT_EQ(out, "renamed\nkept\n1\ntorn reads: 0\n0\n");
}

}  // namespace
}  // namespace warren::guest
