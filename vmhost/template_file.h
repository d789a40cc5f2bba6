// What a saved template's description holds (libvirt_host.h, Templates): its shape, tag, when
// it was saved and how big its memory is, the disk layer its clones stand on, and on a remote
// host the name of its save image's volume. JSON, the same on every host: DATA/templates/
// <key>/template.json here, DATA/templates/<stem>.json on a remote host.
#pragma once

#include <string>

#include "lobby/base/status.h"
#include "vmhost/vm_host.h"

namespace warren {

struct TemplateFile {
  TemplateInfo info;
  std::string base;    // the disk top at the save, kept in DATA/disks (DiskChains pins it)
  std::string memory;  // a remote host's: the save image's volume name; "" here
};

std::string EncodeTemplateFile(const TemplateFile& t);
// Internal naming `what` when the text is not such a file.
Result<TemplateFile> DecodeTemplateFile(const std::string& text, const std::string& what);

}  // namespace warren
