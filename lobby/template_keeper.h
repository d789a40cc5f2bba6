// TemplateKeeper: keeps a saved template (VmHost::SaveTemplate) of the shape `new` makes by
// default — the default image's newest version at the default vCPUs, memory, disk and egress
// — so that `new` restores one instead of booting (services.restore_templates). A missing
// template, or one saved with another guest runner (its tag), is made again: a VM under a
// hidden id (no store record, so no user sees or pays for it) is booted, waits until its guest
// runs a command (which installs the runner), settles (systemd done, disks synced), has its
// memory compacted (page cache dropped, free memory zeroed: the save then holds zero pages for
// what the guest does not use, and every restore reads less), loses its control connection
// and is saved; whatever fails is removed and tried again later. Checked at
// start and then every `interval`. Part of the binary like SandboxReaper: its own thread,
// started after reconcile (which removes a hidden VM a crash left) and stopped before the VM
// runtime it uses.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/commands/interpreter.h"
#include "vmhost/vm_host.h"

namespace warren {

struct TemplateKeeperOptions {
  // The guest runner's version: a template saved with another is made again.
  std::string tag;
  std::chrono::seconds interval{60};
  // After a failure, the next attempt waits at least this long.
  std::chrono::seconds retry_after{300};
  // Shapes to keep templates of besides the default (the warm pool's: lobby/vm_pool.h), on
  // every host, asked at each check. Optional.
  std::function<std::vector<VmShape>()> more_shapes;
};

class TemplateKeeper {
 public:
  // `services` (vms, guests, vm_defaults, images, control_authorized_key, clock) must outlive
  // the keeper. Starts the thread.
  TemplateKeeper(Services& services, TemplateKeeperOptions options);
  ~TemplateKeeper();  // stops and joins the thread (a template being made is finished first)

  // The shape a default `new` asks for now; nullopt when the default image does not resolve.
  static std::optional<VmShape> DefaultShape(Services& services);
  // Makes the template of `shape` now, on the caller's thread, on host `host` (a HostSet
  // member; "" the default one): boots, settles, saves. On failure the hidden VM is removed.
  static Status MakeTemplate(Services& services, const VmShape& shape, const std::string& tag,
                             const std::string& host = "");

 private:
  void Loop();
  // One check: makes the template of the default shape and of each of more_shapes (the warm
  // pool's) on each host that takes new VMs (vm_placement.h HostsForNewVms; templates are per
  // host: a clone's disk stands on its base there) that is missing or stale; one per check,
  // the default host and shape first. True when it made one.
  bool Check();

  Services& services_;
  const TemplateKeeperOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  // Per host: after a failure there, the next attempt on it waits (retry_after).
  std::map<std::string, std::chrono::steady_clock::time_point> next_try_;
  std::thread thread_;
};

}  // namespace warren
