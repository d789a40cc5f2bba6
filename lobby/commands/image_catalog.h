// The ImageCatalog (interpreter.h) over a directory of installed images, laid out as
// vmhost/image_layout.h says. A bare name means its newest version (image_layout.h orders
// them), so `new` keeps picking up rebuilt images while existing VMs stay on the version
// they were made with. Reads the directory on every call (images are added while warren
// runs); thread-safe.
#pragma once

#include <string>

#include "lobby/commands/interpreter.h"

namespace warren {

ImageCatalog DirectoryImageCatalog(std::string images_dir);

}  // namespace warren
