#include "lobby/commands/vm_view.h"

#include <cstdio>

#include "lobby/commands/web_url.h"

namespace warren {

std::string VmUserText() {
  return std::string(kVmUser) + " (home /home/" + std::string(kVmUser) +
         "), who has passwordless sudo";
}

std::string VmSshCommand(const ServerInfo& info, std::string_view name) {
  std::string target = std::string(name) + "@" + info.ssh_host;
  if (info.ssh_port == 22) return "ssh " + target;
  return "ssh -p " + std::to_string(info.ssh_port) + " " + target;
}

std::string VmUrl(const ServerInfo& info, std::string_view name) { return WebHostUrl(info, name); }

std::string VmUrlLine(const ServerInfo& info, std::string_view name) {
  std::string url = VmUrl(info, name);
  return url.empty() ? "" : url + "\n";
}

std::string VmStateText(const VmRecord& vm, const Result<VmInfo>& info) {
  if (vm.phase == VmPhase::kCreating) return "creating";
  if (vm.phase == VmPhase::kRemoving) return "removing";
  if (info.ok()) return std::string(VmStateName(info->state));
  if (info.status().code() == Code::kNotFound) return "missing";
  // Its host does not answer (libvirt reconnecting, a remote host gone): kept, not lost.
  if (info.status().code() == Code::kUnavailable) return "unreachable";
  return "unknown";
}

HostView::HostView(VmHost* host) : host_(host) {}

Result<VmInfo> HostView::Find(std::string_view id) const {
  if (host_ == nullptr) return Unavailable("this server runs no VMs");
  auto it = by_id_.find(id);
  if (it == by_id_.end()) it = by_id_.emplace(std::string(id), host_->Inspect(id)).first;
  return it->second;
}

nlohmann::json VmJson(const VmRecord& vm, std::string_view state, const ServerInfo& info) {
  nlohmann::json env_keys = nlohmann::json::array();
  for (const auto& [k, v] : vm.env) env_keys.push_back(k);
  return {{"name", vm.name},
          {"id", vm.id},
          {"state", state},
          {"desired_state", DesiredStateName(vm.desired_state)},
          {"owner", vm.owner},
          {"image", vm.image},
          {"cpus", vm.cpus},
          {"memory_mib", vm.memory_mib},
          {"disk_gib", vm.disk_gib},
          {"tags", vm.tags},
          {"comment", vm.comment},
          {"env_keys", std::move(env_keys)},
          {"egress", vm.egress},
          {"created_at", vm.created_at},
          {"kind", vm.kind},
          {"size", vm.size.empty() ? nlohmann::json() : nlohmann::json(vm.size)},
          {"expires_at", vm.expires_at == 0 ? nlohmann::json() : nlohmann::json(vm.expires_at)},
          {"ssh", VmSshCommand(info, vm.name)},
          {"url", WebUrlJson(VmUrl(info, vm.name))},
          {"host", vm.host.empty() ? nlohmann::json() : nlohmann::json(vm.host)}};
}

std::string FormatMib(int64_t mib) {
  if (mib >= 1024) {
    if (mib % 1024 == 0) return std::to_string(mib / 1024) + " GiB";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(mib) / 1024.0);
    return buf;
  }
  return std::to_string(mib) + " MiB";
}

std::string FormatDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const int64_t d = seconds / 86400, h = seconds % 86400 / 3600, m = seconds % 3600 / 60,
                s = seconds % 60;
  if (d > 0) return std::to_string(d) + "d " + std::to_string(h) + "h";
  if (h > 0) return std::to_string(h) + "h " + std::to_string(m) + "m";
  if (m > 0) return std::to_string(m) + "m " + std::to_string(s) + "s";
  return std::to_string(s) + "s";
}

}  // namespace warren
