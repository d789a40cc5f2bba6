// The built-in lobby commands. Each cmd_*.cc file registers its commands (and their group)
// through one function declared here; RegisterBuiltinCommands calls them all, once, while
// the Interpreter is being built. Not thread-safe: the table is filled before any Execute.
#pragma once

#include "lobby/commands/command_table.h"

namespace warren {

void RegisterBuiltinCommands(CommandTable& table);

void RegisterHelpCommand(CommandTable& table);       // help
void RegisterWhoamiCommand(CommandTable& table);     // whoami
void RegisterSshKeyCommands(CommandTable& table);    // ssh-key list|add|remove|rename
void RegisterUserCommands(CommandTable& table);      // user add|ls|rm
void RegisterNewCommand(CommandTable& table);        // new
void RegisterImagesCommand(CommandTable& table);     // images
void RegisterAuthorizeCommand(CommandTable& table);  // authorize (OAuth sign-in)
void RegisterOAuthCommands(CommandTable& table);     // oauth clients list|remove
void RegisterVmCopyCommand(CommandTable& table);     // cp
void RegisterVmResizeCommand(CommandTable& table);   // resize
void RegisterEgressCommand(CommandTable& table);     // egress
void RegisterVmListCommands(CommandTable& table);    // ls, stat, console
void RegisterVmStateCommands(CommandTable& table);   // rm, rename, start|stop|restart|pause|resume
void RegisterVmMetaCommands(CommandTable& table);    // tag, comment
void RegisterExtendCommand(CommandTable& table);     // extend
void RegisterUsageCommand(CommandTable& table);      // usage
void RegisterVmSshCommand(CommandTable& table);      // ssh
void RegisterJobCommands(CommandTable& table);       // wait, kill, jobs
// integrations add|list|show|remove|rename|attach|detach
void RegisterIntegrationCommands(CommandTable& table);
// share show|port|set-public|set-private|add|remove|add-link|remove-link
void RegisterShareCommands(CommandTable& table);
void RegisterBrowserCommand(CommandTable& table);  // browser [--revoke]
void RegisterBackupCommand(CommandTable& table);   // backup (admins, over SSH)
void RegisterHostsCommands(CommandTable& table);   // hosts, hosts drain|undrain (admins)
void RegisterMigrateCommand(CommandTable& table);  // migrate (admins)

}  // namespace warren
