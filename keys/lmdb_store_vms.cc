// LmdbStore's VM and job records: tables vms, vm_names and jobs (schema version 2).
#include <algorithm>
#include <optional>
#include <utility>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "keys/scope.h"
#include "keys/vm_rules.h"
#include "lobby/base/host_name.h"

namespace warren {

std::string_view DesiredStateName(DesiredState s) {
  switch (s) {
    case DesiredState::kRunning:
      return "running";
    case DesiredState::kStopped:
      return "stopped";
    case DesiredState::kPaused:
      return "paused";
  }
  return "running";
}

std::string_view VmPhaseName(VmPhase p) {
  switch (p) {
    case VmPhase::kCreating:
      return "creating";
    case VmPhase::kReady:
      return "ready";
    case VmPhase::kRemoving:
      return "removing";
  }
  return "creating";
}

namespace {

Result<DesiredState> ParseDesiredState(std::string_view s) {
  for (DesiredState d : {DesiredState::kRunning, DesiredState::kStopped, DesiredState::kPaused}) {
    if (DesiredStateName(d) == s) return d;
  }
  return Internal("unknown desired_state \"" + std::string(s) + "\"");
}

Result<VmPhase> ParsePhase(std::string_view s) {
  for (VmPhase p : {VmPhase::kCreating, VmPhase::kReady, VmPhase::kRemoving}) {
    if (VmPhaseName(p) == s) return p;
  }
  return Internal("unknown phase \"" + std::string(s) + "\"");
}

}  // namespace

// ---- Codecs. Field names are the on-disk format: renaming one needs an upgrade step.

namespace lmdb {

nlohmann::json Codec<VmRecord>::Encode(const VmRecord& vm) {
  nlohmann::json env = nlohmann::json::array();
  for (const auto& [k, v] : vm.env) env.push_back({k, v});
  nlohmann::json j = {{"id", vm.id},
                      {"name", vm.name},
                      {"owner", vm.owner},
                      {"image", vm.image},
                      {"cpus", vm.cpus},
                      {"memory_mib", vm.memory_mib},
                      {"disk_gib", vm.disk_gib},
                      {"tags", vm.tags},
                      {"comment", vm.comment},
                      {"env", std::move(env)},
                      {"egress", vm.egress},
                      {"created_at", vm.created_at},
                      {"desired_state", DesiredStateName(vm.desired_state)},
                      {"phase", VmPhaseName(vm.phase)},
                      {"kind", vm.kind},
                      {"size", vm.size},
                      {"expires_at", vm.expires_at},
                      {"made", vm.made},
                      {"made_ms", vm.made_ms},
                      {"meter",
                       {{"running_since_ms", vm.meter.running_since_ms},
                        {"running_cpus", vm.meter.running_cpus},
                        {"running_memory_mib", vm.meter.running_memory_mib},
                        {"disk_since_ms", vm.meter.disk_since_ms}}}};
  if (vm.restarting) j["restarting"] = true;
  if (!vm.host.empty()) j["host"] = vm.host;
  if (vm.pending_resize) {
    j["pending_resize"] = {{"cpus", vm.pending_resize->cpus},
                           {"memory_mib", vm.pending_resize->memory_mib},
                           {"disk_gib", vm.pending_resize->disk_gib}};
  }
  return j;
}

Result<VmRecord> Codec<VmRecord>::Decode(const nlohmann::json& j) {
  try {
    VmRecord vm;
    vm.id = j.at("id").get<std::string>();
    vm.name = j.at("name").get<std::string>();
    vm.owner = j.at("owner").get<std::string>();
    vm.image = j.value("image", "");
    vm.cpus = j.value("cpus", 0);
    vm.memory_mib = j.value("memory_mib", int64_t{0});
    vm.disk_gib = j.value("disk_gib", int64_t{0});
    vm.tags = j.value("tags", std::vector<std::string>{});
    vm.comment = j.value("comment", "");
    if (auto it = j.find("env"); it != j.end()) {
      for (const auto& kv : *it) {
        vm.env.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      }
    }
    vm.egress = j.value("egress", "all");
    vm.created_at = j.value("created_at", int64_t{0});
    WARREN_ASSIGN_OR_RETURN(vm.desired_state,
                            ParseDesiredState(j.value("desired_state", "running")));
    WARREN_ASSIGN_OR_RETURN(vm.phase, ParsePhase(j.value("phase", "ready")));
    // Since schema 8; older records are VMs with no marks (metering starts at their first).
    vm.kind = j.value("kind", "vm");
    vm.size = j.value("size", "");
    vm.expires_at = j.value("expires_at", int64_t{0});
    // Records written before these fields were all booted; how long it took is unknown.
    vm.made = j.value("made", "boot");
    vm.made_ms = j.value("made_ms", int64_t{0});
    vm.restarting = j.value("restarting", false);
    vm.host = j.value("host", "");  // since schema 9; absent: the default host
    if (auto it = j.find("pending_resize"); it != j.end()) {
      vm.pending_resize = PendingResize{it->value("cpus", 0), it->value("memory_mib", int64_t{0}),
                                        it->value("disk_gib", int64_t{0})};
    }
    if (auto it = j.find("meter"); it != j.end()) {
      vm.meter.running_since_ms = it->value("running_since_ms", int64_t{0});
      vm.meter.running_cpus = it->value("running_cpus", 0);
      vm.meter.running_memory_mib = it->value("running_memory_mib", int64_t{0});
      vm.meter.disk_since_ms = it->value("disk_since_ms", int64_t{0});
    }
    return vm;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

nlohmann::json Codec<JobRecord>::Encode(const JobRecord& job) {
  return {{"job", job.job},
          {"vm_id", job.vm_id},
          {"owner", job.owner},
          {"command", job.command},
          {"started_at", job.started_at},
          {"stdout_offset", job.stdout_offset},
          {"stderr_offset", job.stderr_offset},
          {"finished", job.finished},
          {"exit_code", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json()},
          {"signal", job.signal},
          {"ended_at", job.ended_at}};
}

Result<JobRecord> Codec<JobRecord>::Decode(const nlohmann::json& j) {
  try {
    JobRecord job;
    job.job = j.at("job").get<std::string>();
    job.vm_id = j.at("vm_id").get<std::string>();
    job.owner = j.value("owner", "");
    job.command = j.value("command", "");
    job.started_at = j.value("started_at", int64_t{0});
    job.stdout_offset = j.value("stdout_offset", uint64_t{0});
    job.stderr_offset = j.value("stderr_offset", uint64_t{0});
    job.finished = j.value("finished", false);
    if (auto it = j.find("exit_code"); it != j.end() && !it->is_null()) {
      job.exit_code = it->get<int>();
    }
    job.signal = j.value("signal", 0);
    job.ended_at = j.value("ended_at", int64_t{0});
    return job;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

}  // namespace lmdb

namespace store_internal {

Status CreateVmTables(lmdb::Txn& txn) { return CreateTables(txn, {"vms", "vm_names", "jobs"}); }

Status RenameFullEgress(lmdb::Txn& txn) {
  WARREN_ASSIGN_OR_RETURN(lmdb::JsonTable vms, lmdb::JsonTable::Open(txn, "vms", false));
  // Collected first: a scan must not write to the table it walks.
  std::vector<std::pair<std::string, nlohmann::json>> renamed;
  WARREN_RETURN_IF_ERROR(
      vms.Scan(txn, "", [&](std::string_view key, nlohmann::json&& v) -> Result<bool> {
        if (v.is_object() && v.value("egress", "") == "full") {
          v["egress"] = "all";
          renamed.emplace_back(std::string(key), std::move(v));
        }
        return true;
      }));
  for (const auto& [key, v] : renamed) WARREN_RETURN_IF_ERROR(vms.Put(txn, key, v));
  return Status::Ok();
}

}  // namespace store_internal

namespace {

using store_internal::Shown;

// A sandbox size's name is the operator's (serve --sandbox-size NAME=...); the store only
// bounds it.
constexpr size_t kMaxSizeNameBytes = 64;

// The jobs table key: vm_id NUL job. Both parts are validated, so neither holds NUL.
std::string JobKey(std::string_view vm_id, std::string_view job) {
  std::string k(vm_id);
  k.push_back('\0');
  k.append(job);
  return k;
}

std::string JobPrefix(std::string_view vm_id) {
  if (vm_id.empty()) return "";
  std::string k(vm_id);
  k.push_back('\0');
  return k;
}

Status ValidateVmRecord(const VmRecord& vm) {
  WARREN_RETURN_IF_ERROR(CheckVmId(vm.id));
  WARREN_RETURN_IF_ERROR(CheckVmName(vm.name));
  if (vm.owner.empty()) return InvalidArgument("VM " + vm.name + " has no owner");
  for (const std::string& t : vm.tags) WARREN_RETURN_IF_ERROR(ValidateTag(t));
  if (!std::is_sorted(vm.tags.begin(), vm.tags.end()) ||
      std::adjacent_find(vm.tags.begin(), vm.tags.end()) != vm.tags.end()) {
    return InvalidArgument("VM " + vm.name + ": tags must be sorted and unique");
  }
  if (vm.kind != "vm" && vm.kind != "sandbox") {
    return InvalidArgument("VM " + vm.name + ": kind must be \"vm\" or \"sandbox\", not \"" +
                           Shown(vm.kind) + "\"");
  }
  if (vm.kind == "vm" && (!vm.size.empty() || vm.expires_at != 0)) {
    return InvalidArgument("VM " + vm.name + ": only a sandbox has a size and an expiry");
  }
  if (vm.size.size() > kMaxSizeNameBytes || vm.expires_at < 0) {
    return InvalidArgument("VM " + vm.name + ": size name too long or expiry before 1970");
  }
  if (std::find(std::begin(kVmMadeHow), std::end(kVmMadeHow), vm.made) == std::end(kVmMadeHow) ||
      vm.made_ms < 0) {
    return InvalidArgument("VM " + vm.name + ": made must be boot, template or copy, " +
                           "in a time that is never negative");
  }
  if (!vm.host.empty()) WARREN_RETURN_IF_ERROR(CheckHostName(vm.host));
  const VmMeter& m = vm.meter;
  if (m.running_since_ms < 0 || m.running_cpus < 0 || m.running_memory_mib < 0 ||
      m.disk_since_ms < 0) {
    return InvalidArgument("VM " + vm.name + ": usage marks are never negative");
  }
  return Status::Ok();
}

Status ValidateJobRecord(const JobRecord& job) {
  WARREN_RETURN_IF_ERROR(CheckVmId(job.vm_id));
  WARREN_RETURN_IF_ERROR(CheckJobId(job.job));
  if (job.command.size() > kMaxJobCommandBytes) {
    return InvalidArgument("job command is longer than " + std::to_string(kMaxJobCommandBytes) +
                           " bytes");
  }
  return Status::Ok();
}

Result<VmRecord> ExistingVm(LmdbStoreState& s, lmdb::Txn& txn, std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, s.vms.Get(txn, id));
  if (!vm) return NotFound("no VM with id " + Shown(id));
  return std::move(*vm);
}

Result<JobRecord> ExistingJob(LmdbStoreState& s, lmdb::Txn& txn, std::string_view vm_id,
                              std::string_view job) {
  WARREN_ASSIGN_OR_RETURN(std::optional<JobRecord> rec, s.jobs.Get(txn, JobKey(vm_id, job)));
  if (!rec) return NotFound("no job " + Shown(job) + " in VM " + Shown(vm_id));
  return std::move(*rec);
}

}  // namespace

Status LmdbStore::CreateVm(const VmRecord& vm) {
  WARREN_RETURN_IF_ERROR(ValidateVmRecord(vm));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> owner, s_->users.Get(txn, vm.owner));
  if (!owner) return NotFound("no user named " + Shown(vm.owner));
  WARREN_ASSIGN_OR_RETURN(bool added, s_->vm_names.Insert(txn, vm.name, vm.id));
  if (!added) return Conflict("a VM named " + vm.name + " already exists");
  WARREN_ASSIGN_OR_RETURN(added, s_->vms.Insert(txn, vm.id, vm));
  if (!added) return Conflict("a VM with id " + vm.id + " already exists");
  return txn.Commit();
}

Result<VmRecord> LmdbStore::GetVm(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  return ExistingVm(*s_, txn, id);
}

Result<VmRecord> LmdbStore::GetVmByName(std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> id, s_->vm_names.Get(txn, name));
  if (!id) return NotFound("no VM named " + Shown(name));
  WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, s_->vms.Get(txn, *id));
  if (!vm) {
    return Internal("store index vm_names/" + lmdb::PrintableKey(name) + " points at missing VM " +
                    *id);
  }
  return std::move(*vm);
}

Result<std::vector<VmRecord>> LmdbStore::ListVms() {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  std::vector<VmRecord> out;
  WARREN_RETURN_IF_ERROR(
      s_->vms.Scan(txn, "", [&](std::string_view, VmRecord&& vm) -> Result<bool> {
        out.push_back(std::move(vm));
        return true;
      }));
  std::sort(out.begin(), out.end(),
            [](const VmRecord& a, const VmRecord& b) { return a.name < b.name; });
  return out;
}

Status LmdbStore::UpdateVm(std::string_view id, const std::function<Status(VmRecord&)>& change) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(VmRecord vm, ExistingVm(*s_, txn, id));
  VmRecord updated = vm;
  WARREN_RETURN_IF_ERROR(change(updated));
  // Only MeterVm and DeleteVm move the meter, each accruing up to the mark it moves: a
  // meter set here would skip or double-count time.
  updated.meter = vm.meter;
  if (updated.id != vm.id || updated.name != vm.name || updated.owner != vm.owner) {
    return InvalidArgument("UpdateVm may not change a VM's id, name or owner");
  }
  WARREN_RETURN_IF_ERROR(ValidateVmRecord(updated));
  WARREN_RETURN_IF_ERROR(s_->vms.Put(txn, updated.id, updated));
  return txn.Commit();
}

Status LmdbStore::RenameVm(std::string_view id, std::string_view new_name) {
  WARREN_RETURN_IF_ERROR(CheckVmName(new_name));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(VmRecord vm, ExistingVm(*s_, txn, id));
  if (vm.name == new_name) return Status::Ok();
  WARREN_ASSIGN_OR_RETURN(bool added, s_->vm_names.Insert(txn, new_name, vm.id));
  if (!added) return Conflict("a VM named " + std::string(new_name) + " already exists");
  WARREN_RETURN_IF_ERROR(s_->vm_names.Delete(txn, vm.name).status());
  vm.name = std::string(new_name);
  WARREN_RETURN_IF_ERROR(s_->vms.Put(txn, vm.id, vm));
  return txn.Commit();
}

Status LmdbStore::DeleteVm(std::string_view id, int64_t at_ms) {
  WARREN_RETURN_IF_ERROR(store_internal::CheckUsageTime(at_ms));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(VmRecord vm, ExistingVm(*s_, txn, id));
  // Its usage to the end, in this transaction: the rows outlive the record.
  WARREN_RETURN_IF_ERROR(s_->AccrueUsage(txn, vm, at_ms));
  WARREN_RETURN_IF_ERROR(s_->vms.Delete(txn, vm.id).status());
  // Only this VM's own index entry: never another VM's that took the name.
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> named, s_->vm_names.Get(txn, vm.name));
  if (named && *named == vm.id) {
    WARREN_RETURN_IF_ERROR(s_->vm_names.Delete(txn, vm.name).status());
  }
  // Keys first: a scan must not see its own table change under it.
  std::vector<std::string> job_keys;
  WARREN_RETURN_IF_ERROR(
      s_->jobs.Scan(txn, JobPrefix(vm.id), [&](std::string_view k, JobRecord&&) -> Result<bool> {
        job_keys.emplace_back(k);
        return true;
      }));
  for (const std::string& k : job_keys) WARREN_RETURN_IF_ERROR(s_->jobs.Delete(txn, k).status());
  WARREN_RETURN_IF_ERROR(s_->DropVmAttachments(txn, vm));
  WARREN_RETURN_IF_ERROR(s_->DeleteVmShare(txn, vm.id));
  return txn.Commit();
}

Status LmdbStore::PutJob(const JobRecord& job) {
  WARREN_RETURN_IF_ERROR(ValidateJobRecord(job));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_RETURN_IF_ERROR(ExistingVm(*s_, txn, job.vm_id).status());
  WARREN_RETURN_IF_ERROR(s_->jobs.Put(txn, JobKey(job.vm_id, job.job), job));
  return txn.Commit();
}

Result<JobRecord> LmdbStore::GetJob(std::string_view vm_id, std::string_view job) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  return ExistingJob(*s_, txn, vm_id, job);
}

Result<std::vector<JobRecord>> LmdbStore::ListJobs(std::string_view vm_id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  std::vector<JobRecord> out;
  WARREN_RETURN_IF_ERROR(
      s_->jobs.Scan(txn, JobPrefix(vm_id), [&](std::string_view, JobRecord&& job) -> Result<bool> {
        out.push_back(std::move(job));
        return true;
      }));
  std::stable_sort(out.begin(), out.end(), [](const JobRecord& a, const JobRecord& b) {
    return a.started_at < b.started_at;
  });
  return out;
}

Status LmdbStore::UpdateJob(std::string_view vm_id, std::string_view job,
                            const std::function<Status(JobRecord&)>& change) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(JobRecord rec, ExistingJob(*s_, txn, vm_id, job));
  JobRecord updated = rec;
  WARREN_RETURN_IF_ERROR(change(updated));
  if (updated.job != rec.job || updated.vm_id != rec.vm_id) {
    return InvalidArgument("UpdateJob may not change a job's id or VM");
  }
  WARREN_RETURN_IF_ERROR(ValidateJobRecord(updated));
  WARREN_RETURN_IF_ERROR(s_->jobs.Put(txn, JobKey(rec.vm_id, rec.job), updated));
  return txn.Commit();
}

Status LmdbStore::DeleteJob(std::string_view vm_id, std::string_view job) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(bool deleted, s_->jobs.Delete(txn, JobKey(vm_id, job)));
  if (!deleted) return NotFound("no job " + Shown(job) + " in VM " + Shown(vm_id));
  return txn.Commit();
}

}  // namespace warren
