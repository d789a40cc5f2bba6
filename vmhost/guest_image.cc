#include "vmhost/guest_image.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vmhost/image_layout.h"

namespace warren {

namespace fs = std::filesystem;

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

Status LetQemuReadImage(const GuestImage& image) {
  auto add = [](const std::string& path, fs::perms wanted) -> Status {
    std::error_code ec;
    const fs::perms now = fs::status(path, ec).permissions();
    if (ec) return Internal("reading the mode of " + path + ": " + ec.message());
    if ((now & wanted) == wanted) return Status::Ok();
    fs::permissions(path, wanted, fs::perm_options::add, ec);
    if (ec) return Internal("making " + path + " readable by QEMU: " + ec.message());
    return Status::Ok();
  };
  const fs::perms dir = fs::perms::others_exec | fs::perms::group_exec;
  const fs::perms file = fs::perms::others_read | fs::perms::group_read;
  WARREN_RETURN_IF_ERROR(add(fs::path(image.dir).parent_path().string(), dir));
  WARREN_RETURN_IF_ERROR(add(image.dir, dir));
  for (const std::string* f : {&image.kernel, &image.initrd, &image.rootfs}) {
    WARREN_RETURN_IF_ERROR(add(*f, file));
  }
  return Status::Ok();
}

Result<GuestImage> OpenGuestImage(const std::string& images_dir, std::string_view ref) {
  if (!IsImageRef(ref)) {
    return InvalidArgument("image must be NAME@VERSION of letters, digits, '.', '_' and '-'");
  }
  const ImageFiles files = ImageFilesOf(images_dir, ref);
  GuestImage img;
  img.ref = std::string(ref);
  img.dir = files.dir;
  std::error_code ec;
  if (!fs::is_directory(img.dir, ec)) return NotFound("no image " + img.ref);
  img.kernel = files.kernel;
  img.initrd = files.initrd;
  img.rootfs = files.rootfs;
  for (const std::string* f : {&img.kernel, &img.initrd, &img.rootfs}) {
    if (!fs::is_regular_file(*f, ec)) return NotFound("image " + img.ref + " has no " + *f);
  }
  WARREN_ASSIGN_OR_RETURN(img.rootfs_bytes, Qcow2VirtualSize(img.rootfs));
  img.cmdline = std::string(kDefaultCmdline);
  std::ifstream meta(files.meta);
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
