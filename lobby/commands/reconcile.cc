#include "lobby/commands/reconcile.h"

#include <map>
#include <set>

#include "lobby/base/log.h"
#include "lobby/commands/job_names.h"
#include "lobby/commands/vm_egress.h"

namespace warren {
namespace {

class Reconciler {
 public:
  Reconciler(Store& store, VmHost& host, GuestControl* guests, int64_t now, ReconcileReport& r,
             const ReconcileScope& scope)
      : store_(store), host_(host), guests_(guests), now_(now), r_(r), scope_(scope) {}

  Status Run() {
    // Both lists first: nothing is touched unless warren can see the whole picture.
    WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> records, store_.ListVms());
    WARREN_ASSIGN_OR_RETURN(std::vector<VmInfo> domains, host_.List());
    std::map<std::string, VmInfo> by_id;
    for (VmInfo& d : domains) by_id.emplace(d.id, std::move(d));
    std::set<std::string> recorded;

    for (VmRecord vm : records) {
      recorded.insert(vm.id);
      if (!Ours(vm)) {
        auto here = by_id.find(vm.id);
        if (here == by_id.end()) continue;
        const Elsewhere what = SettleElsewhere(vm, here->second);
        if (what == Elsewhere::kDestroyed) by_id.erase(here);
        if (what != Elsewhere::kAdopted) continue;
        vm.host = scope_.host;
      }
      if (!scope_.host.empty() && vm.host.empty()) NameHost(vm);
      auto it = by_id.find(vm.id);
      const VmInfo* domain = it == by_id.end() ? nullptr : &it->second;
      if (vm.phase == VmPhase::kCreating || vm.phase == VmPhase::kRemoving) {
        RemoveUnfinished(vm, domain != nullptr);
      } else if (domain == nullptr) {
        LogWarn("reconcile: VM " + LogQuote(vm.name) + " (" + vm.id + ", owner " +
                LogQuote(vm.owner) + ") has no domain; its record is kept and shows as missing");
        r_.missing.push_back(vm.name);
      } else {
        FinishChanges(vm, *domain);
        Converge(vm, *domain);
      }
    }
    for (const auto& [id, domain] : by_id) {
      if (recorded.count(id) == 0) DestroyOrphan(domain);
    }
    ExpireJobs();
    Result<int> disks = host_.RemoveUnusedDisks();
    if (disks.ok()) {
      r_.disks_removed = *disks;
    } else {
      Fail("removing unused disks", disks.status());
    }
    return first_error_;
  }

 private:
  // Whether `vm` is this host's to settle (ReconcileScope).
  bool Ours(const VmRecord& vm) const {
    if (scope_.host.empty()) return true;
    return (vm.host.empty() ? scope_.default_host : vm.host) == scope_.host;
  }

  enum class Elsewhere { kLeft, kAdopted, kDestroyed };
  // A domain here whose record names another host (ReconcileScope: a migration cut short).
  Elsewhere SettleElsewhere(const VmRecord& vm, const VmInfo& domain) {
    const std::string named = vm.host.empty() ? scope_.default_host : vm.host;
    Result<bool> there =
        scope_.holds ? scope_.holds(named, vm.id) : Result<bool>(Unavailable("not asked"));
    if (there.ok() && !*there) {
      Status st = store_.UpdateVm(vm.id, [&](VmRecord& r) {
        r.host = scope_.host;
        return Status::Ok();
      });
      if (!st.ok()) {
        Fail("moving the record of " + vm.name + " to host " + scope_.host, st);
        return Elsewhere::kLeft;
      }
      LogWarn("reconcile: VM " + LogQuote(vm.name) + " (" + vm.id + ") is on host " + scope_.host +
              ", not on host " + named +
              " its record named (a migration finished as warren stopped); the record follows");
      r_.adopted.push_back(vm.name);
      return Elsewhere::kAdopted;
    }
    if (there.ok() && *there && domain.state != VmState::kRunning) {
      LogWarn("reconcile: VM " + LogQuote(vm.name) + " (" + vm.id + ") is on host " + named +
              " as its record says, and a copy that does not run is on host " + scope_.host +
              " (a migration cut short); destroying the copy");
      Status st = host_.Destroy(vm.id);
      if (!st.ok() && st.code() != Code::kNotFound) {
        Fail("destroying the copy a migration left of " + vm.name, st);
        return Elsewhere::kLeft;
      }
      r_.migration_copies_destroyed.push_back(vm.id);
      return Elsewhere::kDestroyed;
    }
    LogWarn("reconcile: domain warren-" + vm.id + " of VM " + LogQuote(vm.name) + " is on host " +
            scope_.host + " but its record says " + named + "; left as it is" +
            (there.ok() ? "" : " (" + there.status().ToString() + ")"));
    r_.elsewhere.push_back(vm.id);
    return Elsewhere::kLeft;
  }

  // A record from before several hosts gets the name of the (default) host it is on.
  void NameHost(const VmRecord& vm) {
    Status st = store_.UpdateVm(vm.id, [&](VmRecord& r) {
      if (r.host.empty()) r.host = scope_.host;
      return Status::Ok();
    });
    if (!st.ok() && st.code() != Code::kNotFound) Fail("naming the host of " + vm.name, st);
  }

  void Fail(const std::string& what, const Status& st) {
    std::string line = what + ": " + st.ToString();
    LogError("reconcile: " + LogQuote(line));
    r_.errors.push_back(line);
    if (first_error_.ok()) first_error_ = st.Annotate(what);
  }

  // A `new` or `cp` that did not finish, or an `rm` that did not: the VM goes.
  void RemoveUnfinished(const VmRecord& vm, bool has_domain) {
    const bool removing = vm.phase == VmPhase::kRemoving;
    LogWarn("reconcile: VM " + LogQuote(vm.name) + " (" + vm.id + ") was still being " +
            (removing ? "removed" : "created") + " when warren stopped; removing it");
    if (guests_ != nullptr) guests_->Disconnect(vm.id);
    if (has_domain) {
      Status st = host_.Destroy(vm.id);
      if (!st.ok() && st.code() != Code::kNotFound) {
        // Keep the record so the next start tries again.
        return Fail("destroying the domain of unfinished VM " + vm.name, st);
      }
    }
    Status st = store_.DeleteVm(vm.id, now_ * 1000);
    if (!st.ok() && st.code() != Code::kNotFound) {
      return Fail("deleting the record of unfinished VM " + vm.name, st);
    }
    (removing ? r_.removals_finished : r_.unfinished_removed).push_back(vm.name);
  }

  // What a command left half-way between the host and the store: the store says what was
  // asked (rename and egress write the store first or last; either way the domain follows
  // the record), and a resize recorded as pending is asked of the host again (the same sizes
  // change nothing twice) and then recorded.
  void FinishChanges(const VmRecord& vm, const VmInfo& domain) {
    if (domain.name != vm.name) {
      Status st = host_.Rename(vm.id, vm.name);
      if (!st.ok()) return Fail("renaming the domain of " + vm.name, st);
      r_.relabelled.push_back(vm.name);
    }
    Result<bool> nic = host_.SetNetwork(vm.id, HostEgressFor(vm.egress));
    if (!nic.ok()) return Fail("setting the network device of " + vm.name, nic.status());
    if (vm.pending_resize) FinishResize(vm);
    if (vm.restarting) FinishRestart(vm, domain);
  }

  // A `restart` cut short: its guest may be shutting down still, and would stay off. It is
  // restarted now (one that is down already is booted by Converge, as it should run).
  void FinishRestart(const VmRecord& vm, const VmInfo& domain) {
    if (domain.state == VmState::kRunning) {
      if (guests_ != nullptr) guests_->Disconnect(vm.id);
      if (Status st = host_.Restart(vm.id); !st.ok()) return Fail("restarting " + vm.name, st);
      r_.restarted.push_back(vm.name);
    }
    Status st = store_.UpdateVm(vm.id, [](VmRecord& r) {
      r.restarting = false;
      return Status::Ok();
    });
    if (!st.ok()) Fail("recording the restart of " + vm.name, st);
  }

  void FinishResize(const VmRecord& vm) {
    const PendingResize& p = *vm.pending_resize;
    ResizeSpec spec;
    spec.cpus = p.cpus;
    spec.memory_mib = p.memory_mib;
    spec.disk_gib = p.disk_gib;
    Result<ResizeOutcome> out = host_.Resize(vm.id, spec);
    const Code code = out.status().code();
    if (!out.ok() && code != Code::kInvalidArgument && code != Code::kLimitExceeded) {
      return Fail("finishing the resize of " + vm.name, out.status());  // again next time
    }
    Status st = store_.UpdateVm(vm.id, [&](VmRecord& r) {
      if (out.ok()) {
        ApplyResize(r, p);
      } else {
        r.pending_resize.reset();  // refused now: it stays as it was
      }
      return Status::Ok();
    });
    if (!out.ok()) return Fail("finishing the resize of " + vm.name, out.status());
    if (!st.ok()) return Fail("recording the resize of " + vm.name, st);
    r_.resized.push_back(vm.name);
  }

  void DestroyOrphan(const VmInfo& domain) {
    LogWarn("reconcile: domain warren-" + domain.id + " (named " + LogQuote(domain.name) +
            ") has no record; destroying it and its disk");
    if (guests_ != nullptr) guests_->Disconnect(domain.id);
    Status st = host_.Destroy(domain.id);
    if (!st.ok() && st.code() != Code::kNotFound) {
      return Fail("destroying orphan domain " + domain.id, st);
    }
    r_.orphans_destroyed.push_back(domain.id);
  }

  // Brings one VM to its desired state.
  void Converge(const VmRecord& vm, const VmInfo& domain) {
    const VmState state = domain.state;
    const bool down = state == VmState::kStopped || state == VmState::kCrashed;
    switch (vm.desired_state) {
      case DesiredState::kRunning:
        if (down)
          Boot(vm, state);
        else if (state == VmState::kPaused)
          Act(vm, &VmHost::Resume, "resuming", r_.started);
        break;
      case DesiredState::kPaused:
        // A paused VM's memory did not survive a host restart; the nearest thing to what
        // was asked is the VM booted and paused again.
        if (down && Boot(vm, state))
          Act(vm, &VmHost::Pause, "pausing", r_.paused);
        else if (state == VmState::kRunning)
          Act(vm, &VmHost::Pause, "pausing", r_.paused);
        break;
      case DesiredState::kStopped:
        if (state == VmState::kRunning || state == VmState::kPaused || state == VmState::kCrashed) {
          if (guests_ != nullptr) guests_->Disconnect(vm.id);
          Act(vm, &VmHost::Stop, "stopping", r_.stopped);
        }
        break;
    }
  }

  // Starts a stopped or crashed VM (a crashed one is stopped first, as the host requires).
  bool Boot(const VmRecord& vm, VmState state) {
    if (guests_ != nullptr) guests_->Disconnect(vm.id);
    if (state == VmState::kCrashed) {
      Status st = host_.Stop(vm.id);
      if (!st.ok()) {
        Fail("stopping crashed VM " + vm.name, st);
        return false;
      }
    }
    LogInfo("reconcile: starting " + LogQuote(vm.name) + " (" + vm.id + "), which should run");
    return Act(vm, &VmHost::Start, "starting", r_.started);
  }

  bool Act(const VmRecord& vm, Status (VmHost::*act)(std::string_view), const char* doing,
           std::vector<std::string>& done) {
    Status st = (host_.*act)(vm.id);
    if (!st.ok()) {
      Fail(std::string(doing) + " " + vm.name, st);
      return false;
    }
    done.push_back(vm.name);
    return true;
  }

  void ExpireJobs() {
    Result<std::vector<JobRecord>> jobs = store_.ListJobs("");
    if (!jobs.ok()) return Fail("listing jobs", jobs.status());
    for (const JobRecord& job : *jobs) {
      if (!JobExpired(job, now_)) continue;
      Status st = store_.DeleteJob(job.vm_id, job.job);
      if (!st.ok() && st.code() != Code::kNotFound) {
        Fail("dropping expired job " + job.job, st);
        continue;
      }
      ++r_.jobs_expired;
    }
  }

  Store& store_;
  VmHost& host_;
  GuestControl* guests_;
  const int64_t now_;
  ReconcileReport& r_;
  const ReconcileScope scope_;
  Status first_error_;
};

}  // namespace

Status Reconcile(Store& store, VmHost& host, GuestControl* guests, const Clock& clock,
                 ReconcileReport* report, const ReconcileScope& scope) {
  ReconcileReport local;
  ReconcileReport& r = report != nullptr ? *report : local;
  Status st = Reconciler(store, host, guests, clock.NowUnix(), r, scope).Run();
  LogInfo("reconcile" + (scope.host.empty() ? std::string() : " of host " + scope.host) + ": " +
          std::to_string(r.unfinished_removed.size()) + " unfinished removed, " +
          std::to_string(r.removals_finished.size()) + " removals finished, " +
          std::to_string(r.relabelled.size()) + " relabelled, " + std::to_string(r.resized.size()) +
          " resizes finished, " + std::to_string(r.restarted.size()) + " restarts finished, " +
          std::to_string(r.orphans_destroyed.size()) + " orphans destroyed, " +
          std::to_string(r.missing.size()) + " missing, " + std::to_string(r.started.size()) +
          " started, " + std::to_string(r.paused.size()) + " paused, " +
          std::to_string(r.stopped.size()) + " stopped, " + std::to_string(r.jobs_expired) +
          " expired jobs, " + std::to_string(r.disks_removed) + " unused disks removed, " +
          std::to_string(r.errors.size()) + " errors");
  return st;
}

}  // namespace warren
