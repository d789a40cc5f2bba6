#include "vmhost/template_file.h"

#include <nlohmann/json.hpp>

namespace warren {

using json = nlohmann::json;

std::string EncodeTemplateFile(const TemplateFile& t) {
  const VmShape& s = t.info.shape;
  json j = {{"image", s.image},
            {"cpus", s.cpus},
            {"memory_mib", s.memory_mib},
            {"disk_gib", s.disk_gib},
            {"egress", EgressName(s.egress)},
            {"tag", t.info.tag},
            {"saved_at", t.info.saved_at},
            {"bytes", t.info.bytes},
            {"base", t.base}};
  if (!t.memory.empty()) j["memory"] = t.memory;
  return j.dump(2);
}

Result<TemplateFile> DecodeTemplateFile(const std::string& text, const std::string& what) {
  try {
    json j = json::parse(text);
    TemplateFile t;
    t.info.shape.image = j.at("image").get<std::string>();
    t.info.shape.cpus = j.at("cpus").get<int>();
    t.info.shape.memory_mib = j.at("memory_mib").get<int64_t>();
    t.info.shape.disk_gib = j.at("disk_gib").get<int64_t>();
    t.info.shape.egress =
        j.at("egress").get<std::string>() == "none" ? Egress::kNone : Egress::kAll;
    t.info.tag = j.value("tag", "");
    t.info.saved_at = j.value("saved_at", int64_t{0});
    t.info.bytes = j.value("bytes", int64_t{0});
    t.base = j.at("base").get<std::string>();
    t.memory = j.value("memory", "");
    return t;
  } catch (const json::exception& e) {
    return Internal("reading " + what + ": " + e.what());
  }
}

}  // namespace warren
