#include "lobby/commands/builtin_commands.h"

namespace warren {

void RegisterBuiltinCommands(CommandTable& table) {
  // Registration order is the order `help` lists them in.
  RegisterHelpCommand(table);
  RegisterWhoamiCommand(table);
  RegisterVmListCommands(table);
  RegisterNewCommand(table);
  RegisterImagesCommand(table);
  RegisterAuthorizeCommand(table);
  RegisterOAuthCommands(table);
  RegisterVmCopyCommand(table);
  RegisterVmResizeCommand(table);
  RegisterEgressCommand(table);
  RegisterVmStateCommands(table);
  RegisterVmMetaCommands(table);
  RegisterExtendCommand(table);
  RegisterVmSshCommand(table);
  RegisterJobCommands(table);
  RegisterUsageCommand(table);
  RegisterIntegrationCommands(table);
  RegisterShareCommands(table);
  RegisterBrowserCommand(table);
  RegisterSshKeyCommands(table);
  RegisterUserCommands(table);
  RegisterHostsCommands(table);
  RegisterMigrateCommand(table);
  RegisterBackupCommand(table);
}

}  // namespace warren
