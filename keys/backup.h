// Backups of a data directory (issue 17): everything warren needs to come back, in one file
// that is a plain tar stream (keys/tar_format.h), in this order:
//   warren-backup.json   the manifest: {"format": 1, "warren_version", "schema_version" (of
//                        the store copy), "created_at" (Unix s), "files": [{"name", "mode",
//                        "size", "sha256"}, ...]} for every entry after it
//   store/data.mdb       LMDB's own compacted copy of DATA/store (mdb_env_copyfd2 from one
//                        read transaction of the live environment: a consistent snapshot
//                        while warren runs, never a file copy)
//   token-signing.key, integration.key, ssh_host_ed25519_key(.pub), control_ed25519(.pub),
//   integrations-ca.key, integrations-ca.crt
//                        the data directory's keys, those that exist (kBackupKeyFiles)
// `tar -xf FILE -C DIR` unpacks it into a data directory's layout; RestoreBackup does that
// with the checks: nothing newer than this warren, every checksum, original modes (secrets
// 0600), each file atomically. VM disks (DATA/disks, DATA/vms) are not in it: README says
// how to snapshot them. Thread-compatible: independent calls may run concurrently.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"

namespace warren {

class LmdbStore;

inline constexpr char kBackupManifestName[] = "warren-backup.json";
inline constexpr char kBackupStoreEntry[] = "store/data.mdb";
// The version of this layout; a reader refuses a newer one.
inline constexpr int kBackupFormatVersion = 1;

struct BackupKeyFile {
  const char* name;  // relative to the data directory
  mode_t mode;       // what it is restored with: 0600 for secrets
};
// The data directory's key files a backup holds when they exist.
std::span<const BackupKeyFile> BackupKeyFiles();

struct BackupManifest {
  struct File {
    std::string name;
    mode_t mode = 0600;
    uint64_t size = 0;
    std::string sha256;  // lowercase hex
  };
  int format = kBackupFormatVersion;
  std::string warren_version;
  int schema_version = 0;
  int64_t created_at = 0;
  std::vector<File> files;

  nlohmann::json ToJson() const;
  // InvalidArgument when it is not a manifest of this layout (a newer format included).
  static Result<BackupManifest> FromJson(const nlohmann::json& j);
};

// Writes the backup to `out`, a chunk at a time; an error from `out` ends it.
using BackupWriter = std::function<Status(std::string_view bytes)>;

struct BackupSource {
  std::string data_dir;
  // The store when this process has it open (warren serve); null: DATA/store is opened
  // read-only for the copy (warren backup, beside a running warren or not).
  LmdbStore* live_store = nullptr;
  std::string warren_version;
  int64_t now = 0;  // Unix seconds, for created_at and the entries' times
  // Checked between chunks: a cancelled backup stops with Cancelled.
  const CancelSignal* cancel = nullptr;
};

// Copies the store (to an unnamed file in the data directory, gone with the process),
// reads the key files, and writes the backup to `out`. Returns its manifest.
Result<BackupManifest> WriteBackup(const BackupSource& source, const BackupWriter& out);

struct RestoreTarget {
  std::string data_dir;
  // Replace the store and keys of a data directory that is not empty (refused otherwise);
  // still refused while a warren has its store open. Key files the backup does not hold
  // are removed, so the directory holds exactly the backup's.
  bool force = false;
  // The newest store schema the restoring warren opens (LmdbStore::kSchemaVersion).
  int max_schema_version = 0;
};

// Restores a backup read from `in` into the target: refuses a non-empty directory unless
// forced (Conflict), a store of a newer schema or a newer format (Conflict, with both
// versions, before anything is written), a truncated or altered file (InvalidArgument:
// every entry's size and SHA-256 are checked against the manifest, and the store copy's
// own schema version against the manifest's). Everything is unpacked into a scratch
// directory inside the target first; only then does each file replace its old self by a
// rename (the store directory as a whole). Nothing of a failed restore is left behind.
Result<BackupManifest> RestoreBackup(const RestoreTarget& target, InputStream& in);

}  // namespace warren
