#include "lobby/vm_runtime.h"

#include <chrono>

#include "lobby/base/log.h"
#include "lobby/commands/image_catalog.h"
#include "lobby/commands/reconcile.h"
#include "vmhost/guest/control_key.h"

namespace warren {

VmRuntime::~VmRuntime() = default;

Result<std::unique_ptr<VmRuntime>> VmRuntime::Start(const VmRuntimeOptions& options,
                                                    Services& services) {
  std::unique_ptr<VmRuntime> rt(new VmRuntime());
  const std::string images_dir =
      options.images_dir.empty() ? options.data_dir + "/images" : options.images_dir;

  LibvirtHostOptions host_options;
  host_options.uri = options.libvirt_uri;
  host_options.data_dir = options.data_dir;
  host_options.images_dir = images_dir;
  WARREN_ASSIGN_OR_RETURN(rt->host_, StartLibvirtHost(host_options, options.accel));

  WARREN_ASSIGN_OR_RETURN(std::string control_key,
                          guest::EnsureControlKey(options.data_dir + "/control_ed25519"));

  guest::SshGuestControlOptions guest_options;
  LibvirtHost* host = rt->host_.get();
  // Only a running VM has a control port; saying so at once beats retrying a dead socket
  // for the whole reach timeout.
  guest_options.resolve_socket = [host](std::string_view id) -> Result<std::string> {
    WARREN_ASSIGN_OR_RETURN(VmInfo info, host->Inspect(id));
    if (info.state != VmState::kRunning) {
      return Conflict("the VM is " + std::string(VmStateName(info.state)) +
                      "; start or resume it first");
    }
    return host->VmDir(id) + "/control.sock";
  };
  guest_options.key_path = options.data_dir + "/control_ed25519";
  guest_options.runner_path = options.runner_path;
  guest_options.reach_timeout = std::chrono::seconds(options.guest_reach_timeout_s);
  WARREN_ASSIGN_OR_RETURN(rt->guests_, guest::SshGuestControl::Create(guest_options));

  // Reconcile logs what it did; a failed action is reported, not fatal: the lobby serves.
  Status reconciled = Reconcile(*services.store, *rt->host_, rt->guests_.get(), *services.clock);
  if (!reconciled.ok()) LogWarn("reconcile: " + reconciled.ToString());

  services.vms = rt->host_.get();
  services.guests = rt->guests_.get();
  services.images = DirectoryImageCatalog(images_dir);
  services.control_authorized_key = control_key;
  LogInfo("vms on " + host_options.uri + ", images in " + images_dir);
  return rt;
}

}  // namespace warren
