// The GuestControl scenarios against a local OpenSSH sshd on a unix socket: everything but
// the guest image (launcher, virtio-serial, TCG speed), in milliseconds. See
// guest_vm_test.cc for the same scenarios against a real guest.
#include "tests/unit/guest_control_scenarios.h"

namespace warren::guest::testing {

TargetSetup MakeGuestTarget() {
  TargetSetup s;
  Result<std::unique_ptr<GuestTarget>> t = StartLocalSshd();
  if (t.status().code() == Code::kNotFound) {
    s.skip_reason = t.status().message();
  } else if (!t.ok()) {
    s.error = t.status();
  } else {
    s.target = std::move(t).value();
  }
  return s;
}

double TimeScale() { return 1.0; }

}  // namespace warren::guest::testing
