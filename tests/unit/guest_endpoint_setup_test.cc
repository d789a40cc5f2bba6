// The guest setup script of the integrations endpoint (vmhost/guest/endpoint_setup.h):
// which names reach /etc/hosts, and that the script parses under the guest's /bin/sh (dash
// here; run for real in guest_endpoint_vm). A fake `sudo` on PATH makes the command a
// syntax check only: nothing on this machine is changed.
#include "vmhost/guest/endpoint_setup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/unit/integration_test_peers.h"

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

}  // namespace
}  // namespace warren::guest
