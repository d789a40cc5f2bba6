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

// Found by fuzz_libvirt_xml (tests/fuzz/regressions/libvirt_xml/): backing stores side by side
// rather than nested all go, or the old chain would stay behind the new top.
TEST(DomainDefinitionTest, MovingADiskDropsEveryRecordedBackingStore) {
  Result<DomainDefinition> def = DomainDefinition::Parse(
      "<domain><devices><disk><source/><backingStore/><backingStore><source file='a'/>"
      "</backingStore><target dev='vda'/></disk></devices></domain>");
  ASSERT_TRUE(def.ok());
  ASSERT_TRUE(def->SetDiskSource("vda", "/top.qcow2").ok());
  EXPECT_EQ(def->DiskSource("vda"), "/top.qcow2");
  EXPECT_TRUE(def->DiskBackingChain("vda").empty());
  EXPECT_EQ(def->ToXml().find("backingStore"), std::string::npos) << def->ToXml();
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

// A clone restored from a saved template (vmhost/save_image.h) starts from the XML in the
// save file's header: domain_saved.xml is that XML from a real `virsh save` of a tiny VM.
constexpr char kTemplateVm[] = "/var/lib/warren-test/savecap/vms/5a7e0c1d2b3f";
constexpr char kTemplateTop[] = "/var/lib/warren-test/savecap/disks/5a7e0c1d2b3f-top.qcow2";
constexpr char kCloneVm[] = "/var/lib/warren-test/savecap/vms/6b8f1d2e3a4c";

TEST(CloneDefinitionTest, ReadsTheSavedTemplate) {
  PARSE_GOLDEN(def, "libvirt/domain_saved.xml");
  EXPECT_EQ(def.Name(), "warren-5a7e0c1d2b3f");
  EXPECT_EQ(def.Uuid(), "143f2320-c633-43f0-b8a4-07c52903477e");
  EXPECT_EQ(def.Title(), "template-tiny");
  EXPECT_EQ(def.ConsoleLog(), std::string(kTemplateVm) + "/console.log");
  EXPECT_EQ(def.ChannelSocket(kControlChannelName), std::string(kTemplateVm) + "/control.sock");
  // Saved before domains had the identity port: the clone has none either.
  EXPECT_EQ(def.ChannelSocket(kIdentityChannelName), "");
  EXPECT_EQ(def.SetChannelSocket(kIdentityChannelName, "/x").code(), Code::kNotFound);
  EXPECT_EQ(def.DiskSource("vda"), kTemplateTop);
  EXPECT_EQ(def.InterfaceMacs(), std::vector<std::string>{"52:54:00:f3:9f:97"});
  Result<VmMetadata> vm = ParseVmMetadata(def.MetadataXml(kWarrenVmNamespace));
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  EXPECT_EQ(vm->id, "5a7e0c1d2b3f");
  EXPECT_EQ(vm->name, "template-tiny");
  EXPECT_EQ(def.MetadataXml(kWarrenRunNamespace), "");
  EXPECT_TRUE(def.MentionsPathUnder(kTemplateVm));
}

TEST(CloneDefinitionTest, EachPortHasItsOwnSocket) {
  // What DomainXml writes: the control port and the identity port, each moved on its own.
  PARSE_GOLDEN(def, "domain_tcg_full.xml");
  EXPECT_EQ(def.ChannelSocket(kControlChannelName),
            "/var/lib/warren/vms/0a1b2c3d4e5f/control.sock");
  EXPECT_EQ(def.ChannelSocket(kIdentityChannelName),
            "/var/lib/warren/vms/0a1b2c3d4e5f/identity.sock");
  ASSERT_TRUE(
      def.SetChannelSocket(kIdentityChannelName, std::string(kCloneVm) + "/identity.sock").ok());
  Result<DomainDefinition> back = DomainDefinition::Parse(def.ToXml());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ChannelSocket(kIdentityChannelName), std::string(kCloneVm) + "/identity.sock");
  EXPECT_EQ(back->ChannelSocket(kControlChannelName),
            "/var/lib/warren/vms/0a1b2c3d4e5f/control.sock");
  EXPECT_EQ(back->ChannelSocket("warren.other"), "");
}

TEST(CloneDefinitionTest, EveryIdentityAndPathBecomesTheClones) {
  PARSE_GOLDEN(def, "libvirt/domain_saved.xml");
  const std::string uuid = "8656b1c5-67f7-407f-ae31-45155235a522";
  const std::string vm = kCloneVm;
  const std::string top = "/var/lib/warren-test/savecap/disks/6b8f1d2e3a4c-top.qcow2";
  ASSERT_TRUE(def.SetName("warren-6b8f1d2e3a4c").ok());
  ASSERT_TRUE(def.SetUuid(uuid).ok());
  def.SetTitle("clone-one");
  EXPECT_FALSE(def.SetGenid("0f0e0d0c-0b0a-0908-0706-050403020100"));  // the template has none
  ASSERT_TRUE(def.SetVmMetadata("6b8f1d2e3a4c", "clone-one", "tiny@20261202").ok());
  ASSERT_TRUE(def.SetConsoleLog(vm + "/console.log").ok());
  ASSERT_TRUE(def.SetChannelSocket(kControlChannelName, vm + "/control.sock").ok());
  ASSERT_TRUE(def.SetDiskSource("vda", top).ok());
  ASSERT_TRUE(def.SetDiskSource("vdb", vm + "/seed.img").ok());
  ASSERT_TRUE(def.SetInterfaceMacs({"52:54:00:6b:8f:1d"}).ok());
  // The guest booted long ago, but the clone's next cold boot reads this.
  ASSERT_TRUE(def.SetCmdlineHostname("clone-one"));
  // Restored uncapped, capped once running.
  ASSERT_TRUE(def.RemoveEmulatorQuota());
  EXPECT_FALSE(def.RemoveEmulatorQuota());
  const std::string xml = def.ToXml();
  EXPECT_EQ(xml.find("emulator_"), std::string::npos);
  EXPECT_NE(xml.find("<quota>80000</quota>"), std::string::npos);  // the vCPUs' cap stays
  ExpectGolden("libvirt/domain_saved_cloned.xml", xml);

  // Read back from the text, as libvirt will.
  Result<DomainDefinition> back = DomainDefinition::Parse(xml);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Name(), "warren-6b8f1d2e3a4c");
  EXPECT_EQ(back->Uuid(), uuid);
  EXPECT_EQ(back->Title(), "clone-one");
  Result<VmMetadata> meta = ParseVmMetadata(back->MetadataXml(kWarrenVmNamespace));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->id, "6b8f1d2e3a4c");
  EXPECT_EQ(meta->name, "clone-one");
  EXPECT_EQ(meta->image, "tiny@20261202");
  EXPECT_EQ(back->ConsoleLog(), vm + "/console.log");
  EXPECT_EQ(back->ChannelSocket(kControlChannelName), vm + "/control.sock");
  EXPECT_EQ(back->DiskSource("vda"), top);
  EXPECT_EQ(back->DiskSource("vdb"), vm + "/seed.img");
  EXPECT_TRUE(back->DiskBackingChain("vdb").empty());
  EXPECT_EQ(back->InterfaceMacs(), std::vector<std::string>{"52:54:00:6b:8f:1d"});
  // Nothing of the template's is left: no file of its (the console's <log> included), no id.
  EXPECT_FALSE(back->MentionsPathUnder(kTemplateVm));
  EXPECT_TRUE(back->MentionsPathUnder(kCloneVm));
  EXPECT_EQ(xml.find(kTemplateTop), std::string::npos);
  EXPECT_EQ(xml.find("5a7e0c1d2b3f"), std::string::npos);
  EXPECT_EQ(xml.find("143f2320-c633-43f0-b8a4-07c52903477e"), std::string::npos);
  EXPECT_EQ(xml.find("52:54:00:f3:9f:97"), std::string::npos);
  EXPECT_EQ(xml.find("template-tiny"), std::string::npos);
  // The machine is the template's: what the memory stream was saved from.
  EXPECT_EQ(back->Vcpus(), 1);
  EXPECT_EQ(back->MemoryMib(), 256);
  EXPECT_FALSE(back->DacRelabels());
  EXPECT_EQ(back->InterfaceXmls("user").size(), 1u);
}

TEST(CloneDefinitionTest, MetadataOfOtherNamespacesStays) {
  PARSE_GOLDEN(def, "libvirt/domain_live_after_copy.xml");
  EXPECT_EQ(*ParseRunStartedAt(def.MetadataXml(kWarrenRunNamespace)), 1764590400);
  ASSERT_TRUE(def.SetVmMetadata("abc", "x&y<z>", "tiny@1").ok());
  Result<VmMetadata> vm = ParseVmMetadata(def.MetadataXml(kWarrenVmNamespace));
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->id, "abc");
  EXPECT_EQ(vm->name, "x&y<z>");
  EXPECT_EQ(*ParseRunStartedAt(def.MetadataXml(kWarrenRunNamespace)), 1764590400);
  // The template's run is not the clone's.
  EXPECT_TRUE(def.RemoveMetadata(kWarrenRunNamespace));
  EXPECT_FALSE(def.RemoveMetadata(kWarrenRunNamespace));
  Result<DomainDefinition> back = DomainDefinition::Parse(def.ToXml());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->MetadataXml(kWarrenRunNamespace), "");
  EXPECT_EQ(ParseVmMetadata(back->MetadataXml(kWarrenVmNamespace))->name, "x&y<z>");
}

TEST(CloneDefinitionTest, WhatADefinitionLacks) {
  Result<DomainDefinition> bare = DomainDefinition::Parse(
      "<domain>\n  <memory>1024</memory>\n  <devices>\n    <interface type='user'>\n      "
      "<model type='virtio'/>\n    </interface>\n  </devices>\n</domain>");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->SetName("n").code(), Code::kInternal);
  EXPECT_EQ(bare->SetUuid("u").code(), Code::kInternal);
  EXPECT_EQ(bare->SetConsoleLog("/l").code(), Code::kNotFound);
  EXPECT_EQ(bare->SetChannelSocket(kControlChannelName, "/s").code(), Code::kNotFound);
  EXPECT_FALSE(bare->RemoveMetadata(kWarrenVmNamespace));
  // Added where libvirt keeps them: <title> and <metadata> ahead of the rest.
  bare->SetTitle("t<&>'\"");
  ASSERT_TRUE(bare->SetVmMetadata("i", "n", "img").ok());
  // An interface without <mac> gets one; the counts must match, the addresses be MACs.
  EXPECT_EQ(bare->InterfaceMacs(), std::vector<std::string>{""});
  EXPECT_EQ(bare->SetInterfaceMacs({}).code(), Code::kInvalidArgument);
  EXPECT_EQ(bare->SetInterfaceMacs({"52:54:00:00:00:0g"}).code(), Code::kInvalidArgument);
  EXPECT_EQ(bare->SetInterfaceMacs({"52:54:00:00:00:0"}).code(), Code::kInvalidArgument);
  EXPECT_EQ(bare->InterfaceMacs(), std::vector<std::string>{""});
  ASSERT_TRUE(bare->SetInterfaceMacs({"52:54:00:AB:cd:01"}).ok());
  const std::string xml = bare->ToXml();
  Result<DomainDefinition> back = DomainDefinition::Parse(xml);
  ASSERT_TRUE(back.ok()) << xml;
  EXPECT_EQ(back->Title(), "t<&>'\"");
  EXPECT_EQ(ParseVmMetadata(back->MetadataXml(kWarrenVmNamespace))->image, "img");
  EXPECT_EQ(back->InterfaceMacs(), std::vector<std::string>{"52:54:00:AB:cd:01"});
  EXPECT_EQ(back->MemoryMib(), 1);
  EXPECT_LT(xml.find("<title>"), xml.find("<metadata>"));
  EXPECT_LT(xml.find("<metadata>"), xml.find("<memory>"));
  EXPECT_LT(xml.find("<mac "), xml.find("<model "));

  // With a <genid>, only its value changes.
  Result<DomainDefinition> gen = DomainDefinition::Parse(
      "<domain><name>a</name><uuid>u</uuid><genid>43dc0cf8-809b-4adb-9bea-a9abb5f3d90d</genid>"
      "<title>old</title></domain>");
  ASSERT_TRUE(gen.ok());
  EXPECT_TRUE(gen->SetGenid("0f0e0d0c-0b0a-0908-0706-050403020100"));
  gen->SetTitle("new");
  EXPECT_EQ(gen->ToXml(),
            "<domain><name>a</name><uuid>u</uuid><genid>0f0e0d0c-0b0a-0908-0706-050403020100"
            "</genid><title>new</title></domain>\n");
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
