// One warren per domain prefix on a machine (vmhost/domain_prefix_claim.h): a second claim
// of a prefix is refused while the first holder lives, and freed however the holder ends.
#include "vmhost/domain_prefix_claim.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace warren {
namespace {

class DomainPrefixClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warren-claim-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/lock";  // missing: Take makes it
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_, dir_;
};

TEST_F(DomainPrefixClaimTest, ASecondClaimOfAPrefixIsRefusedUntilTheFirstEnds) {
  Result<DomainPrefixClaim> first = DomainPrefixClaim::Take("qemu:///system", "warren-", dir_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->held());
  EXPECT_EQ(first->path(), dir_ + "/warren-domains-warren-.lock");

  Result<DomainPrefixClaim> second = DomainPrefixClaim::Take("qemu:///system", "warren-", dir_);
  ASSERT_EQ(second.status().code(), Code::kConflict) << second.status().ToString();
  EXPECT_NE(second.status().message().find("\"warren-<id>\""), std::string::npos);
  EXPECT_NE(second.status().message().find("--vm-domain-prefix"), std::string::npos);

  // Another prefix is another warren's business.
  Result<DomainPrefixClaim> other = DomainPrefixClaim::Take("qemu:///system", "staging-", dir_);
  EXPECT_TRUE(other.ok()) << other.status().ToString();

  // Moved, it is still held; destroyed, it is free.
  DomainPrefixClaim moved = std::move(first).value();
  EXPECT_TRUE(moved.held());
  EXPECT_EQ(DomainPrefixClaim::Take("qemu:///system", "warren-", dir_).status().code(),
            Code::kConflict);
  moved = DomainPrefixClaim();
  EXPECT_TRUE(DomainPrefixClaim::Take("qemu:///system", "warren-", dir_).ok());
}

TEST_F(DomainPrefixClaimTest, AKilledHolderLeavesThePrefixFree) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<DomainPrefixClaim> c = DomainPrefixClaim::Take("qemu:///system", "warren-", dir_);
    char b = c.ok() ? '1' : '0';
    (void)!::write(ready[1], &b, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char b = 0;
  ASSERT_EQ(::read(ready[0], &b, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(b, '1');
  EXPECT_EQ(DomainPrefixClaim::Take("qemu:///system", "warren-", dir_).status().code(),
            Code::kConflict);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(DomainPrefixClaim::Take("qemu:///system", "warren-", dir_).ok());
}

TEST_F(DomainPrefixClaimTest, RemoteAndTestDriversClaimNothingHere) {
  for (const char* uri :
       {"qemu+ssh://vmhost2/system", "qemu+tcp://10.0.0.2/system", "test:///default"}) {
    Result<DomainPrefixClaim> c = DomainPrefixClaim::Take(uri, "warren-", dir_);
    ASSERT_TRUE(c.ok()) << uri << ": " << c.status().ToString();
    EXPECT_FALSE(c->held()) << uri;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_)) << "nothing was made for them";
  Result<DomainPrefixClaim> local = DomainPrefixClaim::Take("qemu+unix:///system", "warren-", dir_);
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(local->held());
}

}  // namespace
}  // namespace warren
