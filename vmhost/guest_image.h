// A guest image version on disk, opened for booting (layout: vmhost/image_layout.h).
// VMs boot the kernel directly and get a qcow2 overlay on rootfs.qcow2, which is never
// written to once published. Thread-safe: keeps no state (LetQemuReadImage changes modes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

struct GuestImage {
  std::string ref;  // "NAME@VERSION"
  std::string dir;
  std::string kernel;
  std::string initrd;
  std::string rootfs;
  std::string cmdline;       // image.json "kernel_cmdline", else a default for our images
  int64_t rootfs_bytes = 0;  // the virtual size of rootfs.qcow2: the smallest possible disk
};

// The kernel command line when image.json names none.
inline constexpr std::string_view kDefaultCmdline = "console=ttyS0 root=/dev/vda rw";

// Checks `ref` (NAME@VERSION, each [A-Za-z0-9._-], no "..") and that the image's files are
// there. InvalidArgument for a malformed ref, NotFound for a missing image or file.
Result<GuestImage> OpenGuestImage(const std::string& images_dir, std::string_view ref);

// Makes the image's kernel, initrd and rootfs readable, and its directory traversable, by
// every user: QEMU runs as another user and warren does not have libvirt hand it the files
// per VM (domain_xml.h, QemuUser), since many VMs share them. Only adds missing permission
// bits, so the files keep their owner and a second call changes nothing. Internal when a
// file's mode cannot be changed.
Status LetQemuReadImage(const GuestImage& image);

// The virtual size recorded in a qcow2 header. InvalidArgument when the file is no qcow2.
Result<int64_t> Qcow2VirtualSize(const std::string& path);

}  // namespace warren
