#include "vmhost/guest_image.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace warren {
namespace {

namespace fs = std::filesystem;

bool IsRefPart(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<int64_t> Qcow2VirtualSize(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  unsigned char h[32];
  if (!in.read(reinterpret_cast<char*>(h), sizeof(h))) {
    return InvalidArgument(path + " is not a qcow2 image");
  }
  // Magic "QFI\xfb", then big-endian fields; the virtual size is at offset 24.
  if (h[0] != 'Q' || h[1] != 'F' || h[2] != 'I' || h[3] != 0xfb) {
    return InvalidArgument(path + " is not a qcow2 image");
  }
  uint64_t size = 0;
  for (int i = 24; i < 32; ++i) size = (size << 8) | h[i];
  return static_cast<int64_t>(size);
}

Result<GuestImage> OpenGuestImage(const std::string& images_dir, std::string_view ref) {
  size_t at = ref.find('@');
  if (at == std::string_view::npos || !IsRefPart(ref.substr(0, at)) ||
      !IsRefPart(ref.substr(at + 1))) {
    return InvalidArgument("image must be NAME@VERSION of letters, digits, '.', '_' and '-'");
  }
  GuestImage img;
  img.ref = std::string(ref);
  img.dir = (fs::path(images_dir) / img.ref).string();
  std::error_code ec;
  if (!fs::is_directory(img.dir, ec)) return NotFound("no image " + img.ref);
  img.kernel = (fs::path(img.dir) / "vmlinuz").string();
  img.initrd = (fs::path(img.dir) / "initrd.img").string();
  img.rootfs = (fs::path(img.dir) / "rootfs.qcow2").string();
  for (const std::string* f : {&img.kernel, &img.initrd, &img.rootfs}) {
    if (!fs::is_regular_file(*f, ec)) return NotFound("image " + img.ref + " has no " + *f);
  }
  WARREN_ASSIGN_OR_RETURN(img.rootfs_bytes, Qcow2VirtualSize(img.rootfs));
  img.cmdline = std::string(kDefaultCmdline);
  std::ifstream meta(fs::path(img.dir) / "image.json");
  if (meta) {
    nlohmann::json j = nlohmann::json::parse(meta, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return InvalidArgument("image " + img.ref + ": image.json is not a JSON object");
    }
    // "kernel_cmdline" is what packaging/images writes; "cmdline" is accepted too.
    for (const char* key : {"kernel_cmdline", "cmdline"}) {
      auto it = j.find(key);
      if (it == j.end()) continue;
      if (!it->is_string()) {
        return InvalidArgument("image " + img.ref + ": " + key + " is not a string");
      }
      img.cmdline = it->get<std::string>();
      break;
    }
  }
  return img;
}

}  // namespace warren
