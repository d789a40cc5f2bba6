// How VMs are shown by ls, stat, new and friends: one JSON shape, one notion of "state"
// (the hypervisor's, or what the store knows when the hypervisor has nothing to say), and
// the ssh line and web address of a VM. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keys/store.h"
#include "lobby/commands/interpreter.h"
#include "vmhost/vm_host.h"

namespace warren {

// Who a command in a VM runs as: every image's default_user (packaging/images), whose home
// is /home/dev and who has passwordless sudo. For help text and agents' instructions.
inline constexpr std::string_view kVmUser = "dev";
// "dev (home /home/dev), who has passwordless sudo".
std::string VmUserText();

// "ssh -p 2222 NAME@HOST", or "ssh NAME@HOST" on port 22.
std::string VmSshCommand(const ServerInfo& info, std::string_view name);
// The URL of the VM's pages, exactly as a browser on this machine reaches them:
// "http://NAME.warren.localhost:8081/" (WebHostUrl, web_url.h); "" when this server has no
// web listener.
std::string VmUrl(const ServerInfo& info, std::string_view name);
// VmUrl and a newline, or "" with no web listener: the text never shows a dead link.
std::string VmUrlLine(const ServerInfo& info, std::string_view name);

// What `ls` and `stat` call a VM's state: "creating" while `new` runs, "removing" while
// `rm` does, else the hypervisor's ("running", "paused", "stopped", "crashed"), "missing"
// when the hypervisor has no such domain, "unreachable" when its host does not answer (it is
// kept, and back when the host is), "unknown" when asking failed otherwise.
std::string VmStateText(const VmRecord& vm, const Result<VmInfo>& info);

// The hypervisor's view of the VMs a command shows, by id: each VM is inspected the first
// time it is asked for and remembered, so a command costs what the caller's VMs cost, never
// a walk over every domain of the host (which grows with every user's VMs and waits on any
// of them that is busy). Lives for one command, on one thread.
class HostView {
 public:
  explicit HostView(VmHost* host);
  Result<VmInfo> Find(std::string_view id) const;

 private:
  VmHost* host_;
  mutable std::map<std::string, Result<VmInfo>, std::less<>> by_id_;
};

// {"name","id","state","desired_state","owner","image","cpus","memory_mib","disk_gib",
//  "tags","comment","env_keys","egress","created_at","kind","size","expires_at","ssh","url"};
// "kind" is "vm" or "sandbox", "size" and "expires_at" (Unix seconds) are null for a VM;
// "url" is null with no web listener. Never env values: they may be secrets.
nlohmann::json VmJson(const VmRecord& vm, std::string_view state, const ServerInfo& info);

// "2 GiB", "512 MiB", "1.5 GiB".
std::string FormatMib(int64_t mib);
// "3d 4h", "2h 5m", "42s".
std::string FormatDuration(int64_t seconds);

}  // namespace warren
