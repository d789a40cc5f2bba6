// The per-VM seed: a small ext4 image, attached read-only as the guest's second disk
// (label "warren-seed"), that gives a guest its identity; the guest applies it at every
// boot (apply-seed: vmhost/guest/runner/seed.c, layout in packaging/images/README.md).
// Files at the root of the file system:
//   hostname         the VM's name (the kernel's warren.hostname= wins when present)
//   authorized_keys  keys the guest's control sshd accepts (warren's control key)
//   env              KEY=VALUE lines for the VM user's sessions
//   setup-script     run once at first boot as the VM user (mode 0755; absent when empty)
//   ssh_host_ed25519_key, ssh_host_ed25519_key.pub  the guest's host key (absent when empty)
// Thread-safe: each call works in its own temporary directory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

inline constexpr char kSeedLabel[] = "warren-seed";
// The size of every seed image, and the most its files may hold (ext4's own metadata takes
// the rest): ValidateVmSpec's bounds keep a spec well inside it.
inline constexpr size_t kSeedImageBytes = 1024 * 1024;
inline constexpr size_t kMaxSeedContentBytes = 768 * 1024;

struct SeedContents {
  std::string hostname;
  std::string authorized_keys;
  std::vector<std::pair<std::string, std::string>> env;
  std::string setup_script;
  std::string ssh_host_key;  // private key file; with ssh_host_key_pub, or neither
  std::string ssh_host_key_pub;
};

// The image's bytes, built with `mkfs.ext4 -d` (no mount, no root needed) in a temporary
// directory under `scratch_dir` (seed.<pid>.XXXXXX), which is removed again.
Result<std::string> BuildSeedImage(const SeedContents& seed, const std::string& scratch_dir,
                                   const std::string& mkfs = "mkfs.ext4");

// A fresh ed25519 host key for a VM's seed: (private key file, .pub line), made with
// ssh-keygen in `tmp_dir` (hostkey-<pid>-HEX) and read back; no file is left there.
Result<std::pair<std::string, std::string>> NewSshHostKey(const std::string& tmp_dir);
// When `key` is empty (a VM whose disk carries another's host key: a clone, a copy), a new one
// into `key` and `pub`; otherwise nothing (the caller pinned one of its own).
Status EnsureSshHostKey(std::string& key, std::string& pub, const std::string& tmp_dir);

// Whether `name`, an entry of the directory the two above make their scratch in, is such a
// scratch made by another process than this one (or by a warren that did not name its pid):
// what a process killed half-way left, since its own cleanup never ran.
bool IsScratchOfAnotherProcess(std::string_view name);

}  // namespace warren
