// RewriteQcow2Backing (vmhost/qcow2_header.h): on a layer qemu-img made, rewritten and read
// back by qemu-img; and what it refuses.
#include "vmhost/qcow2_header.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace warren {
namespace {

namespace fs = std::filesystem;

std::string Output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Qcow2HeaderTest, ALayerQemuImgMadeStandsOnTheNewBackingFile) {
  if (system("command -v qemu-img >/dev/null 2>&1") != 0) GTEST_SKIP() << "no qemu-img";
  const fs::path dir = fs::temp_directory_path() / ("qcow2-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path base = dir / "base.qcow2",
                 other = dir / "a-much-longer-name-of-another-base.qcow2";
  const fs::path top = dir / "top.qcow2";
  ASSERT_EQ(system(("qemu-img create -q -f qcow2 " + base.string() + " 64M").c_str()), 0);
  ASSERT_EQ(system(("qemu-img create -q -f qcow2 " + other.string() + " 64M").c_str()), 0);
  ASSERT_EQ(system(("qemu-img create -q -f qcow2 -F qcow2 -b " + base.string() + " " + top.string())
                       .c_str()),
            0);
  std::string file = Read(top);
  const uint64_t cluster = Qcow2ClusterSize(file);
  ASSERT_EQ(cluster, 65536u);
  std::string head = file.substr(0, cluster);
  ASSERT_TRUE(RewriteQcow2Backing(head, other.string()).ok());
  file.replace(0, head.size(), head);
  std::ofstream(top, std::ios::binary | std::ios::trunc) << file;
  const std::string info = Output("qemu-img info --output=json " + top.string());
  EXPECT_NE(info.find("\"backing-filename\": \"" + other.string() + "\""), std::string::npos)
      << info;
  EXPECT_NE(info.find("\"backing-filename-format\": \"qcow2\""), std::string::npos) << info;
  EXPECT_EQ(system(("qemu-img check -q " + top.string()).c_str()), 0);
  // And back to a shorter name: the rest of the old one is gone.
  file = Read(top);
  head = file.substr(0, cluster);
  ASSERT_TRUE(RewriteQcow2Backing(head, base.string()).ok());
  EXPECT_EQ(head.find(other.string()), std::string::npos);
  fs::remove_all(dir);
}

TEST(Qcow2HeaderTest, RefusesWhatItCannotRewrite) {
  std::string not_qcow2(4096, 'x');
  EXPECT_EQ(RewriteQcow2Backing(not_qcow2, "/b").code(), Code::kInvalidArgument);
  EXPECT_EQ(Qcow2ClusterSize("QFI"), 0u);
  // A qcow2 header without a backing file.
  std::string head(512, '\0');
  head.replace(0, 4, "QFI\xfb");
  head[7] = 3;    // version 3
  head[23] = 16;  // 64 KiB clusters
  EXPECT_EQ(RewriteQcow2Backing(head, "/b").code(), Code::kInvalidArgument);
  // One whose name would run past what the caller has of the header cluster.
  head[15] = static_cast<char>(200);  // backing file at 200
  head[19] = 4;                       // 4 bytes long
  head.replace(200, 4, "/old");
  EXPECT_TRUE(RewriteQcow2Backing(head, "/new-name").ok());
  EXPECT_EQ(head.substr(200, 9), "/new-name");
  EXPECT_EQ(RewriteQcow2Backing(head, std::string(400, 'n')).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace warren
