#include "lobby/commands/image_catalog.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "lobby/commands/vm_view.h"
#include "vmhost/image_layout.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

// What image.json says; what it lacks (an image built before a field existed) stays
// empty. Bounded: a listing must not read a huge file someone left there.
void ReadImageJson(const std::string& dir, ImageInfo& info) {
  constexpr std::streamsize kMaxImageJsonBytes = 64 * 1024;
  std::ifstream f(ImageFilesOf(dir, info.ref).meta, std::ios::binary);
  if (!f) return;
  std::string text(kMaxImageJsonBytes + 1, '\0');
  f.read(text.data(), kMaxImageJsonBytes + 1);
  if (f.gcount() > kMaxImageJsonBytes) return;
  text.resize(static_cast<size_t>(f.gcount()));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  auto str = [&](const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return std::string();
    std::string v = it->get<std::string>();
    // One line, bounded: it is shown in listings and error messages.
    v = v.substr(0, v.find('\n')).substr(0, 200);
    return v;
  };
  info.description = str("description");
  info.default_user = str("default_user");
  info.built_at = str("built_at");
  if (auto it = j.find("size"); it != j.end() && it->is_number_integer()) {
    info.size_bytes = it->get<int64_t>();
  }
}

// Every installed image in `dir` (only images that would boot: a half-built one is not
// offered), sorted by name then version (vmhost/image_layout.h orders versions).
std::vector<ImageInfo> ListImages(const std::string& dir) {
  std::vector<ImageInfo> images;
  for (const std::string& ref : ListInstalledImages(dir)) {
    ImageInfo info;
    info.ref = ref;
    info.name = ref.substr(0, ref.find('@'));
    info.version = ref.substr(ref.find('@') + 1);
    ReadImageJson(dir, info);
    images.push_back(std::move(info));
  }
  std::sort(images.begin(), images.end(), [](const ImageInfo& a, const ImageInfo& b) {
    if (a.name != b.name) return a.name < b.name;
    return OlderImageVersion(a.version, b.version);
  });
  return images;
}

std::string Available(const std::vector<ImageInfo>& images) {
  return "; the images installed here:\n" + ImageLines(images);
}

}  // namespace

ImageCatalog DirectoryImageCatalog(std::string images_dir) {
  ImageCatalog catalog;
  catalog.list = [images_dir] { return ListImages(images_dir); };
  catalog.resolve = [images_dir](std::string_view name) -> Result<std::string> {
    if (name.empty() || name.size() > 129)
      return InvalidArgument("image name is empty or too long");
    std::vector<ImageInfo> images = ListImages(images_dir);
    std::string shown(name.substr(0, 64));
    if (name.find('@') != std::string_view::npos) {
      for (const ImageInfo& image : images) {
        if (image.ref == name) return image.ref;
      }
      return NotFound("no image " + shown + Available(images));
    }
    std::string newest;
    for (const ImageInfo& image : images) {
      if (image.name == name) newest = image.ref;  // sorted: last wins
    }
    if (newest.empty()) return NotFound("no image named " + shown + Available(images));
    return newest;
  };
  return catalog;
}

std::string ImageLines(const std::vector<ImageInfo>& images) {
  if (images.empty()) return "  (no images are installed)\n";
  size_t ref_width = 0, size_width = 0;
  std::vector<std::string> sizes;
  for (const ImageInfo& image : images) {
    sizes.push_back(image.size_bytes > 0 ? FormatMib(image.size_bytes / (1024 * 1024)) : "-");
    ref_width = std::max(ref_width, image.ref.size());
    size_width = std::max(size_width, sizes.back().size());
  }
  std::string out;
  for (size_t i = 0; i < images.size(); ++i) {
    std::string line = "  " + images[i].ref +
                       std::string(ref_width - images[i].ref.size() + 2, ' ') +
                       std::string(size_width - sizes[i].size(), ' ') + sizes[i];
    if (!images[i].description.empty()) line += "  " + images[i].description;
    out += line + "\n";
  }
  return out;
}

std::string InstalledImagesText(const Services& services) {
  if (!services.images.list) return "";
  return "images installed here (--image NAME for its newest version, or NAME@VERSION; the "
         "default is " +
         services.vm_defaults.image + "):\n" + ImageLines(services.images.list());
}

nlohmann::json ImageJson(const ImageInfo& image) {
  return {{"ref", image.ref},
          {"name", image.name},
          {"version", image.version},
          {"size_bytes", image.size_bytes},
          {"description", image.description},
          {"default_user", image.default_user},
          {"built_at", image.built_at}};
}

}  // namespace warren
