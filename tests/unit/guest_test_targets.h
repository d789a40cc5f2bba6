// Places SshGuestControl can reach in tests: a local OpenSSH sshd behind a unix socket
// (`socat UNIX-LISTEN:... EXEC:"sshd -i"`, hermetic and fast, logging in as root with HOME
// in a temp dir) and a real tiny guest image booted under QEMU TCG the way warren boots one
// (overlay, seed disk with the control key, the control port on a unix socket). Each target
// owns a temp dir and its processes, and removes and kills them when destroyed; the
// processes also die with the test process (PR_SET_PDEATHSIG), so a crashed test leaves no
// QEMU behind. Not thread-safe: create and destroy targets on the test's main thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "lobby/base/status.h"
#include "vmhost/guest/ssh_guest_control.h"

namespace warren::guest::testing {

inline constexpr char kTestVm[] = "test-vm";

// A background process in its own process group, output appended to a log file.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  Status Start(const std::vector<std::string>& argv, const std::string& log_path);
  bool Running();
  // SIGTERM to the group, SIGKILL after 3 s; reaps it.
  void Stop();
  pid_t pid() const { return pid_; }
  // After Running() returned false: how it ended (128+signal when killed).
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

class GuestTarget {
 public:
  virtual ~GuestTarget();
  const std::string& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_; }
  const std::string& key_path() const { return key_; }
  const std::string& user() const { return user_; }
  // Options for an SshGuestControl that reaches this target as kTestVm.
  SshGuestControlOptions ControlOptions() const;
  // The last lines of the target's logs (console, sshd), for failure messages.
  virtual std::string LogTail() const = 0;

 protected:
  friend Result<std::unique_ptr<GuestTarget>> StartLocalSshd();
  friend struct BootedGuest BootGuest(const std::string& image_name);
  std::string dir_;
  std::string socket_;
  std::string key_;
  std::string user_;
};

// The local sshd target.
Result<std::unique_ptr<GuestTarget>> StartLocalSshd();

// A guest of the named image ("tiny", "debian"): the newest NAME@VERSION in
// WARREN_TEST_IMAGES (default /var/lib/warren-test/images), built there with
// packaging/images/build-NAME.sh when there is none. `skip_reason` is set (and no target
// returned) when no image can be found or built; an error means the guest did not come up.
struct BootedGuest {
  std::unique_ptr<GuestTarget> target;
  std::string skip_reason;
  Status error;
  double boot_seconds = 0;  // QEMU start to the first answer on the control connection
};
BootedGuest BootGuest(const std::string& image_name);

// The path of the warren-run binary the build made.
std::string RunnerBinaryPath();

}  // namespace warren::guest::testing
