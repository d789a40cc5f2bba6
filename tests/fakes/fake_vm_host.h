// FakeVmHost: an in-memory VmHost for tests of everything above vmhost. It keeps the same
// state machine as the real host (the contract test runs against both) and can be told to
// fail the next operation. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "lobby/base/clock.h"
#include "vmhost/vm_host.h"

namespace warren {

class FakeVmHost final : public VmHost {
 public:
  explicit FakeVmHost(const Clock& clock = SystemClock::Get()) : clock_(clock) {}

  std::string uri() const override { return "fake://"; }
  Status Create(const VmSpec& spec) override;
  Status Start(std::string_view id) override;
  Status Stop(std::string_view id) override;
  Status Pause(std::string_view id) override;
  Status Resume(std::string_view id) override;
  Status Restart(std::string_view id) override;
  Status Destroy(std::string_view id) override;
  Status Rename(std::string_view id, std::string_view name) override;
  Result<VmInfo> Inspect(std::string_view id) override;
  Result<std::vector<VmInfo>> List() override;
  Result<std::string> Console(std::string_view id, int max_lines) override;

  // The next mutating call fails with `status` and changes nothing.
  void FailNext(Status status);

 private:
  struct Vm {
    VmInfo info;
    std::string console;
  };
  // Runs a transition under the lock, honouring FailNext.
  Status Transition(std::string_view id, std::initializer_list<VmState> from, VmState to,
                    const char* verb);
  std::optional<Status> TakeFailure();

  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Vm, std::less<>> vms_;
  std::optional<Status> fail_next_;
};

}  // namespace warren
