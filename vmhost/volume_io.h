// Bytes of a storage volume read and written through libvirt's streams, so the same code
// reaches a file on this machine's host or on a remote one (the parts of a host's DATA that
// are not disk layers: a template's files, a restore's save image header, a live copy's
// memory file's).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "vmhost/libvirt_handles.h"

namespace warren {

struct SaveImageHeader;

// `length` bytes of `vol` from `offset` (fewer when the volume ends first). `what` names it
// in errors.
Result<std::string> ReadVolumeBytes(virConnectPtr conn, virStorageVolPtr vol, uint64_t offset,
                                    uint64_t length, const std::string& what);

// Writes `bytes` into `vol` at `offset`, leaving the rest of it as it was (libvirt's upload
// of a part does not truncate a file volume).
Status WriteVolumeBytes(virConnectPtr conn, virStorageVolPtr vol, uint64_t offset,
                        std::string_view bytes, const std::string& what);

// The header and data at the start of save image `vol` (save_image.h), read only that far
// (two reads: the fixed part says how long the data is) and checked as ParseSaveImageHeader
// checks it.
Result<SaveImageHeader> ReadSaveImageHeaderOfVolume(virConnectPtr conn, virStorageVolPtr vol,
                                                    const std::string& what);

}  // namespace warren
