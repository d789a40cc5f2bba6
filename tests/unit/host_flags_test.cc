// serve's host flags (lobby/host_flags.h): what is taken, each host's peer URI (the one other
// hosts' daemons open for a live move onto it), and the refusals, each naming the flag.
#include "lobby/host_flags.h"

#include <gtest/gtest.h>

namespace warren {
namespace {

const char* kFar = "qemu+ssh://root@h2/system";

TEST(HostFlagsTest, ARemoteHostIsReachedByItsOwnUriAndALocalOneByNone) {
  Result<std::vector<HostFlag>> f =
      ParseHostFlags({"local=qemu:///system", std::string("h2=") + kFar}, {"h2"});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 2u);
  EXPECT_FALSE((*f)[0].remote);
  EXPECT_EQ((*f)[0].peer_uri, "");
  EXPECT_FALSE((*f)[0].declared_isolated);
  EXPECT_TRUE((*f)[1].remote);
  EXPECT_EQ((*f)[1].peer_uri, kFar);
  EXPECT_TRUE((*f)[1].declared_isolated);
}

TEST(HostFlagsTest, APeerUriIsTakenForAnyHost) {
  Result<std::vector<HostFlag>> f =
      ParseHostFlags({"local=qemu:///system", std::string("h2=") + kFar}, {},
                     {"local=qemu+ssh://root@lobby:2222/system", "h2=qemu+tls://h2.lan/system"});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)[0].peer_uri, "qemu+ssh://root@lobby:2222/system");
  EXPECT_EQ((*f)[1].peer_uri, "qemu+tls://h2.lan/system");
}

TEST(HostFlagsTest, RefusalsNameTheFlag) {
  auto refused = [](std::vector<std::string> hosts, std::vector<std::string> isolated,
                    std::vector<std::string> peers, const std::string& says) {
    Result<std::vector<HostFlag>> f = ParseHostFlags(hosts, isolated, peers);
    ASSERT_FALSE(f.ok()) << says;
    EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
    EXPECT_NE(f.status().message().find(says), std::string::npos) << f.status().message();
  };
  refused({}, {}, {}, "--host: give at least one");
  refused({"local"}, {}, {}, "--host takes NAME=URI");
  refused({"local=qemu:///system", "local=qemu:///system"}, {}, {}, "given twice");
  refused({"local=qemu:///system"}, {"h2"}, {}, "--host-isolated h2 names no --host");
  refused({"local=qemu:///system"}, {"local"}, {}, "gets warren's own isolation rules");
  refused({"local=qemu:///system"}, {}, {"h9=qemu+ssh://x/system"}, "names no --host");
  refused({"local=qemu:///system"}, {}, {"local=qemu:///system"}, "names the daemon of whichever");
  refused({"local=qemu:///system"}, {}, {"local="}, "--host-peer-uri takes NAME=URI");
  refused({"local=qemu:///system"}, {}, {"local=qemu+ssh://a/system", "local=qemu+ssh://b/system"},
          "given twice");
}

}  // namespace
}  // namespace warren
