#include "vmhost/image_layout.h"

#include <algorithm>
#include <filesystem>

namespace warren {
namespace {

namespace fs = std::filesystem;

bool IsRefPart(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string_view NameOf(std::string_view ref) { return ref.substr(0, ref.find('@')); }
std::string_view VersionOf(std::string_view ref) { return ref.substr(ref.find('@') + 1); }

}  // namespace

ImageFiles ImageFilesOf(std::string_view images_dir, std::string_view ref) {
  ImageFiles f;
  const fs::path dir = fs::path(images_dir) / ref;
  f.dir = dir.string();
  f.kernel = (dir / kImageKernelFile).string();
  f.initrd = (dir / kImageInitrdFile).string();
  f.rootfs = (dir / kImageRootfsFile).string();
  f.meta = (dir / kImageMetaFile).string();
  return f;
}

bool IsImageRef(std::string_view ref) {
  size_t at = ref.find('@');
  return at != std::string_view::npos && IsRefPart(ref.substr(0, at)) &&
         IsRefPart(ref.substr(at + 1));
}

bool IsInstalledImage(std::string_view images_dir, std::string_view ref) {
  if (!IsImageRef(ref)) return false;
  const ImageFiles f = ImageFilesOf(images_dir, ref);
  std::error_code ec;
  for (const std::string* p : {&f.kernel, &f.initrd, &f.rootfs}) {
    if (!fs::is_regular_file(*p, ec)) return false;
  }
  return true;
}

bool OlderImageVersion(std::string_view a, std::string_view b) {
  if (AllDigits(a) && AllDigits(b)) {
    std::string_view ta = a.substr(std::min(a.find_first_not_of('0'), a.size()));
    std::string_view tb = b.substr(std::min(b.find_first_not_of('0'), b.size()));
    if (ta.size() != tb.size()) return ta.size() < tb.size();
    return ta < tb;
  }
  return a < b;
}

std::vector<std::string> ListInstalledImages(std::string_view images_dir) {
  std::vector<std::string> refs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(images_dir), ec)) {
    std::string ref = entry.path().filename().string();
    if (IsInstalledImage(images_dir, ref)) refs.push_back(std::move(ref));
  }
  std::sort(refs.begin(), refs.end(), [](const std::string& a, const std::string& b) {
    if (NameOf(a) != NameOf(b)) return NameOf(a) < NameOf(b);
    return OlderImageVersion(VersionOf(a), VersionOf(b));
  });
  return refs;
}

std::string NewestInstalledImage(std::string_view images_dir, std::string_view name) {
  std::string newest;
  for (std::string& ref : ListInstalledImages(images_dir)) {
    if (NameOf(ref) == name) newest = std::move(ref);  // sorted: the last one wins
  }
  return newest;
}

}  // namespace warren
