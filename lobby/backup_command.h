// `warren backup` and `warren restore` (issue 17), the command-line side of keys/backup.h,
// and the backup `warren serve` hands the admin command `backup`:
//   warren backup  --data-dir DATA FILE|-        a consistent backup while warren runs (the
//                                               store is opened read-only beside it)
//   warren restore --data-dir DATA [--force] FILE|-
//                                               into an empty (or, forced, a stopped) data dir
// main.cc calls AddBackupSubcommands before parsing and RunBackupSubcommand after.
#pragma once

#include <optional>
#include <string>

#include "lobby/commands/interpreter.h"

namespace CLI {
class App;
}

namespace warren {

class LmdbStore;

struct BackupSubcommands {
  CLI::App* backup = nullptr;
  CLI::App* restore = nullptr;
  std::string data_dir = "/var/lib/warren";
  std::string file;
  bool force = false;
};

// Adds `backup` and `restore` to `app`; `subs` must outlive the parse and the run.
void AddBackupSubcommands(CLI::App& app, BackupSubcommands& subs);

// Runs whichever of them was parsed and returns its exit status (0, or 1 with the error on
// stderr); nullopt when neither was.
std::optional<int> RunBackupSubcommand(const BackupSubcommands& subs);

// What `serve` puts in Services::backup: a backup of `data_dir` with `store`, the store this
// process has open.
decltype(Services::backup) ServeBackups(std::string data_dir, LmdbStore& store);

}  // namespace warren
