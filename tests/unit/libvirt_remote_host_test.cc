// LibvirtHost on a remote libvirt host (issue 18), reached over qemu+ssh or qemu+tls only:
// tests/integration/test_remote_libvirt_host.py starts the second host (second_host.py: its
// own daemon in its own namespaces, with a private /var/lib/warren and the local image
// catalog hidden from it) and runs this binary with
//   WARREN_TEST_REMOTE_LIBVIRT_URI   the host's URI
//   WARREN_TEST_REMOTE_DATA_DIR      warren's data directory on it (default /var/lib/warren)
//   WARREN_TEST_REMOTE_FILES         where this machine sees that directory (the fixture's
//                                    private copy): only to check what landed there
//   WARREN_TEST_IMAGES               the local catalog the images are uploaded from
// Without the URI every test skips (fails under CI: tests/unit/skip_or_fail.h).
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/real_libvirt_env.h"
#include "tests/unit/skip_or_fail.h"
#include "vmhost/image_layout.h"
#include "vmhost/libvirt_channel.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/libvirt_uri.h"
#include "vmhost/libvirt_xml.h"
#include "vmhost/volume_io.h"

namespace warren {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Every entry below `dir`, relative, sorted: a directory's picture before and after.
std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    out.push_back(fs::relative(it->path(), dir, ec).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class RemoteHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As warren does (lobby/main.cc): libvirt's transport writes to peers that may have gone.
    std::signal(SIGPIPE, SIG_IGN);
    const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
    if (!env.available) WARREN_SKIP_OR_FAIL() << env.skip_reason;
    host_ = std::make_unique<LibvirtHost>(env.HostOptions());
    image_ = env.image;
    local_images_before_ = Tree(env.images_dir);
  }
  void TearDown() override {
    if (!host_) return;
    DestroyEveryVm(*host_);
    // The local side is untouched: the catalog as it was, nothing of the remote data
    // directory's here (on this machine that path is, at most, the fixture's empty mount
    // point).
    const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
    EXPECT_EQ(Tree(env.images_dir), local_images_before_);
    EXPECT_EQ(Tree(env.data_dir), std::vector<std::string>{}) << env.data_dir;
  }
  VmSpec Spec(std::string id) { return TinyVmSpec(std::move(id), image_); }

  // The domains of this test's prefix, every pool on the remote host (only warren's tests
  // use it) and every volume in them ("pool/volume", the pools read afresh), through a
  // connection of our own.
  struct Remote {
    std::vector<std::string> domains;
    std::vector<std::string> pools;
    std::vector<std::string> volumes;
  };
  Remote Look() {
    Remote r;
    const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
    Result<ConnectHandle> conn = OpenLibvirt(env.uri);
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    if (!conn.ok()) return r;
    Result<std::vector<DomainHandle>> doms = ListDomains(conn->get(), env.prefix);
    for (const DomainHandle& d : *doms) r.domains.push_back(virDomainGetName(d.get()));
    virStoragePoolPtr* pools = nullptr;
    const int n = virConnectListAllStoragePools(conn->get(), &pools, 0);
    for (int i = 0; i < n; ++i) {
      StoragePoolHandle p(pools[i]);
      // Any prefix's: a pool over DATA's directories may be an earlier process's view.
      r.pools.push_back(virStoragePoolGetName(p.get()));
      if (virStoragePoolIsActive(p.get()) != 1) continue;
      if (virStoragePoolRefresh(p.get(), 0) < 0) virResetLastError();
      virStorageVolPtr* vols = nullptr;
      const int nv = virStoragePoolListAllVolumes(p.get(), &vols, 0);
      for (int j = 0; j < nv; ++j) {
        StorageVolHandle v(vols[j]);
        r.volumes.push_back(r.pools.back() + "/" + virStorageVolGetName(v.get()));
      }
      if (nv < 0) virResetLastError();
      free(vols);  // NOLINT: allocated by libvirt
    }
    free(pools);  // NOLINT: allocated by libvirt
    return r;
  }
  // No VM's pool is left: the host-wide views only, whoever made them — the image store's and
  // the templates' (every collection looks there for template bases to keep).
  static void ExpectOnlyHostWidePools(const Remote& r) {
    EXPECT_FALSE(r.pools.empty());
    for (const std::string& pool : r.pools) {
      EXPECT_TRUE(pool.find("images-") != std::string::npos ||
                  pool.find("templates-") != std::string::npos)
          << pool;
    }
  }
  // The domain's MACs as libvirt runs it.
  std::vector<std::string> MacsOf(const std::string& id) {
    const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
    Result<ConnectHandle> conn = OpenLibvirt(env.uri);
    if (!conn.ok()) return {"(no connection)"};
    DomainHandle dom(virDomainLookupByName(conn->get(), (env.prefix + id).c_str()));
    LibvirtString xml(dom ? virDomainGetXMLDesc(dom.get(), 0) : nullptr);
    Result<DomainDefinition> def =
        xml ? DomainDefinition::Parse(xml.get()) : Result<DomainDefinition>(NotFound(id));
    return def.ok() ? def->InterfaceMacs() : std::vector<std::string>{def.status().ToString()};
  }
  // The remote image store's volume `name` deleted, or (`cut_short`) replaced by 4 KiB of it,
  // as an upload cut short leaves it; through a connection of our own.
  Status ChangeStoreVolume(const std::string& name, bool cut_short) {
    const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
    WARREN_ASSIGN_OR_RETURN(ConnectHandle conn, OpenLibvirt(env.uri));
    const std::string path = env.data_dir + "/images/" + name;
    StorageVolHandle vol(virStorageVolLookupByPath(conn.get(), path.c_str()));
    if (!vol) return LibvirtError("looking up " + path);
    StoragePoolHandle pool(virStoragePoolLookupByVolume(vol.get()));
    if (!pool) return LibvirtError("finding the pool of " + path);
    if (virStorageVolDelete(vol.get(), 0) < 0) return LibvirtError("deleting " + path);
    if (!cut_short) return Status::Ok();
    const std::string xml = "<volume><name>" + name +
                            "</name><capacity unit='bytes'>4096</capacity>"
                            "<target><format type='raw'/></target></volume>";
    StorageVolHandle small(virStorageVolCreateXML(pool.get(), xml.c_str(), 0));
    if (!small) return LibvirtError("creating " + path);
    return Status::Ok();
  }
  Result<std::string> WaitForConsole(const std::string& id, std::string_view text) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::chrono::steady_clock::now() < deadline) {
      WARREN_ASSIGN_OR_RETURN(out, host_->Console(id, 2000));
      if (out.find(text) != std::string::npos) return out;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return Timeout("no '" + std::string(text) + "' on the console of " + id + ":\n" + out);
  }

  std::unique_ptr<LibvirtHost> host_;
  std::string image_;
  std::vector<std::string> local_images_before_;
};

TEST(RemoteUriTest, TellsRemoteFromLocal) {
  for (const char* uri : {"qemu+ssh://root@h2/system", "qemu+tls://h3/system", "qemu://h3/system",
                          "qemu+tcp://10.0.0.2:16509/system", "qemu+ssh://h2/system?keyfile=/k",
                          "qemu+libssh2://root@h/system"}) {
    EXPECT_TRUE(IsRemoteLibvirtUri(uri)) << uri;
  }
  for (const char* uri : {"qemu:///system", "qemu+unix:///system", "qemu:///session",
                          "test:///default", "qemu:///system?socket=/run/x.sock", "default"}) {
    EXPECT_FALSE(IsRemoteLibvirtUri(uri)) << uri;
  }
}

// The image goes to the host once, however many Creates race for it; a second host object
// finds it there; an upload cut short (no mark) or a file cut short never counts.
TEST_F(RemoteHostTest, ImagesAreUploadedOnceAndKnownPerHost) {
  ASSERT_TRUE(host_->remote());
  Result<std::vector<std::string>> before = host_->Images();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const bool had = std::count(before->begin(), before->end(), image_) > 0;
  if (had) {  // an earlier run of this fixture: start from nothing
    ASSERT_TRUE(ChangeStoreVolume(image_ + ".ready", /*cut_short=*/false).ok());
    EXPECT_EQ(host_->Images()->size(), before->size() - 1);
  }
  Status results[3];
  std::vector<std::thread> racers;
  for (int i = 0; i < 3; ++i) {
    racers.emplace_back(
        [&, i] { results[i] = host_->Create(Spec("aaaa000" + std::to_string(i + 1))); });
  }
  for (std::thread& t : racers) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(host_->image_uploads(), 1);
  const ImageUpload up = host_->last_image_upload();
  std::fprintf(stderr, "[timing] uploaded %s (%.1f MiB) in %.2f s: %.1f MiB/s over %s\n",
               image_.c_str(), up.bytes / 1048576.0, up.seconds,
               up.seconds > 0 ? up.bytes / 1048576.0 / up.seconds : 0.0,
               GetRemoteLibvirtEnv().uri.substr(0, GetRemoteLibvirtEnv().uri.find(':')).c_str());
  Result<std::vector<std::string>> after = host_->Images();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(std::count(after->begin(), after->end(), image_), 1);

  LibvirtHost second(GetRemoteLibvirtEnv().HostOptions());
  ASSERT_TRUE(second.Create(Spec("aaaa0004")).ok());
  EXPECT_EQ(second.image_uploads(), 0);
  for (const char* id : {"aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"}) {
    EXPECT_EQ(host_->Inspect(id)->state, VmState::kRunning) << id;
    EXPECT_TRUE(host_->Destroy(id).ok()) << id;
  }

  // A file cut short: not present, uploaded again whole.
  Status cut = ChangeStoreVolume(image_ + "." + std::string(kImageKernelFile), true);
  ASSERT_TRUE(cut.ok()) << cut.ToString();
  Result<std::vector<std::string>> cut_images = host_->Images();
  ASSERT_TRUE(cut_images.ok()) << cut_images.status().ToString();
  EXPECT_EQ(std::count(cut_images->begin(), cut_images->end(), image_), 0);
  LibvirtHost third(GetRemoteLibvirtEnv().HostOptions());
  ASSERT_TRUE(third.Create(Spec("aaaa0005")).ok());
  EXPECT_EQ(third.image_uploads(), 1);
  Result<std::vector<std::string>> again = host_->Images();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(std::count(again->begin(), again->end(), image_), 1);
  EXPECT_TRUE(host_->Destroy("aaaa0005").ok());

  // An image neither side has.
  VmSpec missing = Spec("aaaa0007");
  missing.image = "nosuch@1";
  EXPECT_EQ(host_->Create(missing).code(), Code::kNotFound);
  missing.image = "../x@1";
  EXPECT_EQ(host_->Create(missing).code(), Code::kInvalidArgument);
  EXPECT_EQ(host_->Inspect("aaaa0007").status().code(), Code::kNotFound);
}

Result<double> SshBannerMs(LibvirtHost& host, const std::string& id);

// The whole life of VMs on the remote host, their files there, and nothing left after.
TEST_F(RemoteHostTest, VmsLiveAndDieOnTheRemoteHost) {
  Result<HostCapacity> cap = host_->Capacity();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_GT(cap->cpu_cores, 0);
  EXPECT_LT(cap->disk_free_bytes, INT64_MAX);  // read through the pool, not statvfs here
  EXPECT_GT(cap->disk_free_bytes, 0);

  ASSERT_TRUE(host_->Create(Spec("bbbb0001")).ok());
  Result<VmInfo> info = host_->Inspect("bbbb0001");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, VmState::kRunning);
  EXPECT_EQ(info->image, image_);
  EXPECT_EQ(info->disk_layers, 1);
  Result<std::vector<std::string>> chain = host_->DiskChain("bbbb0001");
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  ASSERT_EQ(chain->size(), 2u);
  const std::string data = GetRemoteLibvirtEnv().data_dir;
  EXPECT_TRUE(chain->at(0).starts_with(data + "/disks/")) << chain->at(0);
  EXPECT_EQ(chain->at(1), data + "/images/" + image_ + ".rootfs.qcow2");
  // The files are where the remote host keeps them (the fixture's private directory).
  const std::string files = Env("WARREN_TEST_REMOTE_FILES");
  if (!files.empty()) {
    EXPECT_TRUE(fs::exists(files + "/vms/bbbb0001/seed.img"));
    EXPECT_TRUE(fs::exists(files + "/images/" + image_ + ".ready"));
    EXPECT_TRUE(fs::exists(files + chain->at(0).substr(data.size())));
  }

  Result<std::vector<VmInfo>> list = host_->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "bbbb0001");
  Result<std::string> boot = WaitForConsole("bbbb0001", "warren-hostkey");
  EXPECT_TRUE(boot.ok()) << boot.status().ToString();

  ASSERT_TRUE(host_->Rename("bbbb0001", "far-away").ok());
  EXPECT_EQ(host_->Inspect("bbbb0001")->name, "far-away");
  ASSERT_TRUE(host_->Pause("bbbb0001").ok());
  EXPECT_EQ(host_->Inspect("bbbb0001")->state, VmState::kPaused);
  ASSERT_TRUE(host_->Resume("bbbb0001").ok());
  ASSERT_TRUE(host_->Stop("bbbb0001").ok());
  EXPECT_EQ(host_->Inspect("bbbb0001")->state, VmState::kStopped);
  ResizeSpec grow;
  grow.disk_gib = 2;
  Result<ResizeOutcome> grown = host_->Resize("bbbb0001", grow);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_TRUE(grown->disk_grown);
  EXPECT_EQ(host_->Inspect("bbbb0001")->disk_gib, 2);
  ASSERT_TRUE(host_->Start("bbbb0001").ok());
  EXPECT_EQ(host_->Inspect("bbbb0001")->state, VmState::kRunning);
  Result<bool> plugged = host_->SetNetwork("bbbb0001", Egress::kAll);
  ASSERT_TRUE(plugged.ok()) << plugged.status().ToString();

  // cp on the host holding the disk chain: both run on overlays over the frozen top.
  VmSpec copy = Spec("bbbb0002");
  copy.disk_gib = 2;
  ASSERT_TRUE(host_->Copy("bbbb0001", copy).ok());
  EXPECT_EQ(host_->Inspect("bbbb0002")->state, VmState::kRunning);
  EXPECT_EQ(host_->Inspect("bbbb0002")->disk_layers, 2);
  EXPECT_EQ(host_->Inspect("bbbb0001")->disk_layers, 2);
  EXPECT_EQ(host_->DiskChain("bbbb0002")->at(1), host_->DiskChain("bbbb0001")->at(1));
  Result<std::string> copy_boot = WaitForConsole("bbbb0002", "warren-hostkey");
  EXPECT_TRUE(copy_boot.ok()) << copy_boot.status().ToString();

  // cp --live on the remote host: the source's memory written in the copy's directory there,
  // restored in place and deleted at once. The copy runs (its sshd, restored, answers on its
  // channel) with a MAC of its own, on an overlay over the source's frozen top, and the
  // source runs on, one layer deeper.
  VmSpec live = Spec("bbbb0003");
  live.egress = Egress::kAll;  // the source got a network device above; the copy keeps it
  const auto l0 = std::chrono::steady_clock::now();
  Result<RestoredVm> copied = host_->CopyLive("bbbb0001", live);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  const double live_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - l0).count();
  EXPECT_EQ(host_->Inspect("bbbb0003")->state, VmState::kRunning);
  EXPECT_EQ(host_->Inspect("bbbb0001")->state, VmState::kRunning);
  EXPECT_EQ(host_->Inspect("bbbb0003")->name, "bbbb0003");
  EXPECT_EQ(host_->DiskChain("bbbb0003")->at(1), host_->DiskChain("bbbb0001")->at(1));
  EXPECT_NE(host_->DiskChain("bbbb0003")->at(0), host_->DiskChain("bbbb0001")->at(0));
  EXPECT_EQ(copied->mac.size(), 17u) << copied->mac;
  EXPECT_EQ(MacsOf("bbbb0003"), std::vector<std::string>{copied->mac});
  ASSERT_EQ(MacsOf("bbbb0001").size(), 1u);
  EXPECT_NE(MacsOf("bbbb0001")[0], copied->mac);
  EXPECT_TRUE(copied->host_key_pub.starts_with("ssh-ed25519 ")) << copied->host_key_pub;
  Result<double> live_banner = SshBannerMs(*host_, "bbbb0003");
  EXPECT_TRUE(live_banner.ok()) << live_banner.status().ToString();
  std::fprintf(stderr, "[timing] remote live copy: %.2f s, its sshd answered %.0f ms after\n",
               live_s, live_banner.ok() ? *live_banner : -1.0);
  for (const std::string& vol : Look().volumes) {
    EXPECT_FALSE(vol.ends_with("/live.save")) << vol;  // the memory went once restored
  }
  if (!files.empty()) {
    EXPECT_TRUE(fs::exists(files + "/vms/bbbb0003/seed.img"));
    EXPECT_FALSE(fs::exists(files + "/vms/bbbb0003/live.save"));
  }
  // A failure half-way (here the copy's seed cannot be built: a host object whose mkfs fails;
  // the copy's files are made before the source is snapshotted, so it is not) leaves nothing
  // of the copy there — no domain, directory, memory file, disk layer or pool — and the source
  // runs on, on the chain it had.
  Result<std::vector<std::string>> chain_before = host_->DiskChain("bbbb0001");
  ASSERT_TRUE(chain_before.ok()) << chain_before.status().ToString();
  {
    LibvirtHostOptions broken = GetRemoteLibvirtEnv().HostOptions();
    broken.mkfs = "false";
    LibvirtHost failing(broken);
    VmSpec cut = Spec("bbbb0005");
    cut.egress = Egress::kAll;
    Result<RestoredVm> failed = failing.CopyLive("bbbb0001", cut);
    EXPECT_FALSE(failed.ok());
    EXPECT_NE(failed.status().message().find("mkfs"), std::string::npos)
        << failed.status().ToString();
  }
  EXPECT_EQ(host_->Inspect("bbbb0005").status().code(), Code::kNotFound);
  EXPECT_EQ(host_->Inspect("bbbb0001")->state, VmState::kRunning);
  EXPECT_EQ(host_->DiskChain("bbbb0003")->at(1), host_->DiskChain("bbbb0001")->at(1));
  EXPECT_EQ(*host_->DiskChain("bbbb0001"), *chain_before);
  Remote after_failure = Look();
  EXPECT_EQ(after_failure.domains.size(), 3u);
  for (const std::string& pool : after_failure.pools) {
    EXPECT_EQ(pool.find("bbbb0005"), std::string::npos) << pool;
  }
  for (const std::string& vol : after_failure.volumes) {
    EXPECT_EQ(vol.find("bbbb0005"), std::string::npos) << vol;
    EXPECT_FALSE(vol.ends_with("/live.save")) << vol;
  }
  if (!files.empty()) EXPECT_FALSE(fs::exists(files + "/vms/bbbb0005"));
  Result<double> source_banner = SshBannerMs(*host_, "bbbb0001");
  EXPECT_TRUE(source_banner.ok()) << source_banner.status().ToString();

  // Refused, nothing of a copy made: onto an existing VM, of a paused source.
  EXPECT_EQ(host_->CopyLive("bbbb0001", live).status().code(), Code::kConflict);
  ASSERT_TRUE(host_->Pause("bbbb0001").ok());
  EXPECT_EQ(host_->CopyLive("bbbb0001", Spec("bbbb0004")).status().code(), Code::kConflict);
  ASSERT_TRUE(host_->Resume("bbbb0001").ok());
  EXPECT_EQ(host_->List()->size(), 3u);

  // Gone without a trace: no domain, no disk, no VM directory, no pool but the image store.
  ASSERT_TRUE(host_->Destroy("bbbb0001").ok());
  EXPECT_EQ(host_->Inspect("bbbb0002")->state, VmState::kRunning);  // its chain stays
  ASSERT_TRUE(host_->Destroy("bbbb0002").ok());
  EXPECT_EQ(host_->Inspect("bbbb0003")->state, VmState::kRunning);  // so does the live copy's
  ASSERT_TRUE(host_->Destroy("bbbb0003").ok());
  Result<int> collected = host_->RemoveUnusedDisks();
  ASSERT_TRUE(collected.ok()) << collected.status().ToString();
  Remote left = Look();
  EXPECT_TRUE(left.domains.empty());
  ExpectOnlyHostWidePools(left);
  for (const std::string& vol : left.volumes) {  // no volume but the image store's
    EXPECT_NE(vol.find("images-"), std::string::npos) << vol;
  }
  if (!files.empty()) {
    EXPECT_EQ(Tree(files + "/vms"), std::vector<std::string>{});
    EXPECT_EQ(Tree(files + "/disks"), std::vector<std::string>{});
  }
}

// The guest's control sshd greeting a client through a fresh control channel of `id`, in
// milliseconds (sshd speaks once the client's banner arrived).
Result<double> SshBannerMs(LibvirtHost& host, const std::string& id) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::seconds(60);
  Result<UniqueFd> fd = Unavailable("not dialled yet");
  while (std::chrono::steady_clock::now() < deadline) {
    fd = host.DialControl(id);
    if (fd.ok() || fd.status().code() != Code::kUnavailable) break;  // busy: retried
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!fd.ok()) return fd.status();
  const std::string hello = "SSH-2.0-warren_test\r\n";
  if (::send(fd->get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello.size())) {
    return Internal("sending the banner");
  }
  std::string got;
  while (got.find("SSH-2.0-") == std::string::npos || got.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Timeout("no banner from " + id + " (got '" + got + "')");
    pollfd p{fd->get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[256];
    const ssize_t n = ::recv(fd->get(), buf, sizeof buf, 0);
    if (n <= 0) return Unavailable("the channel of " + id + " closed (got '" + got + "')");
    got.append(buf, static_cast<size_t>(n));
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Templates on the remote host (libvirt_host_remote_templates.cc): a running VM saved there
// (its memory never leaves that host) as two volumes; a clone restored from a copy made
// there with the header rewritten in place answers on its channel, and the copy is gone; the
// base survives a disk collection; a damaged save image is refused Unavailable (callers
// boot); removed, nothing of the template is left there.
TEST_F(RemoteHostTest, TemplatesAreSavedAndClonedOnTheRemoteHost) {
  const std::string files = Env("WARREN_TEST_REMOTE_FILES");
  const VmSpec maker = Spec("eeee0001");
  ASSERT_TRUE(host_->Create(maker).ok());
  ASSERT_TRUE(SshBannerMs(*host_, "eeee0001").ok());  // booted: its sshd answers
  Result<std::vector<TemplateInfo>> none = host_->Templates();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  const auto s0 = std::chrono::steady_clock::now();
  Status saved = host_->SaveTemplate("eeee0001", "tag-1");
  ASSERT_TRUE(saved.ok()) << saved.ToString();
  const double save_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  EXPECT_EQ(host_->Inspect("eeee0001").status().code(), Code::kNotFound)
      << "it became the template";
  Result<std::vector<TemplateInfo>> one = host_->Templates();
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_TRUE((*one)[0].shape == ShapeOf(maker));
  EXPECT_EQ((*one)[0].tag, "tag-1");
  EXPECT_GT((*one)[0].bytes, 0);
  if (!files.empty()) {
    std::vector<std::string> kept = Tree(files + "/templates");
    ASSERT_EQ(kept.size(), 2u) << ::testing::PrintToString(kept);
    EXPECT_TRUE(kept[0].ends_with(".json") && kept[1].ends_with(".save"))
        << ::testing::PrintToString(kept);
  }

  // A clone runs and answers on its channel (the contract test, vm_host_contract_test.cc,
  // checks identities and shapes on this host too); the copy its restore made is gone.
  const auto r0 = std::chrono::steady_clock::now();
  Result<RestoredVm> clone = host_->CreateFromTemplate(Spec("eeee0002"));
  ASSERT_TRUE(clone.ok()) << clone.status().ToString();
  const double restore_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  Result<double> banner = SshBannerMs(*host_, "eeee0002");
  EXPECT_TRUE(banner.ok()) << banner.status().ToString();
  std::fprintf(stderr, "[timing] remote template: saved in %.2f s, a clone restored in %.2f s\n",
               save_s, restore_s);
  if (!files.empty()) EXPECT_FALSE(fs::exists(files + "/vms/eeee0002/restore.save"));
  // The base outlives its clone and a collection: another restores after it is gone.
  ASSERT_TRUE(host_->Destroy("eeee0002").ok());
  Result<int> collected = host_->RemoveUnusedDisks();
  ASSERT_TRUE(collected.ok()) << collected.status().ToString();
  Result<RestoredVm> later = host_->CreateFromTemplate(Spec("eeee0004"));
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_TRUE(SshBannerMs(*host_, "eeee0004").ok());
  ASSERT_TRUE(host_->Destroy("eeee0004").ok());

  // A damaged save image is refused, Unavailable (callers boot instead), leaving no VM.
  {
    const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
    Result<ConnectHandle> conn = OpenLibvirt(env.uri);
    ASSERT_TRUE(conn.ok());
    const std::string dir = env.data_dir + "/templates";
    StoragePoolHandle pool(virStoragePoolLookupByTargetPath(conn->get(), dir.c_str()));
    ASSERT_TRUE(pool) << "no pool over " << dir;
    virStorageVolPtr* vols = nullptr;
    const int n = virStoragePoolListAllVolumes(pool.get(), &vols, 0);
    std::string save;
    for (int i = 0; i < n; ++i) {
      StorageVolHandle v(vols[i]);
      std::string name = virStorageVolGetName(v.get());
      if (name.ends_with(".save")) save = name;
    }
    free(vols);  // NOLINT: allocated by libvirt
    ASSERT_FALSE(save.empty());
    StorageVolHandle vol(virStorageVolLookupByName(pool.get(), save.c_str()));
    ASSERT_TRUE(WriteVolumeBytes(conn->get(), vol.get(), 0, "NotASaveImage!!!", save).ok());
  }
  Result<RestoredVm> refused = host_->CreateFromTemplate(Spec("eeee0006"));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  EXPECT_EQ(host_->Inspect("eeee0006").status().code(), Code::kNotFound);

  // Removed: nothing of it is left there once collected.
  ASSERT_TRUE(host_->RemoveTemplate(ShapeOf(maker)).ok());
  EXPECT_TRUE(host_->Templates()->empty());
  EXPECT_EQ(host_->RemoveTemplate(ShapeOf(maker)).code(), Code::kNotFound);
  collected = host_->RemoveUnusedDisks();
  ASSERT_TRUE(collected.ok()) << collected.status().ToString();
  if (!files.empty()) {
    EXPECT_EQ(Tree(files + "/templates"), std::vector<std::string>{});
    EXPECT_EQ(Tree(files + "/disks"), std::vector<std::string>{});
  }
}

// Each VM's control channel is on a libvirt connection of its own. libvirtd stops reading a
// client connection while one of its streams has packets queued for a guest that does not
// drain its port (here: a paused VM whose channel is pushed into), so on a shared connection
// every other VM's channel of that host, and the host's own calls, would wait for the guest.
TEST_F(RemoteHostTest, AGuestThatStopsReadingStallsNoOtherVmsChannel) {
  for (const char* id : {"dddd0001", "dddd0002"}) {
    ASSERT_TRUE(host_->Create(Spec(id)).ok()) << id;
  }
  for (const char* id : {"dddd0001", "dddd0002"}) {
    Result<std::string> boot = WaitForConsole(id, "warren-hostkey");
    ASSERT_TRUE(boot.ok()) << boot.status().ToString();
  }
  Result<double> before = SshBannerMs(*host_, "dddd0002");
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  Result<UniqueFd> stalled = host_->DialControl("dddd0001");
  ASSERT_TRUE(stalled.ok()) << stalled.status().ToString();
  ASSERT_TRUE(host_->Pause("dddd0001").ok());
  std::atomic<bool> stop{false};
  std::atomic<size_t> pushed{0};
  const int fd = stalled->get();
  std::thread pusher([fd, &stop, &pushed] {
    const std::string junk(size_t{64} * 1024, 'j');
    while (!stop.load() && pushed.load() < (size_t{64} << 20)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::send(fd, junk.data(), junk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) pushed.fetch_add(static_cast<size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(5));  // the daemon's queue fills
  const size_t stuck = pushed.load();
  Result<double> during = SshBannerMs(*host_, "dddd0002");
  const auto t0 = std::chrono::steady_clock::now();
  Result<VmInfo> info = host_->Inspect("dddd0002");
  const double inspect_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  pusher.join();
  stalled->reset();
  ASSERT_TRUE(host_->Resume("dddd0001").ok());
  std::printf(
      "[timing] remote channel stall: %.1f MiB pushed into the paused VM; another VM's "
      "sshd banner %.0f ms before, %.0f ms during; Inspect during %.0f ms\n",
      stuck / 1048576.0, *before, during.ok() ? *during : -1.0, inspect_ms);
  EXPECT_GT(stuck, kChannelBufferBytes);  // more than ours: the stall reached libvirt
  ASSERT_TRUE(during.ok()) << during.status().ToString();
  EXPECT_LT(*during, 5000);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_LT(inspect_ms, 3000);
  // And the stalled VM answers again once it runs, on a fresh channel.
  Result<double> after = SshBannerMs(*host_, "dddd0001");
  EXPECT_TRUE(after.ok()) << after.status().ToString();
}

// The host's image store follows warren's catalog: a version the catalog dropped leaves the
// host at the next collection once no VM there uses it (a stopped VM keeps it); the catalog's
// versions stay. On a catalog of this test's own: the image under two more versions.
TEST_F(RemoteHostTest, ImagesTheCatalogDroppedLeaveTheHostOnceUnused) {
  const RealLibvirtEnv& env = GetRemoteLibvirtEnv();
  const fs::path catalog =
      fs::path(env.images_dir).parent_path() / ("catalog-" + std::to_string(::getpid()));
  fs::remove_all(catalog);
  const std::string name = image_.substr(0, image_.find('@'));
  const std::string one = name + "@1", two = name + "@2";
  for (const std::string& ref : {image_, one, two}) {  // the env's own version stays in it
    fs::create_directories(catalog / ref);
    for (const auto& entry : fs::directory_iterator(fs::path(env.images_dir) / image_)) {
      fs::copy_file(entry.path(), catalog / ref / entry.path().filename());
    }
  }
  struct RemoveOnExit {
    fs::path p;
    ~RemoveOnExit() { fs::remove_all(p); }
  } cleanup{catalog};
  LibvirtHostOptions options = env.HostOptions();
  options.images_dir = catalog.string();
  LibvirtHost host(options);
  auto stored = [&host] {
    Result<std::vector<std::string>> refs = host.Images();
    EXPECT_TRUE(refs.ok()) << refs.status().ToString();
    return refs.ok() ? *refs : std::vector<std::string>{};
  };
  auto has = [](const std::vector<std::string>& refs, const std::string& ref) {
    return std::find(refs.begin(), refs.end(), ref) != refs.end();
  };

  ASSERT_TRUE(host.Create(TinyVmSpec("eeee0001", one)).ok());
  ASSERT_TRUE(host.Create(TinyVmSpec("eeee0002", two)).ok());
  ASSERT_TRUE(host.Stop("eeee0002").ok());
  ASSERT_TRUE(host.Destroy("eeee0001").ok());
  ASSERT_TRUE(host.RemoveUnusedDisks().ok());
  EXPECT_TRUE(has(stored(), one));  // still in the catalog
  EXPECT_TRUE(has(stored(), two));

  fs::remove_all(catalog / one);
  fs::remove_all(catalog / two);
  ASSERT_TRUE(host.RemoveUnusedDisks().ok());
  std::vector<std::string> left = stored();
  EXPECT_FALSE(has(left, one));  // dropped, unused: gone
  EXPECT_TRUE(has(left, two));   // dropped, but the stopped VM's
  EXPECT_TRUE(has(left, image_));
  const std::string files = Env("WARREN_TEST_REMOTE_FILES");
  if (!files.empty()) {
    for (const std::string& f : Tree(files + "/images")) {
      EXPECT_EQ(f.find(one + "."), std::string::npos) << f;
    }
  }
  // The VM boots again from its version, stopped or not.
  ASSERT_TRUE(host.Start("eeee0002").ok());
  ASSERT_TRUE(host.Destroy("eeee0002").ok());
  ASSERT_TRUE(host.RemoveUnusedDisks().ok());
  left = stored();
  EXPECT_FALSE(has(left, two));
  EXPECT_TRUE(has(left, image_));
}

// A VM whose Create was cut short (files, no domain) is cleaned up by the next collection,
// through the API alone.
TEST_F(RemoteHostTest, LeftoversOfAVmAreCollected) {
  ASSERT_TRUE(host_->Create(Spec("cccc0001")).ok());
  // Undefine it behind warren's back, as if it had died between files and domain.
  {
    Result<ConnectHandle> conn = OpenLibvirt(GetRemoteLibvirtEnv().uri);
    ASSERT_TRUE(conn.ok());
    DomainHandle dom(
        virDomainLookupByName(conn->get(), (GetRemoteLibvirtEnv().prefix + "cccc0001").c_str()));
    ASSERT_TRUE(dom);
    virDomainDestroy(dom.get());
    ASSERT_EQ(virDomainUndefine(dom.get()), 0);
  }
  Result<int> collected = host_->RemoveUnusedDisks();
  ASSERT_TRUE(collected.ok()) << collected.status().ToString();
  EXPECT_EQ(*collected, 1);
  Remote left = Look();
  EXPECT_TRUE(left.domains.empty());
  ExpectOnlyHostWidePools(left);
  const std::string files = Env("WARREN_TEST_REMOTE_FILES");
  if (!files.empty()) EXPECT_FALSE(fs::exists(files + "/vms/cccc0001"));
}

}  // namespace
}  // namespace warren
