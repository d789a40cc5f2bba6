// A live copy's memory file (LibvirtHost::CopyLive, libvirt_host_live_copy.cc): where the
// snapshot of the running source writes its memory and device state (a libvirt save image,
// save_image.h), its header read back and checked, what the copy's restore reads — and the
// file deleted when this goes, whatever happened meanwhile (it may never have been written).
// The one thing a live copy does differently on the two kinds of host:
//   this machine's: a file here, DATA/tmp/live-<copy id>.save, opened once written: the
//                   restore feeds it to libvirt through a FIFO (LibvirtHost::RestoreThroughFifo);
//   a remote one:   a volume in the copy's own directory there, DATA/vms/<copy id>/live.save,
//                   reached through libvirt alone: its header read through the storage API
//                   (volume_io.h), then rewritten in place and restored there
//                   (LibvirtHost::RestoreOnRemoteHost), so the memory never crosses the
//                   network. Were it left behind, the copy's directory would take it along
//                   (LibvirtHost::RemoveFiles).
// One per live copy, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lobby/base/status.h"
#include "lobby/base/unique_fd.h"
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

  // Where the snapshot writes it: a path on the VM's host.
  const std::string& path() const { return path_; }
  // Once the snapshot wrote it: its header and data, checked as ReadSaveImageHeader checks
  // them (the file is libvirt's, but read as possibly damaged).
  Result<SaveImageHeader> ReadHeader();
  // Its size in bytes, once ReadHeader read it (0 before, or when it cannot be told).
  int64_t bytes() const { return bytes_; }
  // What the restore reads: the file open here (-1 on a remote host), or the volume's name in
  // the copy's directory there (empty on this machine).
  int fd() const { return fd_.get(); }
  std::string volume() const { return pool_ ? kVolumeName : ""; }

 private:
  LiveCopyMemory() = default;

  std::string path_;
  UniqueFd fd_;
  int64_t bytes_ = 0;
  virConnectPtr conn_ = nullptr;  // a remote host's: the pool's connection
  StoragePoolHandle pool_;        // a remote host's: the copy's directory
};

}  // namespace warren
