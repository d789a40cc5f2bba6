// LmdbStore's copies for backups (keys/backup.h): LMDB's own copy of a live environment,
// the schema version of a copy, and whether another process holds a store open.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "keys/lmdb_table.h"

namespace warren {
namespace {

constexpr const char kSchemaVersionKey[] = "schema_version";

// Room for every table a store may hold; only "meta" is opened here.
constexpr unsigned kMaxTables = 64;

}  // namespace

Status LmdbStore::CopyTo(int fd) {
  int rc = mdb_env_copyfd2(s_->env.get(), fd, MDB_CP_COMPACT);
  if (rc != 0) return lmdb::Error(rc, "copying the store in " + s_->dir);
  return Status::Ok();
}

Status LmdbStore::CopyStoreIn(const std::string& dir, int fd) {
  struct stat st {};
  const std::string data = dir + "/data.mdb";
  if (::stat(data.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound("there is no store in " + dir);
    return Unavailable("reading " + data + ": " + std::strerror(errno));
  }
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return lmdb::Error(rc, "copying the store: creating an environment");
  lmdb::EnvPtr env(raw);
  if ((rc = mdb_env_set_maxdbs(raw, kMaxTables)) != 0) {
    return lmdb::Error(rc, "copying the store: configuring the environment");
  }
  // Read-only: never an upgrade or any write; a reader slot in the lock file, as any reader.
  rc = mdb_env_open(raw, dir.c_str(), MDB_RDONLY | MDB_NOTLS, 0600);
  if (rc != 0) return lmdb::Error(rc, "opening the store in " + dir + " to copy it");
  rc = mdb_env_copyfd2(raw, fd, MDB_CP_COMPACT);
  if (rc != 0) return lmdb::Error(rc, "copying the store in " + dir);
  return Status::Ok();
}

Result<int> LmdbStore::SchemaVersionOfCopy(const std::string& file) {
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return lmdb::Error(rc, "reading a store copy: creating an environment");
  lmdb::EnvPtr env(raw);
  if ((rc = mdb_env_set_maxdbs(raw, kMaxTables)) != 0) {
    return lmdb::Error(rc, "reading a store copy: configuring the environment");
  }
  rc = mdb_env_open(raw, file.c_str(), MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0600);
  if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
    return Internal("the store copy is not an LMDB store this warren reads");
  }
  if (rc != 0) return lmdb::Error(rc, "opening a store copy");
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(raw));
  Result<lmdb::JsonTable> meta = lmdb::JsonTable::Open(txn, "meta", /*create=*/false);
  if (!meta.ok()) return Internal("the store copy has no schema version (no meta table)");
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> v, meta->Get(txn, kSchemaVersionKey));
  if (!v || !v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > 1'000'000) {
    return Internal("the store copy's schema version is missing or corrupt");
  }
  return v->get<int>();
}

Result<bool> LmdbStore::OpenElsewhere(const std::string& dir) {
  const std::string lock = dir + "/lock.mdb";
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
    int get() const { return fd; }
  } fd{::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (fd.get() < 0) {
    if (errno == ENOENT) return false;
    return Unavailable("opening " + lock + ": " + std::strerror(errno));
  }
  // Every process with the environment open holds a read lock on the lock file's first
  // byte (LMDB's mdb_env_share_locks); a write lock there would conflict with it.
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 1;
  if (::fcntl(fd.get(), F_GETLK, &probe) != 0) {
    return Unavailable("checking the locks of " + lock + ": " + std::strerror(errno));
  }
  return probe.l_type != F_UNLCK;
}

}  // namespace warren
