// Sets a closed store back to what an older warren left, for the schema-upgrade tests: in one
// LMDB transaction on the data directory itself, drops the tables that version did not have,
// writes records as that version encoded them, and sets schema_version. Use with
// ASSERT_NO_FATAL_FAILURE; then open the store again and check what the upgrade made of it.
#pragma once

#include <gtest/gtest.h>
#include <lmdb.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace warren {

struct RawRecord {
  const char* table;
  std::string key;
  std::string value;  // the JSON bytes as the old version wrote them
};

inline void RollBackStore(const std::string& dir, int version,
                          std::initializer_list<const char*> drop,
                          const std::vector<RawRecord>& records = {}) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 32), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  for (const char* name : drop) {
    ASSERT_EQ(mdb_dbi_open(txn, name, 0, &dbi), 0) << name;
    ASSERT_EQ(mdb_drop(txn, dbi, 1), 0) << name;
  }
  std::vector<RawRecord> all = records;
  all.push_back({"meta", "schema_version", std::to_string(version)});
  for (RawRecord& r : all) {
    ASSERT_EQ(mdb_dbi_open(txn, r.table, 0, &dbi), 0) << r.table;
    MDB_val k{r.key.size(), r.key.data()};
    MDB_val v{r.value.size(), r.value.data()};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0) << r.table;
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

}  // namespace warren
