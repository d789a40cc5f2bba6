// The per-VM seed: a small ext4 image, attached read-only as the guest's second disk
// (/dev/vdb, label "warren-seed"), that gives a fresh guest its identity at first boot. The
// guest side lives in packaging/images. Files at the root of the file system:
//   instance-id      the VM's warren id (a changed id means "first boot" again, e.g. a copy)
//   hostname         the VM's name
//   authorized_keys  OpenSSH keys for the VM's default user
//   env              KEY=VALUE lines for the VM user's environment
//   setup-script     run once at first boot as the VM user (mode 0755; absent when empty)
// Thread-safe: each call works in its own temporary directory.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

inline constexpr char kSeedLabel[] = "warren-seed";

struct SeedContents {
  std::string instance_id;
  std::string hostname;
  std::string authorized_keys;
  std::vector<std::pair<std::string, std::string>> env;
  std::string setup_script;
};

// The image's bytes, built with `mkfs.ext4 -d` (no mount, no root needed) in a temporary
// directory under `scratch_dir`, which is removed again.
Result<std::string> BuildSeedImage(const SeedContents& seed, const std::string& scratch_dir,
                                   const std::string& mkfs = "mkfs.ext4");

}  // namespace warren
