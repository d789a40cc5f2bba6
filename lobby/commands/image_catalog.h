// The ImageCatalog (interpreter.h) over a directory laid out as packaging/images builds it
// (IMAGES/NAME@VERSION/{vmlinuz, initrd.img, rootfs.qcow2, image.json}). A bare name means
// its newest version — versions compare as numbers when both are digits (20261129 >
// 20250101, 10 > 9), else as text — so `new` keeps picking up rebuilt images while existing
// VMs stay on the version they were made with. Reads the directory on every call (images
// are added while warren runs); thread-safe.
#pragma once

#include <string>

#include "lobby/commands/interpreter.h"

namespace warren {

ImageCatalog DirectoryImageCatalog(std::string images_dir);

}  // namespace warren
