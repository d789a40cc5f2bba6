// The GuestControl scenarios against a real guest: the tiny image (WARREN_GUEST_TEST_IMAGE
// picks another, e.g. debian) booted once under QEMU TCG (built with
// packaging/images/build-tiny.sh when none is found), reached over its virtio-serial control
// port like warren reaches its VMs. Plus what only a real guest shows:
// the launcher serving reconnects, and a job followed across a control sshd that died.
// Skips (saying why; fails under CI) only when no image can be found or built.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/unit/guest_control_scenarios.h"

namespace warren::guest::testing {

TargetSetup MakeGuestTarget() {
  TargetSetup s;
  const char* image = std::getenv("WARREN_GUEST_TEST_IMAGE");
  BootedGuest g = BootGuest(image != nullptr && *image != '\0' ? image : "tiny");
  s.skip_reason = g.skip_reason;
  s.error = g.error;
  s.target = std::move(g.target);
  if (s.target != nullptr) {
    std::fprintf(stderr, "the guest answered on its control port %.1f s after QEMU started\n",
                 g.boot_seconds);
  }
  return s;
}

double TimeScale() { return 6.0; }

namespace {

TEST_F(GuestControlTest, ExecFollowsAJobAcrossADeadControlConnection) {
  Outcome all;
  std::thread follower(
      [&] { all = RunExec(*control_, "for i in 1 2 3 4 5 6; do echo $i; sleep 1; done"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  // Kills the control sshd under the connection; the launcher serves the next one.
  Outcome killer = RunExec(*control_, "sudo -n pkill -KILL -x sshd");
  follower.join();
  ASSERT_TRUE(all.progress.ok()) << all.progress.status().ToString();
  EXPECT_EQ(all.out, "1\n2\n3\n4\n5\n6\n");
  EXPECT_EQ(all.progress->exit_code, 0);
  Outcome after = RunExec(*control_, "echo after");
  ASSERT_TRUE(after.progress.ok()) << after.progress.status().ToString();
  EXPECT_EQ(after.out, "after\n");
}

TEST_F(GuestControlTest, BackToBackRestartsOfWarren) {
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<SshGuestControl> c = NewControl();
    ASSERT_NE(c, nullptr);
    Outcome o = RunExec(*c, "echo " + std::to_string(i));
    ASSERT_TRUE(o.progress.ok()) << i << ": " << o.progress.status().ToString();
    EXPECT_EQ(o.out, std::to_string(i) + "\n");
  }
}

}  // namespace
}  // namespace warren::guest::testing
