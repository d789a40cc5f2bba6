// The reader of libvirt's XML on what libvirt really returns: tests/golden/libvirt/ holds
// libvirt 9.0's output (virsh dumpxml, vol-dumpxml, pool-dumpxml, metadata) for a tiny VM
// after a live `cp`; edits are pinned by golden outputs next to it.
#include "vmhost/libvirt_xml.h"

#include <gtest/gtest.h>

#include "tests/unit/golden_file.h"
#include "vmhost/domain_xml.h"

namespace warren {
namespace {

constexpr char kCapture[] = "/var/lib/warren-test/capture";

std::string Disk(const std::string& name) { return std::string(kCapture) + "/disks/" + name; }

Result<DomainDefinition> ParseGolden(const std::string& name) {
  return DomainDefinition::Parse(ReadGolden(name));
}

// `var`: the parsed golden domain `name`, or the test stops.
#define PARSE_GOLDEN(var, name)                                       \
  Result<DomainDefinition> var##_parsed = ParseGolden(name);          \
  ASSERT_TRUE(var##_parsed.ok()) << var##_parsed.status().ToString(); \
  DomainDefinition& var = *var##_parsed

TEST(DomainDefinitionTest, ReadsALiveDomainAfterACopy) {
  PARSE_GOLDEN(def, "libvirt/domain_live_after_copy.xml");
  EXPECT_EQ(def.DiskSource("vda"), Disk("0a1b2c3d4e5f-5e6f7a8b.qcow2"));
  EXPECT_EQ(def.DiskSource("vdb"), std::string(kCapture) + "/vms/0a1b2c3d4e5f/seed.img");
  EXPECT_EQ(def.DiskSource("vdc"), "");
  // A running domain lists its whole chain; the seed stands alone (<backingStore/>).
  EXPECT_EQ(def.DiskBackingChain("vda"),
            (std::vector<std::string>{Disk("0a1b2c3d4e5f-1a2b3c4d.qcow2"),
                                      "/var/lib/warren-test/images/tiny@20261201/rootfs.qcow2"}));
  EXPECT_TRUE(def.DiskBackingChain("vdb").empty());
  EXPECT_EQ(def.Vcpus(), 1);
  EXPECT_EQ(def.MemoryMib(), 256);  // libvirt wrote 262144 KiB
}

TEST(DomainDefinitionTest, ReadsTheInactiveDefinition) {
  PARSE_GOLDEN(def, "libvirt/domain_inactive_after_copy.xml");
  EXPECT_EQ(def.DiskSource("vda"), Disk("0a1b2c3d4e5f-5e6f7a8b.qcow2"));
  // The snapshot recorded the layer below in the persistent definition too.
  EXPECT_EQ(def.DiskBackingChain("vda"),
            std::vector<std::string>{Disk("0a1b2c3d4e5f-1a2b3c4d.qcow2")});
}

TEST(DomainDefinitionTest, ADomainWithoutDevicesHasNoDisk) {
  // What libvirt's test driver keeps of a domain Create would make.
  PARSE_GOLDEN(def, "libvirt/domain_test_driver.xml");
  EXPECT_EQ(def.DiskSource("vda"), "");
  EXPECT_TRUE(def.DiskBackingChain("vda").empty());
  EXPECT_EQ(def.Vcpus(), 2);
  EXPECT_EQ(def.MemoryMib(), 2048);
  EXPECT_EQ(def.SetDiskSource("vda", "/x.qcow2").code(), Code::kNotFound);
}

TEST(DomainDefinitionTest, TellsWhichDataDirItsFilesAreIn) {
  PARSE_GOLDEN(def, "libvirt/domain_live_after_copy.xml");
  EXPECT_TRUE(def.MentionsPathUnder(kCapture));
  EXPECT_TRUE(def.MentionsPathUnder(std::string(kCapture) + "//"));
  EXPECT_TRUE(def.MentionsPathUnder("/var/lib/warren-test"));  // element text: the kernel
  EXPECT_FALSE(def.MentionsPathUnder("/var/lib/warren-test/capt"));
  EXPECT_FALSE(def.MentionsPathUnder("/var/lib/warren"));
  EXPECT_FALSE(def.MentionsPathUnder(std::string(kCapture) + "/vms/0a1b2c3d4e5f/seed.img"));
}

TEST(DomainDefinitionTest, ResizeEditsWhatTheNextBootGets) {
  PARSE_GOLDEN(def, "libvirt/domain_inactive_after_copy.xml");
  ASSERT_TRUE(def.SetVcpus(4).ok());
  ASSERT_TRUE(def.SetMemoryMib(1024).ok());
  EXPECT_EQ(def.Vcpus(), 4);
  EXPECT_EQ(def.MemoryMib(), 1024);
  ExpectGolden("libvirt/domain_inactive_resized.xml", def.ToXml());
  // What it writes reads back the same.
  Result<DomainDefinition> again = DomainDefinition::Parse(def.ToXml());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Vcpus(), 4);
  EXPECT_EQ(again->MemoryMib(), 1024);
}

TEST(DomainDefinitionTest, RenameRewritesOnlyTheHostname) {
  PARSE_GOLDEN(def, "libvirt/domain_inactive_after_copy.xml");
  ASSERT_TRUE(def.SetCmdlineHostname("new-name"));
  ExpectGolden("libvirt/domain_inactive_renamed.xml", def.ToXml());
  const std::string xml = def.ToXml();
  EXPECT_NE(xml.find("<cmdline>console=ttyS0 root=/dev/vda rw quiet warren.hostname=new-name"
                     "</cmdline>"),
            std::string::npos);

  PARSE_GOLDEN(other, "libvirt/domain_test_driver.xml");
  ASSERT_TRUE(other.SetCmdlineHostname("x"));
  EXPECT_NE(other.ToXml().find("warren.hostname=x</cmdline>"), std::string::npos);
}

TEST(DomainDefinitionTest, ACommandLineWithoutHostnameIsLeftAlone) {
  Result<DomainDefinition> def = DomainDefinition::Parse(
      "<domain><os><cmdline>console=ttyS0 xwarren.hostname=a</cmdline></os></domain>");
  ASSERT_TRUE(def.ok());
  const std::string before = def->ToXml();
  EXPECT_FALSE(def->SetCmdlineHostname("b"));
  EXPECT_EQ(def->ToXml(), before);
  Result<DomainDefinition> none = DomainDefinition::Parse("<domain><os/></domain>");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->SetCmdlineHostname("b"));
}

// A stopped `cp` moves the source onto its new overlay. The chain libvirt recorded for the
// old top must go: libvirt would boot the new top over it instead of reading its header.
TEST(DomainDefinitionTest, MovingADiskDropsTheRecordedChain) {
  PARSE_GOLDEN(def, "libvirt/domain_inactive_after_copy.xml");
  const std::string top = Disk("0a1b2c3d4e5f-9c0d1e2f.qcow2");
  ASSERT_TRUE(def.SetDiskSource("vda", top).ok());
  EXPECT_EQ(def.DiskSource("vda"), top);
  EXPECT_TRUE(def.DiskBackingChain("vda").empty());
  EXPECT_EQ(def.DiskSource("vdb"), std::string(kCapture) + "/vms/0a1b2c3d4e5f/seed.img");
  ExpectGolden("libvirt/domain_inactive_disk_moved.xml", def.ToXml());
}

TEST(DomainDefinitionTest, EditsAreEscapedOnTheWayOut) {
  PARSE_GOLDEN(def, "libvirt/domain_inactive_after_copy.xml");
  const std::string odd = "/v/it's <&> \"here\"/top.qcow2";
  ASSERT_TRUE(def.SetDiskSource("vda", odd).ok());
  const std::string xml = def.ToXml();
  EXPECT_EQ(xml.find(odd), std::string::npos);
  Result<DomainDefinition> again = DomainDefinition::Parse(xml);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->DiskSource("vda"), odd);
}

TEST(DomainDefinitionTest, MemoryUnits) {
  auto mib = [](const std::string& memory) {
    Result<DomainDefinition> def = DomainDefinition::Parse("<domain>" + memory + "</domain>");
    return def.ok() ? def->MemoryMib() : -1;
  };
  EXPECT_EQ(mib("<memory>524288</memory>"), 512);  // no unit: KiB
  EXPECT_EQ(mib("<memory unit='KiB'>524288</memory>"), 512);
  EXPECT_EQ(mib("<memory unit='MiB'>512</memory>"), 512);
  EXPECT_EQ(mib("<memory unit='G'>2</memory>"), 2048);
  EXPECT_EQ(mib("<memory unit='bytes'>1073741824</memory>"), 1024);
  EXPECT_EQ(mib("<memory unit='parsec'>1</memory>"), 0);
  EXPECT_EQ(mib("<memory>lots</memory>"), 0);
  EXPECT_EQ(mib(""), 0);
  Result<DomainDefinition> none = DomainDefinition::Parse("<domain/>");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->SetMemoryMib(512).code(), Code::kInternal);
  EXPECT_EQ(none->SetVcpus(2).code(), Code::kInternal);
}

TEST(DomainDefinitionTest, RefusesWhatIsNoDomain) {
  EXPECT_EQ(DomainDefinition::Parse("").status().code(), Code::kInternal);
  EXPECT_EQ(DomainDefinition::Parse("<domain>").status().code(), Code::kInternal);
  EXPECT_EQ(DomainDefinition::Parse("<pool/>").status().code(), Code::kInternal);
  // No entity is ever fetched or expanded.
  Result<DomainDefinition> xxe = DomainDefinition::Parse(
      "<!DOCTYPE domain [<!ENTITY e SYSTEM 'file:///etc/passwd'>]>"
      "<domain><os><cmdline>&e;</cmdline></os></domain>");
  if (xxe.ok()) {
    EXPECT_EQ(xxe->ToXml().find("root:"), std::string::npos);
  }
}

TEST(StorageXmlReaderTest, VolumesAndPools) {
  EXPECT_EQ(*VolumeBackingPath(ReadGolden("libvirt/volume_overlay.xml")),
            Disk("0a1b2c3d4e5f-1a2b3c4d.qcow2"));
  EXPECT_EQ(*VolumeBackingPath(ReadGolden("libvirt/volume_over_image.xml")),
            "/var/lib/warren-test/images/tiny@20261201/rootfs.qcow2");
  // What warren itself writes reads back too; a volume without backing has none.
  EXPECT_EQ(*VolumeBackingPath(OverlayVolumeXml("n", 1, "/a/b&c.qcow2")), "/a/b&c.qcow2");
  EXPECT_EQ(*VolumeBackingPath(RawVolumeXml("seed.img", 1)), "");
  EXPECT_EQ(VolumeBackingPath("<pool/>").status().code(), Code::kInternal);

  EXPECT_EQ(*PoolTargetPath(ReadGolden("libvirt/pool_dir.xml")), std::string(kCapture) + "/disks");
  EXPECT_EQ(*PoolTargetPath(DirPoolXml("p", "/x/'y'")), "/x/'y'");
  EXPECT_EQ(*PoolTargetPath("<pool type='dir'><source><path>/no</path></source></pool>"), "");
  EXPECT_EQ(PoolTargetPath("not xml").status().code(), Code::kInternal);
}

TEST(MetadataReaderTest, VmAndRun) {
  Result<VmMetadata> vm = ParseVmMetadata(ReadGolden("libvirt/metadata_vm.xml"));
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  EXPECT_EQ(vm->id, "0a1b2c3d4e5f");
  EXPECT_EQ(vm->name, "web-1");
  EXPECT_EQ(vm->image, "debian@2025.11.1");
  // What Rename hands libvirt reads back unchanged.
  vm = ParseVmMetadata(VmMetadataElement("abc", "x&y<z>", "tiny@1"));
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->name, "x&y<z>");
  vm = ParseVmMetadata("<vm><id>abc</id></vm>");
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->name, "");
  EXPECT_FALSE(ParseVmMetadata("").ok());  // no metadata at all: the caller decides

  EXPECT_EQ(*ParseRunStartedAt(ReadGolden("libvirt/metadata_run.xml")), 1764590400);
  EXPECT_EQ(*ParseRunStartedAt(RunMetadataElement(42)), 42);
  EXPECT_EQ(*ParseRunStartedAt("<run/>"), 0);
  EXPECT_EQ(*ParseRunStartedAt("<run started='soon'/>"), 0);
  EXPECT_FALSE(ParseRunStartedAt("<vm/>").ok());
}

// Domains libvirt relabels (every one defined before warren owned its files) and ours.
TEST(DomainReaderTest, DacRelabels) {
  Result<DomainDefinition> old = ParseGolden("libvirt/domain_inactive_after_copy.xml");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->DacRelabels());
  DomainConfig c;
  c.id = "0a1b2c3d4e5f";
  c.qemu_user = {64055, 64055};
  Result<DomainDefinition> ours = DomainDefinition::Parse(DomainXml(c));
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_FALSE(ours->DacRelabels());
  c.qemu_user = {};
  EXPECT_TRUE(DomainDefinition::Parse(DomainXml(c))->DacRelabels());
}

TEST(CapabilitiesReaderTest, QemuUserFromTheDacModel) {
  const std::string caps = ReadGolden("libvirt/capabilities_system.xml");
  for (const char* type : {"qemu", "kvm"}) {
    Result<QemuUser> user = ParseQemuUser(caps, type);
    ASSERT_TRUE(user.ok()) << user.status().ToString();
    EXPECT_EQ(user->uid, 64055) << type;  // Debian's libvirt-qemu
    EXPECT_EQ(user->gid, 64055) << type;
  }
  // No DAC model (the test driver, a session daemon), no such type, a label of names.
  EXPECT_FALSE(ParseQemuUser(caps, "xen")->known());
  EXPECT_FALSE(ParseQemuUser("<capabilities><host><secmodel><model>testSecurity</model>"
                             "</secmodel></host></capabilities>",
                             "qemu")
                   ->known());
  EXPECT_FALSE(ParseQemuUser("<capabilities><host><secmodel><model>dac</model><baselabel "
                             "type='qemu'>qemu:qemu</baselabel></secmodel></host></capabilities>",
                             "qemu")
                   ->known());
  EXPECT_EQ(ParseQemuUser("not xml", "qemu").status().code(), Code::kInternal);
}

}  // namespace
}  // namespace warren
