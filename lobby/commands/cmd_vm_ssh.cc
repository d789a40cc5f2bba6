// ssh VM CMD…: runs a command line in a VM as its user, through the VM's control
// connection. The words after the VM name are joined with spaces, as OpenSSH does, and the
// VM's shell parses them again; every word after the VM name belongs to that command, so
// `ssh web ls -la` runs "ls -la" (our own flags go before the VM name).
//
// Over SSH it streams until the command ends, unless --wait-seconds is given; elsewhere
// (/exec, MCP) it waits 45 s by default. A command still running then is handed back as a
// job, VM/xxxxxxxx, with the output so far: `wait` continues reading it, `kill` stops it.
#include <CLI/CLI.hpp>

#include <chrono>
#include <optional>

#include "lobby/base/duration.h"
#include "lobby/base/log.h"
#include "lobby/base/utf8.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/guest_output.h"
#include "lobby/commands/job_names.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {

namespace {

constexpr int64_t kMaxCommandTimeoutMs = 10 * 60 * 1000;
constexpr size_t kMaxCwdBytes = 4096;
// What `timeout`(1) exits with, so scripts and agents read a timeout the usual way.
constexpr int kTimedOutExitCode = 124;
// How long a killed command's last output is waited for.
constexpr int kKilledDrainMs = 5000;

class SshCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    // Declared before the positionals, and parsing stops at the VM name: what follows is
    // the remote command's, flags included.
    wait_opt_ = app.add_option("--wait-seconds", wait_seconds_,
                               "hand the command back as a job after N seconds (0-45); over "
                               "SSH the default is to stream until it ends, elsewhere 45")
                    ->type_name("N");
    app.add_option("--cwd", cwd_, "run in this directory (default: the VM user's home)")
        ->type_name("DIR");
    // One value per --env, so the VM name after it is not taken for another.
    app.add_option("--env", env_, "KEY=VALUE for this command only (repeatable)")
        ->type_name("K=V")
        ->allow_extra_args(false);
    timeout_opt_ = app.add_option("--timeout", timeout_,
                                  "kill the command (its whole process tree) after this long: "
                                  "500ms, 90s, 10m at most; it is never left running as a job")
                       ->type_name("DURATION");
    app.add_option("VM", vm_, "the VM to run in")->required();
    app.add_option("CMD", words_, "the command line, run by the VM user's shell");
    app.positionals_at_end(true);
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_RETURN_IF_ERROR(CheckWaitSeconds(wait_opt_->count() > 0, wait_seconds_));
    std::optional<int> timeout_ms;
    if (timeout_opt_->count() > 0) {
      if (wait_opt_->count() > 0) {
        return InvalidArgument(
            "--timeout kills the command and --wait-seconds leaves it running as a job: give "
            "one of them");
      }
      WARREN_ASSIGN_OR_RETURN(int64_t ms, ParseDurationMs("--timeout", timeout_));
      if (ms > kMaxCommandTimeoutMs) {
        return InvalidArgument("--timeout is at most 10m, not " + FormatDurationMs(ms));
      }
      timeout_ms = static_cast<int>(ms);
    }
    GuestCommand command;
    if (env_.size() > kMaxEnvEntries) {
      return InvalidArgument("at most " + std::to_string(kMaxEnvEntries) + " --env entries");
    }
    for (const std::string& e : env_) {
      WARREN_ASSIGN_OR_RETURN(auto kv, ParseEnvEntry(e));
      command.env.push_back(std::move(kv));
    }
    if (cwd_.size() > kMaxCwdBytes || cwd_.find('\0') != std::string::npos ||
        cwd_.find('\n') != std::string::npos || !IsValidUtf8(cwd_)) {
      return InvalidArgument("--cwd must be a directory path of at most " +
                             std::to_string(kMaxCwdBytes) + " bytes, without newlines");
    }
    command.cwd = cwd_;
    GuestControl* guests = ctx.services.guests;
    const VmRecord& vm = *ctx.vm;
    // "ssh web -- ls": the "--" only ends our flags.
    if (!words_.empty() && words_.front() == "--") words_.erase(words_.begin());
    if (words_.empty()) {
      return InvalidArgument("give the command to run: ssh " + vm.name + " CMD…; for a shell, " +
                             VmSshCommand(ctx.services.info, vm.name));
    }

    command.command = JoinWords(words_);
    const auto started = std::chrono::steady_clock::now();
    GuestOutput io(ctx, wait_opt_->count() > 0 ? std::optional<int>(wait_seconds_) : std::nullopt);
    if (timeout_ms.has_value()) {
      io.SetTimeoutMs(*timeout_ms);
      if (ctx.session.extend_deadline) ctx.session.extend_deadline(*timeout_ms + kKilledDrainMs);
    }
    Result<GuestProgress> progress = guests->Exec(vm.id, command, io.Streams(/*with_stdin=*/true));
    if (!progress.ok()) {
      if (progress.status().code() == Code::kCancelled) return progress.status();
      return progress.status().Annotate("running a command in " + vm.name);
    }
    const std::string name = JobName(vm.name, progress->job);
    bool timed_out = false;
    if (timeout_ms.has_value() && !progress->finished) {
      // Its time is up: kill its process tree, then take what it wrote until it died.
      if (Status st = guests->Kill(vm.id, progress->job); !st.ok()) {
        LogWarn("killing timed-out command " + LogQuote(name) + ": " + LogQuote(st.ToString()));
      }
      GuestStreams rest = io.Streams(/*with_stdin=*/false);
      rest.wait_ms = kKilledDrainMs;
      Result<GuestProgress> after = guests->Wait(vm.id, progress->job, progress->stdout_offset,
                                                 progress->stderr_offset, rest);
      if (after.ok()) progress = std::move(after);
      // One that ended on its own just as its time ran out keeps its own status.
      const bool ended_itself = after.ok() && progress->finished && progress->exit_code.has_value();
      if (!ended_itself) {
        timed_out = true;
        progress->finished = true;
        progress->exit_code = kTimedOutExitCode;
        progress->signal = 0;
      }
    }
    if (!progress->finished) {
      JobRecord job;
      job.job = progress->job;
      job.vm_id = vm.id;
      job.owner = vm.owner;
      job.command = BoundedJobCommand(command.command);
      job.started_at = ctx.now;
      job.stdout_offset = progress->stdout_offset;
      job.stderr_offset = progress->stderr_offset;
      if (Status st = ctx.store().PutJob(job); !st.ok()) {
        // The command runs on in the guest either way; say so rather than lose the output.
        LogWarn("recording job " + LogQuote(name) + ": " + LogQuote(st.ToString()));
      }
    }
    CommandResult r = io.Finish(*progress, vm.name, name, GuestCall::kStart);
    r.data["duration_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count();
    r.data["timed_out"] = timed_out;
    if (timed_out && !ctx.json) {
      ctx.session.err->Write("warren: killed after " + FormatDurationMs(*timeout_ms) +
                             " (--timeout)\n");
    }
    return r;
  }

 private:
  std::string vm_, cwd_, timeout_;
  std::vector<std::string> words_, env_;
  int wait_seconds_ = 0;
  CLI::Option* wait_opt_ = nullptr;
  CLI::Option* timeout_opt_ = nullptr;
};

}  // namespace

void RegisterVmSshCommand(CommandTable& table) {
  table.Add({
      .path = "ssh",
      .summary = "run a command in a VM",
      .args = "VM CMD…",
      .description =
          "Runs CMD in the VM as its user " + VmUserText() +
          ", with your stdin, stdout and stderr; the exit status is the command's. The words after "
          "VM are joined with spaces and parsed "
          "again by the VM's shell, so quote a compound command as one argument:\n"
          "  ssh web-1 ls -la\n"
          "  ssh web-1 'cd /srv && make'\n"
          "Flags for warren go before VM; everything after it belongs to CMD.\n"
          "Over SSH the command streams until it ends unless --wait-seconds is given; "
          "elsewhere (/exec, MCP) it waits 45 s. A command still running then becomes a "
          "job named VM/xxxxxxxx: you get the output so far and the job's name; `wait JOB` "
          "reads the rest and `kill JOB` stops it. Output returned in one piece is cut to "
          "its first and last 35 KB or so. Under --json (and over /exec and MCP) output "
          "that is not UTF-8 text comes as stdout_base64 and stderr_base64, byte for byte.\n"
          "--cwd and --env apply to this command only. --timeout kills the command, its whole "
          "process tree, when it runs longer (at most 10m, over any surface, past /exec's "
          "own limit): it then exits 124 with timed_out in its JSON, and never becomes a "
          "job. The JSON also has duration_ms.\n"
          "For an interactive shell, ssh to NAME@HOST instead.\n",
      .target = {"VM", VmNeed::kRunning},
      .make = [] { return std::make_unique<SshCommand>(); },
  });
}

}  // namespace warren
