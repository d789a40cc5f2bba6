#include "vmhost/volume_io.h"

#include <algorithm>
#include <vector>

#include "vmhost/save_image.h"

namespace warren {
namespace {

// A stream message carries at most 256 KiB (libvirt's RPC limit): bigger sends go in parts.
constexpr size_t kChunk = 256 * 1024;

}  // namespace

Result<std::string> ReadVolumeBytes(virConnectPtr conn, virStorageVolPtr vol, uint64_t offset,
                                    uint64_t length, const std::string& what) {
  StreamHandle st(virStreamNew(conn, 0));
  if (!st) return LibvirtError("opening a stream for " + what);
  if (virStorageVolDownload(vol, st.get(), offset, length, 0) < 0) {
    return LibvirtError("reading " + what);
  }
  std::string data;
  std::vector<char> buf(kChunk);
  while (data.size() < length) {
    const int n = virStreamRecv(st.get(), buf.data(), buf.size());
    if (n < 0) return LibvirtError("reading " + what);
    if (n == 0) break;
    data.append(buf.data(), std::min<size_t>(static_cast<size_t>(n), length - data.size()));
  }
  if (virStreamFinish(st.get()) < 0) virResetLastError();  // a short read ended it early
  return data;
}

Status WriteVolumeBytes(virConnectPtr conn, virStorageVolPtr vol, uint64_t offset,
                        std::string_view bytes, const std::string& what) {
  StreamHandle st(virStreamNew(conn, 0));
  if (!st) return LibvirtError("opening a stream for " + what);
  if (virStorageVolUpload(vol, st.get(), offset, bytes.size(), 0) < 0) {
    return LibvirtError("writing " + what);
  }
  size_t off = 0;
  while (off < bytes.size()) {
    const size_t n = std::min(kChunk, bytes.size() - off);
    const int sent = virStreamSend(st.get(), bytes.data() + off, n);
    if (sent < 0) return LibvirtError("writing " + what);
    off += static_cast<size_t>(sent);
  }
  // Only a finished stream means the host has it all.
  if (virStreamFinish(st.get()) < 0) return LibvirtError("finishing writing " + what);
  return Status::Ok();
}

Result<SaveImageHeader> ReadSaveImageHeaderOfVolume(virConnectPtr conn, virStorageVolPtr vol,
                                                    const std::string& what) {
  WARREN_ASSIGN_OR_RETURN(std::string fixed,
                          ReadVolumeBytes(conn, vol, 0, kSaveImageHeaderBytes, what));
  WARREN_ASSIGN_OR_RETURN(uint64_t length, SaveImageHeaderLength(fixed));
  WARREN_ASSIGN_OR_RETURN(std::string head, ReadVolumeBytes(conn, vol, 0, length, what));
  return ParseSaveImageHeader(head);
}

}  // namespace warren
