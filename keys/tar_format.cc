#include "keys/tar_format.h"

#include <algorithm>
#include <cstring>

namespace warren {
namespace {

// ustar header fields: offset and width.
constexpr size_t kName = 0, kNameLen = 100;
constexpr size_t kMode = 100, kModeLen = 8;
constexpr size_t kUid = 108, kGid = 116, kIdLen = 8;
constexpr size_t kSize = 124, kSizeLen = 12;
constexpr size_t kMtime = 136, kMtimeLen = 12;
constexpr size_t kChksum = 148, kChksumLen = 8;
constexpr size_t kType = 156;
constexpr size_t kMagic = 257;  // "ustar\0" then version "00"
constexpr size_t kUname = 265, kGname = 297;
constexpr size_t kPrefix = 345, kPrefixLen = 155;

// The largest value an octal field of `width` bytes holds (width - 1 digits and a NUL).
uint64_t OctalMax(size_t width) { return (uint64_t{1} << (3 * (width - 1))) - 1; }

void PutOctal(std::string& block, size_t at, size_t width, uint64_t value) {
  std::string digits(width - 1, '0');
  for (size_t i = width - 1; i-- > 0;) {
    digits[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  block.replace(at, width - 1, digits);
  block[at + width - 1] = '\0';
}

// GNU tar's base-256 for values past the octal field: high bit of the first byte set, the
// value big-endian in the rest.
void PutBase256(std::string& block, size_t at, size_t width, uint64_t value) {
  for (size_t i = width; i-- > 1;) {
    block[at + i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  block[at] = static_cast<char>(0x80);
}

Result<uint64_t> GetNumber(std::string_view block, size_t at, size_t width, const char* what) {
  std::string_view f = block.substr(at, width);
  if (!f.empty() && (static_cast<unsigned char>(f[0]) & 0x80) != 0) {
    if (static_cast<unsigned char>(f[0]) != 0x80) {
      return InvalidArgument(std::string("tar header: negative or huge ") + what);
    }
    uint64_t v = 0;
    for (size_t i = 1; i < f.size(); ++i) {
      if (v >> 56 != 0) return InvalidArgument(std::string("tar header: huge ") + what);
      v = (v << 8) | static_cast<unsigned char>(f[i]);
    }
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  bool any = false;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60 != 0) return InvalidArgument(std::string("tar header: huge ") + what);
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
    any = true;
  }
  for (; i < f.size(); ++i) {
    if (f[i] != '\0' && f[i] != ' ') {
      return InvalidArgument(std::string("tar header: ") + what + " is not a number");
    }
  }
  if (!any) return InvalidArgument(std::string("tar header: ") + what + " is empty");
  return v;
}

uint64_t Checksum(std::string_view block) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    bool in_field = i >= kChksum && i < kChksum + kChksumLen;
    sum += in_field ? ' ' : static_cast<unsigned char>(block[i]);
  }
  return sum;
}

Status CheckName(std::string_view name) {
  if (name.empty() || name.size() > kNameLen || name.front() == '/' || name.back() == '/') {
    return InvalidArgument("tar entry name is not a relative file path");
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument("tar entry name is not a plain relative path");
    }
    start = end + 1;
  }
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return InvalidArgument("tar entry name holds a control character");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> TarHeader(const TarEntry& entry) {
  WARREN_RETURN_IF_ERROR(CheckName(entry.name));
  std::string block(kTarBlock, '\0');
  block.replace(kName, entry.name.size(), entry.name);
  PutOctal(block, kMode, kModeLen, entry.mode & 07777);
  PutOctal(block, kUid, kIdLen, 0);
  PutOctal(block, kGid, kIdLen, 0);
  if (entry.size <= OctalMax(kSizeLen)) {
    PutOctal(block, kSize, kSizeLen, entry.size);
  } else {
    PutBase256(block, kSize, kSizeLen, entry.size);
  }
  PutOctal(block, kMtime, kMtimeLen,
           entry.mtime < 0 ? 0 : std::min<uint64_t>(entry.mtime, OctalMax(kMtimeLen)));
  block[kType] = '0';
  std::memcpy(&block[kMagic],
              "ustar\0"
              "00",
              8);
  block.replace(kUname, 4, "root");
  block.replace(kGname, 4, "root");
  // The checksum: six octal digits, NUL, space (as tar writes it).
  uint64_t sum = Checksum(block);
  PutOctal(block, kChksum, 7, sum);
  block[kChksum + 7] = ' ';
  return block;
}

std::string TarPadding(uint64_t size) {
  size_t rest = static_cast<size_t>(size % kTarBlock);
  return rest == 0 ? std::string() : std::string(kTarBlock - rest, '\0');
}

std::string TarEnd() { return std::string(2 * kTarBlock, '\0'); }

Result<std::optional<TarEntry>> ParseTarHeader(std::string_view block) {
  if (block.size() != kTarBlock) return InvalidArgument("tar header: short block");
  if (block.find_first_not_of('\0') == std::string_view::npos) return std::optional<TarEntry>();
  WARREN_ASSIGN_OR_RETURN(uint64_t stored, GetNumber(block, kChksum, kChksumLen, "checksum"));
  if (stored != Checksum(block)) return InvalidArgument("tar header: checksum mismatch");
  if (block.substr(kMagic, 5) != "ustar") return InvalidArgument("tar header: not ustar");
  if (block[kType] != '0' && block[kType] != '\0') {
    return InvalidArgument("tar entry is not a regular file");
  }
  if (block[kPrefix] != '\0') return InvalidArgument("tar entry name is too long");
  (void)kPrefixLen;
  TarEntry e;
  std::string_view name = block.substr(kName, kNameLen);
  e.name = std::string(name.substr(0, name.find('\0')));
  WARREN_RETURN_IF_ERROR(CheckName(e.name));
  WARREN_ASSIGN_OR_RETURN(uint64_t mode, GetNumber(block, kMode, kModeLen, "mode"));
  e.mode = static_cast<mode_t>(mode & 07777);
  WARREN_ASSIGN_OR_RETURN(e.size, GetNumber(block, kSize, kSizeLen, "size"));
  WARREN_ASSIGN_OR_RETURN(uint64_t mtime, GetNumber(block, kMtime, kMtimeLen, "mtime"));
  e.mtime = static_cast<int64_t>(mtime);
  return std::optional<TarEntry>(std::move(e));
}

}  // namespace warren
