// backup: an admin streams a backup of the server's data directory to its stdout over SSH
// (`ssh -p 2222 admin@HOST backup > warren.backup`) — the very file `warren backup` writes
// (keys/backup.h: the store copied by LMDB from a read transaction while warren runs, and
// the data directory's keys). It holds every user's credentials and secrets, so it is
// admin-only, refused to a credential limited to a tag (it holds every VM), not read-only
// (exec_read_only never runs it), and only where output is a byte stream: SSH without --json.
#include "keys/backup.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"

namespace warren {
namespace {

class BackupCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    if (!ctx.caller().scope.tag.empty()) {
      return PermissionDenied("a backup holds every user's VMs and keys; " +
                              CredentialNoun(ctx.caller()) + " is limited to tag " +
                              ctx.caller().scope.tag + ", so it cannot take one");
    }
    if (!ctx.session.streams_output || ctx.json) {
      return InvalidArgument(
          "backup writes a binary file to its output, so it runs over SSH, without --json: " +
          SshHint(ctx.services.info) + " backup > warren.backup");
    }
    if (!ctx.services.backup) return Unavailable("this server cannot take backups");
    OutputSink& out = *ctx.session.out;
    const CancelSignal& cancel = *ctx.session.cancel;
    WARREN_ASSIGN_OR_RETURN(BackupManifest m, ctx.services.backup(
                                                  [&](std::string_view bytes) -> Status {
                                                    if (cancel.cancelled()) {
                                                      return Cancelled("the client went away");
                                                    }
                                                    out.Write(bytes);
                                                    return Status::Ok();
                                                  },
                                                  cancel));
    CommandResult r;
    r.data = m.ToJson();
    // Nothing more on stdout: it is the file.
    return r;
  }
};

}  // namespace

void RegisterBackupCommand(CommandTable& table) {
  table.Add({
      .path = "backup",
      .summary = "write a backup of the server's store and keys to stdout (admins)",
      .description =
          "Writes a backup of this server to stdout, over SSH only:\n"
          "  ssh -p 2222 admin@HOST backup > warren.backup\n"
          "It is the file `warren backup --data-dir DATA FILE` writes: a tar stream of a "
          "manifest (warren version, store schema version, time, each file's size and "
          "SHA-256), a consistent copy of the store taken while warren runs, and the data "
          "directory's keys (API token signing, integration secrets, the SSH host key, the "
          "guest control key, the integrations CA). Restore it with `warren restore "
          "--data-dir DATA FILE` on a stopped server. VM disks are not in it (see README: "
          "Backups). It holds every user's credentials: keep it as secret as the server.\n",
      .admin_only = true,
      .make = [] { return std::make_unique<BackupCommand>(); },
  });
}

}  // namespace warren
