// FakeVmHost's persistence (fake_vm_host.h, PersistIn): its state as JSON in a data
// directory, written through after every change, and the small files that stand for what the
// real host keeps there.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lobby/base/file_write.h"
#include "tests/fakes/fake_vm_host.h"

namespace warren {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kStateFile[] = "fake-host.json";

VmState StateNamed(const std::string& name) {
  for (VmState s : {VmState::kRunning, VmState::kPaused, VmState::kStopped, VmState::kCrashed}) {
    if (VmStateName(s) == name) return s;
  }
  return VmState::kStopped;
}

Egress EgressNamed(const std::string& name) {
  return name == EgressName(Egress::kNone) ? Egress::kNone : Egress::kAll;
}

json SpecJson(const VmSpec& s) {
  return {{"id", s.id},
          {"image", s.image},
          {"cpus", s.cpus},
          {"memory_mib", s.memory_mib},
          {"disk_gib", s.disk_gib},
          {"name", s.name},
          {"egress", EgressName(s.egress)},
          {"authorized_keys", s.authorized_keys},
          {"env", s.env},
          {"setup_script", s.setup_script},
          {"ssh_host_key", s.ssh_host_key},
          {"ssh_host_key_pub", s.ssh_host_key_pub}};
}

VmSpec SpecOfJson(const json& j) {
  VmSpec s;
  s.id = j.at("id");
  s.image = j.at("image");
  s.cpus = j.at("cpus");
  s.memory_mib = j.at("memory_mib");
  s.disk_gib = j.at("disk_gib");
  s.name = j.at("name");
  s.egress = EgressNamed(j.at("egress"));
  s.authorized_keys = j.at("authorized_keys");
  s.env = j.at("env").get<std::vector<std::pair<std::string, std::string>>>();
  s.setup_script = j.at("setup_script");
  s.ssh_host_key = j.at("ssh_host_key");
  s.ssh_host_key_pub = j.at("ssh_host_key_pub");
  return s;
}

json InfoJson(const VmInfo& i) {
  return {{"id", i.id},
          {"name", i.name},
          {"image", i.image},
          {"state", VmStateName(i.state)},
          {"cpus", i.cpus},
          {"memory_mib", i.memory_mib},
          {"disk_gib", i.disk_gib},
          {"started_at", i.started_at},
          {"disk_layers", i.disk_layers}};
}

VmInfo InfoOfJson(const json& j) {
  VmInfo i;
  i.id = j.at("id");
  i.name = j.at("name");
  i.image = j.at("image");
  i.state = StateNamed(j.at("state"));
  i.cpus = j.at("cpus");
  i.memory_mib = j.at("memory_mib");
  i.disk_gib = j.at("disk_gib");
  i.started_at = j.at("started_at");
  i.disk_layers = j.at("disk_layers");
  return i;
}

json TemplateJson(const TemplateInfo& t) {
  return {{"image", t.shape.image},
          {"cpus", t.shape.cpus},
          {"memory_mib", t.shape.memory_mib},
          {"disk_gib", t.shape.disk_gib},
          {"egress", EgressName(t.shape.egress)},
          {"tag", t.tag},
          {"saved_at", t.saved_at},
          {"bytes", t.bytes}};
}

TemplateInfo TemplateOfJson(const json& j) {
  TemplateInfo t;
  t.shape.image = j.at("image");
  t.shape.cpus = j.at("cpus");
  t.shape.memory_mib = j.at("memory_mib");
  t.shape.disk_gib = j.at("disk_gib");
  t.shape.egress = EgressNamed(j.at("egress"));
  t.tag = j.at("tag");
  t.saved_at = j.at("saved_at");
  t.bytes = j.at("bytes");
  return t;
}

// A fake's file: its contents say whose it is, for a person reading a failed test's data dir.
void Touch(const fs::path& path, const std::string& contents) {
  std::ofstream(path) << contents << "\n";
}

}  // namespace

Status FakeVmHost::PersistIn(const std::string& dir) {
  std::lock_guard lock(mu_);
  std::error_code ec;
  for (const char* sub : {"vms", "disks", "templates", "tmp"}) {
    fs::create_directories(fs::path(dir) / sub, ec);
    if (ec) return Internal("fake host: creating " + dir + "/" + sub + ": " + ec.message());
  }
  dir_ = dir;
  const fs::path state = fs::path(dir) / kStateFile;
  if (!fs::exists(state)) {
    Persist();
    return Status::Ok();
  }
  std::ifstream in(state);
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json j = json::parse(text.str());
    vms_.clear();
    for (const auto& [id, v] : j.at("vms").items()) {
      Vm vm;
      vm.info = InfoOfJson(v.at("info"));
      vm.spec = SpecOfJson(v.at("spec"));
      vm.console = v.at("console");
      vm.config_cpus = v.at("config_cpus");
      vm.config_memory_mib = v.at("config_memory_mib");
      vm.mac = v.at("mac");
      vm.shutting_down = v.value("shutting_down", false);
      vms_.emplace(id, std::move(vm));
    }
    templates_.clear();
    for (const auto& [key, t] : j.at("templates").items()) templates_[key] = TemplateOfJson(t);
    restored_ = j.at("restored").get<std::set<std::string, std::less<>>>();
    live_copied_ = j.at("live_copied").get<std::set<std::string, std::less<>>>();
    macs_made_ = j.at("macs_made");
  } catch (const json::exception& e) {
    return Internal("fake host: reading " + state.string() + ": " + e.what());
  }
  return Status::Ok();
}

void FakeVmHost::SetStepHook(StepHook hook) {
  std::lock_guard lock(mu_);
  step_hook_ = std::move(hook);
}

std::optional<FakeVmHost::Definition> FakeVmHost::DefinitionOf(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return std::nullopt;
  const Vm& vm = it->second;
  return Definition{vm.info.name, vm.config_cpus, vm.config_memory_mib, vm.info.disk_gib,
                    vm.spec.egress};
}

void FakeVmHost::Step(const char* verb, const char* phase, std::string_view what) {
  if (step_hook_) step_hook_(std::string(verb) + ":" + phase, what);
}

void FakeVmHost::Persist() {
  if (dir_.empty()) return;
  json vms = json::object();
  for (const auto& [id, vm] : vms_) {
    vms[id] = {{"info", InfoJson(vm.info)},
               {"spec", SpecJson(vm.spec)},
               {"console", vm.console},
               {"config_cpus", vm.config_cpus},
               {"config_memory_mib", vm.config_memory_mib},
               {"mac", vm.mac},
               {"shutting_down", vm.shutting_down}};
  }
  json templates = json::object();
  for (const auto& [key, t] : templates_) templates[key] = TemplateJson(t);
  const json state = {{"vms", vms},
                      {"templates", templates},
                      {"restored", restored_},
                      {"live_copied", live_copied_},
                      {"macs_made", macs_made_}};
  Status st = WriteFileAtomic(dir_ + "/" + kStateFile, state.dump(1), 0600);
  if (!st.ok()) {
    // The test's world is gone; nothing after this could be trusted.
    std::fprintf(stderr, "fake host: %s\n", st.ToString().c_str());
    std::abort();
  }
}

void FakeVmHost::MakeVmFiles(const std::string& id) {
  if (dir_.empty()) return;
  const fs::path vm_dir = fs::path(dir_) / "vms" / id;
  fs::create_directories(vm_dir);
  Touch(vm_dir / "seed.img", "fake seed of " + id);
  Touch(vm_dir / "console.log", "");
  Touch(vm_dir / "control.sock", "fake control socket of " + id);
  Touch(fs::path(dir_) / "disks" / (id + ".qcow2"), "fake disk of " + id);
}

void FakeVmHost::RemoveVmFiles(const std::string& id) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / "vms" / id, ec);
  fs::remove(fs::path(dir_) / "disks" / (id + ".qcow2"), ec);
}

std::string FakeVmHost::TemplateFile(const std::string& shape_key) const {
  return dir_ + "/templates/" + shape_key + ".save";
}

int FakeVmHost::RemoveLeftoverFiles() {
  if (dir_.empty()) return 0;
  Step("collect", "before", "");
  int disks = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "vms", ec)) {
    if (!vms_.count(e.path().filename().string())) fs::remove_all(e.path(), ec);
  }
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "disks", ec)) {
    if (!vms_.count(e.path().stem().string())) disks += fs::remove(e.path(), ec) ? 1 : 0;
  }
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "templates", ec)) {
    if (!templates_.count(e.path().stem().string())) fs::remove(e.path(), ec);
  }
  // A live copy's memory outlives it only when the process died mid-way.
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "tmp", ec)) {
    fs::remove_all(e.path(), ec);
  }
  Step("collect", "after", "");
  return disks;
}

}  // namespace warren
