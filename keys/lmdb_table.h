// A thin RAII layer over LMDB for LmdbStore: the environment, transactions that abort
// unless committed, and typed tables (one named LMDB database each) of JSON records. A new
// record kind is a Codec<T> specialisation plus one Table<T> member. Internal to keys/.
//
// Threading: the environment is opened with MDB_NOTLS, so a read transaction may be used
// by any one thread at a time (not only the one that began it). A write transaction must
// begin, run and end on one thread; LMDB serialises write transactions across threads and
// processes. Table objects are immutable after opening and may be shared by all threads.
#pragma once

#include <lmdb.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lobby/base/status.h"

namespace warren::lmdb {

// An LMDB return code as a Status: MDB_MAP_FULL -> LimitExceeded, resource trouble
// (readers full, I/O, permissions) -> Unavailable, anything else -> Internal.
Status Error(int rc, std::string_view what);

// A record key for messages: index keys join their parts with NUL, shown here as '/', and
// other control bytes become '?'.
std::string PrintableKey(std::string_view key);

struct EnvClose {
  void operator()(MDB_env* env) const { mdb_env_close(env); }
};
using EnvPtr = std::unique_ptr<MDB_env, EnvClose>;

class Txn {
 public:
  static Result<Txn> BeginRead(MDB_env* env);
  static Result<Txn> BeginWrite(MDB_env* env);

  Txn(Txn&& other) noexcept;
  Txn& operator=(Txn&& other) noexcept;
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn();  // aborts unless committed

  // Ends the transaction either way; on failure nothing was written.
  Status Commit();
  MDB_txn* get() const { return txn_; }
  bool writable() const { return writable_; }

 private:
  Txn(MDB_txn* txn, bool writable) : txn_(txn), writable_(writable) {}
  MDB_txn* txn_ = nullptr;
  bool writable_ = false;
};

// Visitor for scans: return true to continue, false to stop, or an error to stop with it.
using JsonVisitor = std::function<Result<bool>(std::string_view key, nlohmann::json&& value)>;

// A named database of JSON values keyed by byte strings.
class JsonTable {
 public:
  JsonTable() = default;
  // Opens the named database; with `create` (write transactions only) it is created when
  // missing, otherwise a missing database is Internal.
  static Result<JsonTable> Open(Txn& txn, const char* name, bool create);

  const std::string& name() const { return name_; }
  Result<std::optional<nlohmann::json>> Get(Txn& txn, std::string_view key) const;
  // Inserts or replaces.
  Status Put(Txn& txn, std::string_view key, const nlohmann::json& value) const;
  // Inserts; false (and no change) when the key exists.
  Result<bool> Insert(Txn& txn, std::string_view key, const nlohmann::json& value) const;
  // False when the key was absent.
  Result<bool> Delete(Txn& txn, std::string_view key) const;
  // Visits the records whose keys start with `prefix`, in key (bytewise) order. `visit`
  // must not write to this table (that would move the cursor under it).
  Status Scan(Txn& txn, std::string_view prefix, const JsonVisitor& visit) const;
  // The same from the first key at or after `from` (which starts with `prefix`): a range
  // within a prefix, such as one owner's records from some day on.
  Status ScanFrom(Txn& txn, std::string_view prefix, std::string_view from,
                  const JsonVisitor& visit) const;

 private:
  JsonTable(MDB_dbi dbi, std::string name) : dbi_(dbi), name_(std::move(name)) {}
  Result<bool> Write(Txn& txn, std::string_view key, const nlohmann::json& value,
                     unsigned flags) const;

  MDB_dbi dbi_ = 0;
  std::string name_;
};

// Specialise for each record type:
//   static nlohmann::json Encode(const T&);
//   static Result<T> Decode(const nlohmann::json&);   // must not throw
template <typename T>
struct Codec;

// A JsonTable whose values are T. A record that does not decode is reported as Internal
// naming the table and key, since only this binary writes the store.
template <typename T>
class Table {
 public:
  using Visitor = std::function<Result<bool>(std::string_view key, T&& value)>;

  Table() = default;
  static Result<Table> Open(Txn& txn, const char* name, bool create) {
    WARREN_ASSIGN_OR_RETURN(JsonTable raw, JsonTable::Open(txn, name, create));
    return Table(std::move(raw));
  }

  Result<std::optional<T>> Get(Txn& txn, std::string_view key) const {
    WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, raw_.Get(txn, key));
    if (!j) return std::optional<T>();
    WARREN_ASSIGN_OR_RETURN(T value, Decode(key, *j));
    return std::optional<T>(std::move(value));
  }
  Status Put(Txn& txn, std::string_view key, const T& value) const {
    return raw_.Put(txn, key, Codec<T>::Encode(value));
  }
  Result<bool> Insert(Txn& txn, std::string_view key, const T& value) const {
    return raw_.Insert(txn, key, Codec<T>::Encode(value));
  }
  Result<bool> Delete(Txn& txn, std::string_view key) const { return raw_.Delete(txn, key); }
  Status Scan(Txn& txn, std::string_view prefix, const Visitor& visit) const {
    return raw_.Scan(txn, prefix, [&](std::string_view key, nlohmann::json&& j) -> Result<bool> {
      WARREN_ASSIGN_OR_RETURN(T value, Decode(key, j));
      return visit(key, std::move(value));
    });
  }
  Status ScanFrom(Txn& txn, std::string_view prefix, std::string_view from,
                  const Visitor& visit) const {
    return raw_.ScanFrom(txn, prefix, from,
                         [&](std::string_view key, nlohmann::json&& j) -> Result<bool> {
                           WARREN_ASSIGN_OR_RETURN(T value, Decode(key, j));
                           return visit(key, std::move(value));
                         });
  }

 private:
  explicit Table(JsonTable raw) : raw_(std::move(raw)) {}
  Result<T> Decode(std::string_view key, const nlohmann::json& j) const {
    Result<T> r = Codec<T>::Decode(j);
    if (!r.ok()) {
      return Internal("store record " + raw_.name() + "/" + PrintableKey(key) +
                      " is corrupt: " + r.status().message());
    }
    return r;
  }

  JsonTable raw_;
};

}  // namespace warren::lmdb
