// Store: warren's durable records — users and their SSH keys now; API tokens, VMs, shares,
// jobs and usage in later issues. LmdbStore (lmdb_store.h) is the implementation; tests use
// it on a temp dir rather than a fake. Implementations are thread-safe: any thread may call
// any method; each method is one transaction, so a multi-record change is all or nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "keys/scope.h"
#include "lobby/base/status.h"

namespace warren {

struct User {
  std::string name;  // ^[a-z][a-z0-9_-]{0,31}$
  bool admin = false;
  int64_t created_at = 0;
};

struct SshKey {
  std::string fingerprint;  // "SHA256:<base64 without padding>" of the key blob; unique server-wide
  std::string user;         // owner
  // Unique per user; what `ssh-key remove/rename` accept besides the fp.
  // ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$ (no ':', so never mistaken for a fingerprint).
  std::string name;
  std::string algorithm;    // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
  std::string blob_base64;  // the public key blob as in authorized_keys
  std::string comment;
  int64_t added_at = 0;
  int64_t last_used_at = 0;  // 0 = never
  Scope scope;               // restrictions; Unrestricted() for a plain key
};

class Store {
 public:
  virtual ~Store() = default;

  // Creates a user with its first keys in one transaction.
  // Conflict if the user exists or any key's fingerprint is registered to anyone.
  virtual Status CreateUser(const User& user, const std::vector<SshKey>& keys) = 0;
  virtual Result<User> GetUser(std::string_view name) = 0;  // NotFound
  virtual Result<std::vector<User>> ListUsers() = 0;        // sorted by name
  // Removes the user and all of its keys. NotFound if absent.
  virtual Status DeleteUser(std::string_view name) = 0;

  // Conflict if the fingerprint is registered (to anyone) or the name is taken for this
  // user; NotFound if the user does not exist.
  virtual Status AddKey(const SshKey& key) = 0;
  virtual Result<SshKey> GetKey(std::string_view fingerprint) = 0;          // NotFound
  virtual Result<std::vector<SshKey>> ListKeys(std::string_view user) = 0;  // sorted by added_at
  // NotFound unless the key exists and belongs to `user`.
  virtual Status RemoveKey(std::string_view user, std::string_view fingerprint) = 0;
  // Conflict if `new_name` is taken for this user.
  virtual Status RenameKey(std::string_view user, std::string_view fingerprint,
                           std::string_view new_name) = 0;
  // Records a successful login; a missing key is not an error (it may have just been removed).
  virtual Status TouchKey(std::string_view fingerprint, int64_t when_unix) = 0;
};

}  // namespace warren
