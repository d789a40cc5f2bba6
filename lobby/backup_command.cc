#include "lobby/backup_command.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <CLI/CLI.hpp>

#include "keys/backup.h"
#include "keys/lmdb_store.h"
#include "lobby/base/log.h"

namespace warren {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(Errno("writing " + path));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// An InputStream over a file descriptor (a backup file, or stdin).
class FdInput final : public InputStream {
 public:
  FdInput(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  Result<size_t> Read(char* buf, size_t len) override {
    while (true) {
      ssize_t n = ::read(fd_, buf, len);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return Unavailable(Errno("reading " + name_));
    }
  }

 private:
  int fd_;
  std::string name_;
};

int Failed(const std::string& verb, const Status& st) {
  std::fprintf(stderr, "warren %s: %s\n", verb.c_str(), st.message().c_str());
  return 1;
}

std::string Describe(const BackupManifest& m) {
  uint64_t bytes = 0;
  for (const auto& f : m.files) bytes += f.size;
  return std::to_string(m.files.size()) + " files, " + std::to_string(bytes) +
         " bytes, store schema version " + std::to_string(m.schema_version) + ", warren " +
         m.warren_version;
}

// The backup file is made beside its final name and renamed when complete, so a failed
// backup never leaves a half file under the name asked for.
int RunBackup(const BackupSubcommands& subs) {
  const bool to_stdout = subs.file == "-";
  std::string tmp;
  int fd = STDOUT_FILENO;
  if (!to_stdout) {
    tmp = subs.file + ".partial-XXXXXX";
    fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return Failed("backup", Unavailable(Errno("creating " + tmp)));
    ::fchmod(fd, 0600);  // it holds every secret of the server
  }
  BackupSource src;
  src.data_dir = subs.data_dir;
  src.warren_version = WARREN_VERSION;
  src.now = static_cast<int64_t>(std::time(nullptr));
  const std::string shown = to_stdout ? "stdout" : tmp;
  Result<BackupManifest> m =
      WriteBackup(src, [&](std::string_view bytes) { return WriteAll(fd, bytes, shown); });
  Status done = m.status();
  if (done.ok() && ::fsync(fd) != 0 && !to_stdout) done = Unavailable(Errno("syncing " + tmp));
  if (!to_stdout) {
    ::close(fd);
    if (done.ok() && ::rename(tmp.c_str(), subs.file.c_str()) != 0) {
      done = Unavailable(Errno("renaming " + tmp + " to " + subs.file));
    }
    if (!done.ok()) ::unlink(tmp.c_str());
  }
  if (!done.ok()) return Failed("backup", done);
  std::fprintf(stderr, "warren backup: %s: %s\n", to_stdout ? "stdout" : subs.file.c_str(),
               Describe(*m).c_str());
  return 0;
}

int RunRestore(const BackupSubcommands& subs) {
  const bool from_stdin = subs.file == "-";
  int fd = from_stdin ? STDIN_FILENO : ::open(subs.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Failed("restore", Unavailable(Errno("opening " + subs.file)));
  FdInput in(fd, from_stdin ? "stdin" : subs.file);
  RestoreTarget target;
  target.data_dir = subs.data_dir;
  target.force = subs.force;
  target.max_schema_version = LmdbStore::kSchemaVersion;
  Result<BackupManifest> m = RestoreBackup(target, in);
  if (!from_stdin) ::close(fd);
  if (!m.ok()) return Failed("restore", m.status());
  std::fprintf(stderr,
               "warren restore: %s restored into %s (%s); start warren on it: reconcile "
               "brings its VMs back to their records\n",
               from_stdin ? "stdin" : subs.file.c_str(), subs.data_dir.c_str(),
               Describe(*m).c_str());
  return 0;
}

}  // namespace

void AddBackupSubcommands(CLI::App& app, BackupSubcommands& subs) {
  subs.backup = app.add_subcommand(
      "backup",
      "Write a backup (the store, copied while warren runs, and the data directory's keys) "
      "to FILE, or - for stdout");
  subs.backup->add_option("--data-dir", subs.data_dir, "State directory")->capture_default_str();
  subs.backup->add_option("FILE", subs.file, "Where to write it (- for stdout)")->required();
  subs.restore = app.add_subcommand(
      "restore",
      "Restore a backup into a data directory (new or empty; --force replaces the store and "
      "keys of a stopped warren's)");
  subs.restore->add_option("--data-dir", subs.data_dir, "State directory")->capture_default_str();
  subs.restore->add_flag("--force", subs.force,
                         "Replace the store and keys of a data directory that is not empty "
                         "(never while a warren has it open)");
  subs.restore->add_option("FILE", subs.file, "The backup (- for stdin)")->required();
}

std::optional<int> RunBackupSubcommand(const BackupSubcommands& subs) {
  if (subs.backup != nullptr && subs.backup->parsed()) return RunBackup(subs);
  if (subs.restore != nullptr && subs.restore->parsed()) return RunRestore(subs);
  return std::nullopt;
}

decltype(Services::backup) ServeBackups(std::string data_dir, LmdbStore& store) {
  return [data_dir = std::move(data_dir), &store](
             const BackupWriter& out, const CancelSignal& cancel) -> Result<BackupManifest> {
    BackupSource src;
    src.data_dir = data_dir;
    src.live_store = &store;
    src.warren_version = WARREN_VERSION;
    src.now = static_cast<int64_t>(std::time(nullptr));
    src.cancel = &cancel;
    return WriteBackup(src, out);
  };
}

}  // namespace warren
