// wait JOB, kill JOB, jobs [VM]: commands that outlived the call that started them (`ssh VM
// CMD` past its wait). The guest's runner keeps the process and spools its output; the
// store keeps who may see the job and how far `wait` has read, so each `wait` returns only
// what is new, across sessions and restarts of warren. A job is named VM/xxxxxxxx by its
// VM's current name.
#include <map>

#include <CLI/CLI.hpp>

#include "lobby/base/log.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/guest_output.h"
#include "lobby/commands/job_names.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

struct FoundJob {
  VmRecord vm;
  JobRecord job;
  std::string name;  // "VM/xxxxxxxx"
};

// The caller's job `name`; NotFound like a VM it cannot see, and for a finished job past
// keeping.
Result<FoundJob> FindJob(CommandContext& ctx, std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(auto parts, ParseJobName(name));
  FoundJob f;
  WARREN_ASSIGN_OR_RETURN(f.vm, FindVisibleVm(ctx, parts.first));
  f.name = JobName(f.vm.name, parts.second);
  Result<JobRecord> job = ctx.store().GetJob(f.vm.id, parts.second);
  if (!job.ok()) {
    if (job.status().code() == Code::kNotFound) {
      return NotFound("no job " + f.name + "; see jobs " + f.vm.name);
    }
    return job.status();
  }
  f.job = std::move(job).value();
  if (JobExpired(f.job, ctx.now)) {
    return NotFound("job " + f.name + " ended more than a day ago; its output is gone");
  }
  return f;
}

// Records what the guest said about a job: how far output has been read, and its end.
Status RecordProgress(CommandContext& ctx, const FoundJob& f, const GuestProgress& p) {
  return ctx.store().UpdateJob(f.vm.id, f.job.job, [&](JobRecord& job) {
    // Two waits at once may race; offsets only move forward.
    job.stdout_offset = std::max(job.stdout_offset, p.stdout_offset);
    job.stderr_offset = std::max(job.stderr_offset, p.stderr_offset);
    if (p.finished && !job.finished) {
      job.finished = true;
      job.exit_code = p.exit_code;
      job.signal = p.signal;
      job.ended_at = ctx.now;
    }
    return Status::Ok();
  });
}

// Marks a job ended without an exit status: its VM stopped or restarted under it, or the
// runner no longer knows it.
void MarkLost(Store& store, const JobRecord& rec, int64_t now) {
  Status st = store.UpdateJob(rec.vm_id, rec.job, [&](JobRecord& job) {
    if (!job.finished) {
      job.finished = true;
      job.exit_code.reset();
      job.ended_at = now;
    }
    return Status::Ok();
  });
  if (!st.ok()) LogWarn("recording the end of job " + rec.job + ": " + LogQuote(st.ToString()));
}

GuestProgress ProgressOf(const JobRecord& job) {
  GuestProgress p;
  p.job = job.job;
  p.finished = job.finished;
  p.exit_code = job.exit_code;
  p.signal = job.signal;
  p.stdout_offset = job.stdout_offset;
  p.stderr_offset = job.stderr_offset;
  return p;
}

class WaitCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    wait_opt_ = app.add_option("--wait-seconds", wait_seconds_,
                               "return after N seconds (0-45) if it is still running; default 45")
                    ->type_name("N");
    app.add_option("JOB", job_, "the job, VM/xxxxxxxx")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_RETURN_IF_ERROR(CheckWaitSeconds(wait_opt_->count() > 0, wait_seconds_));
    WARREN_ASSIGN_OR_RETURN(GuestControl * guests, RequireGuests(ctx));
    WARREN_ASSIGN_OR_RETURN(FoundJob f, FindJob(ctx, job_));
    // `wait` always returns: 45 s at most, also over SSH.
    GuestOutput io(ctx, wait_opt_->count() > 0
                            ? wait_seconds_
                            : ctx.session.wait_seconds.value_or(kMaxWaitSeconds));

    Result<VmInfo> info = ctx.services.vms->Inspect(f.vm.id);
    if (!info.ok() && info.status().code() != Code::kNotFound) {
      return info.status().Annotate("checking " + f.vm.name);
    }
    if (!info.ok() || info->state == VmState::kStopped || info->state == VmState::kCrashed) {
      // The VM is down: nothing more will come from it. A job still running when it went
      // down ended then, without a status.
      if (!f.job.finished) {
        MarkLost(ctx.store(), f.job, ctx.now);
        f.job.finished = true;
        f.job.exit_code.reset();
      }
      return io.Finish(ProgressOf(f.job), f.vm.name, f.name, GuestCall::kWait);
    }

    Result<GuestProgress> p = guests->Wait(f.vm.id, f.job.job, f.job.stdout_offset,
                                           f.job.stderr_offset, io.Streams(/*with_stdin=*/false));
    if (!p.ok()) {
      if (p.status().code() == Code::kNotFound) {
        if (f.job.finished) {
          // Ended earlier and its output is gone from the guest: the status still stands.
          return io.Finish(ProgressOf(f.job), f.vm.name, f.name, GuestCall::kWait);
        }
        MarkLost(ctx.store(), f.job, ctx.now);
        return NotFound("job " + f.name + " is gone from " + f.vm.name +
                        " (the VM restarted, or its output expired)");
      }
      if (p.status().code() == Code::kCancelled) return p.status();
      return p.status().Annotate("waiting for " + f.name);
    }
    if (Status st = RecordProgress(ctx, f, *p); !st.ok()) {
      LogWarn("recording progress of job " + LogQuote(f.name) + ": " + LogQuote(st.ToString()));
    }
    return io.Finish(*p, f.vm.name, f.name, GuestCall::kWait);
  }

 private:
  std::string job_;
  int wait_seconds_ = 0;
  CLI::Option* wait_opt_ = nullptr;
};

class KillCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("JOB", job_, "the job, VM/xxxxxxxx")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(GuestControl * guests, RequireGuests(ctx));
    WARREN_ASSIGN_OR_RETURN(FoundJob f, FindJob(ctx, job_));
    CommandResult r;
    r.data = {{"job", f.name}};
    if (f.job.finished) {
      r.data["killed"] = false;
      r.text = f.name + " has already ended\n";
      return r;
    }
    Status st = guests->Kill(f.vm.id, f.job.job);
    if (st.code() == Code::kNotFound) {
      MarkLost(ctx.store(), f.job, ctx.now);
      r.data["killed"] = false;
      r.text = f.name + " had already ended\n";
      return r;
    }
    WARREN_RETURN_IF_ERROR(st.Annotate("killing " + f.name));
    // Its end (and the rest of its output) is recorded by the next wait or jobs.
    r.data["killed"] = true;
    r.text = "killed " + f.name + "\n";
    return r;
  }

 private:
  std::string job_;
};

std::string JobStateText(const JobRecord& job) {
  if (!job.finished) return "running";
  if (job.exit_code.has_value()) return "exited " + std::to_string(*job.exit_code);
  if (job.signal > 0) return "killed (signal " + std::to_string(job.signal) + ")";
  return "ended";
}

class JobsCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override { app.add_option("VM", vm_, "only this VM's jobs"); }

  Result<CommandResult> Run(CommandContext& ctx) override {
    std::vector<VmRecord> vms;
    if (ctx.vm.has_value()) {
      vms.push_back(*ctx.vm);
    } else {
      WARREN_ASSIGN_OR_RETURN(vms, VisibleVms(ctx));
    }
    HostView host(ctx.services.vms);
    nlohmann::json list = nlohmann::json::array();
    TextTable table({"JOB", "STATE", "STARTED", "COMMAND"});
    size_t count = 0;
    for (const VmRecord& vm : vms) {
      WARREN_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, Refreshed(ctx, vm, host));
      for (const JobRecord& job : jobs) {
        const std::string name = JobName(vm.name, job.job);
        list.push_back(
            {{"job", name},
             {"vm", vm.name},
             {"command", job.command},
             {"started_at", job.started_at},
             {"finished", job.finished},
             {"exit_code", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json()},
             {"ended_at", job.ended_at}});
        std::string command =
            job.command.size() > 60 ? job.command.substr(0, 57) + "..." : job.command;
        table.AddRow({name, JobStateText(job), FormatTime(job.started_at), command});
        ++count;
      }
    }
    CommandResult r;
    r.data = {{"jobs", std::move(list)}};
    r.text = count == 0 ? "no jobs\n" : table.Render();
    return r;
  }

 private:
  // The VM's jobs with their ends brought up to date from the guest, and those past
  // keeping dropped.
  Result<std::vector<JobRecord>> Refreshed(CommandContext& ctx, const VmRecord& vm,
                                           const HostView& host) {
    WARREN_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, ctx.store().ListJobs(vm.id));
    std::vector<JobRecord> kept;
    bool any_running = false;
    for (JobRecord& job : jobs) {
      if (JobExpired(job, ctx.now)) {
        if (Status st = ctx.store().DeleteJob(job.vm_id, job.job); !st.ok()) {
          LogWarn("dropping expired job " + job.job + ": " + LogQuote(st.ToString()));
        }
        continue;
      }
      any_running = any_running || !job.finished;
      kept.push_back(std::move(job));
    }
    if (!any_running) return kept;

    Result<VmInfo> info = host.Find(vm.id);
    if (info.ok() && info->state == VmState::kRunning && ctx.services.guests != nullptr) {
      Result<std::vector<GuestJob>> guest_jobs = ctx.services.guests->Jobs(vm.id);
      if (!guest_jobs.ok()) return kept;  // shown as last known; the next look may do better
      std::map<std::string, GuestJob> by_id;
      for (GuestJob& g : *guest_jobs) by_id.emplace(g.job, g);
      for (JobRecord& job : kept) {
        if (job.finished) continue;
        auto it = by_id.find(job.job);
        if (it == by_id.end()) {
          MarkLost(ctx.store(), job, ctx.now);
          job.finished = true;
          job.ended_at = ctx.now;
        } else if (it->second.finished) {
          job.finished = true;
          job.exit_code = it->second.exit_code;
          job.ended_at = it->second.finished_at > 0 ? it->second.finished_at : ctx.now;
          Status st = ctx.store().UpdateJob(vm.id, job.job, [&](JobRecord& rec) {
            rec.finished = true;
            rec.exit_code = job.exit_code;
            rec.ended_at = job.ended_at;
            return Status::Ok();
          });
          if (!st.ok()) LogWarn("recording the end of job " + job.job + ": " + st.ToString());
        }
      }
    } else if ((info.ok() &&
                (info->state == VmState::kStopped || info->state == VmState::kCrashed)) ||
               info.status().code() == Code::kNotFound) {
      // Jobs do not survive their VM stopping.
      for (JobRecord& job : kept) {
        if (job.finished) continue;
        MarkLost(ctx.store(), job, ctx.now);
        job.finished = true;
        job.ended_at = ctx.now;
      }
    }
    return kept;
  }

  std::string vm_;
};

}  // namespace

void RegisterJobCommands(CommandTable& table) {
  table.Add({
      .path = "wait",
      .summary = "read a job's new output and, once it ended, its exit status",
      .args = "JOB",
      .description =
          "Waits up to 45 s (or --wait-seconds) for the job to end, returning the output it "
          "printed since the last wait; once it has ended, its exit status is this "
          "command's. A finished job's output can be read for a day.\n",
      .make = [] { return std::make_unique<WaitCommand>(); },
  });
  table.Add({
      .path = "kill",
      .summary = "stop a job and everything it started",
      .args = "JOB",
      .description = "Kills the job's whole process tree in its VM. `wait JOB` then returns "
                     "the rest of its output.\n",
      .make = [] { return std::make_unique<KillCommand>(); },
  });
  table.Add({
      .path = "jobs",
      .summary = "list the jobs in your VMs",
      .args = "[VM]",
      .description = "Lists commands handed back as jobs (by `ssh VM CMD` past its wait): "
                     "running ones and those that ended within a day.\n",
      .read_only = true,
      .target = {"VM", VmNeed::kExists},
      .make = [] { return std::make_unique<JobsCommand>(); },
  });
}

}  // namespace warren
