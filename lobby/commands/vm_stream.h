// The one sanctioned way to carry a byte stream into a guest — a shell, a command, sftp, a
// TCP connection to a port inside a VM. Each call authorizes one caller for one VM by the
// rule of the lobby command `ssh VM CMD` (vm_login.h AuthorizeVmLogin: the credential
// re-read from the store, --cmds allowing ssh, owner and tag scope, ready and running),
// writes the one audit line for it, and hands back the guest's side. The SSH VM route
// (`ssh NAME@HOST`, lobby/ssh/vm_route.h) uses it; no surface reaches services().guests
// itself. Stateless functions, thread-safe (the interpreter's services are); what they
// return is as thread-safe as GuestControl.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"
#include "vmhost/guest_control.h"

namespace warren {

// A raw channel into VM `vm_name` (GuestControl::OpenChannel): a session (shell, command or
// subsystem, with or without a terminal) or a TCP port on the guest's loopback. Returns at
// once; the pipe says when the guest has answered, and `notify` is called whenever it may
// have changed (see GuestPipe). A refusal is AuthorizeVmLogin's status, worded for the user
// ("NAME is stopped; start it with: …"); Unavailable when the VM's control connection cannot
// be used. Refreshes `caller`'s scope.
Result<std::shared_ptr<GuestPipe>> OpenVmStream(Interpreter& interpreter, Caller& caller,
                                                std::string_view vm_name,
                                                const GuestChannelRequest& request,
                                                std::function<void()> notify);

// A VM that a caller was just authorized to run one command in under the guest runner
// (GuestControl::Exec: exact stdout, stderr and exit status; cancelling kills the command's
// process tree). What a surface's worker thread needs for a command without a terminal: copy
// it there. Holds no lock.
class VmExecTarget {
 public:
  const std::string& vm_name() const { return vm_name_; }
  // Runs `command` in the VM and streams it per `streams` (GuestControl::Exec).
  Result<GuestProgress> Exec(const GuestCommand& command, const GuestStreams& streams) const;

 private:
  friend Result<VmExecTarget> AuthorizeVmExec(Interpreter& interpreter, Caller& caller,
                                              std::string_view vm_name);
  GuestControl* guests_ = nullptr;
  std::string vm_id_;
  std::string vm_name_;
};

// Authorizes `caller` for one command in VM `vm_name` and writes its audit line. Refusals
// as for OpenVmStream. Refreshes `caller`'s scope.
Result<VmExecTarget> AuthorizeVmExec(Interpreter& interpreter, Caller& caller,
                                     std::string_view vm_name);

}  // namespace warren
