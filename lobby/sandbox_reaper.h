// SandboxReaper: the thread that ends sandboxes at their expiry (ExpireSandboxes,
// lobby/commands/sandbox_expiry.h), checking once a second, so a sandbox goes within a
// second of its time. Part of the binary, as the other runtimes; started after reconcile,
// stopped before the VM runtime it uses.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "lobby/commands/interpreter.h"

namespace warren {

class SandboxReaper {
 public:
  // `services` (store, clock, vms, guests) must outlive the reaper.
  explicit SandboxReaper(Services& services);
  ~SandboxReaper();  // stops and joins the thread

 private:
  void Loop();

  Services& services_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace warren
