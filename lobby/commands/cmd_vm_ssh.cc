// ssh VM CMD…: runs a command line in a VM as its user, through the VM's control
// connection. The words after the VM name are joined with spaces, as OpenSSH does, and the
// VM's shell parses them again; every word after the VM name belongs to that command, so
// `ssh web ls -la` runs "ls -la" (our own flags go before the VM name).
//
// Over SSH it streams until the command ends, unless --wait-seconds is given; elsewhere
// (/exec, MCP) it waits 45 s by default. A command still running then is handed back as a
// job, VM/xxxxxxxx, with the output so far: `wait` continues reading it, `kill` stops it.
#include <CLI/CLI.hpp>

#include "lobby/base/log.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/guest_output.h"
#include "lobby/commands/job_names.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {

namespace {

class SshCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    // Declared before the positionals, and parsing stops at the VM name: what follows is
    // the remote command's, flags included.
    wait_opt_ = app.add_option("--wait-seconds", wait_seconds_,
                               "hand the command back as a job after N seconds (0-45); over "
                               "SSH the default is to stream until it ends, elsewhere 45")
                    ->type_name("N");
    app.add_option("VM", vm_, "the VM to run in")->required();
    app.add_option("CMD", words_, "the command line, run by the VM user's shell");
    app.positionals_at_end(true);
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_RETURN_IF_ERROR(CheckWaitSeconds(wait_opt_->count() > 0, wait_seconds_));
    GuestControl* guests = ctx.services.guests;
    const VmRecord& vm = *ctx.vm;
    // "ssh web -- ls": the "--" only ends our flags.
    if (!words_.empty() && words_.front() == "--") words_.erase(words_.begin());
    if (words_.empty()) {
      return InvalidArgument("give the command to run: ssh " + vm.name + " CMD…; for a shell, " +
                             VmSshCommand(ctx.services.info, vm.name));
    }

    GuestCommand command;
    command.command = JoinWords(words_);
    GuestOutput io(ctx, wait_opt_->count() > 0 ? std::optional<int>(wait_seconds_) : std::nullopt);
    Result<GuestProgress> progress = guests->Exec(vm.id, command, io.Streams(/*with_stdin=*/true));
    if (!progress.ok()) {
      if (progress.status().code() == Code::kCancelled) return progress.status();
      return progress.status().Annotate("running a command in " + vm.name);
    }
    const std::string name = JobName(vm.name, progress->job);
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
    return io.Finish(*progress, vm.name, name, GuestCall::kStart);
  }

 private:
  std::string vm_;
  std::vector<std::string> words_;
  int wait_seconds_ = 0;
  CLI::Option* wait_opt_ = nullptr;
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
          "For an interactive shell, ssh to NAME@HOST instead.\n",
      .target = {"VM", VmNeed::kRunning},
      .make = [] { return std::make_unique<SshCommand>(); },
  });
}

}  // namespace warren
