// The guest image layout (vmhost/image_layout.h): which refs are well-formed, when an image
// counts as installed, and which version is the newest.
#include "vmhost/image_layout.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace warren {
namespace {

namespace fs = std::filesystem;

class ImageLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "image_layout_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // An image with the files `which` names (all three boot files by default).
  void Install(const std::string& ref, std::initializer_list<std::string_view> which = {
                                           kImageKernelFile, kImageInitrdFile, kImageRootfsFile}) {
    fs::create_directories(fs::path(dir_) / ref);
    for (std::string_view f : which) std::ofstream(fs::path(dir_) / ref / f) << "x";
  }
  std::string dir_;
};

TEST_F(ImageLayoutTest, FilesOfAnImage) {
  ImageFiles f = ImageFilesOf("/images", "tiny@1");
  EXPECT_EQ(f.dir, "/images/tiny@1");
  EXPECT_EQ(f.kernel, "/images/tiny@1/vmlinuz");
  EXPECT_EQ(f.initrd, "/images/tiny@1/initrd.img");
  EXPECT_EQ(f.rootfs, "/images/tiny@1/rootfs.qcow2");
  EXPECT_EQ(f.meta, "/images/tiny@1/image.json");
}

TEST_F(ImageLayoutTest, Refs) {
  EXPECT_TRUE(IsImageRef("tiny@20261201"));
  EXPECT_TRUE(IsImageRef("debian@2025.11.1"));
  EXPECT_TRUE(IsImageRef("a_b-c@v.1"));
  for (const char* bad :
       {"tiny", "@1", "tiny@", "../x@1", "x@..", "a/b@1", "a@b@c", ".@1", "sp ace@1"}) {
    EXPECT_FALSE(IsImageRef(bad)) << bad;
  }
  EXPECT_FALSE(IsImageRef(std::string(65, 'a') + "@1"));
}

TEST_F(ImageLayoutTest, InstalledMeansTheThreeBootFiles) {
  Install("tiny@1");
  Install("tiny@2", {kImageKernelFile, kImageRootfsFile});  // still being built
  Install(".work-tiny.Ab12Cd");  // a build's scratch directory (build-*.sh)
  EXPECT_TRUE(IsInstalledImage(dir_, "tiny@1"));
  EXPECT_FALSE(IsInstalledImage(dir_, "tiny@2"));
  EXPECT_FALSE(IsInstalledImage(dir_, "tiny@3"));
  EXPECT_FALSE(IsInstalledImage(dir_, "../tiny@1"));
  EXPECT_EQ(ListInstalledImages(dir_), std::vector<std::string>{"tiny@1"});
}

TEST_F(ImageLayoutTest, VersionsOrderAsNumbersWhenTheyAreNumbers) {
  EXPECT_TRUE(OlderImageVersion("9", "10"));
  EXPECT_TRUE(OlderImageVersion("20250101", "20261129"));
  EXPECT_TRUE(OlderImageVersion("007", "10"));
  EXPECT_FALSE(OlderImageVersion("10", "9"));
  EXPECT_TRUE(OlderImageVersion("1.10", "1.9"));  // text, not numbers
  for (const char* ref : {"tiny@10", "tiny@9", "debian@20261201", "debian@20250101"}) {
    Install(ref);
  }
  EXPECT_EQ(ListInstalledImages(dir_),
            (std::vector<std::string>{"debian@20250101", "debian@20261201", "tiny@9", "tiny@10"}));
  EXPECT_EQ(NewestInstalledImage(dir_, "tiny"), "tiny@10");
  EXPECT_EQ(NewestInstalledImage(dir_, "debian"), "debian@20261201");
  EXPECT_EQ(NewestInstalledImage(dir_, "tin"), "");
  EXPECT_EQ(NewestInstalledImage(dir_ + "/absent", "tiny"), "");
}

}  // namespace
}  // namespace warren
