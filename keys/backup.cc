#include "keys/backup.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "keys/lmdb_store.h"
#include "keys/tar_format.h"
#include "lobby/base/hex.h"

namespace warren {
namespace {

constexpr BackupKeyFile kKeyFiles[] = {
    {"token-signing.key", 0600},    {"integration.key", 0600},
    {"ssh_host_ed25519_key", 0600}, {"ssh_host_ed25519_key.pub", 0644},
    {"control_ed25519", 0600},      {"control_ed25519.pub", 0644},
    {"integrations-ca.key", 0600},  {"integrations-ca.crt", 0644},
};

constexpr size_t kChunk = 1 << 20;
constexpr size_t kMaxManifestBytes = 64 * 1024;
constexpr size_t kMaxKeyFileBytes = 64 * 1024;
// LMDB's map may be configured large; this only bounds what a reader accepts.
constexpr uint64_t kMaxStoreBytes = uint64_t{1} << 40;

std::string Errno(std::string_view what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ != nullptr) EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void Update(std::string_view bytes) {
    if (ctx_ != nullptr) EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size());
  }
  Result<std::string> HexDigest() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (ctx_ == nullptr || EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) {
      return Internal("SHA-256 failed");
    }
    return HexEncode(std::string_view(reinterpret_cast<const char*>(md), len));
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

Result<std::string> HashOf(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

Status CheckCancel(const CancelSignal* cancel) {
  if (cancel != nullptr && cancel->cancelled()) return Cancelled("the backup was cancelled");
  return Status::Ok();
}

// A file of warren's that no other name in the data directory may stand in for: a regular
// file (never a symlink), small. nullopt when it does not exist.
Result<std::optional<std::string>> ReadKeyFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Unavailable(Errno("opening", path));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Unavailable(Errno("reading", path));
  if (!S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kMaxKeyFileBytes)) {
    return Internal(path + " is not a key file of warren's (not a small regular file)");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::read(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable(Errno("reading", path));
    if (n == 0) break;
    off += static_cast<size_t>(n);
  }
  data.resize(off);
  return std::optional<std::string>(std::move(data));
}

// An unnamed file in `dir` (O_TMPFILE): gone when closed, so a backup killed half-way
// leaves nothing. Falls back to a named temp file unlinked at once.
Result<Fd> ScratchFile(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd.get() >= 0) return fd;
  std::string tmpl = dir + "/.backup-XXXXXX";
  Fd named(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (named.get() < 0) return Unavailable(Errno("making a scratch file in", dir));
  ::unlink(tmpl.c_str());
  return named;
}

Status PreadAll(int fd, char* buf, size_t len, uint64_t offset) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable("reading the store copy: " + std::string(std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status WriteEntry(const BackupWriter& out, const std::string& name, mode_t mode,
                  std::string_view bytes, int64_t now) {
  WARREN_ASSIGN_OR_RETURN(std::string header, TarHeader({name, mode, bytes.size(), now}));
  WARREN_RETURN_IF_ERROR(out(header));
  WARREN_RETURN_IF_ERROR(out(bytes));
  std::string pad = TarPadding(bytes.size());
  if (!pad.empty()) WARREN_RETURN_IF_ERROR(out(pad));
  return Status::Ok();
}

const BackupKeyFile* FindKeyFile(std::string_view name) {
  for (const BackupKeyFile& k : kKeyFiles) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

// ---- Restore's pieces ----

Status ReadExact(InputStream& in, char* buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    WARREN_ASSIGN_OR_RETURN(size_t n, in.Read(buf + done, len - done));
    if (n == 0) return InvalidArgument("the backup ends early: it is truncated");
    done += n;
  }
  return Status::Ok();
}

Status SkipPadding(InputStream& in, uint64_t size) {
  std::string pad = TarPadding(size);
  if (pad.empty()) return Status::Ok();
  std::string got(pad.size(), '\0');
  return ReadExact(in, got.data(), got.size());
}

bool DirIsEmpty(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_empty(dir, ec) && !ec;
}

Status FsyncPath(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) return Unavailable(Errno("syncing", path));
  return Status::Ok();
}

// The scratch directory a restore unpacks into, removed with whatever is in it unless
// the restore got through.
class Scratch {
 public:
  ~Scratch() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  Status Make(const std::string& data_dir) {
    std::string tmpl = data_dir + "/.restore-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return Unavailable(Errno("making", tmpl));
    path_ = tmpl;
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Unpacks one entry's bytes from `in` into `path` (new, with `mode`), checking its size
// and hash against the manifest.
Status UnpackEntry(InputStream& in, const TarEntry& entry, const BackupManifest::File& want,
                   const std::string& path, mode_t mode) {
  if (entry.size != want.size) {
    return InvalidArgument("the backup's " + entry.name + " is " + std::to_string(entry.size) +
                           " bytes but its manifest says " + std::to_string(want.size));
  }
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd.get() < 0) return Unavailable(Errno("creating", path));
  if (::fchmod(fd.get(), mode) != 0) return Unavailable(Errno("setting the mode of", path));
  Sha256 hash;
  std::string buf(kChunk, '\0');
  uint64_t left = entry.size;
  while (left > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    WARREN_RETURN_IF_ERROR(ReadExact(in, buf.data(), n));
    hash.Update(std::string_view(buf.data(), n));
    size_t off = 0;
    while (off < n) {
      ssize_t w = ::write(fd.get(), buf.data() + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Unavailable(Errno("writing", path));
      off += static_cast<size_t>(w);
    }
    left -= n;
  }
  WARREN_RETURN_IF_ERROR(SkipPadding(in, entry.size));
  WARREN_ASSIGN_OR_RETURN(std::string got, hash.HexDigest());
  if (got != want.sha256) {
    return InvalidArgument("the backup's " + entry.name +
                           " does not match its manifest's SHA-256: the file is damaged");
  }
  if (::fsync(fd.get()) != 0) return Unavailable(Errno("syncing", path));
  return Status::Ok();
}

// Moves `from` to `to`; an existing directory at `to` is swapped into `from`'s place (and
// leaves with the scratch directory).
Status MoveInto(const std::string& from, const std::string& to, bool directory) {
  if (directory && ::access(to.c_str(), F_OK) == 0) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
      return Unavailable(Errno("replacing", to));
    }
    return Status::Ok();
  }
  if (::rename(from.c_str(), to.c_str()) != 0) return Unavailable(Errno("placing", to));
  return Status::Ok();
}

}  // namespace

std::span<const BackupKeyFile> BackupKeyFiles() { return kKeyFiles; }

nlohmann::json BackupManifest::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const File& f : files) {
    list.push_back({{"name", f.name}, {"mode", f.mode}, {"size", f.size}, {"sha256", f.sha256}});
  }
  return {{"format", format},
          {"warren_version", warren_version},
          {"schema_version", schema_version},
          {"created_at", created_at},
          {"files", std::move(list)}};
}

Result<BackupManifest> BackupManifest::FromJson(const nlohmann::json& j) {
  try {
    BackupManifest m;
    m.format = j.at("format").get<int>();
    if (m.format > kBackupFormatVersion) {
      return Conflict("the backup is of format " + std::to_string(m.format) +
                      ", newer than this warren reads (" + std::to_string(kBackupFormatVersion) +
                      "); restore it with a newer warren");
    }
    if (m.format < 1) return InvalidArgument("the backup's manifest has no valid format");
    m.warren_version = j.at("warren_version").get<std::string>();
    m.schema_version = j.at("schema_version").get<int>();
    m.created_at = j.at("created_at").get<int64_t>();
    for (const nlohmann::json& f : j.at("files")) {
      File file;
      file.name = f.at("name").get<std::string>();
      file.mode = f.at("mode").get<mode_t>();
      file.size = f.at("size").get<uint64_t>();
      file.sha256 = f.at("sha256").get<std::string>();
      m.files.push_back(std::move(file));
    }
    if (m.schema_version < 1) return InvalidArgument("the backup's manifest has no schema version");
    return m;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("the backup's manifest is malformed: ") + e.what());
  }
}

Result<BackupManifest> WriteBackup(const BackupSource& source, const BackupWriter& out) {
  const std::string& dir = source.data_dir;
  BackupManifest m;
  m.warren_version = source.warren_version;
  m.created_at = source.now;

  // The store: LMDB's copy into an unnamed scratch file, then its size, version and hash.
  WARREN_ASSIGN_OR_RETURN(Fd copy, ScratchFile(dir));
  if (source.live_store != nullptr) {
    WARREN_RETURN_IF_ERROR(source.live_store->CopyTo(copy.get()));
  } else {
    WARREN_RETURN_IF_ERROR(LmdbStore::CopyStoreIn(dir + "/store", copy.get()));
  }
  struct stat st {};
  if (::fstat(copy.get(), &st) != 0) return Unavailable(Errno("reading the store copy in", dir));
  const uint64_t store_size = static_cast<uint64_t>(st.st_size);
  WARREN_ASSIGN_OR_RETURN(m.schema_version, LmdbStore::SchemaVersionOfCopy(
                                                "/proc/self/fd/" + std::to_string(copy.get())));
  std::string buf(kChunk, '\0');
  {
    Sha256 hash;
    for (uint64_t off = 0; off < store_size;) {
      WARREN_RETURN_IF_ERROR(CheckCancel(source.cancel));
      size_t n = static_cast<size_t>(std::min<uint64_t>(store_size - off, buf.size()));
      WARREN_RETURN_IF_ERROR(PreadAll(copy.get(), buf.data(), n, off));
      hash.Update(std::string_view(buf.data(), n));
      off += n;
    }
    WARREN_ASSIGN_OR_RETURN(std::string digest, hash.HexDigest());
    m.files.push_back({kBackupStoreEntry, 0600, store_size, std::move(digest)});
  }

  // The keys, those present.
  std::vector<std::pair<const BackupKeyFile*, std::string>> keys;
  for (const BackupKeyFile& k : kKeyFiles) {
    WARREN_ASSIGN_OR_RETURN(std::optional<std::string> bytes, ReadKeyFile(dir + "/" + k.name));
    if (!bytes) continue;
    WARREN_ASSIGN_OR_RETURN(std::string digest, HashOf(*bytes));
    m.files.push_back({k.name, k.mode, bytes->size(), std::move(digest)});
    keys.emplace_back(&k, std::move(*bytes));
  }

  // The stream: manifest, store, keys, end.
  WARREN_RETURN_IF_ERROR(
      WriteEntry(out, kBackupManifestName, 0600, m.ToJson().dump(2) + "\n", source.now));
  WARREN_ASSIGN_OR_RETURN(std::string header,
                          TarHeader({kBackupStoreEntry, 0600, store_size, source.now}));
  WARREN_RETURN_IF_ERROR(out(header));
  for (uint64_t off = 0; off < store_size;) {
    WARREN_RETURN_IF_ERROR(CheckCancel(source.cancel));
    size_t n = static_cast<size_t>(std::min<uint64_t>(store_size - off, buf.size()));
    WARREN_RETURN_IF_ERROR(PreadAll(copy.get(), buf.data(), n, off));
    WARREN_RETURN_IF_ERROR(out(std::string_view(buf.data(), n)));
    off += n;
  }
  if (std::string pad = TarPadding(store_size); !pad.empty()) WARREN_RETURN_IF_ERROR(out(pad));
  for (const auto& [k, bytes] : keys) {
    WARREN_RETURN_IF_ERROR(WriteEntry(out, k->name, k->mode, bytes, source.now));
  }
  WARREN_RETURN_IF_ERROR(out(TarEnd()));
  return m;
}

Result<BackupManifest> RestoreBackup(const RestoreTarget& target, InputStream& in) {
  namespace fs = std::filesystem;
  const std::string& dir = target.data_dir;
  if (dir.empty()) return InvalidArgument("the data directory is empty");
  std::error_code ec;
  // A data directory this restore made goes again when it fails.
  struct MadeDir {
    std::string path;
    ~MadeDir() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  } made_dir;
  fs::file_status st = fs::symlink_status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return InvalidArgument(dir + " exists and is not a directory");
    if (!DirIsEmpty(dir)) {
      if (!target.force) {
        return Conflict(dir +
                        " is not empty: restore into a new directory, or give --force to "
                        "replace its store and keys (with warren stopped)");
      }
      WARREN_ASSIGN_OR_RETURN(bool in_use, LmdbStore::OpenElsewhere(dir + "/store"));
      if (in_use) {
        return Conflict("a warren has the store in " + dir + " open: stop it before restoring");
      }
    }
  } else {
    fs::create_directories(dir, ec);
    if (ec) return Unavailable("creating " + dir + ": " + ec.message());
    made_dir.path = dir;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    if (ec) return Unavailable("setting the permissions of " + dir + ": " + ec.message());
  }

  // The manifest comes first, and is checked before anything else is read.
  std::string block(kTarBlock, '\0');
  WARREN_RETURN_IF_ERROR(ReadExact(in, block.data(), block.size()));
  WARREN_ASSIGN_OR_RETURN(std::optional<TarEntry> first, ParseTarHeader(block));
  if (!first || first->name != kBackupManifestName || first->size > kMaxManifestBytes) {
    return InvalidArgument(std::string("this is not a warren backup: it does not start with ") +
                           kBackupManifestName);
  }
  std::string text(static_cast<size_t>(first->size), '\0');
  WARREN_RETURN_IF_ERROR(ReadExact(in, text.data(), text.size()));
  WARREN_RETURN_IF_ERROR(SkipPadding(in, first->size));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the backup's manifest is not JSON");
  WARREN_ASSIGN_OR_RETURN(BackupManifest m, BackupManifest::FromJson(j));
  if (m.schema_version > target.max_schema_version) {
    return Conflict("the backup's store has schema version " + std::to_string(m.schema_version) +
                    " (written by warren " + m.warren_version +
                    ") but this warren opens only up to " +
                    std::to_string(target.max_schema_version) +
                    ": restore it with that warren or a newer one (nothing was changed)");
  }
  std::map<std::string, const BackupManifest::File*> listed;
  for (const BackupManifest::File& f : m.files) {
    if (f.name != kBackupStoreEntry && FindKeyFile(f.name) == nullptr) {
      return InvalidArgument("the backup's manifest lists an unknown file " + f.name);
    }
    if (!listed.emplace(f.name, &f).second) {
      return InvalidArgument("the backup's manifest lists " + f.name + " twice");
    }
    const uint64_t max = f.name == kBackupStoreEntry ? kMaxStoreBytes : kMaxKeyFileBytes;
    if (f.size > max) return InvalidArgument("the backup's " + f.name + " is too large");
  }
  if (!listed.count(kBackupStoreEntry)) return InvalidArgument("the backup holds no store");

  // Unpack into the scratch directory, checking each entry.
  Scratch scratch;
  WARREN_RETURN_IF_ERROR(scratch.Make(dir));
  const std::string stage = scratch.path();
  if (::mkdir((stage + "/store").c_str(), 0700) != 0) {
    return Unavailable(Errno("making", stage + "/store"));
  }
  std::set<std::string> seen;
  while (true) {
    WARREN_RETURN_IF_ERROR(ReadExact(in, block.data(), block.size()));
    WARREN_ASSIGN_OR_RETURN(std::optional<TarEntry> entry, ParseTarHeader(block));
    if (!entry) break;
    auto it = listed.find(entry->name);
    if (it == listed.end()) {
      return InvalidArgument("the backup holds " + entry->name + ", which its manifest omits");
    }
    if (!seen.insert(entry->name).second) {
      return InvalidArgument("the backup holds " + entry->name + " twice");
    }
    const BackupKeyFile* key = FindKeyFile(entry->name);
    const mode_t mode = key != nullptr ? key->mode : 0600;
    WARREN_RETURN_IF_ERROR(UnpackEntry(in, *entry, *it->second, stage + "/" + entry->name, mode));
  }
  for (const auto& [name, file] : listed) {
    if (!seen.count(name)) {
      return InvalidArgument("the backup ends without " + name + ": it is truncated");
    }
  }
  // The store copy itself must say what the manifest does.
  WARREN_ASSIGN_OR_RETURN(int version,
                          LmdbStore::SchemaVersionOfCopy(stage + "/" + kBackupStoreEntry));
  if (version != m.schema_version) {
    return InvalidArgument("the backup's store has schema version " + std::to_string(version) +
                           " but its manifest says " + std::to_string(m.schema_version));
  }
  if (version > target.max_schema_version) {
    return Conflict("the backup's store has schema version " + std::to_string(version) +
                    ", newer than this warren opens");
  }

  // Place everything: the store directory (swapped with an old one), then each key; keys
  // the backup does not hold go, so the directory holds exactly the backup's.
  WARREN_RETURN_IF_ERROR(FsyncPath(stage + "/store"));
  WARREN_RETURN_IF_ERROR(FsyncPath(stage));
  WARREN_RETURN_IF_ERROR(MoveInto(stage + "/store", dir + "/store", /*directory=*/true));
  for (const BackupKeyFile& k : kKeyFiles) {
    const std::string to = dir + "/" + k.name;
    if (seen.count(k.name)) {
      WARREN_RETURN_IF_ERROR(MoveInto(stage + "/" + k.name, to, /*directory=*/false));
    } else if (::unlink(to.c_str()) != 0 && errno != ENOENT) {
      return Unavailable(Errno("removing", to));
    }
  }
  WARREN_RETURN_IF_ERROR(FsyncPath(dir));
  made_dir.path.clear();
  return m;
}

}  // namespace warren
