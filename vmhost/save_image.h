// libvirt's QEMU save image (virDomainSave's file): its header read, encoded as libvirt 9.0
// does, and a template's image rewritten under a new domain XML, streamed without copying the
// memory. Pure functions over file descriptors; thread-safe (a call touches only its fds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

// The layout, as libvirt 9.0 writes it (src/qemu/qemu_saveimage.{h,c}: virQEMUSaveHeader,
// virQEMUSaveDataWrite, qemuSaveImageOpen), every integer a u32 in host byte order:
//   magic[16] "LibvirtQemudSave" ("LibvirtQemudPart" until the stream is complete)
//   version (2), data_len, was_running (0/1), format (compression; 0 = raw),
//   cookieOffset (0 when there is no cookie), unused[14] (zero)
//   data_len bytes: the domain XML, NUL, [the cookie XML, NUL,] zeros
//   QEMU's migration stream ("QEVM"...), to the end of the file.
// A fresh save makes data_len the XML and cookie with their NULs plus 64 KiB of zeros (room
// for `virsh save-image-define` to grow the XML in place); cookieOffset is the XML's length
// with its NUL.
inline constexpr std::string_view kSaveImageMagic = "LibvirtQemudSave";
inline constexpr std::string_view kSaveImagePartialMagic = "LibvirtQemudPart";
// The one version libvirt has written since 0.9 and still writes in 9.0. Anything else is
// refused rather than guessed at: a header we do not know could mean bytes we would drop.
inline constexpr uint32_t kSaveImageVersion = 2;
inline constexpr uint32_t kSaveImageFormatRaw = 0;
inline constexpr size_t kSaveImageHeaderBytes = 16 + 19 * 4;  // magic + 5 fields + unused[14]
inline constexpr uint32_t kSaveImagePadding = 64 * 1024;
// No domain XML comes near this; a larger data_len means a corrupt header, not a big domain.
inline constexpr uint32_t kMaxSaveImageDataBytes = 16 << 20;

struct SaveImageHeader {
  uint32_t version = kSaveImageVersion;
  // Whether the domain was running when saved: a restore resumes it, else leaves it paused.
  bool was_running = true;
  uint32_t format = kSaveImageFormatRaw;
  // The domain XML libvirt restores from (the live definition, migratable form).
  std::string domain_xml;
  // libvirt's save cookie (<cookie><cpu>…</cpu><slirpHelper/>…</cookie>); empty: none.
  std::string cookie_xml;
  // Where QEMU's migration stream starts, counted from the magic: kSaveImageHeaderBytes +
  // data_len. Set by ReadSaveImageHeader; EncodeSaveImageHeader ignores it (it computes its
  // own data_len), WriteRewrittenSave reads the template's stream from here.
  uint64_t stream_offset = 0;
};

// Reads a header and its data from the fd's current position (a file, a pipe), leaving the
// position at the start of the migration stream. The file is warren's own, but it is treated
// as possibly corrupt: Internal, saying what is wrong, when it ends early (anywhere in the
// header or data), has another magic or libvirt's "incomplete" magic, a version other than
// kSaveImageVersion, a compressed format (only raw images are supported: a compressed stream
// cannot be handed on as it is), a data_len of 0 or above kMaxSaveImageDataBytes, an XML or
// cookie without its NUL, a cookieOffset other than right after the XML's NUL, or non-zero
// bytes where libvirt writes zeros (padding, unused fields).
Result<SaveImageHeader> ReadSaveImageHeader(int fd);

// The header and data bytes libvirt 9.0 writes for `header` in a fresh save: data_len is the
// XML and cookie with their NULs plus kSaveImagePadding, so a header libvirt wrote encodes
// back byte for byte. Needs a non-empty XML and an XML and cookie without NULs (XML text from
// libvirt or libxml2 never holds one; WriteRewrittenSave checks).
std::string EncodeSaveImageHeader(const SaveImageHeader& header);

// The header and data bytes for `header` in the room the template's took (its stream_offset):
// the same data_len, the XML and cookie followed by zeros, so they overwrite the template's in
// a copy of it and the migration stream stays where it is (a remote host's restore, which
// rewrites a copy made there, or a live copy's memory written there, in place:
// libvirt_host_remote_templates.cc). InvalidArgument when they do
// not fit (libvirt leaves kSaveImagePadding of room) or EncodeSaveImageHeader would refuse.
Result<std::string> EncodeSaveImageHeaderInPlace(const SaveImageHeader& header);

// How many bytes the header and data of a save image take (where its migration stream
// starts), from its first kSaveImageHeaderBytes: so a remote host's image is read only that far.
// Internal, as ReadSaveImageHeader says it, for fewer bytes, another magic or version, or a
// data_len above kMaxSaveImageDataBytes.
Result<uint64_t> SaveImageHeaderLength(std::string_view fixed);

// ReadSaveImageHeader over bytes in memory (the start of a save image read from a remote
// host): its checks, its errors.
Result<SaveImageHeader> ParseSaveImageHeader(std::string_view bytes);

// What a copy of a migration stream left out (migration_stream.h); the restore logs why it
// went whole when it did.
struct StreamCopyStats {
  uint64_t zero_pages_dropped = 0;
  uint64_t bytes_dropped = 0;
  // Why the stream went whole, when its layout was not one PlanWithoutZeroPages knows.
  std::string whole_because;
};

// Writes a restorable image to `out_fd`: `header` encoded as above, then the template's
// migration stream without its guest RAM's zero-page records (PlanWithoutZeroPages: the
// QEMU restoring it starts with that memory zero; a stream whose layout is not known goes
// whole, `stats` says why), the bytes of `template_fd` (a regular file, read by offset, so one fd
// may serve many calls at once) from header.stream_offset to its end. `header` is the template's
// (its stream_offset) with a new domain XML. `out_fd` may be a file, a pipe, or a FIFO whose
// reader is libvirt (blocking or not); nothing is buffered beyond a chunk, and the call
// blocks while the reader does not read. InvalidArgument for an XML EncodeSaveImageHeader
// cannot write, or a version or format ReadSaveImageHeader would refuse. Internal when the
// template is no regular file, its stream does not start with QEMU's "QEVM", or it ends
// before the size it had when the copy began. Unavailable when the reader goes away (EPIPE:
// libvirt or QEMU gave up; SIGPIPE is never raised) or another write fails.
Status WriteRewrittenSave(int template_fd, const SaveImageHeader& header, int out_fd,
                          StreamCopyStats* stats = nullptr);

// Writes `header` encoded (EncodeSaveImageHeader: its stream_offset is not used), then
// `stream_fd`, a regular file holding QEMU's migration stream alone from its offset 0, as
// WriteRewrittenSave writes a template's stream (by offset, without its zero pages): a live
// copy's memory as its source's QEMU wrote it (qemu_memory_migration.h), restored as libvirt would
// restore a save. `out_fd` and the errors as for WriteRewrittenSave.
Status WriteStreamAsSave(const SaveImageHeader& header, int stream_fd, int out_fd,
                         StreamCopyStats* stats = nullptr);

}  // namespace warren
