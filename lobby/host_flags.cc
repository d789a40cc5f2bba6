#include "lobby/host_flags.h"

#include <algorithm>
#include <set>

#include "lobby/base/host_name.h"
#include "vmhost/libvirt_uri.h"

namespace warren {
namespace {

// NAME=URI, both non-empty.
Result<std::pair<std::string, std::string>> NameAndUri(const char* flag, const char* example,
                                                       const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return InvalidArgument(std::string(flag) + " takes NAME=URI (" + example + "), not \"" +
                           text.substr(0, 80) + "\"");
  }
  return std::pair{text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace

Result<std::vector<HostFlag>> ParseHostFlags(const std::vector<std::string>& hosts,
                                             const std::vector<std::string>& isolated,
                                             const std::vector<std::string>& peer_uris) {
  if (hosts.empty()) return InvalidArgument("--host: give at least one NAME=URI");
  std::vector<HostFlag> out;
  std::set<std::string, std::less<>> names;
  for (const std::string& text : hosts) {
    WARREN_ASSIGN_OR_RETURN(auto parts, NameAndUri("--host", "local=qemu:///system", text));
    HostFlag flag{parts.first, parts.second};
    WARREN_RETURN_IF_ERROR(CheckHostName(flag.name).Annotate("--host"));
    if (!names.insert(flag.name).second) {
      return InvalidArgument("--host " + flag.name + " is given twice");
    }
    flag.remote = IsRemoteLibvirtUri(flag.uri);
    if (flag.remote) flag.peer_uri = flag.uri;
    out.push_back(std::move(flag));
  }
  auto named = [&out](const std::string& name) {
    return std::find_if(out.begin(), out.end(), [&](const HostFlag& f) { return f.name == name; });
  };
  for (const std::string& name : isolated) {
    auto it = named(name);
    if (it == out.end()) {
      return InvalidArgument("--host-isolated " + name.substr(0, 40) + " names no --host");
    }
    if (!it->remote) {
      return InvalidArgument("--host-isolated " + name +
                             ": a host on this machine gets warren's own isolation rules");
    }
    it->declared_isolated = true;
  }
  std::set<std::string, std::less<>> peered;
  for (const std::string& text : peer_uris) {
    WARREN_ASSIGN_OR_RETURN(
        auto parts, NameAndUri("--host-peer-uri", "local=qemu+ssh://root@lobby/system", text));
    auto it = named(parts.first);
    if (it == out.end()) {
      return InvalidArgument("--host-peer-uri " + parts.first.substr(0, 40) + " names no --host");
    }
    if (!peered.insert(parts.first).second) {
      return InvalidArgument("--host-peer-uri " + parts.first + " is given twice");
    }
    if (!IsRemoteLibvirtUri(parts.second)) {
      return InvalidArgument("--host-peer-uri " + parts.first + ": " + parts.second.substr(0, 80) +
                             " names the daemon of whichever machine opens it; give one other "
                             "hosts reach this one by (qemu+ssh://, qemu+tls://)");
    }
    it->peer_uri = parts.second;
  }
  return out;
}

}  // namespace warren
