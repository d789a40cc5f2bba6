#include "lobby/commands/vm_stream.h"

#include <chrono>
#include <utility>

#include "lobby/base/log.h"
#include "lobby/commands/vm_login.h"

namespace warren {
namespace {

// What a stream is, for its audit line: "shell", "exec-pty", "sftp", "tcp:8080"…
std::string ChannelName(const GuestChannelRequest& request) {
  bool pty = request.terminal.has_value();
  switch (request.kind) {
    case GuestChannelRequest::Kind::kShell:
      return pty ? "shell" : "shell-nopty";
    case GuestChannelRequest::Kind::kExec:
      return pty ? "exec-pty" : "exec";
    case GuestChannelRequest::Kind::kSubsystem:
      return request.command;
    case GuestChannelRequest::Kind::kTcp:
      return "tcp:" + std::to_string(request.port);
    case GuestChannelRequest::Kind::kUnix:
      return "unix";
    case GuestChannelRequest::Kind::kIdentityPort:  // (warren's own: no surface asks for it)
      return "identity-port";
  }
  return "?";
}

// The one audit line of a stream into a VM: the interpreter's line for the command `ssh`
// (interpreter.cc Finish: cmd, vm, caller, user, surface, code, dur_ms), with which channel
// and, for a refusal, why. Never the command line or a byte of the stream.
void Audit(const Caller& caller, std::string_view vm_name, std::string_view channel,
           const Status& st, std::chrono::steady_clock::time_point start) {
  auto dur_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  LogInfo("audit cmd=ssh vm=" + LogQuote(vm_name) + " channel=" + LogQuote(channel) +
          " caller=" + LogQuote(caller.credential) + " user=" + LogQuote(caller.user) +
          " surface=" + LogQuote(caller.surface) + " code=" + std::string(CodeName(st.code())) +
          " dur_ms=" + std::to_string(dur_ms) +
          (st.ok() ? "" : " error=" + LogQuote(st.message())));
}

}  // namespace

Result<std::shared_ptr<GuestPipe>> OpenVmStream(Interpreter& interpreter, Caller& caller,
                                                std::string_view vm_name,
                                                const GuestChannelRequest& request,
                                                std::function<void()> notify) {
  const auto start = std::chrono::steady_clock::now();
  auto open = [&]() -> Result<std::shared_ptr<GuestPipe>> {
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, AuthorizeVmLogin(interpreter, caller, vm_name));
    // AuthorizeVmLogin answers Unavailable when this server runs no VMs, so guests is set.
    return interpreter.services().guests->OpenChannel(vm.id, request, std::move(notify));
  };
  Result<std::shared_ptr<GuestPipe>> pipe = open();
  Audit(caller, vm_name, ChannelName(request), pipe.status(), start);
  return pipe;
}

Result<GuestProgress> VmExecTarget::Exec(const GuestCommand& command,
                                         const GuestStreams& streams) const {
  return guests_->Exec(vm_id_, command, streams);
}

Result<VmExecTarget> AuthorizeVmExec(Interpreter& interpreter, Caller& caller,
                                     std::string_view vm_name) {
  const auto start = std::chrono::steady_clock::now();
  Result<VmRecord> vm = AuthorizeVmLogin(interpreter, caller, vm_name);
  Audit(caller, vm_name, "exec", vm.status(), start);
  if (!vm.ok()) return vm.status();
  VmExecTarget target;
  target.guests_ = interpreter.services().guests;
  target.vm_id_ = vm->id;
  target.vm_name_ = vm->name;
  return target;
}

}  // namespace warren
