#include "vmhost/qcow2_header.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace warren {
namespace {

constexpr size_t kHeaderV2 = 72;  // the fields every version has

uint64_t BigEndian(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

void PutBigEndian(std::string& b, size_t at, int bytes, uint64_t v) {
  for (int i = bytes - 1; i >= 0; --i) {
    b[at + i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

bool IsQcow2(const std::string& head) {
  return head.size() >= kHeaderV2 && head.compare(0, 4, "QFI\xfb") == 0;
}

}  // namespace

uint64_t Qcow2ClusterSize(const std::string& head) {
  if (!IsQcow2(head)) return 0;
  const uint64_t bits = BigEndian(head, 20, 4);
  return bits >= 9 && bits <= 21 ? uint64_t{1} << bits : 0;
}

Status RewriteQcow2Backing(std::string& head, const std::string& backing) {
  const uint64_t cluster = Qcow2ClusterSize(head);
  if (cluster == 0) return InvalidArgument("not a qcow2 file");
  const uint64_t offset = BigEndian(head, 8, 8);
  const uint64_t size = BigEndian(head, 16, 4);
  if (offset == 0 || size == 0) return InvalidArgument("the layer has no backing file");
  if (backing.empty() || backing.size() > 1023) {
    return InvalidArgument("a backing file name is 1 to 1023 bytes");
  }
  const uint64_t room = std::min<uint64_t>(cluster, head.size());
  if (offset < kHeaderV2 || offset + std::max<uint64_t>(size, backing.size()) > room) {
    return InvalidArgument("the backing file name does not fit in the layer's header");
  }
  std::memset(head.data() + offset, 0, size);
  std::memcpy(head.data() + offset, backing.data(), backing.size());
  PutBigEndian(head, 16, 4, backing.size());
  return Status::Ok();
}

}  // namespace warren
