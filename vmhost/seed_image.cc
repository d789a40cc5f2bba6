#include "vmhost/seed_image.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "vmhost/random_names.h"
#include "vmhost/subprocess.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

Status WriteFile(const fs::path& path, const std::string& data, fs::perms perms) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return Internal("writing " + path.string());
  std::error_code ec;
  fs::permissions(path, perms, ec);
  if (ec) return Internal("chmod " + path.string() + ": " + ec.message());
  return Status::Ok();
}

// Removes the temporary directory whatever happens.
struct ScratchDir {
  fs::path path;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

Result<std::string> BuildSeedImage(const SeedContents& seed, const std::string& scratch_dir,
                                   const std::string& mkfs) {
  std::error_code ec;
  fs::create_directories(scratch_dir, ec);
  std::string tmpl =
      (fs::path(scratch_dir) / ("seed." + std::to_string(getpid()) + ".XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) return Internal("mkdtemp in " + scratch_dir);
  ScratchDir scratch{tmpl};
  fs::path root = scratch.path / "root";
  fs::create_directory(root, ec);
  if (ec) return Internal("mkdir " + root.string() + ": " + ec.message());

  const auto file = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                    fs::perms::others_read;
  std::string env;
  for (const auto& [key, value] : seed.env) env += key + "=" + value + "\n";
  WARREN_RETURN_IF_ERROR(WriteFile(root / "hostname", seed.hostname + "\n", file));
  WARREN_RETURN_IF_ERROR(WriteFile(root / "authorized_keys", seed.authorized_keys, file));
  WARREN_RETURN_IF_ERROR(WriteFile(root / "env", env, file));
  if (!seed.setup_script.empty()) {
    WARREN_RETURN_IF_ERROR(
        WriteFile(root / "setup-script", seed.setup_script,
                  file | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec));
  }

  if (!seed.ssh_host_key.empty()) {
    WARREN_RETURN_IF_ERROR(WriteFile(root / "ssh_host_ed25519_key", seed.ssh_host_key,
                                     fs::perms::owner_read | fs::perms::owner_write));
    WARREN_RETURN_IF_ERROR(
        WriteFile(root / "ssh_host_ed25519_key.pub", seed.ssh_host_key_pub, file));
  }

  // Every seed is the same size: a VM restored from a template keeps the template's disk
  // sizes in its saved device state, so a seed of another size would not mount there.
  size_t content = seed.hostname.size() + seed.authorized_keys.size() + env.size() +
                   seed.setup_script.size() + seed.ssh_host_key.size() +
                   seed.ssh_host_key_pub.size();
  if (content > kMaxSeedContentBytes) {
    return TooLarge("a vm's seed holds at most " + std::to_string(kMaxSeedContentBytes / 1024) +
                    " KiB (hostname, keys, env and setup script)");
  }
  fs::path image = scratch.path / "seed.img";
  {
    std::ofstream out(image, std::ios::binary);
    out.close();
    fs::resize_file(image, kSeedImageBytes, ec);
    if (ec) return Internal("sizing " + image.string() + ": " + ec.message());
  }
  // 1 KiB blocks and no journal: the image is tiny and never written by the guest.
  // root_owner pins ownership so the image does not depend on who runs warren.
  Result<ProcessResult> r = RunProcess({mkfs,
                                        "-q",
                                        "-F",
                                        "-t",
                                        "ext4",
                                        "-L",
                                        kSeedLabel,
                                        "-b",
                                        "1024",
                                        "-N",
                                        "64",
                                        "-m",
                                        "0",
                                        "-O",
                                        "^has_journal",
                                        "-E",
                                        "root_owner=0:0",
                                        "-d",
                                        root.string(),
                                        image.string()});
  if (!r.ok()) return r.status().Annotate("building seed image");
  if (r->exit_code != 0) return Internal("mkfs.ext4 for the seed failed: " + r->output);

  std::ifstream in(image, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() != kSeedImageBytes) return Internal("reading back the seed image");
  return bytes;
}

Result<std::pair<std::string, std::string>> NewSshHostKey(const std::string& tmp_dir) {
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  const std::string path =
      (fs::path(tmp_dir) / ("hostkey-" + std::to_string(getpid()) + "-" + RandomHex(12))).string();
  auto cleanup = [&] {
    fs::remove(path, ec);
    fs::remove(path + ".pub", ec);
  };
  Result<ProcessResult> r =
      RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "warren-vm", "-f", path});
  if (!r.ok() || r->exit_code != 0) {
    cleanup();
    return Internal("making an ssh host key for a vm failed" +
                    (r.ok() ? ": " + r->output : ": " + r.status().ToString()));
  }
  auto slurp = [](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::pair<std::string, std::string> key{slurp(path), slurp(path + ".pub")};
  cleanup();
  if (key.first.empty() || key.second.empty()) return Internal("reading a new ssh host key");
  return key;
}

bool IsScratchOfAnotherProcess(std::string_view name) {
  std::string_view rest;
  if (name.starts_with("seed.")) {
    rest = name.substr(5);
  } else if (name.starts_with("hostkey-")) {
    rest = name.substr(8);
  } else {
    return false;
  }
  const std::string mine = std::to_string(getpid());
  return !(rest.starts_with(mine) && rest.size() > mine.size() &&
           (rest[mine.size()] == '.' || rest[mine.size()] == '-'));
}

Status EnsureSshHostKey(std::string& key, std::string& pub, const std::string& tmp_dir) {
  if (!key.empty()) return Status::Ok();
  WARREN_ASSIGN_OR_RETURN(auto made, NewSshHostKey(tmp_dir));
  key = std::move(made.first);
  pub = std::move(made.second);
  return Status::Ok();
}

}  // namespace warren
