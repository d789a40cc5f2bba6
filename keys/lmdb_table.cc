#include "keys/lmdb_table.h"

#include <cerrno>
#include <string>
#include <utility>

namespace warren::lmdb {
namespace {

MDB_val Val(std::string_view s) {
  // LMDB does not write through mv_data for keys or for values it copies in.
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}

std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

// LMDB refuses empty keys and keys over its compile-time limit (511 bytes in Debian's
// build) with MDB_BAD_VALSIZE. Lookups of such keys come from untrusted input (a pasted
// fingerprint), so they are answered "absent" instead of becoming an error.
bool UsableKey(Txn& txn, std::string_view key) {
  return !key.empty() &&
         key.size() <= static_cast<size_t>(mdb_env_get_maxkeysize(mdb_txn_env(txn.get())));
}

}  // namespace

Status Error(int rc, std::string_view what) {
  std::string msg = std::string(what) + ": " + mdb_strerror(rc);
  switch (rc) {
    case MDB_MAP_FULL:
      return LimitExceeded("the store is full (" + msg + ")");
    case MDB_READERS_FULL:
    case MDB_TXN_FULL:
    case EIO:
    case ENOSPC:
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOMEM:
    case EAGAIN:
      return Unavailable(msg);
    default:
      return Internal(msg);
  }
}

std::string PrintableKey(std::string_view key) {
  std::string out;
  for (char c : key) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u == 0 ? '/' : (u < 0x20 || u == 0x7f) ? '?' : c);
  }
  return out;
}

Result<Txn> Txn::BeginRead(MDB_env* env) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) return Error(rc, "beginning a read transaction");
  return Txn(txn, false);
}

Result<Txn> Txn::BeginWrite(MDB_env* env) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env, nullptr, 0, &txn);
  if (rc != 0) return Error(rc, "beginning a write transaction");
  return Txn(txn, true);
}

Txn::Txn(Txn&& other) noexcept
    : txn_(std::exchange(other.txn_, nullptr)), writable_(other.writable_) {}

Txn& Txn::operator=(Txn&& other) noexcept {
  if (this != &other) {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    txn_ = std::exchange(other.txn_, nullptr);
    writable_ = other.writable_;
  }
  return *this;
}

Txn::~Txn() {
  if (txn_ != nullptr) mdb_txn_abort(txn_);
}

Status Txn::Commit() {
  if (txn_ == nullptr) return Internal("committing a transaction that has already ended");
  // mdb_txn_commit frees the transaction even when it fails.
  int rc = mdb_txn_commit(std::exchange(txn_, nullptr));
  if (rc != 0) return Error(rc, "committing a transaction");
  return Status::Ok();
}

Result<JsonTable> JsonTable::Open(Txn& txn, const char* name, bool create) {
  MDB_dbi dbi = 0;
  int rc = mdb_dbi_open(txn.get(), name, create ? MDB_CREATE : 0, &dbi);
  if (rc == MDB_NOTFOUND) {
    return Internal(std::string("the store has no table \"") + name + "\"");
  }
  if (rc != 0) return Error(rc, std::string("opening table ") + name);
  return JsonTable(dbi, name);
}

Result<std::optional<nlohmann::json>> JsonTable::Get(Txn& txn, std::string_view key) const {
  if (!UsableKey(txn, key)) return std::optional<nlohmann::json>();
  MDB_val k = Val(key);
  MDB_val v;
  int rc = mdb_get(txn.get(), dbi_, &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<nlohmann::json>();
  if (rc != 0) return Error(rc, "reading " + name_ + "/" + PrintableKey(key));
  nlohmann::json j = nlohmann::json::parse(View(v), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Internal("store record " + name_ + "/" + PrintableKey(key) + " is not valid JSON");
  }
  return std::optional<nlohmann::json>(std::move(j));
}

Result<bool> JsonTable::Write(Txn& txn, std::string_view key, const nlohmann::json& value,
                              unsigned flags) const {
  if (!UsableKey(txn, key)) {
    return InvalidArgument("record key for " + name_ + " is empty or too long");
  }
  std::string text;
  try {
    text = value.dump();
  } catch (const nlohmann::json::exception& e) {
    // dump() throws only for strings that are not valid UTF-8.
    return InvalidArgument("record for " + name_ + "/" + PrintableKey(key) +
                           " has text that is not valid UTF-8");
  }
  MDB_val k = Val(key);
  MDB_val v = Val(text);
  int rc = mdb_put(txn.get(), dbi_, &k, &v, flags);
  if (rc == MDB_KEYEXIST) return false;
  if (rc != 0) return Error(rc, "writing " + name_ + "/" + PrintableKey(key));
  return true;
}

Status JsonTable::Put(Txn& txn, std::string_view key, const nlohmann::json& value) const {
  return Write(txn, key, value, 0).status();
}

Result<bool> JsonTable::Insert(Txn& txn, std::string_view key, const nlohmann::json& value) const {
  return Write(txn, key, value, MDB_NOOVERWRITE);
}

Result<bool> JsonTable::Delete(Txn& txn, std::string_view key) const {
  if (!UsableKey(txn, key)) return false;
  MDB_val k = Val(key);
  int rc = mdb_del(txn.get(), dbi_, &k, nullptr);
  if (rc == MDB_NOTFOUND) return false;
  if (rc != 0) return Error(rc, "deleting " + name_ + "/" + PrintableKey(key));
  return true;
}

Status JsonTable::Scan(Txn& txn, std::string_view prefix, const JsonVisitor& visit) const {
  return ScanFrom(txn, prefix, prefix, visit);
}

Status JsonTable::ScanFrom(Txn& txn, std::string_view prefix, std::string_view from,
                           const JsonVisitor& visit) const {
  if (!from.starts_with(prefix))
    return Internal("a scan of " + name_ + " starts outside its prefix");
  if (!from.empty() && !UsableKey(txn, from)) return Status::Ok();  // no key that long
  struct CursorClose {
    void operator()(MDB_cursor* c) const { mdb_cursor_close(c); }
  };
  MDB_cursor* raw = nullptr;
  int rc = mdb_cursor_open(txn.get(), dbi_, &raw);
  if (rc != 0) return Error(rc, "opening a cursor on " + name_);
  // Closed before this function returns, so always while its transaction is alive (LMDB
  // frees write-transaction cursors itself when the transaction ends).
  std::unique_ptr<MDB_cursor, CursorClose> cursor(raw);

  MDB_val k = Val(from);
  MDB_val v;
  rc = from.empty() ? mdb_cursor_get(cursor.get(), &k, &v, MDB_FIRST)
                    : mdb_cursor_get(cursor.get(), &k, &v, MDB_SET_RANGE);
  while (rc == 0) {
    std::string_view key = View(k);
    if (!key.starts_with(prefix)) break;
    nlohmann::json j = nlohmann::json::parse(View(v), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return Internal("store record " + name_ + "/" + PrintableKey(key) + " is not valid JSON");
    }
    WARREN_ASSIGN_OR_RETURN(bool more, visit(key, std::move(j)));
    if (!more) return Status::Ok();
    rc = mdb_cursor_get(cursor.get(), &k, &v, MDB_NEXT);
  }
  if (rc != 0 && rc != MDB_NOTFOUND) return Error(rc, "scanning " + name_);
  return Status::Ok();
}

}  // namespace warren::lmdb
