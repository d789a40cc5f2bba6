// The GuestControl scenarios (guest_control_scenarios.cc) run against a target that each test
// binary supplies: guest_local_test a local sshd, guest_vm_test a real tiny guest under QEMU.
// The target is made once per process and lives until exit.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/unit/guest_test_targets.h"
#include "vmhost/guest/ssh_guest_control.h"

namespace warren::guest::testing {

struct TargetSetup {
  std::unique_ptr<GuestTarget> target;
  std::string skip_reason;  // set: every scenario skips, saying this
  Status error;             // set: every scenario fails, saying this
};

// Supplied by each binary.
TargetSetup MakeGuestTarget();
// How much slower than a local sshd the target is (timing bounds are multiplied by it).
double TimeScale();

class GuestControlTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  static GuestTarget& target();
  // A fresh SshGuestControl for the target (like a restarted warren).
  std::unique_ptr<SshGuestControl> NewControl();

  std::unique_ptr<SshGuestControl> control_;
};

// What one Exec or Wait gave back.
struct Outcome {
  Result<GuestProgress> progress = Internal("not run");
  std::string out;
  std::string err;
};

Outcome RunExec(GuestControl& control, const GuestCommand& command, int wait_ms = -1,
                InputStream* in = nullptr, std::shared_ptr<CancelSignal> cancel = nullptr);
Outcome RunExec(GuestControl& control, const std::string& command, int wait_ms = -1);
Outcome RunWait(GuestControl& control, const GuestProgress& from, int wait_ms = -1);

}  // namespace warren::guest::testing
