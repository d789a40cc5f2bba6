#include "tests/fakes/fake_vm_host.h"

#include <algorithm>

namespace warren {

std::optional<Status> FakeVmHost::TakeFailure() {
  std::optional<Status> f;
  f.swap(fail_next_);
  return f;
}

void FakeVmHost::FailNext(Status status) {
  std::lock_guard lock(mu_);
  fail_next_ = std::move(status);
}

Status FakeVmHost::Create(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  std::lock_guard lock(mu_);
  if (auto f = TakeFailure()) return *f;
  if (vms_.count(spec.id)) return Conflict("vm " + spec.id + " already exists");
  Vm vm;
  vm.info.id = spec.id;
  vm.info.name = spec.name.empty() ? spec.id : spec.name;
  vm.info.image = spec.image;
  vm.info.state = VmState::kRunning;
  vm.info.cpus = spec.cpus;
  vm.info.memory_mib = spec.memory_mib;
  vm.info.disk_gib = spec.disk_gib;
  vm.info.started_at = clock_.NowUnix();
  vm.console = "fake boot of " + spec.image + "\nlogin:\n";
  vms_.emplace(spec.id, std::move(vm));
  return Status::Ok();
}

Status FakeVmHost::Transition(std::string_view id, std::initializer_list<VmState> from, VmState to,
                              const char* verb) {
  std::lock_guard lock(mu_);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  VmInfo& info = it->second.info;
  if (std::find(from.begin(), from.end(), info.state) == from.end()) {
    return Conflict("cannot " + std::string(verb) + " a " + std::string(VmStateName(info.state)) +
                    " vm");
  }
  bool boots = to == VmState::kRunning && info.state != VmState::kPaused;
  info.state = to;
  if (boots) {
    info.started_at = clock_.NowUnix();
    it->second.console += "fake boot\n";
  }
  if (to == VmState::kStopped) info.started_at = 0;
  return Status::Ok();
}

Status FakeVmHost::Start(std::string_view id) {
  return Transition(id, {VmState::kStopped}, VmState::kRunning, "start");
}
Status FakeVmHost::Stop(std::string_view id) {
  return Transition(id, {VmState::kRunning, VmState::kPaused, VmState::kCrashed}, VmState::kStopped,
                    "stop");
}
Status FakeVmHost::Pause(std::string_view id) {
  return Transition(id, {VmState::kRunning}, VmState::kPaused, "pause");
}
Status FakeVmHost::Resume(std::string_view id) {
  return Transition(id, {VmState::kPaused}, VmState::kRunning, "resume");
}
Status FakeVmHost::Restart(std::string_view id) {
  return Transition(id, {VmState::kRunning}, VmState::kRunning, "restart");
}

Status FakeVmHost::Destroy(std::string_view id) {
  std::lock_guard lock(mu_);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  vms_.erase(it);
  return Status::Ok();
}

Status FakeVmHost::Rename(std::string_view id, std::string_view name) {
  WARREN_RETURN_IF_ERROR(ValidateVmName(name));
  std::lock_guard lock(mu_);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  it->second.info.name = std::string(name);
  return Status::Ok();
}

Result<VmInfo> FakeVmHost::Inspect(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  return it->second.info;
}

Result<std::vector<VmInfo>> FakeVmHost::List() {
  std::lock_guard lock(mu_);
  std::vector<VmInfo> out;
  for (const auto& [id, vm] : vms_) out.push_back(vm.info);
  return out;
}

Result<std::string> FakeVmHost::Console(std::string_view id, int max_lines) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  const std::string& log = it->second.console;
  // The start of the last `max_lines` complete lines.
  size_t pos = log.size();
  for (int i = 0; i < max_lines && pos > 0; ++i) {
    size_t nl = pos >= 2 ? log.rfind('\n', pos - 2) : std::string::npos;
    pos = nl == std::string::npos ? 0 : nl + 1;
  }
  return log.substr(max_lines <= 0 ? log.size() : pos);
}

}  // namespace warren
