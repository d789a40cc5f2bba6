// A live copy's memory file (LibvirtHost::CopyLive, libvirt_host_live_copy.cc): where the
// running source's memory and device state are written, what the copy's restore reads — and
// the file deleted when this goes, whatever happened meanwhile (it may never have been
// written). The one thing a live copy does differently on the two kinds of host:
//   this machine's: a file here, DATA/tmp/live-<copy id>.save, into which the source's QEMU
//                   writes its migration stream alone (LibvirtHost::StreamLiveCopy opens it
//                   and hands it over: qemu_memory_migration.h); the restore feeds it to
//                   libvirt behind a header through a FIFO (LibvirtHost::RestoreThroughFifo);
//   a remote one:   a volume in the copy's own directory there, DATA/vms/<copy id>/live.save,
//                   a libvirt save image (libvirt's snapshot with memory writes it, header
//                   and all), reached through libvirt alone: its header read through the
//                   storage API (volume_io.h), then rewritten in place and restored there
//                   (LibvirtHost::RestoreOnRemoteHost), so the memory never crosses the
//                   network. Were it left behind, the copy's directory would take it along
//                   (LibvirtHost::RemoveFiles).
// One per live copy, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lobby/base/status.h"
#include "vmhost/libvirt_handles.h"

namespace warren {

struct SaveImageHeader;

class LiveCopyMemory {
 public:
  // The name of the memory's volume in the copy's directory on a remote host.
  static constexpr char kVolumeName[] = "live.save";

  // A file at `path` on this machine; its directory is made, and a file left there before
  // (a live copy cut short) removed.
  static std::unique_ptr<LiveCopyMemory> LocalFile(const std::string& path);
  // Volume kVolumeName of `pool`, the copy's directory `dir` on the host of `conn`.
  static std::unique_ptr<LiveCopyMemory> InCopyDirectory(virConnectPtr conn, StoragePoolHandle pool,
                                                         const std::string& dir);
  LiveCopyMemory(const LiveCopyMemory&) = delete;
  LiveCopyMemory& operator=(const LiveCopyMemory&) = delete;
  // Deletes the file, if there is one; a failure is only logged.
  ~LiveCopyMemory();

  // Where the memory is written: a path on the VM's host.
  const std::string& path() const { return path_; }
  // A remote host's, once libvirt's snapshot wrote it: its header and data, checked as
  // ReadSaveImageHeader checks them (the file is libvirt's, but read as possibly damaged).
  // Internal for this machine's file, which holds QEMU's stream alone.
  Result<SaveImageHeader> ReadHeader();
  // Its size in bytes, once ReadHeader read it (0 before, or when it cannot be told).
  int64_t bytes() const { return bytes_; }
  // What a remote host's restore reads: the volume's name in the copy's directory there
  // (empty on this machine).
  std::string volume() const { return pool_ ? kVolumeName : ""; }

 private:
  LiveCopyMemory() = default;

  std::string path_;
  int64_t bytes_ = 0;
  virConnectPtr conn_ = nullptr;  // a remote host's: the pool's connection
  StoragePoolHandle pool_;        // a remote host's: the copy's directory
};

}  // namespace warren
