#include "lobby/commands/image_catalog.h"

#include <algorithm>

#include "vmhost/image_layout.h"

namespace warren {
namespace {

std::string Available(const std::vector<std::string>& refs) {
  if (refs.empty()) return "no images are installed";
  std::string out = "available: ";
  for (size_t i = 0; i < refs.size(); ++i) out += (i ? ", " : "") + refs[i];
  return out;
}

}  // namespace

ImageCatalog DirectoryImageCatalog(std::string images_dir) {
  ImageCatalog catalog;
  // Only images that would boot: a half-built one is not offered.
  catalog.list = [images_dir] { return ListInstalledImages(images_dir); };
  catalog.resolve = [images_dir](std::string_view name) -> Result<std::string> {
    if (name.empty() || name.size() > 129)
      return InvalidArgument("image name is empty or too long");
    std::string shown(name.substr(0, 64));
    if (name.find('@') == std::string_view::npos) {
      std::string newest = NewestInstalledImage(images_dir, name);
      if (!newest.empty()) return newest;
      return NotFound("no image named " + shown + "; " +
                      Available(ListInstalledImages(images_dir)));
    }
    std::vector<std::string> refs = ListInstalledImages(images_dir);
    if (std::find(refs.begin(), refs.end(), name) != refs.end()) return std::string(name);
    return NotFound("no image " + shown + "; " + Available(refs));
  };
  return catalog;
}

}  // namespace warren
