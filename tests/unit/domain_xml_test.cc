// The XML warren writes for libvirt is pinned byte for byte by tests/golden/*.xml (the way
// libvirt's own qemuxml2argvtest pins generated command lines); golden_file.h says how to
// rewrite them after an intended change.
#include "vmhost/domain_xml.h"

#include <gtest/gtest.h>

#include "tests/unit/golden_file.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

DomainConfig Typical() {
  DomainConfig c;
  c.id = "0a1b2c3d4e5f";
  c.name = "web-1";
  c.uuid = "6f2c1a9e-3b47-4d55-9a0e-1c2d3e4f5a6b";
  c.image = "debian@2025.11.1";
  c.kvm = false;
  c.cpus = 2;
  c.memory_mib = 2048;
  c.kernel = "/var/lib/warren/images/debian@2025.11.1/vmlinuz";
  c.initrd = "/var/lib/warren/images/debian@2025.11.1/initrd.img";
  c.cmdline = "console=ttyS0 root=/dev/vda rw quiet";
  c.disk = "/var/lib/warren/vms/0a1b2c3d4e5f/disk.qcow2";
  c.seed = "/var/lib/warren/vms/0a1b2c3d4e5f/seed.img";
  c.console_log = "/var/lib/warren/vms/0a1b2c3d4e5f/console.log";
  c.control_socket = "/var/lib/warren/vms/0a1b2c3d4e5f/control.sock";
  c.identity_socket = "/var/lib/warren/vms/0a1b2c3d4e5f/identity.sock";
  c.egress = Egress::kAll;
  c.qemu_user = {64055, 64055};  // Debian's libvirt-qemu, as the daemon's capabilities name it
  return c;
}

TEST(DomainXmlTest, TcgWithFullEgress) {
  ExpectGolden("domain_tcg_full.xml", DomainXml(Typical()));
}

TEST(DomainXmlTest, KvmWithoutNetwork) {
  DomainConfig c = Typical();
  c.kvm = true;
  c.cpus = 4;
  c.memory_mib = 8192;
  c.egress = Egress::kNone;
  ExpectGolden("domain_kvm_none.xml", DomainXml(c));
}

TEST(DomainXmlTest, EveryStringIsEscaped) {
  DomainConfig c = Typical();
  c.name = "a<b>&'\"";
  c.image = "we<ird>@1&2";
  c.kernel = "/images/it's & \"that\"/vmlinuz";
  c.cmdline = "console=ttyS0 x=<&>";
  c.disk = "/v/'quote'/disk.qcow2";
  c.control_socket = "/v/</control.sock";
  std::string xml = DomainXml(c);
  ExpectGolden("domain_escaping.xml", xml);
  // Nothing from the config appears unescaped.
  EXPECT_EQ(xml.find("it's"), std::string::npos);
  EXPECT_EQ(xml.find("a<b>"), std::string::npos);
  EXPECT_EQ(xml.find("x=<&>"), std::string::npos);
}

TEST(DomainXmlTest, FixedFacts) {
  std::string xml = DomainXml(Typical());
  EXPECT_NE(xml.find("<domain type='qemu' "
                     "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"),
            std::string::npos);
  // libvirt's CPU read-back, one qom-get per feature, is off (domain_xml.cc says why).
  EXPECT_NE(xml.find("<qemu:capabilities>\n    <qemu:del capability='cpu-unavailable-features'/>"),
            std::string::npos);
  EXPECT_NE(xml.find("<name>warren-0a1b2c3d4e5f</name>"), std::string::npos);
  EXPECT_NE(xml.find("quiet warren.hostname=web-1</cmdline>"), std::string::npos);
  EXPECT_NE(xml.find("<target type='virtio' name='warren.control'/>"), std::string::npos);
  EXPECT_NE(xml.find("<on_crash>destroy</on_crash>"), std::string::npos);
  EXPECT_NE(xml.find("<memballoon model='none'/>"), std::string::npos);
  EXPECT_EQ(xml.find("<graphics"), std::string::npos);
  EXPECT_NE(xml.find("<interface type='user'>"), std::string::npos);
  DomainConfig sealed = Typical();
  sealed.egress = Egress::kNone;
  EXPECT_EQ(DomainXml(sealed).find("<interface"), std::string::npos);
}

// Shares follow the vCPUs; each vCPU and QEMU's own threads are capped (domain_xml.h).
TEST(DomainXmlTest, EveryDomainGetsAFairCpuShare) {
  DomainConfig c = Typical();
  c.cpus = 3;
  const std::string xml = DomainXml(c);
  EXPECT_NE(xml.find("<shares>300</shares>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<period>100000</period>\n    <quota>80000</quota>"), std::string::npos);
  // The emulator cap is put on live once the domain runs: in the definition it would slow
  // every start (libvirt's start-up queries wait on QEMU's capped main thread).
  EXPECT_EQ(xml.find("emulator_quota"), std::string::npos);
  EXPECT_EQ(CpuSharesFor(1), 100);
  EXPECT_EQ(CpuSharesFor(16), 1600);
}

// libvirt relabels nothing of a domain whose QEMU user warren knows (it owns the files
// itself); without one, libvirt's default stays.
TEST(DomainXmlTest, AKnownQemuUserMeansNoRelabelling) {
  const std::string xml = DomainXml(Typical());
  EXPECT_NE(xml.find("<seclabel type='static' model='dac' relabel='no'>\n"
                     "    <label>+64055:+64055</label>"),
            std::string::npos)
      << xml;
  DomainConfig c = Typical();
  c.qemu_user = {};
  EXPECT_EQ(DomainXml(c).find("<seclabel"), std::string::npos);
}

// TCG's translated code is bounded (domain_xml.h kTcgTbCacheMib); KVM has none to bound.
TEST(DomainXmlTest, TcgDomainsGetABoundedTranslationCache) {
  const std::string tcg = DomainXml(Typical());
  EXPECT_NE(
      tcg.find("<features>\n    <acpi/>\n    <tcg>\n      <tb-cache unit='MiB'>128</tb-cache>"),
      std::string::npos)
      << tcg;
  DomainConfig kvm = Typical();
  kvm.kvm = true;
  EXPECT_EQ(DomainXml(kvm).find("<tcg>"), std::string::npos);
  // serve --vm-tb-cache: another size, or 0 for QEMU's own.
  DomainConfig other = Typical();
  other.tb_cache_mib = 256;
  EXPECT_NE(DomainXml(other).find("<tb-cache unit='MiB'>256</tb-cache>"), std::string::npos);
  other.tb_cache_mib = 0;
  EXPECT_EQ(DomainXml(other).find("<tcg>"), std::string::npos);
}

// A fixed MAC (a clone keeps the one it was restored with) goes into the NIC; none without
// a NIC.
TEST(DomainXmlTest, AFixedMacIsTheNics) {
  DomainConfig c = Typical();
  c.mac = "52:54:00:12:34:56";
  EXPECT_NE(DomainXml(c).find("<interface type='user'>\n      <mac address='52:54:00:12:34:56'/>"),
            std::string::npos)
      << DomainXml(c);
  EXPECT_EQ(DomainXml(Typical()).find("<mac "), std::string::npos);
  c.egress = Egress::kNone;
  EXPECT_EQ(DomainXml(c).find("<mac "), std::string::npos);
}

TEST(DomainXmlTest, EmptyImageCmdlineStillNamesTheHost) {
  DomainConfig c = Typical();
  c.cmdline = "";
  EXPECT_NE(DomainXml(c).find("<cmdline>warren.hostname=web-1</cmdline>"), std::string::npos);
}

TEST(MarkupEscapeTest, EscapesAndDropsWhatXmlCannotCarry) {
  EXPECT_EQ(MarkupEscape("a&b<c>d'e\"f"), "a&amp;b&lt;c&gt;d&#39;e&quot;f");
  EXPECT_EQ(MarkupEscape(std::string("x\x01y\x1fz\tq\n", 9)), "xyz\tq\n");
  EXPECT_EQ(MarkupEscape("plain-text_1.2"), "plain-text_1.2");
}

TEST(VmMetadataXmlTest, NamespacedAndEscaped) {
  EXPECT_EQ(VmMetadataXml("abc", "x&y", "tiny@1"),
            "<warren:vm xmlns:warren='https://warren.dev/xmlns/vm/1'>\n"
            "  <warren:id>abc</warren:id>\n"
            "  <warren:name>x&amp;y</warren:name>\n"
            "  <warren:image>tiny@1</warren:image>\n"
            "</warren:vm>");
}

TEST(VmMetadataXmlTest, ElementForSetMetadataHasNoPrefix) {
  EXPECT_EQ(VmMetadataElement("abc", "x&y", "tiny@1"),
            "<vm><id>abc</id><name>x&amp;y</name><image>tiny@1</image></vm>");
  EXPECT_EQ(RunMetadataElement(1764590400), "<run started='1764590400'/>");
}

TEST(StorageXmlTest, SnapshotPoolAndVolumes) {
  ExpectGolden("snapshot_vda.xml",
               DiskSnapshotXml("/var/lib/warren/disks/0a1b2c3d-5e6f7a8b.qcow2"));
  // cp --live: the memory too, into a file of its own.
  ExpectGolden("snapshot_vda_memory.xml",
               DiskSnapshotXml("/var/lib/warren/disks/0a1b2c3d-5e6f7a8b.qcow2",
                               "/var/lib/warren/tmp/live-0a1b2c3d.save"));
  ExpectGolden("pool_dir.xml", DirPoolXml("warren-disks-1234abcd", "/var/lib/warren/disks"));
  // The overlay for a known QEMU user is that user's; the seed here is for an unknown one.
  ExpectGolden("volume_overlay.xml",
               OverlayVolumeXml("0a1b2c3d-1a2b3c4d.qcow2", 10737418240,
                                "/var/lib/warren/images/debian@2025.11.1/rootfs.qcow2",
                                QemuUser{64055, 64055}));
  ExpectGolden("volume_raw.xml", RawVolumeXml("seed.img", 1048576));
}

TEST(StorageXmlTest, PathsAreEscaped) {
  const std::string odd = "/v/it's <&> \"here\"/x.qcow2";
  for (const std::string& xml : {DiskSnapshotXml(odd), DiskSnapshotXml("/d/top.qcow2", odd),
                                 DirPoolXml("p", odd), OverlayVolumeXml("n", 1, odd)}) {
    EXPECT_EQ(xml.find(odd), std::string::npos) << xml;
    EXPECT_NE(xml.find(MarkupEscape(odd)), std::string::npos) << xml;
  }
}

VmSpec GoodSpec() {
  VmSpec s;
  s.id = "abcd1234";
  s.image = "tiny@1";
  return s;
}

TEST(ValidateVmSpecTest, NameEnvAndSeedLimits) {
  EXPECT_TRUE(ValidateVmSpec(GoodSpec()).ok());
  VmSpec s = GoodSpec();
  s.name = "web-1";
  EXPECT_TRUE(ValidateVmSpec(s).ok());
  s.name = "Web_1";
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s.name = "-web";
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s.name = std::string(64, 'a');
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);

  s = GoodSpec();
  s.env = {{"GOOD_1", "value with spaces"}};
  EXPECT_TRUE(ValidateVmSpec(s).ok());
  s.env = {{"1BAD", "v"}};
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s.env = {{"K", "two\nlines"}};
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s.env = {{"K", std::string("nul\0byte", 8)}};
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  // In all, well inside the seed image every VM gets (seed_image.h).
  s.env.assign(200, {"K", std::string(4000, 'v')});
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s.env.assign(100, {"K", std::string(4000, 'v')});
  EXPECT_TRUE(ValidateVmSpec(s).ok());

  s = GoodSpec();
  s.setup_script = std::string(10 * 1024 + 1, 'x');
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s = GoodSpec();
  s.authorized_keys = std::string(64 * 1024 + 1, 'x');
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);
  s = GoodSpec();
  s.ssh_host_key = "private";
  EXPECT_EQ(ValidateVmSpec(s).code(), Code::kInvalidArgument);  // no public half
  s.ssh_host_key_pub = "ssh-ed25519 AAAA";
  EXPECT_TRUE(ValidateVmSpec(s).ok());
}

TEST(EgressNameTest, Names) {
  EXPECT_EQ(EgressName(Egress::kAll), "all");
  EXPECT_EQ(EgressName(Egress::kNone), "none");
}

}  // namespace
}  // namespace warren
