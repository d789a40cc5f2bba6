#include "tests/fakes/fake_vm_host.h"

#include "tests/fakes/outage_vm_host.h"

#include <atomic>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace warren {

std::optional<Status> FakeVmHost::TakeFailure() {
  std::optional<Status> f;
  f.swap(fail_next_);
  return f;
}

void FakeVmHost::Emit(std::string_view id, VmState state) {
  if (delivery_) delivery_->Push({std::string(id), state});
}

VmStateDelivery* FakeVmHost::Delivery() {
  std::lock_guard lock(mu_);
  return delivery_.get();
}

Status FakeVmHost::WatchStates(VmStateListener listener) {
  VmStateDelivery* delivery = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!delivery_) {
      if (!listener) return Status::Ok();
      delivery_ = std::make_unique<VmStateDelivery>(
          [this](const std::atomic<bool>&) -> Result<std::vector<VmStateEvent>> {
            WARREN_ASSIGN_OR_RETURN(std::vector<VmInfo> vms, List());
            std::vector<VmStateEvent> all;
            for (const VmInfo& vm : vms) all.push_back({vm.id, vm.state});
            return all;
          });
    }
    delivery = delivery_.get();
  }
  delivery->SetListener(std::move(listener));  // not under mu_: it waits for the listener
  return Status::Ok();
}

Status FakeVmHost::SimulateOutOfBand(std::string_view id, VmState state) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  VmInfo& info = it->second.info;
  if (state == VmState::kRunning && info.state != VmState::kPaused) {
    info.started_at = clock_.NowUnix();
  }
  if (state == VmState::kStopped || state == VmState::kCrashed) info.started_at = 0;
  info.state = state;
  Emit(id, state);
  return Status::Ok();
}

void FakeVmHost::SettleShutdowns() {
  std::lock_guard lock(mu_);
  for (auto& [id, vm] : vms_) {
    if (!vm.shutting_down) continue;
    vm.shutting_down = false;
    vm.info.state = VmState::kStopped;
    vm.info.started_at = 0;
    Emit(id, VmState::kStopped);
  }
  Persist();
}

void FakeVmHost::SimulateReconnect() {
  if (VmStateDelivery* d = Delivery()) d->Resync();
}

void FakeVmHost::FlushStateEvents() {
  if (VmStateDelivery* d = Delivery()) d->Flush();
}

void FakeVmHost::FailNext(Status status) {
  std::lock_guard lock(mu_);
  fail_next_ = std::move(status);
}

void FakeVmHost::SetHostLimits(int64_t memory_mib, int64_t disk_gib) {
  std::lock_guard lock(mu_);
  limit_memory_mib_ = memory_mib;
  limit_disk_gib_ = disk_gib;
}

std::optional<VmSpec> FakeVmHost::SpecOf(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return std::nullopt;
  return it->second.spec;
}

void FakeVmHost::SetHostCores(int cores) {
  std::lock_guard lock(mu_);
  cores_ = cores;
}

HostCapacity FakeVmHost::CapacityLocked() const {
  constexpr int64_t kGiB = int64_t{1} << 30;
  HostCapacity cap;
  cap.cpu_cores = cores_;
  cap.memory_mib = limit_memory_mib_;
  cap.memory_free_mib = limit_memory_mib_;  // a fake guest touches nothing
  cap.disk_free_bytes = limit_disk_gib_ >= INT64_MAX / kGiB ? INT64_MAX : limit_disk_gib_ * kGiB;
  for (const auto& [id, vm] : vms_) {
    if (vm.info.state == VmState::kRunning || vm.info.state == VmState::kPaused) {
      cap.memory_committed_mib += vm.info.memory_mib;
    }
    cap.disk_committed_bytes += vm.info.disk_gib * kGiB;  // an empty overlay may grow to all of it
  }
  return cap;
}

Result<HostCapacity> FakeVmHost::Capacity() {
  std::lock_guard lock(mu_);
  return CapacityLocked();
}

FakeVmHost::Vm FakeVmHost::Booted(const VmSpec& spec, const std::string& image, int64_t disk_gib,
                                  int disk_layers) const {
  Vm vm;
  vm.spec = spec;
  vm.config_cpus = spec.cpus;
  vm.config_memory_mib = spec.memory_mib;
  vm.info.id = spec.id;
  vm.info.name = spec.name.empty() ? spec.id : spec.name;
  vm.info.image = image;
  vm.info.state = VmState::kRunning;
  vm.info.cpus = spec.cpus;
  vm.info.memory_mib = spec.memory_mib;
  vm.info.disk_gib = disk_gib;
  vm.info.started_at = clock_.NowUnix();
  vm.info.disk_layers = disk_layers;
  return vm;
}

void FakeVmHost::SetCreateDelay(std::chrono::milliseconds delay) {
  create_delay_ms_ = delay.count();
}

Status FakeVmHost::Create(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  if (int64_t ms = create_delay_ms_.load(); ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  std::lock_guard lock(mu_);
  Step("create", "before", spec.id);
  if (auto f = TakeFailure()) return *f;
  if (vms_.count(spec.id)) return Conflict("vm " + spec.id + " already exists");
  WARREN_RETURN_IF_ERROR(CheckRoom({spec.cpus, spec.memory_mib, spec.disk_gib}));
  Vm vm = Booted(spec, spec.image, spec.disk_gib, /*disk_layers=*/1);
  vm.console = "fake boot of " + spec.image + "\nlogin:\n";
  MakeVmFiles(spec.id);
  Step("create", "files", spec.id);
  vms_.emplace(spec.id, std::move(vm));
  Persist();
  Emit(spec.id, VmState::kRunning);
  Step("create", "after", spec.id);
  return Status::Ok();
}

Status FakeVmHost::Transition(std::string_view id, std::initializer_list<VmState> from, VmState to,
                              const char* verb) {
  std::lock_guard lock(mu_);
  Step(verb, "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  VmInfo& info = it->second.info;
  if (std::find(from.begin(), from.end(), info.state) == from.end()) {
    return Conflict("cannot " + std::string(verb) + " a " + std::string(VmStateName(info.state)) +
                    " vm");
  }
  bool boots = to == VmState::kRunning && info.state != VmState::kPaused;
  if (boots && info.state != VmState::kRunning) {  // a start: it holds no memory until now
    WARREN_RETURN_IF_ERROR(CheckRoom({it->second.config_cpus, it->second.config_memory_mib, 0})
                               .Annotate("starting vm " + std::string(id)));
  }
  // The power button first, as on the real host (an ACPI shutdown): from here on the guest
  // powers off by itself, also should the process that pressed it die (SettleShutdowns).
  const std::string_view v(verb);
  if ((v == "stop" || v == "restart") && info.state != VmState::kCrashed) {
    it->second.shutting_down = true;
    Persist();
    Step(verb, "asked", id);
  }
  it->second.shutting_down = false;  // done below: off, or off and booted again
  // What libvirt reports on the real host: a restart is a stop and a start; a paused VM is
  // resumed before it is stopped (a paused guest cannot hear the power button).
  if (std::string_view(verb) == "restart") Emit(id, VmState::kStopped);
  if (to == VmState::kStopped && info.state == VmState::kPaused) Emit(id, VmState::kRunning);
  info.state = to;
  Emit(id, to);
  if (boots) {
    info.started_at = clock_.NowUnix();
    it->second.console += "fake boot\n";
    // A boot takes the definition's values, and flattens a chain grown too deep.
    info.cpus = it->second.config_cpus;
    info.memory_mib = it->second.config_memory_mib;
    if (info.disk_layers > kMaxDiskLayers) info.disk_layers = 1;
  }
  if (to == VmState::kStopped) info.started_at = 0;
  Persist();
  Step(verb, "after", id);
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
  Step("destroy", "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  vms_.erase(it);
  Persist();
  Emit(id, VmState::kStopped);  // removed
  Step("destroy", "undefined", id);
  RemoveVmFiles(std::string(id));
  Step("destroy", "after", id);
  return Status::Ok();
}

Result<MigrationReport> FakeVmHost::MigrateTo(std::string_view id, VmHost& target) {
  if (auto* outage = dynamic_cast<OutageVmHost*>(&target)) {
    if (!outage->up()) return outage->GoneStatus();
    return MigrateTo(id, outage->inner());
  }
  auto* to = dynamic_cast<FakeVmHost*>(&target);
  if (to == this) return InvalidArgument("vm " + std::string(id) + " is on that host already");
  if (to == nullptr) return InvalidArgument("a fake host moves vms only to another fake host");
  std::scoped_lock lock(mu_, to->mu_);
  Step("migrate", "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  if (to->vms_.count(id) != 0) return Conflict("vm " + std::string(id) + " exists on the target");
  const VmState state = it->second.info.state;
  if (state == VmState::kCrashed) return Conflict("cannot migrate a crashed vm; stop it first");
  const bool live = state == VmState::kRunning || state == VmState::kPaused;
  const Vm& vm = it->second;
  WARREN_RETURN_IF_ERROR(
      to->CheckRoom({vm.config_cpus, live ? vm.info.memory_mib : 0, vm.info.disk_gib}));
  const std::string key(id);
  to->MakeVmFiles(key);
  to->vms_[key] = std::move(it->second);
  to->Persist();
  to->Step("migrate", "target", id);
  vms_.erase(it);
  Persist();
  Emit(id, VmState::kStopped);  // undefined here
  to->Emit(id, state);
  RemoveVmFiles(key);
  Step("migrate", "after", id);
  MigrationReport report;
  report.live = live;
  report.downtime_ms = live ? 0 : -1;
  return report;
}

Status FakeVmHost::SaveTemplate(std::string_view id, std::string_view tag) {
  std::lock_guard lock(mu_);
  Step("save-template", "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  if (it->second.info.state != VmState::kRunning) {
    return Conflict("cannot save a " + std::string(VmStateName(it->second.info.state)) +
                    " vm as a template");
  }
  TemplateInfo t;
  t.shape = ShapeOf(it->second.spec);
  t.shape.image = it->second.info.image;
  t.tag = std::string(tag);
  t.saved_at = clock_.NowUnix();
  t.bytes = it->second.spec.memory_mib * 1024 * 1024 / 4;
  const std::string key = VmShapeKey(t.shape);
  if (!dir_.empty()) {
    std::ofstream(TemplateFile(key)) << "fake memory of " << id << "\n";
    Step("save-template", "files", key);
  }
  templates_[key] = t;
  vms_.erase(it);
  Persist();
  Emit(id, VmState::kStopped);  // removed
  Step("save-template", "saved", key);
  RemoveVmFiles(std::string(id));
  Step("save-template", "after", key);
  return Status::Ok();
}

Result<std::vector<TemplateInfo>> FakeVmHost::Templates() {
  std::lock_guard lock(mu_);
  std::vector<TemplateInfo> out;
  for (const auto& [key, t] : templates_) out.push_back(t);
  return out;
}

Status FakeVmHost::RemoveTemplate(const VmShape& shape) {
  std::lock_guard lock(mu_);
  const std::string key = VmShapeKey(shape);
  Step("remove-template", "before", key);
  if (auto f = TakeFailure()) return *f;
  if (templates_.erase(key) == 0) return NotFound("no template of shape " + key);
  Persist();
  Step("remove-template", "forgotten", key);
  if (!dir_.empty()) std::filesystem::remove(TemplateFile(key));
  Step("remove-template", "after", key);
  return Status::Ok();
}

namespace {

// The spec's host key, or a new one (each different, as ssh-keygen's are).
std::string FakeHostKeyOf(const VmSpec& spec) {
  static std::atomic<int> made{0};
  return spec.ssh_host_key_pub.empty() ? "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyOf" +
                                             spec.id + "n" + std::to_string(++made) + " warren-vm"
                                       : spec.ssh_host_key_pub;
}

// Gives `r` and the VM's seed (`seeded`, what SpecOf shows) the spec's host key pair, or a
// new one, as LibvirtHost writes it into the seed.
void TakeHostKey(const VmSpec& spec, RestoredVm& r, VmSpec& seeded) {
  r.host_key_pub = FakeHostKeyOf(spec);
  r.host_key = spec.ssh_host_key.empty()
                   ? "-----BEGIN OPENSSH PRIVATE KEY-----\nfake " + spec.id + "\n"
                   : spec.ssh_host_key;
  seeded.ssh_host_key = r.host_key;
  seeded.ssh_host_key_pub = r.host_key_pub;
}

}  // namespace

Result<RestoredVm> FakeVmHost::CreateFromTemplate(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  std::lock_guard lock(mu_);
  Step("restore", "before", spec.id);
  if (auto f = TakeFailure()) return *f;
  if (!templates_.count(VmShapeKey(ShapeOf(spec)))) {
    return NotFound("no template of shape " + VmShapeKey(ShapeOf(spec)));
  }
  if (vms_.count(spec.id)) return Conflict("vm " + spec.id + " already exists");
  WARREN_RETURN_IF_ERROR(CheckRoom({spec.cpus, spec.memory_mib, spec.disk_gib}));
  Vm vm = Booted(spec, spec.image, spec.disk_gib, /*disk_layers=*/1);
  vm.console = "";  // a restored guest prints nothing until it is asked to
  RestoredVm r;
  if (spec.egress == Egress::kAll) vm.mac = r.mac = NextMac();
  TakeHostKey(spec, r, vm.spec);
  MakeVmFiles(spec.id);
  Step("restore", "files", spec.id);
  vms_.emplace(spec.id, std::move(vm));
  restored_.insert(spec.id);
  Persist();
  Emit(spec.id, VmState::kRunning);
  r.seed_has_more = SeedHasMoreThanIdentity(spec);
  r.identity_port = true;  // as every domain warren defines now
  r.restore_ms = 1;
  Step("restore", "after", spec.id);
  return r;
}

Result<RestoredVm> FakeVmHost::Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) {
  WARREN_ASSIGN_OR_RETURN(RestoredVm r, ReidentifyLocked(spec));
  // Outside the lock: the guest's part may look at this host.
  if (meanwhile) WARREN_RETURN_IF_ERROR(meanwhile(r));
  return r;
}

Result<RestoredVm> FakeVmHost::ReidentifyLocked(const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  std::lock_guard lock(mu_);
  Step("reidentify", "before", spec.id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(spec.id);
  if (it == vms_.end()) return NotFound("no vm " + spec.id);
  Vm& vm = it->second;
  if (vm.info.state != VmState::kPaused && vm.info.state != VmState::kRunning) {
    return Conflict("cannot give a " + std::string(VmStateName(vm.info.state)) +
                    " vm a new identity");
  }
  if (!(ShapeOf(vm.spec) == ShapeOf(spec))) {
    return InvalidArgument("vm " + spec.id + " is of shape " + VmShapeKey(ShapeOf(vm.spec)) +
                           ", not " + VmShapeKey(ShapeOf(spec)));
  }
  const std::string mac = vm.mac;
  vm.spec = spec;
  vm.info.name = spec.name;
  RestoredVm r;
  r.mac = mac;
  // As LibvirtHost's: the key pair, and whether the seed holds more than the name.
  TakeHostKey(spec, r, vm.spec);
  r.seed_has_more = SeedHasMoreThanIdentity(spec);
  r.identity_port = true;  // as every domain warren defines now
  if (vm.info.state == VmState::kPaused) {
    vm.info.state = VmState::kRunning;
    Emit(spec.id, VmState::kRunning);
  }
  Persist();
  Step("reidentify", "after", spec.id);
  return r;
}

Result<RestoredVm> FakeVmHost::CopyLive(std::string_view source_id, const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  if (spec.id == source_id) return InvalidArgument("a vm cannot be copied onto itself");
  std::lock_guard lock(mu_);
  Step("copy-live", "before", spec.id);
  if (auto f = TakeFailure()) return *f;
  auto src = vms_.find(source_id);
  if (src == vms_.end()) return NotFound("no vm " + std::string(source_id));
  if (src->second.info.state != VmState::kRunning) {
    return Conflict("a live copy needs a running vm; " + std::string(source_id) + " is " +
                    std::string(VmStateName(src->second.info.state)));
  }
  if (vms_.count(spec.id)) return Conflict("vm " + spec.id + " already exists");
  WARREN_RETURN_IF_ERROR(CheckRoom({spec.cpus, spec.memory_mib, src->second.info.disk_gib}));
  // The source's memory, saved beside its snapshot, is restored as the copy.
  const std::string memory = dir_.empty() ? "" : dir_ + "/tmp/live-" + spec.id + ".save";
  if (!memory.empty()) {
    std::ofstream(memory) << "fake memory of " << source_id << "\n";
    Step("copy-live", "memory", spec.id);
  }
  Vm vm = Forked(src->second, spec);
  vm.console = "";  // restored: its guest prints nothing until asked
  RestoredVm r;
  if (spec.egress == Egress::kAll) vm.mac = NextMac();
  r.mac = vm.mac;
  // As LibvirtHost's: the key pair, and whether the seed holds more than the name.
  TakeHostKey(spec, r, vm.spec);
  r.seed_has_more = SeedHasMoreThanIdentity(spec);
  r.identity_port = true;  // as every domain warren defines now
  MakeVmFiles(spec.id);
  Step("copy-live", "files", spec.id);
  vms_.emplace(spec.id, std::move(vm));
  live_copied_.insert(spec.id);
  Persist();
  Emit(spec.id, VmState::kRunning);
  Step("copy-live", "restored", spec.id);
  if (!memory.empty()) std::filesystem::remove(memory);
  Step("copy-live", "after", spec.id);
  return r;
}

bool FakeVmHost::WasLiveCopied(std::string_view id) {
  std::lock_guard lock(mu_);
  return live_copied_.count(id) > 0;
}

std::string FakeVmHost::NextMac() {
  char mac[32];
  ++macs_made_;
  std::snprintf(mac, sizeof mac, "52:54:00:00:%02x:%02x", (macs_made_ >> 8) & 0xff,
                macs_made_ & 0xff);
  return mac;
}

bool FakeVmHost::WasRestored(std::string_view id) {
  std::lock_guard lock(mu_);
  return restored_.count(id) > 0;
}

Status FakeVmHost::Rename(std::string_view id, std::string_view name) {
  WARREN_RETURN_IF_ERROR(ValidateVmName(name));
  std::lock_guard lock(mu_);
  Step("rename", "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  it->second.info.name = std::string(name);
  Persist();
  Step("rename", "after", id);
  return Status::Ok();
}

Result<bool> FakeVmHost::SetNetwork(std::string_view id, Egress egress) {
  std::lock_guard lock(mu_);
  Step("set-network", "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  Vm& vm = it->second;
  if (vm.spec.egress == egress) return false;
  vm.spec.egress = egress;
  Persist();
  Step("set-network", "after", id);
  return vm.info.state == VmState::kRunning || vm.info.state == VmState::kPaused;
}

FakeVmHost::Vm FakeVmHost::Forked(Vm& source, const VmSpec& spec) const {
  // Both now sit on a fresh overlay over the source's old top; the real host flattens a
  // running chain in the background, the fake at once.
  VmInfo& s = source.info;
  s.disk_layers += 1;
  const int copy_layers = s.disk_layers;
  if (s.disk_layers > kMaxDiskLayers && s.state != VmState::kStopped) s.disk_layers = 1;
  return Booted(spec, s.image, s.disk_gib, copy_layers > kMaxDiskLayers ? 1 : copy_layers);
}

Status FakeVmHost::Copy(std::string_view source_id, const VmSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
  if (spec.id == source_id) return InvalidArgument("a vm cannot be copied onto itself");
  std::lock_guard lock(mu_);
  Step("copy", "before", spec.id);
  if (auto f = TakeFailure()) return *f;
  auto src = vms_.find(source_id);
  if (src == vms_.end()) return NotFound("no vm " + std::string(source_id));
  if (vms_.count(spec.id)) return Conflict("vm " + spec.id + " already exists");
  WARREN_RETURN_IF_ERROR(CheckRoom({spec.cpus, spec.memory_mib, src->second.info.disk_gib}));
  Vm vm = Forked(src->second, spec);
  vm.console = "fake boot of a copy of " + std::string(source_id) + "\nlogin:\n";
  MakeVmFiles(spec.id);
  Step("copy", "files", spec.id);
  vms_.emplace(spec.id, std::move(vm));
  Persist();
  Emit(spec.id, VmState::kRunning);
  Step("copy", "after", spec.id);
  return Status::Ok();
}

Result<ResizeOutcome> FakeVmHost::Resize(std::string_view id, const ResizeSpec& spec) {
  WARREN_RETURN_IF_ERROR(ValidateResizeSpec(spec));
  std::lock_guard lock(mu_);
  Step("resize", "before", id);
  if (auto f = TakeFailure()) return *f;
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  Vm& vm = it->second;
  if (spec.disk_gib != 0 && spec.disk_gib < vm.info.disk_gib) {
    return InvalidArgument("the disk only grows: it is " + std::to_string(vm.info.disk_gib) +
                           " GiB");
  }
  WARREN_RETURN_IF_ERROR(
      CheckRoom({spec.cpus, std::max<int64_t>(0, spec.memory_mib - vm.config_memory_mib),
                 std::max<int64_t>(0, spec.disk_gib - vm.info.disk_gib)}));
  ResizeOutcome out;
  if (spec.disk_gib > vm.info.disk_gib) {
    // The disk grows first, as on the real host (a block resize, then the definition).
    vm.info.disk_gib = spec.disk_gib;
    out.disk_grown = true;
    Persist();
    Step("resize", "disk", id);
  }
  const bool live = vm.info.state == VmState::kRunning || vm.info.state == VmState::kPaused;
  if (spec.cpus != 0 && spec.cpus != vm.config_cpus) {
    vm.config_cpus = spec.cpus;
    out.restart_needed = out.restart_needed || live;
  }
  if (spec.memory_mib != 0 && spec.memory_mib != vm.config_memory_mib) {
    vm.config_memory_mib = spec.memory_mib;
    out.restart_needed = out.restart_needed || live;
  }
  if (!live) {
    vm.info.cpus = vm.config_cpus;
    vm.info.memory_mib = vm.config_memory_mib;
  }
  Persist();
  Step("resize", "after", id);
  return out;
}

Result<int> FakeVmHost::RemoveUnusedDisks() {
  std::lock_guard lock(mu_);
  return RemoveLeftoverFiles();
}

Result<VmInfo> FakeVmHost::Inspect(std::string_view id) {
  ++inspect_calls_;
  std::lock_guard lock(mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFound("no vm " + std::string(id));
  return it->second.info;
}

Result<std::vector<VmInfo>> FakeVmHost::List() {
  ++list_calls_;
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
