#include "lobby/vm_pool.h"

#include <algorithm>
#include <climits>

#include "lobby/base/log.h"
#include "lobby/base/streams.h"
#include "lobby/commands/vm_egress.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_placement.h"
#include "vmhost/guest/identity.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_set.h"

namespace warren {
namespace {

constexpr int kMaxPoolSize = 64;
constexpr int kConnectPollMs = 250;
constexpr std::chrono::seconds kChannelSettle{1};
constexpr std::chrono::seconds kEndpointSettle{10};
// A refill waits this long after a hand-out: the VM handed out takes its identity meanwhile,
// which a restore beside it (two cores) would slow.
constexpr std::chrono::seconds kRefillAfterTake{3};
// Commands a pooled VM runs once it took its identity, before it pauses. Under TCG, QEMU
// translates guest code on first use, per QEMU process: a restored VM's command path (sshd's
// channel, the runner server's fork, the job's shell) ran once before its identity, and its
// first command after a hand-out took ~0.2 s against ~0.08 s warm (debian, measured at the
// server). Run twice more here, it is translated before anyone waits for it.
constexpr int kWarmingCommands = 2;

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 3 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The first command of a pooled VM: opens its control connection, which stays open while
// it is paused (no channel, no keepalive), so `new` never pays for a handshake. Gives up
// (Cancelled) as soon as `cancel` is: warren stops. Also its warming commands (below), on
// the open connection.
Status Connect(GuestControl& guests, const std::string& id, int timeout_ms,
               const std::shared_ptr<CancelSignal>& cancel) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last = Unavailable("no answer");
  while (std::chrono::steady_clock::now() < deadline) {
    if (cancel->cancelled()) return Cancelled("warren stops");
    DiscardSink discard;
    GuestStreams streams;
    streams.out = &discard;
    streams.err = &discard;
    streams.cancel = cancel;
    streams.wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now())
                                           .count());
    if (streams.wait_ms <= 0) break;
    Result<GuestProgress> p = guests.Exec(id, GuestCommand{"true", {}, ""}, streams);
    if (p.ok() && p->finished && p->exit_code == 0) return Status::Ok();
    last = p.ok() ? Unavailable("`true` did not succeed") : p.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(kConnectPollMs));
  }
  return last.Annotate("connecting to pooled vm " + id);
}

}  // namespace

Result<PoolTarget> ParsePoolTarget(std::string_view text, const VmDefaults& defaults) {
  const std::string usage =
      "--pool takes IMAGE=N or IMAGE:CPUS,MEMORY,DISK[,EGRESS]=N, such as debian=1 or "
      "tiny:1,256M,1G,none=2";
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) return InvalidArgument(usage);
  if (!AllDigits(text.substr(eq + 1))) return InvalidArgument(usage);
  PoolTarget t;
  t.size = std::stoi(std::string(text.substr(eq + 1)));
  if (t.size > kMaxPoolSize) {
    return InvalidArgument("--pool: at most " + std::to_string(kMaxPoolSize) + " VMs per shape");
  }
  std::string_view head = text.substr(0, eq);
  const size_t colon = head.find(':');
  t.image = std::string(head.substr(0, colon));
  if (t.image.empty()) return InvalidArgument(usage);
  t.memory_mib = defaults.memory_mib;
  t.disk_gib = defaults.disk_gib;
  t.egress = HostEgressFor(defaults.egress);
  if (colon == std::string_view::npos) return t;  // cpus 0: the default's, as `new` caps it
  std::vector<std::string_view> parts;
  std::string_view rest = head.substr(colon + 1);
  while (true) {
    const size_t comma = rest.find(',');
    parts.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (parts.size() < 3 || parts.size() > 4 || !AllDigits(parts[0])) {
    return InvalidArgument(usage);
  }
  t.cpus = std::stoi(std::string(parts[0]));
  if (t.cpus < 1 || t.cpus > 64) return InvalidArgument("--pool: the vCPUs are 1 to 64");
  WARREN_ASSIGN_OR_RETURN(t.memory_mib, ParseMemoryMib(parts[1]));
  WARREN_ASSIGN_OR_RETURN(t.disk_gib, ParseDiskGib(parts[2]));
  if (parts.size() == 4) {
    WARREN_ASSIGN_OR_RETURN(std::string policy, ParseEgressPolicy("--pool", parts[3]));
    t.egress = HostEgressFor(policy);
  }
  return t;
}

VmPool::VmPool(Services& services, VmPoolOptions options)
    : services_(services), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

VmPool::~VmPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopping_->Cancel();  // a refill waiting for its guest gives up (and removes its VM)
  cv_.notify_all();
  thread_.join();
  std::map<Slot, std::vector<PooledVm>> idle;
  {
    std::lock_guard lock(mu_);
    idle.swap(idle_);
  }
  for (const auto& [slot, vms] : idle) {
    for (const PooledVm& vm : vms) Remove(vm.id, "warren stops");
  }
}

std::string VmPool::KeyText(const Slot& slot) {
  return slot.host.empty() ? slot.shape : slot.host + "/" + slot.shape;
}

std::string VmPool::PoolKey(const std::string& host, const VmShape& shape) {
  return KeyText(SlotOf(host, shape));
}

std::optional<PooledVm> VmPool::Take(const VmShape& shape, const std::string& host) {
  std::lock_guard lock(mu_);
  auto it = idle_.find(SlotOf(host, shape));
  if (it == idle_.end() || it->second.empty()) return std::nullopt;
  // The newest: its connection is the freshest.
  PooledVm vm = std::move(it->second.back());
  it->second.pop_back();
  refill_after_ = std::chrono::steady_clock::now() + kRefillAfterTake;
  wake_ = true;
  cv_.notify_all();
  return vm;
}

void VmPool::PutBack(const VmShape& shape, const std::string& host, PooledVm vm) {
  std::lock_guard lock(mu_);
  idle_[SlotOf(host, shape)].push_back(std::move(vm));
}

std::vector<std::string> VmPool::HostsWithIdle(const VmShape& shape) {
  std::lock_guard lock(mu_);
  std::vector<std::string> hosts;
  const std::string key = VmShapeKey(shape);
  for (const auto& [slot, vms] : idle_) {
    if (!vms.empty() && slot.shape == key) hosts.push_back(slot.host);
  }
  return hosts;
}

int VmPool::GiveWay(int64_t memory_mib, const std::string& host) {
  int removed = 0;
  while (AvailableMib(host) < memory_mib) {
    std::string id;
    {
      std::lock_guard lock(mu_);
      for (auto& [slot, vms] : idle_) {
        if (slot.host != host || vms.empty()) continue;
        id = std::move(vms.front().id);  // the oldest
        vms.erase(vms.begin());
        break;
      }
    }
    if (id.empty()) break;
    Remove(id, "the host needs its memory for a new VM");
    ++removed;
  }
  return removed;
}

std::optional<VmShape> VmPool::ShapeFor(Services& services, const PoolTarget& t) {
  VmShape shape;
  shape.image = t.image;
  if (services.images.resolve) {
    Result<std::string> ref = services.images.resolve(t.image);
    if (!ref.ok()) return std::nullopt;
    shape.image = *ref;
  }
  shape.cpus = t.cpus;
  if (shape.cpus == 0) {
    // As `new` settles the default: never more vCPUs than the host has cores.
    shape.cpus = services.vm_defaults.cpus;
    Result<HostCapacity> host = services.vms->Capacity();
    if (host.ok() && host->cpu_cores > 0) shape.cpus = std::min(shape.cpus, host->cpu_cores);
  }
  shape.memory_mib = t.memory_mib;
  shape.disk_gib = t.disk_gib;
  shape.egress = t.egress;
  return shape;
}

std::vector<VmShape> VmPool::Shapes(Services& services, const std::vector<PoolTarget>& targets) {
  std::vector<VmShape> shapes;
  for (const PoolTarget& t : targets) {
    if (t.size <= 0) continue;
    if (std::optional<VmShape> shape = ShapeFor(services, t)) shapes.push_back(*shape);
  }
  return shapes;
}

std::map<std::string, int> VmPool::Idle() {
  std::lock_guard lock(mu_);
  std::map<std::string, int> out;
  for (const auto& [slot, vms] : idle_) out[KeyText(slot)] = static_cast<int>(vms.size());
  return out;
}

std::vector<VmPool::Wanted> VmPool::Resolve() {
  std::vector<Wanted> wanted;
  for (const std::string& host : HostsForNewVms(services_)) {
    for (const PoolTarget& t : options_.targets) {
      if (t.size <= 0) continue;
      if (std::optional<VmShape> shape = ShapeFor(services_, t)) {
        wanted.push_back({host, *shape, t.size});
      }
    }
  }
  return wanted;
}

int64_t VmPool::AvailableMib(const std::string& host) {
  // The host's own memory, not the fleet's.
  Result<HostCapacity> room = services_.hosts != nullptr && !host.empty()
                                  ? services_.hosts->CapacityOf(host)
                                  : services_.vms->Capacity();
  if (!room.ok()) return INT64_MAX;
  const int64_t uncommitted = room->memory_mib - room->memory_committed_mib;
  return std::max<int64_t>(0, std::min(uncommitted, room->memory_free_mib));
}

Result<PooledVm> VmPool::Fill(const VmShape& shape, const std::string& host) {
  VmSpec spec;
  spec.host = host;
  spec.id = NewVmId();
  spec.name = "pool-" + spec.id;  // a stand-in: `new` gives it the VM's own
  spec.image = shape.image;
  spec.cpus = shape.cpus;
  spec.memory_mib = shape.memory_mib;
  spec.disk_gib = shape.disk_gib;
  spec.egress = shape.egress;
  spec.authorized_keys = services_.control_authorized_key;
  const auto t0 = std::chrono::steady_clock::now();
  Result<RestoredVm> restored = services_.vms->CreateFromTemplate(spec);
  if (!restored.ok()) return restored.status();
  Status st = Connect(*services_.guests, spec.id, services_.ready_timeout_ms, stopping_);
  // Its whole identity now, under the stand-in name (the kernel's RNG, host key, machine-id,
  // MAC and seed, from the template's waiting root process): a hand-out then changes only
  // the name and the host key.
  if (st.ok()) st = TakeOwnIdentity(spec.id, spec.name, *restored);
  // A root process left waiting for the identity, so the hand-out needs no sudo.
  if (st.ok()) {
    st = PrepareGuestIdentity(*services_.guests, spec.id,
                              std::chrono::milliseconds(services_.ready_timeout_ms));
  }
  if (st.ok() && options_.settle_endpoint) {
    const auto settle = std::chrono::steady_clock::now() + kEndpointSettle;
    while (options_.settle_endpoint(spec.id) && std::chrono::steady_clock::now() < settle) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (st.ok() && options_.open_channels) {
    const auto settle = std::chrono::steady_clock::now() + kChannelSettle;
    while (options_.open_channels(spec.id) > 0 && std::chrono::steady_clock::now() < settle) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (int i = 0; i < kWarmingCommands && st.ok(); ++i) {
    st = Connect(*services_.guests, spec.id, services_.ready_timeout_ms, stopping_);
  }
  if (st.ok()) st = services_.vms->Pause(spec.id);
  if (!st.ok()) {
    Remove(spec.id, "its refill failed");
    return st;
  }
  LogInfo("pool: vm " + spec.id + " of " + PoolKey(host, shape) + " ready in " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count()) +
          " ms");
  return PooledVm{spec.id, restored->host_key, restored->host_key_pub};
}

Status VmPool::TakeOwnIdentity(const std::string& id, const std::string& name,
                               const RestoredVm& restored) {
  const auto timeout = std::chrono::milliseconds(services_.ready_timeout_ms);
  WARREN_ASSIGN_OR_RETURN(GuestIdentity identity,
                          RestoredGuestIdentity(restored, name, /*prepared=*/true,
                                                /*handout=*/false, /*pooled=*/false));
  identity.port = restored.identity_port;
  identity.slowdown = GuestSlowdownNow(services_);
  Result<GuestIdentityReport> report = ApplyGuestIdentity(*services_.guests, id, identity, timeout);
  if (!report.ok()) return report.status().Annotate("giving pooled vm " + id + " its identity");
  return services_.guests->RepinHostKey(id, restored.host_key_pub);
}

void VmPool::Remove(const std::string& id, const std::string& why) {
  services_.guests->Disconnect(id);
  Status st = services_.vms->Destroy(id);
  if (!st.ok() && st.code() != Code::kNotFound) {
    // Left without a record: the next start's reconcile removes it.
    LogWarn("pool: removing vm " + id + " (" + why + "): " + st.ToString());
    return;
  }
  LogInfo("pool: removed vm " + id + ": " + why);
}

void VmPool::ForgetGone() {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [slot, vms] : idle_) {
      for (const PooledVm& vm : vms) ids.push_back(vm.id);
    }
  }
  for (const std::string& id : ids) {
    Result<VmInfo> info = services_.vms->Inspect(id);
    if (info.ok() || info.status().code() != Code::kNotFound) continue;
    LogInfo("pool: vm " + id + " is gone from its host; forgotten");
    std::lock_guard lock(mu_);
    for (auto& [slot, vms] : idle_) {
      std::erase_if(vms, [&id](const PooledVm& vm) { return vm.id == id; });
    }
  }
}

bool VmPool::Check() {
  ForgetGone();
  const std::vector<Wanted> wanted = Resolve();
  // VMs of a shape or host no longer kept (a newer image version, a drained host), or one
  // too many.
  std::vector<std::string> stale;
  {
    std::lock_guard lock(mu_);
    for (auto& [slot, vms] : idle_) {
      size_t keep = 0;
      for (const Wanted& w : wanted) {
        if (SlotOf(w.host, w.shape) == slot) keep = static_cast<size_t>(w.size);
      }
      while (vms.size() > keep) {
        stale.push_back(std::move(vms.front().id));
        vms.erase(vms.begin());
      }
    }
  }
  for (const std::string& id : stale) Remove(id, "its shape or host is no longer pooled");
  {
    std::lock_guard lock(mu_);
    if (std::chrono::steady_clock::now() < refill_after_) return false;
  }
  for (const Wanted& w : wanted) {
    const Slot slot = SlotOf(w.host, w.shape);
    const std::string key = KeyText(slot);
    size_t have = 0;
    {
      std::lock_guard lock(mu_);
      if (auto it = idle_.find(slot); it != idle_.end()) have = it->second.size();
    }
    const int64_t available = AvailableMib(w.host);
    if (available < w.shape.memory_mib && have > 0) {
      // A VM of its own shape no longer fits: the pool gives back first.
      GiveWay(w.shape.memory_mib, w.host);
      continue;
    }
    if (have >= static_cast<size_t>(w.size)) continue;
    if (std::chrono::steady_clock::now() < next_try_[w.host]) continue;
    // Room for the pooled VM and one more of its shape, or no refill.
    if (available != INT64_MAX && available < 2 * w.shape.memory_mib) {
      Waiting(key, "room",
              "room on the host: " + std::to_string(available) + " MiB available, " +
                  std::to_string(2 * w.shape.memory_mib) + " needed");
      continue;
    }
    Result<PooledVm> made = Fill(w.shape, w.host);
    if (!made.ok()) {
      if (made.status().code() == Code::kNotFound) {
        Waiting(key, "template", made.status().message());
      } else {
        LogWarn("pool: refilling " + key + ": " + made.status().ToString());
        next_try_[w.host] = std::chrono::steady_clock::now() + options_.retry_after;
      }
      continue;
    }
    waiting_.erase(key);
    {
      std::lock_guard lock(mu_);
      if (!stop_) {
        idle_[slot].push_back(*made);
        return true;
      }
    }
    Remove(made->id, "warren stops");
    return false;
  }
  return false;
}

void VmPool::Waiting(const std::string& key, const std::string& reason, const std::string& detail) {
  std::string& was = waiting_[key];
  if (was == reason) return;  // the free memory moves all the time: once per reason
  was = reason;
  LogInfo("pool: " + key + " waits for " + detail);
}

void VmPool::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const bool more = Check();
    lock.lock();
    if (more) continue;
    // After a hand-out, back as soon as the refill may start.
    auto until = std::chrono::steady_clock::now() + options_.interval;
    if (refill_after_ > std::chrono::steady_clock::now()) until = std::min(until, refill_after_);
    cv_.wait_until(lock, until, [this] { return stop_ || wake_; });
    wake_ = false;
  }
}

}  // namespace warren
