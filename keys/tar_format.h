// The tar (POSIX ustar) framing of a backup (keys/backup.h): headers for regular files, the
// padding after their bytes and the archive's end, and a strict reader of exactly what the
// writer makes. So `tar -tvf warren.backup` lists a backup and `tar -xf` unpacks one.
// Only regular files; sizes past ustar's 8 GiB use GNU tar's base-256 field, which GNU tar
// and bsdtar read. Stateless functions; thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

inline constexpr size_t kTarBlock = 512;

struct TarEntry {
  std::string name;  // relative, '/'-separated, at most 100 bytes, no ".." part
  mode_t mode = 0600;
  uint64_t size = 0;
  int64_t mtime = 0;  // Unix seconds
};

// The 512-byte header of a regular file. InvalidArgument for a name that does not fit or is
// not a plain relative path.
Result<std::string> TarHeader(const TarEntry& entry);

// The zero bytes that pad `size` bytes of content to a whole block.
std::string TarPadding(uint64_t size);

// The end of an archive: two zero blocks.
std::string TarEnd();

// Reads one header block (exactly kTarBlock bytes): nullopt for a zero block (the end);
// InvalidArgument for a bad checksum, anything but a regular file, or a name that is not a
// plain relative path.
Result<std::optional<TarEntry>> ParseTarHeader(std::string_view block);

}  // namespace warren
