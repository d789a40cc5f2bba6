// The on-disk layout of guest images, as packaging/images builds them (its lib.sh is the
// shell side's one home for the same names):
//   IMAGES/NAME@VERSION/{vmlinuz, initrd.img, rootfs.qcow2, image.json}
// The C++ side's one home for those names, for what a well-formed NAME@VERSION is, for when an
// image counts as installed and for which version is the newest. Pure functions over the
// file system; no libvirt, so the interpreter may use it too. Thread-safe: keeps no state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace warren {

inline constexpr std::string_view kImageKernelFile = "vmlinuz";
inline constexpr std::string_view kImageInitrdFile = "initrd.img";
// The read-only base every VM's disk chain ends at; never written to once published.
inline constexpr std::string_view kImageRootfsFile = "rootfs.qcow2";
// Written last by the builder; optional for warren (a default command line stands in).
inline constexpr std::string_view kImageMetaFile = "image.json";

// The paths of one image's files (whether or not they exist).
struct ImageFiles {
  std::string dir;  // IMAGES/NAME@VERSION
  std::string kernel;
  std::string initrd;
  std::string rootfs;
  std::string meta;
};
ImageFiles ImageFilesOf(std::string_view images_dir, std::string_view ref);

// NAME@VERSION, each part 1..64 of [A-Za-z0-9._-] and neither "." nor "..", so a ref is
// always one directory name inside IMAGES.
bool IsImageRef(std::string_view ref);

// A well-formed ref whose kernel, initrd and rootfs are regular files: an image that would
// boot (a half-built one is not offered; the host checks the qcow2 header when it uses it).
bool IsInstalledImage(std::string_view images_dir, std::string_view ref);

// True when VERSION `a` is older than `b`: as numbers when both are all digits (20261129 >
// 20250101, 10 > 9), else as text.
bool OlderImageVersion(std::string_view a, std::string_view b);

// Every installed image in `images_dir`, sorted by name, then version oldest first.
std::vector<std::string> ListInstalledImages(std::string_view images_dir);

// The newest installed version of image `name` ("NAME@VERSION"), "" when there is none.
std::string NewestInstalledImage(std::string_view images_dir, std::string_view name);

}  // namespace warren
