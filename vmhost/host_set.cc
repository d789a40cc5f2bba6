#include "vmhost/host_set.h"

#include <algorithm>
#include <set>
#include <utility>

#include "lobby/base/host_name.h"

namespace warren {

Result<std::unique_ptr<HostSet>> HostSet::Make(std::vector<HostMember> members) {
  if (members.empty()) return InvalidArgument("no VM host: give at least one --host NAME=URI");
  std::set<std::string, std::less<>> seen;
  for (const HostMember& m : members) {
    WARREN_RETURN_IF_ERROR(CheckHostName(m.name));
    if (m.host == nullptr) return InvalidArgument("host " + m.name + " has no VmHost");
    if (!seen.insert(m.name).second) return InvalidArgument("host " + m.name + " given twice");
  }
  return std::unique_ptr<HostSet>(new HostSet(std::move(members)));
}

std::vector<std::string> HostSet::names() const {
  std::vector<std::string> out;
  for (const HostMember& m : members_) out.push_back(m.name);
  return out;
}

VmHost* HostSet::member(std::string_view name) const {
  for (const HostMember& m : members_) {
    if (m.name == name) return m.host;
  }
  return nullptr;
}

Status HostSet::Named(const HostMember& m, Status st) const {
  if (members_.size() == 1 || st.ok() || st.code() != Code::kUnavailable) return st;
  return st.Annotate("host " + m.name);
}

void HostSet::Remember(std::string_view id, const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  where_[std::string(id)] = host;
}

void HostSet::Forget(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = where_.find(id); it != where_.end()) where_.erase(it);
  if (auto it = leaving_.find(id); it != leaving_.end()) leaving_.erase(it);
}

Result<const HostMember*> HostSet::Route(std::string_view id) {
  if (members_.size() == 1) return &members_.front();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = where_.find(id); it != where_.end()) {
      for (const HostMember& m : members_) {
        if (m.name == it->second) return &m;
      }
    }
  }
  std::vector<std::string> silent;
  for (const HostMember& m : members_) {
    Result<VmInfo> info = m.host->Inspect(id);
    if (info.ok()) {
      Remember(id, m.name);
      return &m;
    }
    if (info.status().code() != Code::kNotFound) silent.push_back(m.name);
  }
  if (!silent.empty()) {
    std::string names;
    for (const std::string& n : silent) names += (names.empty() ? "" : ", ") + n;
    return Unavailable("VM " + std::string(id) + " is on no host that answers; it may be on " +
                       names + ", which do" + (silent.size() == 1 ? "es" : "") + " not answer");
  }
  return NotFound("no VM " + std::string(id) + " on any host");
}

Result<std::string> HostSet::HostOf(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(const HostMember* m, Route(id));
  return m->name;
}

Result<const HostMember*> HostSet::Target(const VmSpec& spec) const {
  if (spec.host.empty()) return &members_.front();
  for (const HostMember& m : members_) {
    if (m.name == spec.host) return &m;
  }
  return NotFound("no host named \"" + spec.host.substr(0, 40) + "\"");
}

Result<const HostMember*> HostSet::CopyTarget(std::string_view source_id, const VmSpec& spec) {
  WARREN_ASSIGN_OR_RETURN(const HostMember* m, Route(source_id));
  if (!spec.host.empty() && spec.host != m->name) {
    return InvalidArgument("a copy is made on its source's host (" + m->name + "), not " +
                           spec.host + ": the disk it shares is there");
  }
  return m;
}

template <typename R>
R HostSet::OnVm(std::string_view id, const std::function<R(VmHost&)>& call) {
  Result<const HostMember*> m = Route(id);
  if (!m.ok()) return m.status();
  R r = call(*(*m)->host);
  if constexpr (std::is_same_v<R, Status>) {
    return Named(**m, std::move(r));
  } else {
    if (!r.ok()) return Named(**m, r.status());
    return r;
  }
}

std::string HostSet::uri() const {
  if (members_.size() == 1) return members_.front().host->uri();
  std::string out = "hosts:";
  for (const HostMember& m : members_) out += (out.size() > 6 ? "," : "") + m.name;
  return out;
}

Result<HostCapacity> HostSet::CapacityOf(std::string_view name) {
  for (const HostMember& m : members_) {
    if (m.name != name) continue;
    Result<HostCapacity> c = m.host->Capacity();
    if (!c.ok()) return Named(m, c.status());
    return c;
  }
  return NotFound("no host named \"" + std::string(name.substr(0, 40)) + "\"");
}

Result<HostCapacity> HostSet::Capacity() {
  if (members_.size() == 1) return members_.front().host->Capacity();
  HostCapacity total;
  Status first_error;
  bool any = false;
  for (const HostMember& m : members_) {
    Result<HostCapacity> c = m.host->Capacity();
    if (!c.ok()) {
      if (first_error.ok()) first_error = Named(m, c.status());
      continue;
    }
    any = true;
    total.cpu_cores = std::max(total.cpu_cores, c->cpu_cores);
    total.memory_mib += c->memory_mib;
    total.memory_free_mib += c->memory_free_mib;
    total.memory_committed_mib += c->memory_committed_mib;
    total.disk_free_bytes += c->disk_free_bytes;
    total.disk_committed_bytes += c->disk_committed_bytes;
  }
  if (!any) return first_error;
  return total;
}

std::vector<HostStatus> HostSet::Statuses(bool contents) {
  std::vector<HostStatus> out;
  for (const HostMember& m : members_) {
    HostStatus s;
    s.name = m.name;
    s.uri = m.host->uri();
    s.accel = m.accel;
    s.isolated = m.isolated && m.isolated();
    Result<HostCapacity> c = m.host->Capacity();
    s.reachable = c.ok();
    if (!c.ok()) {
      s.error = c.status().message();
      out.push_back(std::move(s));
      continue;
    }
    s.capacity = *c;
    if (!contents) {
      out.push_back(std::move(s));
      continue;
    }
    Result<std::vector<VmInfo>> vms = m.host->List();
    if (vms.ok()) {
      s.vms = static_cast<int>(vms->size());
      for (const VmInfo& vm : *vms) Remember(vm.id, m.name);
      if (m.images) {
        Result<std::vector<std::string>> images = m.images();
        if (images.ok()) s.images = std::move(images).value();
      }
    } else {
      s.reachable = false;
      s.error = vms.status().message();
    }
    out.push_back(std::move(s));
  }
  return out;
}

Status HostSet::Create(const VmSpec& spec) {
  WARREN_ASSIGN_OR_RETURN(const HostMember* m, Target(spec));
  Status st = m->host->Create(spec);
  if (st.ok()) Remember(spec.id, m->name);
  return Named(*m, std::move(st));
}

Status HostSet::Start(std::string_view id) {
  return OnVm<Status>(id, [&](VmHost& h) { return h.Start(id); });
}
Status HostSet::Stop(std::string_view id) {
  return OnVm<Status>(id, [&](VmHost& h) { return h.Stop(id); });
}
Status HostSet::Pause(std::string_view id) {
  return OnVm<Status>(id, [&](VmHost& h) { return h.Pause(id); });
}
Status HostSet::Resume(std::string_view id) {
  return OnVm<Status>(id, [&](VmHost& h) { return h.Resume(id); });
}
Status HostSet::Restart(std::string_view id) {
  return OnVm<Status>(id, [&](VmHost& h) { return h.Restart(id); });
}
Status HostSet::Rename(std::string_view id, std::string_view name) {
  return OnVm<Status>(id, [&](VmHost& h) { return h.Rename(id, name); });
}

Status HostSet::Destroy(std::string_view id) {
  Status st = OnVm<Status>(id, [&](VmHost& h) { return h.Destroy(id); });
  if (st.ok() || st.code() == Code::kNotFound) Forget(id);
  return st;
}

Status HostSet::Copy(std::string_view source_id, const VmSpec& spec) {
  WARREN_ASSIGN_OR_RETURN(const HostMember* m, CopyTarget(source_id, spec));
  Status st = m->host->Copy(source_id, spec);
  if (st.ok()) Remember(spec.id, m->name);
  return Named(*m, std::move(st));
}

Result<ResizeOutcome> HostSet::Resize(std::string_view id, const ResizeSpec& spec) {
  return OnVm<Result<ResizeOutcome>>(id, [&](VmHost& h) { return h.Resize(id, spec); });
}

Result<int> HostSet::RemoveUnusedDisks() {
  if (members_.size() == 1) return members_.front().host->RemoveUnusedDisks();
  int removed = 0;
  Status first_error;
  for (const HostMember& m : members_) {
    Result<int> n = m.host->RemoveUnusedDisks();
    if (n.ok()) {
      removed += *n;
    } else if (first_error.ok()) {
      first_error = Named(m, n.status());
    }
  }
  if (!first_error.ok() && removed == 0) return first_error;
  return removed;
}

Result<bool> HostSet::SetNetwork(std::string_view id, Egress egress) {
  return OnVm<Result<bool>>(id, [&](VmHost& h) { return h.SetNetwork(id, egress); });
}

Result<VmInfo> HostSet::Inspect(std::string_view id) {
  Result<const HostMember*> m = Route(id);
  if (!m.ok()) return m.status();
  Result<VmInfo> info = (*m)->host->Inspect(id);
  if (!info.ok()) {
    // Gone from where it was seen (moved, or removed behind warren's back): ask again.
    if (info.status().code() == Code::kNotFound && members_.size() > 1) {
      Forget(id);
      Result<const HostMember*> again = Route(id);
      if (!again.ok()) return again.status();
      info = (*again)->host->Inspect(id);
      if (info.ok()) info->host = (*again)->name;
      return info;
    }
    return Named(**m, info.status());
  }
  if (members_.size() > 1) info->host = (*m)->name;
  return info;
}

Result<std::vector<VmInfo>> HostSet::List() {
  if (members_.size() == 1) return members_.front().host->List();
  std::vector<VmInfo> all;
  for (const HostMember& m : members_) {
    Result<std::vector<VmInfo>> vms = m.host->List();
    if (!vms.ok()) continue;  // unreachable: its VMs are not gone
    for (VmInfo& vm : *vms) {
      vm.host = m.name;
      Remember(vm.id, m.name);
      all.push_back(std::move(vm));
    }
  }
  return all;
}

Result<std::string> HostSet::Console(std::string_view id, int max_lines) {
  return OnVm<Result<std::string>>(id, [&](VmHost& h) { return h.Console(id, max_lines); });
}

Status HostSet::SaveTemplate(std::string_view id, std::string_view tag) {
  Status st = OnVm<Status>(id, [&](VmHost& h) { return h.SaveTemplate(id, tag); });
  Forget(id);  // the VM is gone, saved or not
  return st;
}

Result<std::vector<TemplateInfo>> HostSet::Templates() {
  std::vector<TemplateInfo> all;
  for (const HostMember& m : members_) {
    Result<std::vector<TemplateInfo>> t = m.host->Templates();
    if (!t.ok()) {
      if (members_.size() == 1) return t.status();
      continue;
    }
    for (TemplateInfo& info : *t) {
      info.host = m.name;
      all.push_back(std::move(info));
    }
  }
  return all;
}

Status HostSet::RemoveTemplate(const VmShape& shape) {
  if (members_.size() == 1) return members_.front().host->RemoveTemplate(shape);
  bool removed = false;
  for (const HostMember& m : members_) {
    Status st = m.host->RemoveTemplate(shape);
    if (st.ok()) {
      removed = true;
    } else if (st.code() != Code::kNotFound) {
      return Named(m, std::move(st));
    }
  }
  return removed ? Status::Ok() : NotFound("no template of shape " + VmShapeKey(shape));
}

Result<RestoredVm> HostSet::CreateFromTemplate(const VmSpec& spec) {
  WARREN_ASSIGN_OR_RETURN(const HostMember* m, Target(spec));
  Result<RestoredVm> r = m->host->CreateFromTemplate(spec);
  if (!r.ok()) return Named(*m, r.status());
  Remember(spec.id, m->name);
  return r;
}

Result<RestoredVm> HostSet::Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) {
  return OnVm<Result<RestoredVm>>(spec.id,
                                  [&](VmHost& h) { return h.Reidentify(spec, meanwhile); });
}

Result<RestoredVm> HostSet::CopyLive(std::string_view source_id, const VmSpec& spec) {
  WARREN_ASSIGN_OR_RETURN(const HostMember* m, CopyTarget(source_id, spec));
  Result<RestoredVm> r = m->host->CopyLive(source_id, spec);
  if (!r.ok()) return Named(*m, r.status());
  Remember(spec.id, m->name);
  return r;
}

Result<MigrationReport> HostSet::Migrate(std::string_view id, std::string_view host_name) {
  const HostMember* to = nullptr;
  for (const HostMember& m : members_) {
    if (m.name == host_name) to = &m;
  }
  if (to == nullptr)
    return NotFound("no host named \"" + std::string(host_name.substr(0, 40)) + "\"");
  WARREN_ASSIGN_OR_RETURN(const HostMember* from, Route(id));
  if (from == to) {
    return InvalidArgument("vm " + std::string(id) + " is on host " + to->name + " already");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    leaving_[std::string(id)] = from->name;
    Move& move = moving_[std::string(id)];
    ++move.count;
    move.to = to->name;
  }
  Result<MigrationReport> r = from->host->MigrateTo(id, *to->host);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.ok()) where_[std::string(id)] = to->name;
    // Kept on success: the old host's late "stopped" (its domain undefined) is not passed on
    // either. Dropped when the VM did not move.
    if (!r.ok()) leaving_.erase(std::string(id));
    auto it = moving_.find(id);
    if (--it->second.count == 0) moving_.erase(it);
  }
  moved_.notify_all();
  if (!r.ok()) {
    // Either end's unavailability names the host.
    if (r.status().code() == Code::kUnavailable && members_.size() > 1) {
      return r.status().Annotate("moving vm " + std::string(id) + " from host " + from->name +
                                 " to host " + to->name);
    }
    return r.status();
  }
  return r;
}

std::string HostSet::MovingTo(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = moving_.find(id);
  return it == moving_.end() ? std::string() : it->second.to;
}

void HostSet::AwaitMove(std::string_view id, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  moved_.wait_until(lock, deadline, [&] { return !moving_.contains(id); });
}

Result<MigrationReport> HostSet::MigrateTo(std::string_view id, VmHost& target) {
  for (const HostMember& m : members_) {
    if (m.host == &target) return Migrate(id, m.name);
  }
  return InvalidArgument("the target is not a host of this set");
}

Status HostSet::WatchStates(VmStateListener listener) {
  for (const HostMember& m : members_) {
    VmStateListener per_member = listener;
    if (listener && members_.size() > 1) {
      // A VM that moved (or is moving) away from this member: its "stopped" here is its
      // domain leaving, not the VM stopping.
      per_member = [this, name = m.name, listener](const VmStateEvent& e) {
        if (e.state == VmState::kStopped) {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = leaving_.find(e.id);
          if (it != leaving_.end() && it->second == name) return;
        }
        listener(e);
      };
    }
    Status st = m.host->WatchStates(per_member);
    // A host that does not answer now registers once it does (LibvirtHost reconnects).
    if (!st.ok() && (members_.size() == 1 || st.code() != Code::kUnavailable)) {
      return Named(m, std::move(st));
    }
  }
  return Status::Ok();
}

}  // namespace warren
