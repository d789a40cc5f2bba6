#include "lobby/template_keeper.h"

#include <algorithm>
#include <memory>
#include <random>

#include "lobby/base/log.h"
#include "lobby/base/streams.h"
#include "lobby/commands/vm_egress.h"
#include "lobby/commands/vm_placement.h"
#include "vmhost/guest/identity.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_set.h"

namespace warren {
namespace {

// Lets boot-time services finish (a clone would otherwise restart them half-way) and puts
// the guest's writes on its disk, which becomes the template's base.
constexpr char kSettleCommand[] =
    "if command -v systemctl >/dev/null 2>&1; then "
    "timeout 120 systemctl is-system-running --wait >/dev/null 2>&1; fi; sync";
constexpr int kSettleTimeoutMs = 150'000;
// Shrinks what the save writes, and so what every clone's restore reads: the page cache is
// dropped, then the free memory is filled with zeros (a tmpfs as large as what is free, less
// 128 MiB the kernel keeps for itself, written full and unmounted), so the memory the guest
// does not use is zero pages, which the save stream only marks. The guest's next commands
// read their programs from its disk again. As root, through sudo; best-effort (a guest
// without it saves larger).
constexpr char kCompactCommand[] =
    "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches; "
    "kb=$(($(awk \"/^MemFree:/ {print \\$2}\" /proc/meminfo) - 131072)); "
    "[ \"$kb\" -gt 0 ] || exit 0; d=$(mktemp -d) || exit 1; "
    "if mount -t tmpfs -o size=${kb}k warren-zero \"$d\"; then "
    "dd if=/dev/zero of=\"$d/zero\" bs=1M 2>/dev/null; umount \"$d\"; fi; rmdir \"$d\"'";
constexpr int kCompactTimeoutMs = 120'000;
constexpr int kReadyPollMs = 500;
// How long the guest's next sshd takes to start under TCG, with room (about 0.3 s measured).
constexpr std::chrono::milliseconds kSpareStartup{1500};

// A hidden VM's id: "tpl" and random [a-z0-9], a valid VmSpec id that no record has.
std::string HiddenVmId() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device os;
  std::uniform_int_distribution<int> pick(0, 35);
  std::string id = "tpl";
  for (int i = 0; i < 13; ++i) id += kAlphabet[pick(os)];
  return id;
}

// Runs `command` in the guest until it ends or `timeout_ms` passes; Ok when it exited 0.
Status RunInGuest(GuestControl& guests, const std::string& vm_id, const std::string& command,
                  int timeout_ms) {
  DiscardSink discard;
  GuestStreams streams;
  streams.out = &discard;
  streams.err = &discard;
  streams.cancel = std::make_shared<CancelSignal>();
  streams.wait_ms = timeout_ms;
  Result<GuestProgress> p = guests.Exec(vm_id, GuestCommand{command, {}, ""}, streams);
  if (!p.ok()) return p.status();
  if (!p->finished) {
    Status st = guests.Kill(vm_id, p->job);
    if (!st.ok()) LogDebug("templates: " + st.ToString());
    return Timeout("`" + command + "` did not end within " + std::to_string(timeout_ms) + " ms");
  }
  if (p->exit_code != 0) return Internal("`" + command + "` failed in the guest");
  return Status::Ok();
}

}  // namespace

TemplateKeeper::TemplateKeeper(Services& services, TemplateKeeperOptions options)
    : services_(services), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

TemplateKeeper::~TemplateKeeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::optional<VmShape> TemplateKeeper::DefaultShape(Services& services) {
  const VmDefaults& d = services.vm_defaults;
  VmShape shape;
  shape.image = d.image;
  if (services.images.resolve) {
    Result<std::string> ref = services.images.resolve(d.image);
    if (!ref.ok()) return std::nullopt;
    shape.image = *ref;
  }
  // As `new` settles them (cmd_new.cc): never more vCPUs than the host has cores.
  shape.cpus = d.cpus;
  Result<HostCapacity> host = services.vms->Capacity();
  if (host.ok() && host->cpu_cores > 0) shape.cpus = std::min(shape.cpus, host->cpu_cores);
  shape.memory_mib = d.memory_mib;
  shape.disk_gib = d.disk_gib;
  shape.egress = HostEgressFor(d.egress);
  return shape;
}

Status TemplateKeeper::MakeTemplate(Services& services, const VmShape& shape,
                                    const std::string& tag, const std::string& host_name) {
  VmHost& host = *services.vms;
  GuestControl& guests = *services.guests;
  VmSpec spec;
  spec.id = HiddenVmId();
  spec.image = shape.image;
  spec.cpus = shape.cpus;
  spec.memory_mib = shape.memory_mib;
  spec.disk_gib = shape.disk_gib;
  spec.egress = shape.egress;
  spec.authorized_keys = services.control_authorized_key;
  spec.host = host_name;
  const auto t0 = std::chrono::steady_clock::now();
  WARREN_RETURN_IF_ERROR(host.Create(spec).Annotate("booting a template vm"));
  auto abandon = [&](Status st) {
    guests.Disconnect(spec.id);
    Status removed = host.Destroy(spec.id);
    if (!removed.ok() && removed.code() != Code::kNotFound) {
      LogWarn("templates: removing vm " + spec.id + ": " + removed.ToString());
    }
    return st;
  };
  // Ready once the guest runs a command: the runner is installed by then.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(services.ready_timeout_ms);
  Status ready = Unavailable("no answer yet");
  while (std::chrono::steady_clock::now() < deadline) {
    ready = RunInGuest(guests, spec.id, "true", kReadyPollMs * 20);
    if (ready.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kReadyPollMs));
  }
  if (!ready.ok()) return abandon(ready.Annotate("template vm " + spec.id + " never answered"));
  if (Status st = RunInGuest(guests, spec.id, kSettleCommand, kSettleTimeoutMs); !st.ok()) {
    return abandon(st.Annotate("settling template vm " + spec.id));
  }
  if (Status st = RunInGuest(guests, spec.id, kCompactCommand, kCompactTimeoutMs); !st.ok()) {
    LogWarn("templates: compacting the memory of template vm " + spec.id + ": " + st.ToString() +
            "; saved as it is");
  }
  // Every clone then has a root process waiting for its identity: no sudo at `new`.
  if (Status st = PrepareGuestIdentity(guests, spec.id,
                                       std::chrono::milliseconds(services.ready_timeout_ms));
      !st.ok()) {
    return abandon(st.Annotate("readying template vm " + spec.id));
  }
  // A connection open at the save would be a dead one in every clone.
  guests.Disconnect(spec.id);
  // The guest's launcher starts the next connection's sshd when the host leaves (a spare:
  // packaging/images/README.md); saved once it is up, every clone answers its first
  // connection without sshd's start-up.
  std::this_thread::sleep_for(kSpareStartup);
  if (Status st = host.SaveTemplate(spec.id, tag); !st.ok()) {
    return abandon(st.Annotate("saving template vm " + spec.id));
  }
  LogInfo("templates: made the template of " + VmShapeKey(shape) +
          (host_name.empty() ? "" : " on host " + host_name) + " in " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count()) +
          " ms");
  return Status::Ok();
}

bool TemplateKeeper::Check() {
  // What to keep: the default shape and the pool's, on every host that takes new VMs
  // (placement's rule: a clone's disk stands on its base there), the default host first.
  struct Wanted {
    VmShape shape;
    std::string host;  // "" without a HostSet
  };
  std::vector<VmShape> shapes;
  if (std::optional<VmShape> shape = DefaultShape(services_)) shapes.push_back(*shape);
  if (options_.more_shapes) {
    for (const VmShape& shape : options_.more_shapes()) {
      if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
    }
  }
  std::vector<Wanted> wanted;
  for (const std::string& host : HostsForNewVms(services_)) {
    for (const VmShape& shape : shapes) wanted.push_back({shape, host});
  }
  const std::string default_host =
      services_.hosts != nullptr ? services_.hosts->default_host() : "";
  std::stable_sort(wanted.begin(), wanted.end(), [&](const Wanted& a, const Wanted& b) {
    return (a.host == default_host) > (b.host == default_host);
  });
  if (wanted.empty()) return false;  // no image yet: nothing to restore either
  Result<std::vector<TemplateInfo>> have = services_.vms->Templates();
  if (!have.ok()) {
    LogWarn("templates: " + have.status().ToString());
    return false;
  }
  for (const Wanted& w : wanted) {
    const bool current = std::any_of(have->begin(), have->end(), [&](const TemplateInfo& t) {
      return t.shape == w.shape && t.tag == options_.tag && (w.host.empty() || t.host == w.host);
    });
    if (current) continue;
    if (std::chrono::steady_clock::now() < next_try_[w.host]) continue;
    const std::string where = w.host.empty() ? "" : " on host " + w.host;
    LogInfo("templates: making the template of " + VmShapeKey(w.shape) + where);
    if (Status st = MakeTemplate(services_, w.shape, options_.tag, w.host); !st.ok()) {
      LogWarn("templates: " + st.ToString() + "; `new`" + where + " boots until a later try works");
      next_try_[w.host] = std::chrono::steady_clock::now() + options_.retry_after;
      return false;
    }
    return true;  // one per check: the loop comes back at once for the next
  }
  return false;
}

void TemplateKeeper::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const bool more = Check();
    lock.lock();
    if (!more) cv_.wait_for(lock, options_.interval, [this] { return stop_; });
  }
}

}  // namespace warren
