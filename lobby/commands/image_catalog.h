// The ImageCatalog (interpreter.h) over a directory of installed images, laid out as
// vmhost/image_layout.h says. A bare name means its newest version (image_layout.h orders
// them), so `new` keeps picking up rebuilt images while existing VMs stay on the version
// they were made with. Reads the directory on every call (images are added while warren
// runs); thread-safe. Also how images are shown, one line each, by `images`,
// `help new` and an unknown --image.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lobby/commands/interpreter.h"

namespace warren {

ImageCatalog DirectoryImageCatalog(std::string images_dir);

// One line per image, "  debian@20261129  875 MiB  Debian 12 with systemd…", columns
// aligned; "  (no images are installed)" for none.
std::string ImageLines(const std::vector<ImageInfo>& images);
// The images this server offers, for `help new`: a heading naming the default, then
// ImageLines; empty when the server has no catalog to ask.
std::string InstalledImagesText(const Services& services);
// {"ref","name","version","size_bytes","description","default_user","built_at"}.
nlohmann::json ImageJson(const ImageInfo& image);

}  // namespace warren
