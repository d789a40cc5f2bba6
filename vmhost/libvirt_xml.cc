#include "vmhost/libvirt_xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <utility>

#include "lobby/base/unique_handle.h"

namespace warren {
namespace {

using XmlDoc = UniqueHandle<xmlDocPtr, xmlFreeDoc>;
using XmlBuffer = UniqueHandle<xmlBufferPtr, xmlBufferFree>;
inline void FreeXmlString(xmlChar* p) { xmlFree(p); }
using XmlString = UniqueHandle<xmlChar*, FreeXmlString>;

const xmlChar* X(const char* s) { return reinterpret_cast<const xmlChar*>(s); }

bool Named(const xmlNode* node, std::string_view name) {
  return node != nullptr && node->type == XML_ELEMENT_NODE &&
         std::string_view(reinterpret_cast<const char*>(node->name)) == name;
}

// The element children of `node` named `name`, in document order.
std::vector<xmlNode*> Children(const xmlNode* node, std::string_view name) {
  std::vector<xmlNode*> out;
  if (node == nullptr) return out;
  for (xmlNode* c = node->children; c != nullptr; c = c->next) {
    if (Named(c, name)) out.push_back(c);
  }
  return out;
}

xmlNode* Child(const xmlNode* node, std::string_view name) {
  if (node == nullptr) return nullptr;
  for (xmlNode* c = node->children; c != nullptr; c = c->next) {
    if (Named(c, name)) return c;
  }
  return nullptr;
}

// The node at `path` below `node` (each step the first child of that name).
xmlNode* Descend(const xmlNode* node, std::initializer_list<std::string_view> path) {
  const xmlNode* at = node;
  for (std::string_view step : path) {
    at = Child(at, step);
    if (at == nullptr) return nullptr;
  }
  return const_cast<xmlNode*>(at);
}

// The element's text, entities resolved; empty for a missing node.
std::string Text(const xmlNode* node) {
  if (node == nullptr) return "";
  XmlString s(xmlNodeGetContent(node));
  return s ? reinterpret_cast<const char*>(s.get()) : "";
}

std::string Attribute(const xmlNode* node, const char* name) {
  if (node == nullptr) return "";
  XmlString s(xmlGetNoNsProp(node, X(name)));
  return s ? reinterpret_cast<const char*>(s.get()) : "";
}

// Replaces the element's content with `text`, taken literally (the writer escapes it).
void SetText(xmlNode* node, std::string_view text) {
  while (node->children != nullptr) {
    xmlNode* c = node->children;
    xmlUnlinkNode(c);
    xmlFreeNode(c);
  }
  const std::string value(text);
  xmlAddChild(node, xmlNewDocText(node->doc, X(value.c_str())));
}

// Removes `node` with the indentation in front of it, so the written XML keeps its shape.
void Remove(xmlNode* node) {
  xmlNode* before = node->prev;
  if (before != nullptr && xmlIsBlankNode(before)) {
    xmlUnlinkNode(before);
    xmlFreeNode(before);
  }
  xmlUnlinkNode(node);
  xmlFreeNode(node);
}

// A new element `name` right after `prev`, indented as `prev` is (libvirt reads any layout,
// but the written XML stays readable).
xmlNode* AddElementAfter(xmlNode* prev, const char* name) {
  xmlNode* node = xmlNewDocNode(prev->doc, nullptr, X(name), nullptr);
  xmlAddNextSibling(prev, node);
  if (prev->prev != nullptr && xmlIsBlankNode(prev->prev)) {
    xmlAddPrevSibling(node, xmlNewDocText(prev->doc, prev->prev->content));
  }
  return node;
}

// A new element `name` as the first element child of `parent`, indented as that child is.
xmlNode* AddFirstElement(xmlNode* parent, const char* name) {
  xmlNode* first = parent->children;
  while (first != nullptr && first->type != XML_ELEMENT_NODE) first = first->next;
  xmlNode* node = xmlNewDocNode(parent->doc, nullptr, X(name), nullptr);
  if (first == nullptr) {
    xmlAddChild(parent, node);
    return node;
  }
  xmlAddPrevSibling(first, node);
  if (node->prev != nullptr && xmlIsBlankNode(node->prev)) {
    xmlAddNextSibling(node, xmlNewDocText(parent->doc, node->prev->content));
  }
  return node;
}

// The element of the root's identity block (<name>, <uuid>, <genid>, <title>) that a new
// <title> or <metadata> goes after: the last of `after` present.
xmlNode* LastOf(xmlNode* root, std::initializer_list<std::string_view> after) {
  xmlNode* last = nullptr;
  for (std::string_view name : after) {
    if (xmlNode* n = Child(root, name)) last = n;
  }
  return last;
}

bool IsMac(std::string_view mac) {
  if (mac.size() != 17) return false;
  for (size_t i = 0; i < mac.size(); ++i) {
    const char c = mac[i];
    if (i % 3 == 2 ? c != ':' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool ParseInt64(std::string_view text, int64_t* out) {
  const std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

// Bytes per unit in libvirt's scaled integers (formatdomain: "memory" units); 0 if unknown.
int64_t UnitBytes(std::string_view unit) {
  static const std::pair<std::string_view, int64_t> kUnits[] = {
      {"", 1024},  // no unit: KiB
      {"b", 1},
      {"bytes", 1},
      {"KB", 1000},
      {"k", 1024},
      {"KiB", 1024},
      {"MB", 1000 * 1000},
      {"M", int64_t{1} << 20},
      {"MiB", int64_t{1} << 20},
      {"GB", 1000 * 1000 * 1000},
      {"G", int64_t{1} << 30},
      {"GiB", int64_t{1} << 30},
      {"TB", int64_t{1000} * 1000 * 1000 * 1000},
      {"T", int64_t{1} << 40},
      {"TiB", int64_t{1} << 40},
  };
  for (const auto& [name, bytes] : kUnits) {
    if (name == unit) return bytes;
  }
  return 0;
}

void InitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { xmlInitParser(); });
}

// Parses libvirt's XML: no network, no external entities (nothing is substituted), errors
// reported as a Status rather than printed. `root` is the element the document must be.
Result<XmlDoc> ParseXml(std::string_view xml, std::string_view root, std::string_view what) {
  InitOnce();
  XmlDoc doc(xmlReadMemory(xml.data(), static_cast<int>(xml.size()), nullptr, nullptr,
                           XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (!doc) return Internal("libvirt's " + std::string(what) + " is not well-formed XML");
  if (!Named(xmlDocGetRootElement(doc.get()), root)) {
    return Internal("libvirt's " + std::string(what) + " is no <" + std::string(root) + ">");
  }
  return doc;
}

// The <disk> of a domain whose <target dev=…> is `dev`.
xmlNode* DiskOf(const xmlDoc* doc, std::string_view dev) {
  xmlNode* devices = Descend(xmlDocGetRootElement(const_cast<xmlDoc*>(doc)), {"devices"});
  for (xmlNode* disk : Children(devices, "disk")) {
    if (Attribute(Child(disk, "target"), "dev") == dev) return disk;
  }
  return nullptr;
}

// The <channel type='unix'> whose target is the virtio-serial port `name`.
xmlNode* ChannelOf(const xmlDoc* doc, std::string_view name) {
  xmlNode* devices = Descend(xmlDocGetRootElement(const_cast<xmlDoc*>(doc)), {"devices"});
  for (xmlNode* channel : Children(devices, "channel")) {
    if (Attribute(channel, "type") == "unix" &&
        Attribute(Child(channel, "target"), "name") == name) {
      return channel;
    }
  }
  return nullptr;
}

// Whether `node` is an element in the namespace whose URI is `ns`.
bool InNamespace(const xmlNode* node, std::string_view ns) {
  return node->type == XML_ELEMENT_NODE && node->ns != nullptr && node->ns->href != nullptr &&
         std::string_view(reinterpret_cast<const char*>(node->ns->href)) == ns;
}

bool InsideDir(std::string_view value, std::string_view dir) {
  return value.size() > dir.size() + 1 && value.substr(0, dir.size()) == dir &&
         value[dir.size()] == '/';
}

bool MentionsPath(const xmlNode* node, std::string_view dir) {
  for (const xmlNode* n = node; n != nullptr; n = n->next) {
    if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
      if (n->content != nullptr && InsideDir(reinterpret_cast<const char*>(n->content), dir)) {
        return true;
      }
      continue;
    }
    if (n->type != XML_ELEMENT_NODE) continue;
    for (const xmlAttr* a = n->properties; a != nullptr; a = a->next) {
      XmlString v(xmlNodeListGetString(n->doc, a->children, 1));
      if (v && InsideDir(reinterpret_cast<const char*>(v.get()), dir)) return true;
    }
    if (MentionsPath(n->children, dir)) return true;
  }
  return false;
}

}  // namespace

void DomainDefinition::FreeDoc::operator()(_xmlDoc* doc) const { xmlFreeDoc(doc); }

DomainDefinition::DomainDefinition(std::unique_ptr<_xmlDoc, FreeDoc> doc) : doc_(std::move(doc)) {}
DomainDefinition::DomainDefinition(DomainDefinition&&) noexcept = default;
DomainDefinition& DomainDefinition::operator=(DomainDefinition&&) noexcept = default;
DomainDefinition::~DomainDefinition() = default;

Result<DomainDefinition> DomainDefinition::Parse(std::string_view xml) {
  WARREN_ASSIGN_OR_RETURN(XmlDoc doc, ParseXml(xml, "domain", "domain definition"));
  return DomainDefinition(std::unique_ptr<_xmlDoc, FreeDoc>(doc.release()));
}

std::string DomainDefinition::DiskSource(std::string_view target_dev) const {
  return Attribute(Child(DiskOf(doc_.get(), target_dev), "source"), "file");
}

std::vector<std::string> DomainDefinition::DiskBackingChain(std::string_view target_dev) const {
  std::vector<std::string> chain;
  // An empty <backingStore/> ends the chain: "the file above stands alone".
  for (xmlNode* bs = Child(DiskOf(doc_.get(), target_dev), "backingStore");
       bs != nullptr && chain.size() <= 64; bs = Child(bs, "backingStore")) {
    std::string file = Attribute(Child(bs, "source"), "file");
    if (file.empty()) break;
    chain.push_back(std::move(file));
  }
  return chain;
}

int DomainDefinition::Vcpus() const {
  int64_t n = 0;
  if (!ParseInt64(Text(Descend(xmlDocGetRootElement(doc_.get()), {"vcpu"})), &n)) return 0;
  return n > 0 && n < 100000 ? static_cast<int>(n) : 0;
}

int64_t DomainDefinition::MemoryMib() const {
  const xmlNode* memory = Descend(xmlDocGetRootElement(doc_.get()), {"memory"});
  int64_t value = 0;
  const int64_t unit = UnitBytes(Attribute(memory, "unit"));
  if (!ParseInt64(Text(memory), &value) || value < 0 || unit == 0) return 0;
  // Within range for any memory a host has (value * unit < 2^63 for value < 2^63 / unit).
  if (value > INT64_MAX / unit) return 0;
  return value * unit / (int64_t{1} << 20);
}

bool DomainDefinition::DacRelabels() const {
  for (const xmlNode* label : Children(xmlDocGetRootElement(doc_.get()), "seclabel")) {
    if (Attribute(label, "model") == "dac" && Attribute(label, "relabel") == "no") return false;
  }
  return true;
}

bool DomainDefinition::MentionsPathUnder(std::string_view dir) const {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return MentionsPath(xmlDocGetRootElement(doc_.get()), dir);
}

std::vector<std::string> DomainDefinition::InterfaceXmls(std::string_view type) const {
  std::vector<std::string> out;
  const xmlNode* devices = Child(xmlDocGetRootElement(doc_.get()), "devices");
  for (const xmlNode* nic : Children(devices, "interface")) {
    if (Attribute(nic, "type") != type) continue;
    XmlBuffer buf(xmlBufferCreate());
    if (!buf || xmlNodeDump(buf.get(), doc_.get(), const_cast<xmlNode*>(nic), 0, 0) < 0) continue;
    out.emplace_back(reinterpret_cast<const char*>(xmlBufferContent(buf.get())));
  }
  return out;
}

std::string DomainDefinition::Name() const {
  return Text(Child(xmlDocGetRootElement(doc_.get()), "name"));
}

std::string DomainDefinition::Uuid() const {
  return Text(Child(xmlDocGetRootElement(doc_.get()), "uuid"));
}

std::string DomainDefinition::Title() const {
  return Text(Child(xmlDocGetRootElement(doc_.get()), "title"));
}

std::string DomainDefinition::ConsoleLog() const {
  const xmlNode* devices = Child(xmlDocGetRootElement(doc_.get()), "devices");
  return Attribute(Child(Child(devices, "serial"), "log"), "file");
}

std::string DomainDefinition::ChannelSocket(std::string_view name) const {
  xmlNode* channel = ChannelOf(doc_.get(), name);
  return channel != nullptr ? Attribute(Child(channel, "source"), "path") : "";
}

std::string DomainDefinition::MetadataXml(std::string_view ns) const {
  xmlNode* metadata = Child(xmlDocGetRootElement(doc_.get()), "metadata");
  for (xmlNode* c = metadata != nullptr ? metadata->children : nullptr; c != nullptr; c = c->next) {
    if (!InNamespace(c, ns)) continue;
    XmlBuffer buf(xmlBufferCreate());
    if (!buf || xmlNodeDump(buf.get(), doc_.get(), c, 0, 0) < 0) return "";
    return reinterpret_cast<const char*>(xmlBufferContent(buf.get()));
  }
  return "";
}

Status DomainDefinition::SetDiskSource(std::string_view target_dev, std::string_view path) {
  xmlNode* disk = DiskOf(doc_.get(), target_dev);
  xmlNode* source = Child(disk, "source");
  if (source == nullptr) return NotFound("the vm has no disk " + std::string(target_dev));
  const std::string value(path);
  xmlSetProp(source, X("file"), X(value.c_str()));
  // Whatever else libvirt noted about the old file (its place in a running chain) is not
  // true of the new one.
  xmlUnsetProp(source, X("index"));
  // All of them: libvirt nests one per layer, but a definition may hold several side by side.
  while (xmlNode* bs = Child(disk, "backingStore")) Remove(bs);
  return Status::Ok();
}

Status DomainDefinition::SetVcpus(int cpus) {
  xmlNode* vcpu = Descend(xmlDocGetRootElement(doc_.get()), {"vcpu"});
  if (vcpu == nullptr) return Internal("vm has no <vcpu>");
  SetText(vcpu, std::to_string(cpus));
  return Status::Ok();
}

Status DomainDefinition::SetMemoryMib(int64_t mib) {
  xmlNode* root = xmlDocGetRootElement(doc_.get());
  xmlNode* memory = Child(root, "memory");
  if (memory == nullptr) return Internal("vm has no <memory>");
  const std::string kib = std::to_string(mib * 1024);
  for (xmlNode* node : {memory, Child(root, "currentMemory")}) {
    if (node == nullptr) continue;
    SetText(node, kib);
    xmlSetProp(node, X("unit"), X("KiB"));
  }
  return Status::Ok();
}

bool DomainDefinition::SetCmdlineHostname(std::string_view hostname) {
  xmlNode* cmdline = Descend(xmlDocGetRootElement(doc_.get()), {"os", "cmdline"});
  if (cmdline == nullptr) return false;
  std::string text = Text(cmdline);
  constexpr std::string_view kKey = "warren.hostname=";
  size_t at = 0;
  while ((at = text.find(kKey, at)) != std::string::npos && at > 0 && text[at - 1] != ' ') {
    at += kKey.size();
  }
  if (at == std::string::npos) return false;
  at += kKey.size();
  const size_t end = std::min(text.find(' ', at), text.size());
  text.replace(at, end - at, hostname);
  SetText(cmdline, text);
  return true;
}

Status DomainDefinition::SetName(std::string_view name) {
  xmlNode* node = Child(xmlDocGetRootElement(doc_.get()), "name");
  if (node == nullptr) return Internal("the domain definition has no <name>");
  SetText(node, name);
  return Status::Ok();
}

Status DomainDefinition::SetUuid(std::string_view uuid) {
  xmlNode* node = Child(xmlDocGetRootElement(doc_.get()), "uuid");
  if (node == nullptr) return Internal("the domain definition has no <uuid>");
  SetText(node, uuid);
  return Status::Ok();
}

void DomainDefinition::SetTitle(std::string_view title) {
  xmlNode* root = xmlDocGetRootElement(doc_.get());
  xmlNode* node = Child(root, "title");
  if (node == nullptr) {
    xmlNode* after = LastOf(root, {"name", "uuid", "genid"});
    node = after != nullptr ? AddElementAfter(after, "title") : AddFirstElement(root, "title");
  }
  SetText(node, title);
}

bool DomainDefinition::SetGenid(std::string_view uuid) {
  xmlNode* node = Child(xmlDocGetRootElement(doc_.get()), "genid");
  if (node == nullptr) return false;
  SetText(node, uuid);
  return true;
}

bool DomainDefinition::RemoveEmulatorQuota() {
  xmlNode* cputune = Child(xmlDocGetRootElement(doc_.get()), "cputune");
  if (cputune == nullptr) return false;
  bool removed = false;
  for (const char* name : {"emulator_period", "emulator_quota"}) {
    if (xmlNode* node = Child(cputune, name)) {
      Remove(node);
      removed = true;
    }
  }
  return removed;
}

bool DomainDefinition::RemoveMetadata(std::string_view ns) {
  bool removed = false;
  xmlNode* metadata = Child(xmlDocGetRootElement(doc_.get()), "metadata");
  for (xmlNode* c = metadata != nullptr ? metadata->children : nullptr; c != nullptr;) {
    xmlNode* next = c->next;
    if (InNamespace(c, ns)) {
      Remove(c);
      removed = true;
    }
    c = next;
  }
  return removed;
}

Status DomainDefinition::SetVmMetadata(std::string_view id, std::string_view name,
                                       std::string_view image) {
  RemoveMetadata(kWarrenVmNamespace);
  xmlNode* root = xmlDocGetRootElement(doc_.get());
  xmlNode* metadata = Child(root, "metadata");
  if (metadata == nullptr) {
    xmlNode* after = LastOf(root, {"name", "uuid", "genid", "title", "description"});
    metadata =
        after != nullptr ? AddElementAfter(after, "metadata") : AddFirstElement(root, "metadata");
  }
  // One step deeper than </metadata> is indented, when it is.
  xmlNode* tail = metadata->last;
  std::string indent;
  if (tail != nullptr && xmlIsBlankNode(tail)) {
    XmlString text(xmlNodeGetContent(tail));
    indent = text ? reinterpret_cast<const char*>(text.get()) : "";
    indent += "  ";
  }
  std::string element;
  std::istringstream lines(VmMetadataXml(id, name, image));
  for (std::string line; std::getline(lines, line);) {
    if (!element.empty()) element += indent.empty() ? "\n" : indent;
    element += line;
  }
  // Parsed on its own and copied in, so the element carries its own namespace declaration
  // whatever prefixes the definition already uses.
  WARREN_ASSIGN_OR_RETURN(XmlDoc parsed, ParseXml(element, "vm", "vm metadata"));
  xmlNode* copy = xmlDocCopyNode(xmlDocGetRootElement(parsed.get()), doc_.get(), 1);
  if (copy == nullptr) return Internal("copying the vm metadata element failed");
  if (indent.empty()) {
    xmlAddChild(metadata, copy);
  } else {
    xmlAddPrevSibling(tail, copy);
    xmlAddPrevSibling(copy, xmlNewDocText(doc_.get(), X(indent.c_str())));
  }
  return Status::Ok();
}

Status DomainDefinition::SetConsoleLog(std::string_view path) {
  const std::string value(path);
  bool found = false;
  xmlNode* devices = Child(xmlDocGetRootElement(doc_.get()), "devices");
  for (const char* kind : {"serial", "console"}) {
    // libvirt writes the serial's <log> into the console that mirrors it, too.
    for (xmlNode* dev : Children(devices, kind)) {
      xmlNode* log = Child(dev, "log");
      if (log == nullptr) continue;
      xmlSetProp(log, X("file"), X(value.c_str()));
      found = true;
    }
  }
  if (!found) return NotFound("the vm has no console log");
  return Status::Ok();
}

Status DomainDefinition::SetChannelSocket(std::string_view name, std::string_view path) {
  xmlNode* channel = ChannelOf(doc_.get(), name);
  if (channel == nullptr) return NotFound("the vm has no " + std::string(name) + " channel");
  xmlNode* source = Child(channel, "source");
  if (source == nullptr) {
    source = AddFirstElement(channel, "source");
    xmlSetProp(source, X("mode"), X("bind"));
  }
  const std::string value(path);
  xmlSetProp(source, X("path"), X(value.c_str()));
  return Status::Ok();
}

std::vector<std::string> DomainDefinition::InterfaceMacs() const {
  std::vector<std::string> macs;
  const xmlNode* devices = Child(xmlDocGetRootElement(doc_.get()), "devices");
  for (const xmlNode* nic : Children(devices, "interface")) {
    macs.push_back(Attribute(Child(nic, "mac"), "address"));
  }
  return macs;
}

Status DomainDefinition::SetInterfaceMacs(const std::vector<std::string>& macs) {
  const std::vector<xmlNode*> nics =
      Children(Child(xmlDocGetRootElement(doc_.get()), "devices"), "interface");
  if (nics.size() != macs.size()) {
    return InvalidArgument(std::to_string(macs.size()) + " MAC addresses for " +
                           std::to_string(nics.size()) + " network interfaces");
  }
  for (const std::string& mac : macs) {
    if (!IsMac(mac)) return InvalidArgument("not a MAC address: " + mac);
  }
  for (size_t i = 0; i < nics.size(); ++i) {
    xmlNode* node = Child(nics[i], "mac");
    // libvirt writes <mac> first in an <interface>.
    if (node == nullptr) node = AddFirstElement(nics[i], "mac");
    xmlSetProp(node, X("address"), X(macs[i].c_str()));
  }
  return Status::Ok();
}

std::string DomainDefinition::ToXml() const {
  XmlBuffer buf(xmlBufferCreate());
  if (!buf) return "";
  if (xmlNodeDump(buf.get(), doc_.get(), xmlDocGetRootElement(doc_.get()), 0, 0) < 0) return "";
  return std::string(reinterpret_cast<const char*>(xmlBufferContent(buf.get()))) + "\n";
}

Result<std::string> VolumeBackingPath(std::string_view volume_xml) {
  WARREN_ASSIGN_OR_RETURN(XmlDoc doc, ParseXml(volume_xml, "volume", "volume description"));
  return Text(Descend(xmlDocGetRootElement(doc.get()), {"backingStore", "path"}));
}

Result<std::string> PoolTargetPath(std::string_view pool_xml) {
  WARREN_ASSIGN_OR_RETURN(XmlDoc doc, ParseXml(pool_xml, "pool", "pool description"));
  return Text(Descend(xmlDocGetRootElement(doc.get()), {"target", "path"}));
}

Result<VmMetadata> ParseVmMetadata(std::string_view metadata_xml) {
  WARREN_ASSIGN_OR_RETURN(XmlDoc doc, ParseXml(metadata_xml, "vm", "vm metadata"));
  const xmlNode* vm = xmlDocGetRootElement(doc.get());
  VmMetadata m;
  m.id = Text(Child(vm, "id"));
  m.name = Text(Child(vm, "name"));
  m.image = Text(Child(vm, "image"));
  return m;
}

Result<int64_t> ParseRunStartedAt(std::string_view metadata_xml) {
  WARREN_ASSIGN_OR_RETURN(XmlDoc doc, ParseXml(metadata_xml, "run", "run metadata"));
  int64_t started = 0;
  if (!ParseInt64(Attribute(xmlDocGetRootElement(doc.get()), "started"), &started)) return 0;
  return started;
}

Result<QemuUser> ParseQemuUser(std::string_view capabilities_xml, std::string_view domain_type) {
  WARREN_ASSIGN_OR_RETURN(XmlDoc doc,
                          ParseXml(capabilities_xml, "capabilities", "daemon capabilities"));
  QemuUser user;
  for (const xmlNode* model :
       Children(Child(xmlDocGetRootElement(doc.get()), "host"), "secmodel")) {
    if (Text(Child(model, "model")) != "dac") continue;
    for (const xmlNode* label : Children(model, "baselabel")) {
      if (Attribute(label, "type") != domain_type) continue;
      // "+UID:+GID": numbers, so they mean the same on a remote host.
      const std::string text = Text(label);
      const size_t colon = text.find(':');
      int64_t uid = -1;
      int64_t gid = -1;
      if (colon == std::string::npos || text.size() < 4 || text[0] != '+' ||
          text[colon + 1] != '+' || !ParseInt64(text.substr(1, colon - 1), &uid) ||
          !ParseInt64(text.substr(colon + 2), &gid) || uid < 0 || gid < 0) {
        continue;
      }
      user.uid = uid;
      user.gid = gid;
      return user;
    }
  }
  return user;
}

}  // namespace warren
