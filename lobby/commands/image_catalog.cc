#include "lobby/commands/image_catalog.h"

#include <algorithm>
#include <filesystem>

namespace warren {
namespace {

namespace fs = std::filesystem;

// NAME or VERSION: what vmhost's OpenGuestImage accepts ([A-Za-z0-9._-], not "." or "..").
bool IsRefPart(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// A published image has all three files; one still being built does not. (The host checks
// the files again, qcow2 header included, when it makes a VM; this layer links no vmhost
// implementation.)
bool IsCompleteImage(const std::string& dir, const std::string& ref) {
  size_t at = ref.find('@');
  if (at == std::string::npos || !IsRefPart(std::string_view(ref).substr(0, at)) ||
      !IsRefPart(std::string_view(ref).substr(at + 1))) {
    return false;
  }
  std::error_code ec;
  for (const char* f : {"vmlinuz", "initrd.img", "rootfs.qcow2"}) {
    if (!fs::is_regular_file(fs::path(dir) / ref / f, ec)) return false;
  }
  return true;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// True when version `a` is older than `b`.
bool OlderVersion(std::string_view a, std::string_view b) {
  if (AllDigits(a) && AllDigits(b)) {
    std::string_view ta = a.substr(std::min(a.find_first_not_of('0'), a.size()));
    std::string_view tb = b.substr(std::min(b.find_first_not_of('0'), b.size()));
    if (ta.size() != tb.size()) return ta.size() < tb.size();
    return ta < tb;
  }
  return a < b;
}

// Every complete image in `dir`, sorted by name then version.
std::vector<std::string> ListImages(const std::string& dir) {
  std::vector<std::string> refs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string ref = entry.path().filename().string();
    if (ref.find('@') == std::string::npos) continue;
    // Only images that would boot: a half-built one is not offered.
    if (IsCompleteImage(dir, ref)) refs.push_back(std::move(ref));
  }
  std::sort(refs.begin(), refs.end(), [](const std::string& a, const std::string& b) {
    std::string_view na = std::string_view(a).substr(0, a.find('@'));
    std::string_view nb = std::string_view(b).substr(0, b.find('@'));
    if (na != nb) return na < nb;
    return OlderVersion(std::string_view(a).substr(a.find('@') + 1),
                        std::string_view(b).substr(b.find('@') + 1));
  });
  return refs;
}

std::string Available(const std::vector<std::string>& refs) {
  if (refs.empty()) return "no images are installed";
  std::string out = "available: ";
  for (size_t i = 0; i < refs.size(); ++i) out += (i ? ", " : "") + refs[i];
  return out;
}

}  // namespace

ImageCatalog DirectoryImageCatalog(std::string images_dir) {
  ImageCatalog catalog;
  catalog.list = [images_dir] { return ListImages(images_dir); };
  catalog.resolve = [images_dir](std::string_view name) -> Result<std::string> {
    if (name.empty() || name.size() > 129)
      return InvalidArgument("image name is empty or too long");
    std::vector<std::string> refs = ListImages(images_dir);
    std::string shown(name.substr(0, 64));
    if (name.find('@') != std::string_view::npos) {
      if (std::find(refs.begin(), refs.end(), name) != refs.end()) return std::string(name);
      return NotFound("no image " + shown + "; " + Available(refs));
    }
    std::string newest;
    for (const std::string& ref : refs) {
      if (std::string_view(ref).substr(0, ref.find('@')) == name)
        newest = ref;  // sorted: last wins
    }
    if (newest.empty()) return NotFound("no image named " + shown + "; " + Available(refs));
    return newest;
  };
  return catalog;
}

}  // namespace warren
